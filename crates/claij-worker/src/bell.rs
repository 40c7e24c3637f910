//! Notices from the store's subscription (PostgreSQL's `LISTEN`), forwarded to the claim
//! loop. A broken subscription is opened again after a pause; notices missed meanwhile
//! are made up for by the loop's poll. Stores without notices (SQLite) forward nothing.

use std::sync::Arc;
use std::time::Duration;

use claij_core::store::Notice;
use claij_store::roles::WorkQueue;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The pause before listening again after the subscription broke.
const RELISTEN: Duration = Duration::from_secs(1);

/// Starts forwarding notices to `to` until `stop`.
pub(crate) fn spawn(
    store: Arc<dyn WorkQueue>,
    to: mpsc::Sender<Notice>,
    stop: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        while !stop.is_cancelled() {
            let bell = tokio::select! {
                _ = stop.cancelled() => return,
                bell = store.listen() => bell,
            };
            let mut bell = match bell {
                Ok(Some(bell)) => bell,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "listening for work failed; polling meanwhile");
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep(RELISTEN) => continue,
                    }
                }
            };
            loop {
                let notice = tokio::select! {
                    _ = stop.cancelled() => return,
                    notice = bell.next() => notice,
                };
                match notice {
                    Ok(notice) => {
                        if to.send(notice).await.is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the subscription to work broke; listening again");
                        break;
                    }
                }
            }
        }
    })
}
