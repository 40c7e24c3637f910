//! Stopping a stored run from any process: [`interrupt`].

use std::sync::Arc;
use std::time::SystemTime;

use claij_core::store::{ClaimFrom, RunRecord, RunStore, StoreError};
use claij_core::{Failure, FailureKind, TrailEntry};
use serde_json::Value;

use super::{RunError, RunStatus};
use crate::durable::{DEFAULT_LEASE, is_dead_local_owner, process_owner};

/// Stops a stored run from any process: a running run's process notices within its
/// heartbeat (about a quarter of a second) and records `interrupted` itself; a suspended
/// run, or a running one whose process is gone, is finished here with an `interrupted`
/// entry. Returns the run's record as it now stands.
pub fn interrupt<'a>(
    store: &'a dyn RunStore,
    run_id: &'a str,
) -> crate::action::BoxFuture<'a, Result<RunRecord, RunError>> {
    Box::pin(interrupt_one(store, run_id))
}

/// How many times an interrupt looks at a suspended run again when an answer moved it on
/// between its look and its claim (it then runs, and notices the request itself, or waits
/// again, and is claimed in its new wait).
const RETRIES: u32 = 8;

async fn interrupt_one(store: &dyn RunStore, run_id: &str) -> Result<RunRecord, RunError> {
    for _ in 0..RETRIES {
        if let Some(done) = interrupt_as_found(store, run_id).await? {
            return Ok(done);
        }
    }
    // Still moving on: the request is stored, and whoever drives it next stops it.
    Ok(store.run(run_id).await?)
}

/// [`interrupt_one`] on the run as one look finds it; `None` when another claimed it
/// between the look and this claim (look again).
async fn interrupt_as_found(
    store: &dyn RunStore,
    run_id: &str,
) -> Result<Option<RunRecord>, RunError> {
    let record = store.request_interrupt(run_id).await?;
    // A run waiting for its children: they are interrupted too.
    if let Some(wait) = &record.wait {
        for child in &wait.children {
            match interrupt(store, child).await {
                Ok(_) | Err(RunError::Store(StoreError::Conflict { .. })) => {}
                Err(e) => return Err(e),
            }
        }
    }
    let owner_dead = record
        .lease
        .as_ref()
        .is_none_or(|l| l.until <= SystemTime::now() || is_dead_local_owner(&l.owner));
    let from = match record.status {
        RunStatus::Suspended => ClaimFrom::wait_of(&record),
        RunStatus::Running if owner_dead => ClaimFrom::Stale {
            dead_owners: record.lease.iter().map(|l| l.owner.clone()).collect(),
        },
        _ => return Ok(Some(record)),
    };
    let owner = process_owner();
    let claimed = match store
        .claim(run_id, from, &owner, SystemTime::now() + DEFAULT_LEASE)
        .await
    {
        Ok(claimed) => claimed,
        Err(StoreError::Conflict { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let finished = finish_interrupted(store, &record, claimed, &owner).await;
    super::claim::released_on_error(store, &record, &owner, finished)
        .await
        .map(Some)
}

/// Records the `interrupted` entry of a run this process claimed (`record`: as found).
async fn finish_interrupted(
    store: &dyn RunStore,
    record: &RunRecord,
    claimed: RunRecord,
    owner: &str,
) -> Result<RunRecord, RunError> {
    let run_id = record.id.as_str();
    let trail = store
        .trail(run_id, claimed.trail_len.saturating_sub(1))
        .await?;
    let attempt = trail
        .last()
        .map_or(1, |e| if e.is_transition() { 1 } else { e.attempt + 1 });
    // Calls a dead process had in flight are counted as spent, at most.
    let usage = record
        .pending
        .as_ref()
        .map(|p| Box::new(p.at_most.as_usage()));
    let entry = TrailEntry {
        seq: claimed.trail_len,
        fsm: Arc::from(claimed.fsm_id.as_str()),
        version: claimed.version,
        from: Arc::from(claimed.state.as_str()),
        to: None,
        event: Value::Null,
        at: crate::drive::to_micros(SystemTime::now()),
        attempt,
        model: None,
        usage,
        enforce: None,
        summary: None,
        votes: None,
        duration_ms: None,
        failure: Some(Box::new(Failure {
            kind: FailureKind::Interrupted,
            message: "the run was interrupted".into(),
            errors: Vec::new(),
            attempt,
        })),
    };
    let mut spend = record.spend;
    spend.add_calls(&claij_core::Spend::of_entry(&entry));
    if record.status == RunStatus::Suspended {
        spend.waiting_ms = spend
            .waiting_ms
            .saturating_add(crate::spend::millis_since(record.updated_at));
    }
    store
        .commit(claij_core::store::Checkpoint {
            run_id: run_id.to_owned(),
            owner: owner.to_owned(),
            entries: vec![entry],
            status: RunStatus::Interrupted,
            state: claimed.state.clone(),
            context: None,
            wait: None,
            lease_until: None,
            published: Vec::new(),
            spend,
        })
        .await?;
    Ok(store.run(run_id).await?)
}
