//! The renewal task: every third of the lease, one statement renews the leases of the runs
//! the worker drives (and its own record), and the keeper stops the runs that were
//! interrupted or taken over. A run it holds but no longer drives (its drive failed) is not
//! renewed: its lease ends, and another worker takes it.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use claij_engine::LeaseKeeper;
use claij_store::roles::WorkQueue;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Starts renewing `owner`'s leases until `stop`.
pub(crate) fn spawn(
    store: Arc<dyn WorkQueue>,
    owner: String,
    keeper: LeaseKeeper,
    lease: Duration,
    stop: CancellationToken,
) -> JoinHandle<()> {
    let every = lease / 3;
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
            let mark = keeper.mark();
            let runs = keeper.run_ids();
            match store
                .renew_leases(&owner, SystemTime::now() + lease, &runs)
                .await
            {
                Ok(held) => keeper.renewed(mark, &held),
                // A passing failure: the lease has slack for two more tries.
                Err(e) => tracing::warn!(error = %e, "renewing leases failed; trying again"),
            }
        }
    })
}
