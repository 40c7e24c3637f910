//! Resume links kept: a link's secret — 256 random bits ([`mint`]), or derived from the
//! webhook secret for a callback ([`keep`]) — is stored only as its SHA-256, for the wait
//! the run is in, and found again by the secret ([`stored`]). The routes that answer
//! through a link are `routes::hooks`.

use std::time::SystemTime;

use claij_core::RunStatus;
use claij_core::store::RunRecord;
use claij_store::roles::Hook;
use serde::Serialize;
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use crate::problem::Problem;
use crate::state::AppState;

/// Bytes of a link's secret.
pub(crate) const SECRET_BYTES: usize = 32;

/// A new resume link.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct NewHook {
    /// Where to post the answer: `/hooks/{secret}` (shown only now).
    pub url: String,
    /// The run it answers.
    pub run: String,
    /// The state that waits.
    pub state: String,
}

/// The SHA-256 of a secret, hex.
pub(crate) fn hash(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Makes a resume link for the wait `record` is in.
pub(crate) async fn mint(state: &AppState, record: &RunRecord) -> Result<NewHook, Problem> {
    let mut secret = [0u8; SECRET_BYTES];
    getrandom::fill(&mut secret)
        .map_err(|e| Problem::internal(format!("no randomness from the OS: {e}")))?;
    keep(state, record, &hex(&secret)).await
}

/// Makes `secret` (64 hex digits: random, or derived from a key the server holds) a
/// resume link for the wait `record` is in: only its hash is stored.
pub(crate) async fn keep(
    state: &AppState,
    record: &RunRecord,
    secret: &str,
) -> Result<NewHook, Problem> {
    let Some(wait) = record
        .wait
        .as_ref()
        .filter(|_| record.status == RunStatus::Suspended)
    else {
        return Err(Problem::conflict(format!(
            "run `{}` is {}: it waits for no answer, so it has no resume link",
            record.id, record.status
        )));
    };
    if wait.budget.is_some() {
        return Err(Problem::conflict(format!(
            "run `{}` stopped for its budget, not for an answer",
            record.id
        )));
    }
    if !wait.takes_input() {
        return Err(Problem::conflict(format!(
            "run `{}` waits for its child runs, not for an answer",
            record.id
        )));
    }
    let hook = Hook {
        run_id: record.id.clone(),
        wait_seq: record.trail_len,
        created_at: SystemTime::now(),
    };
    state
        .webhooks
        .put_hook(&hash(secret), &hook)
        .await
        .map_err(|e| Problem::from_store(&e))?;
    // Links to the run's earlier waits answer nothing any more: forget them.
    if let Err(e) = state
        .webhooks
        .delete_hooks(&record.id, record.trail_len)
        .await
    {
        tracing::warn!("run {}: old resume links not deleted: {e}", record.id);
    }
    Ok(NewHook {
        url: format!("/hooks/{secret}"),
        run: record.id.clone(),
        state: wait.state.clone(),
    })
}

/// The stored link whose secret is `secret`, if there is one.
pub(crate) async fn stored(state: &AppState, secret: &str) -> Option<Hook> {
    state.webhooks.hook(&hash(secret)).await.ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_hash_to_hex_sha256() {
        assert_eq!(
            hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(hex(&[0, 15, 255]), "000fff");
    }
}
