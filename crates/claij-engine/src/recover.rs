//! Which stored runs can continue without input now: runs whose process died (or whose
//! lease expired), suspended runs whose wait expired, and runs waiting for their children.
//! `claij runs resume --all` and a starting `claij serve` continue them.

use std::collections::HashSet;
use std::time::SystemTime;

use claij_core::store::{RunFilter, RunRecord, RunStore, StoreError};

use crate::durable::is_dead_local_owner;
use crate::run::RunStatus;

/// Whether `run` can continue without input at `now`: running with a dead owner or an
/// expired lease, or suspended with an expired wait or waiting for child runs (a crash may
/// have come between a child's end and its parent's wake-up, so such a run tries again).
pub fn continues_without_input(run: &RunRecord, now: SystemTime) -> bool {
    match run.status {
        RunStatus::Running => run
            .lease
            .as_ref()
            .is_none_or(|l| l.until <= now || is_dead_local_owner(&l.owner)),
        RunStatus::Suspended => run
            .wait
            .as_ref()
            .is_some_and(|w| w.expires_at.is_some_and(|at| at <= now) || !w.children.is_empty()),
        _ => false,
    }
}

/// The runs of `store` that can continue without input now, oldest first; a child whose
/// parent is among them is left out (its parent continues it).
pub async fn runs_to_continue(store: &dyn RunStore) -> Result<Vec<RunRecord>, StoreError> {
    let filter = RunFilter {
        statuses: vec![RunStatus::Running, RunStatus::Suspended],
        ..RunFilter::default()
    };
    let now = SystemTime::now();
    let candidates: Vec<RunRecord> = store
        .runs(&filter)
        .await?
        .into_iter()
        .filter(|r| continues_without_input(r, now))
        .collect();
    let ids: HashSet<&str> = candidates.iter().map(|r| r.id.as_str()).collect();
    let mut chosen: Vec<RunRecord> = candidates
        .iter()
        .filter(|r| r.parent.as_deref().is_none_or(|p| !ids.contains(p)))
        .cloned()
        .collect();
    chosen.reverse();
    Ok(chosen)
}
