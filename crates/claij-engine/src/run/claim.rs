//! Claims this process makes on stored runs, and their release when what follows a claim
//! fails: a run is never left claimed by an attempt to continue it that went wrong (it
//! would otherwise stay `running`, refusing answers and interrupts, until its lease is
//! found expired).

use claij_core::Fsm;
use claij_core::store::{Checkpoint, RunRecord, RunStatus, RunStore, StoreError};

use super::RunError;

/// Refuses to continue `record` (resumed or answered) with `fsm` when the run is pinned
/// to another definition: nothing changes.
pub(super) fn check_pinned(record: &RunRecord, fsm: &Fsm) -> Result<(), RunError> {
    if record.hash == fsm.hash {
        return Ok(());
    }
    let short = |hash: &str| hash.get(..12).unwrap_or(hash).to_owned();
    Err(RunError::NotResumable {
        run: record.id.clone(),
        reason: format!(
            "is pinned to definition {} v{} ({}), not to the one given ({})",
            record.fsm_id,
            record.version,
            short(&record.hash),
            short(&fsm.hash)
        ),
    })
}

/// Refuses a resume or answer meant for the wait that began at trail length `wait_seq`
/// when `record` is no longer in it (another answer moved the run on, even if it waits
/// again since): nothing changes.
pub(super) fn check_wait(record: &RunRecord, wait_seq: Option<u64>) -> Result<(), RunError> {
    match wait_seq {
        Some(seq) if record.status != RunStatus::Suspended || record.trail_len != seq => {
            Err(StoreError::Conflict {
                run: record.id.clone(),
                reason: format!(
                    "no longer waits where this answer was given (at trail length {seq}): it is {} in `{}` at trail length {}",
                    record.status, record.state, record.trail_len
                ),
            }
            .into())
        }
        _ => Ok(()),
    }
}

/// `result` as it is, after giving the run back when it is an error: see [`release`].
pub(super) async fn released_on_error<T>(
    store: &dyn RunStore,
    before: &RunRecord,
    owner: &str,
    result: Result<T, RunError>,
) -> Result<T, RunError> {
    if result.is_err() {
        release(store, before, owner).await;
    }
    result
}

/// Gives back a run this process claimed (`before`: its record as found before the claim)
/// after what followed the claim failed, if this process still holds it: a suspended run
/// to which nothing was committed since waits again as it was found (its wait, and the
/// time waited, kept); any other is handed back, running and held by no one, for whoever
/// continues runs (a worker, `claij runs resume`, a server starting) — and an interrupt
/// finishes it at once. Best effort: a release that fails leaves the lease to expire,
/// and says so in the log.
pub(super) async fn release(store: &dyn RunStore, before: &RunRecord, owner: &str) {
    let now = match store.run(&before.id).await {
        Ok(now) => now,
        Err(e) => {
            tracing::warn!(run = %before.id, error = %e, "a claimed run could not be given back");
            return;
        }
    };
    if now.lease.as_ref().is_none_or(|l| l.owner != owner) {
        // Finished, suspended, or taken over since: not this process's to give back.
        return;
    }
    let given_back = if before.status == RunStatus::Suspended
        && now.status == RunStatus::Running
        && now.trail_len == before.trail_len
    {
        let mut spend = now.spend;
        spend.waiting_ms = spend
            .waiting_ms
            .saturating_add(crate::spend::millis_since(before.updated_at));
        store
            .commit(Checkpoint {
                run_id: before.id.clone(),
                owner: owner.to_owned(),
                entries: Vec::new(),
                status: RunStatus::Suspended,
                state: before.state.clone(),
                context: None,
                wait: before.wait.clone(),
                lease_until: None,
                published: Vec::new(),
                spend,
            })
            .await
    } else {
        store.release(&before.id, owner).await.map(|_| ())
    };
    if let Err(e) = given_back {
        tracing::warn!(
            run = %before.id,
            error = %e,
            "a claimed run could not be given back; it is left to its lease's end"
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::Arc;
    use std::time::{Duration, SystemTime};

    use claij_core::store::{ClaimFrom, Durability};
    use claij_core::{Failure, FailureKind, TrailEntry, load_str};
    use serde_json::json;

    use super::*;
    use crate::{ActionRegistry, Engine, RunOptions};

    const ASK: &str = "
id: ask
states:
  - {id: ask, action: human}
  - {id: done, action: end}
xitions:
  - id: [start, ask]
  - id: [ask, done]
";

    /// A run suspended in `ask`, on a SQLite file in `dir`.
    async fn waiting(dir: &tempfile::TempDir) -> (Arc<dyn RunStore>, RunRecord) {
        let path = dir.path().join("claij.db").display().to_string();
        let store = claij_store::open(&path, Durability::Normal).await.unwrap();
        let engine = Engine::new(Arc::new(ActionRegistry::durable()));
        let fsm = Arc::new(load_str("ask.yaml", ASK, engine.registry()).unwrap());
        let options = RunOptions {
            store: Some(store.clone()),
            ..RunOptions::default()
        };
        let out = engine.run(fsm, json!({}), options).await.unwrap();
        let record = store.run(&out.run_id).await.unwrap();
        assert_eq!(record.status, RunStatus::Suspended);
        (store, record)
    }

    async fn claim(store: &dyn RunStore, found: &RunRecord, owner: &str) {
        let until = SystemTime::now() + Duration::from_secs(60);
        store
            .claim(&found.id, ClaimFrom::wait_of(found), owner, until)
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_claim_nothing_followed_gives_the_run_its_wait_back() {
        let dir = tempfile::tempdir().unwrap();
        let (store, found) = waiting(&dir).await;
        claim(store.as_ref(), &found, "me").await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        release(store.as_ref(), &found, "me").await;
        let now = store.run(&found.id).await.unwrap();
        assert_eq!(now.status, RunStatus::Suspended);
        assert_eq!(now.wait, found.wait, "the wait it was found in");
        assert_eq!(now.lease, None);
        assert_eq!(now.trail_len, found.trail_len);
        assert!(
            now.spend.waiting_ms >= found.spend.waiting_ms + 20,
            "the time it waited is kept: {:?}",
            now.spend
        );
        // And it is answered as any waiting run is.
        claim(store.as_ref(), &now, "another").await;
    }

    #[tokio::test]
    async fn a_claim_something_was_committed_after_is_handed_back() {
        let dir = tempfile::tempdir().unwrap();
        let (store, found) = waiting(&dir).await;
        claim(store.as_ref(), &found, "me").await;
        let failure = Failure {
            kind: FailureKind::Action,
            message: "a try".into(),
            errors: Vec::new(),
            attempt: 1,
        };
        let entry = TrailEntry {
            seq: found.trail_len,
            fsm: Arc::from("ask"),
            version: 1,
            from: Arc::from("ask"),
            to: None,
            event: json!(null),
            at: SystemTime::UNIX_EPOCH,
            attempt: 1,
            model: None,
            enforce: None,
            summary: None,
            votes: None,
            usage: None,
            duration_ms: None,
            failure: Some(Box::new(failure)),
        };
        store
            .commit(Checkpoint {
                run_id: found.id.clone(),
                owner: "me".into(),
                entries: vec![entry],
                status: RunStatus::Running,
                state: "ask".into(),
                context: None,
                wait: None,
                lease_until: Some(SystemTime::now() + Duration::from_secs(60)),
                published: Vec::new(),
                spend: found.spend,
            })
            .await
            .unwrap();
        release(store.as_ref(), &found, "me").await;
        let now = store.run(&found.id).await.unwrap();
        assert_eq!(now.status, RunStatus::Running, "its entry stays");
        assert_eq!(now.lease, None, "held by no one: anyone may continue it");
        assert_eq!(now.trail_len, found.trail_len + 1);
    }

    #[tokio::test]
    async fn a_run_another_holds_is_not_given_back() {
        let dir = tempfile::tempdir().unwrap();
        let (store, found) = waiting(&dir).await;
        claim(store.as_ref(), &found, "another").await;
        let held = store.run(&found.id).await.unwrap();
        release(store.as_ref(), &found, "me").await;
        assert_eq!(store.run(&found.id).await.unwrap(), held);
    }

    #[test]
    fn an_answer_for_another_wait_is_refused() {
        let record = RunRecord {
            id: "r".into(),
            fsm_id: "ask".into(),
            version: 1,
            hash: String::new(),
            parent: None,
            status: RunStatus::Suspended,
            state: "ask".into(),
            context: json!({}),
            trail_len: 3,
            wait: None,
            lease: None,
            interrupt_requested: false,
            not_before: None,
            idempotency_key: None,
            spend: Default::default(),
            budget: None,
            pending: None,
            forked_from: None,
            created_at: SystemTime::UNIX_EPOCH,
            updated_at: SystemTime::UNIX_EPOCH,
        };
        assert!(check_wait(&record, None).is_ok());
        assert!(check_wait(&record, Some(3)).is_ok());
        for (status, seq) in [(RunStatus::Suspended, 2), (RunStatus::Running, 3)] {
            let record = RunRecord {
                status,
                ..record.clone()
            };
            match check_wait(&record, Some(seq)) {
                Err(RunError::Store(StoreError::Conflict { reason, .. })) => {
                    assert!(reason.contains("no longer waits where"), "{reason}")
                }
                other => panic!("{other:?}"),
            }
        }
    }
}
