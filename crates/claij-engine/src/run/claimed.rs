//! Continuing a run this process claimed (resumed, taken from the queue, answered): its
//! state rebuilt from the store, the answer or input it was given recorded, an expired
//! wait or a passed deadline followed, and the loop driven from there.

use crate::drive::CallRecord;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use claij_core::store::{ClaimFrom, RunRecord, RunStore, StoreError};
use claij_core::{Failure, FailureKind, Fsm};
use serde_json::{Value, json};

use super::{Engine, RunError, RunOptions, RunOutcome, RunStatus};
use crate::drive::{RunState, run_deadline};
use crate::durable::{DEFAULT_LEASE, process_owner};

impl Engine {
    /// Claims the run (from `from`; `before`: its record before the claim), rebuilds its
    /// state from the store and continues it from the last transition of its trail, with
    /// the next attempt of that state; gives it back if that fails.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn claim_and_continue(
        &self,
        fsm: &Fsm,
        before: &RunRecord,
        from: ClaimFrom,
        store: Arc<dyn RunStore>,
        owner: &str,
        lease: Duration,
        options: &RunOptions,
    ) -> Result<RunOutcome, RunError> {
        let claimed = store
            .claim(&before.id, from, owner, SystemTime::now() + lease)
            .await?;
        // The claimed record (running now) with what the run was before: its wait, its
        // status (a suspended run's time waiting ends now) and its calls in flight.
        let found = RunRecord {
            status: before.status,
            wait: before.wait.clone(),
            pending: before.pending.clone(),
            updated_at: before.updated_at,
            ..claimed
        };
        let continued = self
            .continue_claimed_run(fsm, &found, None, store.clone(), owner, lease, options)
            .await;
        super::claim::released_on_error(store.as_ref(), before, owner, continued).await
    }

    /// Continues a run a worker took from the queue
    /// (the store's `WorkQueue::claim_due`) for
    /// `options.owner`: `before` is its record as it was before the claim. A queued or
    /// crashed run continues from its last transition; a suspended run whose wait expired
    /// follows `on_expiry` (or fails), one whose deadline passed follows its deadline's
    /// failure, one waiting for children tries again. A child that ends wakes its parent,
    /// as with [`resume`](Self::resume).
    pub async fn continue_claimed(
        &self,
        fsm: Arc<Fsm>,
        before: &RunRecord,
        options: RunOptions,
    ) -> Result<RunOutcome, RunError> {
        let Some(store) = options.store.clone() else {
            return Err(RunError::NotResumable {
                run: before.id.clone(),
                reason: "cannot be continued without a store".into(),
            });
        };
        let owner = options.owner.clone().unwrap_or_else(process_owner);
        let lease = options.lease.unwrap_or(DEFAULT_LEASE);
        let mut outcome = self
            .continue_claimed_run(&fsm, before, None, store.clone(), &owner, lease, &options)
            .await?;
        if outcome.status.is_final()
            && let Some(parent) = &before.parent
        {
            outcome.parent = self.wake(&store, parent, &options).await?.map(Box::new);
        }
        Ok(outcome)
    }

    /// Continues a run this process has just claimed, suspended on `question`, with its
    /// `answer`: the answer is recorded (committed at once, so that it outlives this
    /// process), then the state's attempt is made again, its repeated question answered
    /// from the trail.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn continue_answered_run(
        &self,
        fsm: &Fsm,
        before: &RunRecord,
        given: Option<(&claij_core::Question, &claij_core::Answer)>,
        store: Arc<dyn RunStore>,
        owner: &str,
        lease: Duration,
        options: &RunOptions,
    ) -> Result<RunOutcome, RunError> {
        let mut run = self
            .resumed_state(fsm, before, store, owner, lease, options)
            .await?;
        let attempt = run.attempts_here() + 1;
        if let Some((question, answer)) = given {
            let state = waiting_state(fsm, before)?;
            run.append_answer(state, question, answer);
            run.commit_answer(&state.id).await?;
        }
        let Some(into) = run.current_transition() else {
            return Err(RunError::NotResumable {
                run: before.id.clone(),
                reason: "has no transition in its trail".into(),
            });
        };
        Ok(run.drive(into, attempt).await?)
    }

    /// Answers a question whose request another process holds open until `until`, the run
    /// claimed for it: the answer is recorded and the run handed back to the queue, for the
    /// holder to take (it looks every 100 ms) and give the server the answer. When the
    /// holder does not take it by the end of its hold, it is gone: the run is taken here,
    /// and the attempt made again (the server, asking again, is answered from the trail).
    /// The outcome is the run as the holder took it (running), or as it ends here.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn answer_held(
        &self,
        fsm: &Fsm,
        before: &RunRecord,
        (question, answer): (&claij_core::Question, &claij_core::Answer),
        until: SystemTime,
        store: Arc<dyn RunStore>,
        owner: &str,
        options: &RunOptions,
    ) -> Result<RunOutcome, RunError> {
        let lease = options.lease.unwrap_or(DEFAULT_LEASE);
        let mut run = self
            .resumed_state(fsm, before, store.clone(), owner, lease, options)
            .await?;
        let state = waiting_state(fsm, before)?;
        run.append_answer(state, question, answer);
        run.hand_back(&state.id).await?;
        let give_up = until + crate::drive::HOLD_GRACE;
        loop {
            let record = store.run(&before.id).await?;
            if record.status != RunStatus::Running || record.lease.is_some() {
                return Ok(RunOutcome::stored(store.as_ref(), record).await?);
            }
            if SystemTime::now() >= give_up {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let stale = ClaimFrom::Stale {
            dead_owners: Vec::new(),
        };
        let taken = match store
            .claim(&before.id, stale, owner, SystemTime::now() + lease)
            .await
        {
            Ok(taken) => taken,
            // The holder took it at the last moment.
            Err(StoreError::Conflict { .. }) => {
                let record = store.run(&before.id).await?;
                return Ok(RunOutcome::stored(store.as_ref(), record).await?);
            }
            Err(e) => return Err(e.into()),
        };
        self.continue_answered_run(fsm, &taken, None, store, owner, lease, options)
            .await
    }

    /// Continues a run this process has just claimed (`before`: its record before the
    /// claim), with the input that took one of its waited transitions, if it was given one.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn continue_claimed_run(
        &self,
        fsm: &Fsm,
        before: &RunRecord,
        given: Option<(usize, Value)>,
        store: Arc<dyn RunStore>,
        owner: &str,
        lease: Duration,
        options: &RunOptions,
    ) -> Result<RunOutcome, RunError> {
        let run_id = before.id.as_str();
        let mut run = self
            .resumed_state(fsm, before, store, owner, lease, options)
            .await?;
        let now = SystemTime::now();
        // A suspended run, or a running one whose claimer died before its first commit
        // (its wait is still there): the wait is acted on as it stands. A run stopped for
        // its budget tries its state again, unless its deadline passed meanwhile.
        let waited = match (&before.status, &before.wait) {
            (RunStatus::Suspended | RunStatus::Running, Some(wait))
                if wait.children.is_empty()
                    && (wait.budget.is_none() || wait.deadline_at.is_some_and(|at| at <= now)) =>
            {
                Some(wait)
            }
            _ => None,
        };
        if let Some(wait) = waited {
            let state = fsm
                .state(&wait.state)
                .ok_or_else(|| RunError::NotResumable {
                    run: run_id.to_owned(),
                    reason: format!("waits in unknown state `{}`", wait.state),
                })?;
            let attempt = run.attempts_here() + 1;
            if let Some((t, input)) = given {
                run.append_full(t, input, attempt, CallRecord::default(), None, None);
                return Ok(run.drive(t, 1).await?);
            }
            let expired = wait.expires_at.is_some_and(|at| at <= now);
            let deadline_passed = wait.deadline_at.is_some_and(|at| at <= now);
            if expired {
                let failure = Failure {
                    kind: FailureKind::Timeout,
                    message: "the wait for input expired".into(),
                    errors: Vec::new(),
                    attempt,
                };
                run.append_failure(
                    state,
                    Value::Null,
                    failure.clone(),
                    CallRecord::default(),
                    None,
                );
                let route = wait
                    .on_expiry
                    .as_deref()
                    .and_then(|target| fsm.transition_idx(&state.id, target));
                return match route {
                    Some(t) => {
                        let event = json!({
                            "id": fsm.transitions[t].id_value,
                            "failure": failure,
                            "state": &*state.id,
                        });
                        run.append_full(t, event, attempt, CallRecord::default(), None, None);
                        Ok(run.drive(t, 1).await?)
                    }
                    None => Ok(run.fail_here(state).await?),
                };
            }
            if deadline_passed {
                // Its `on_failure` route is followed once, as in a running run.
                return match run.deadline_passed(state, attempt, None, None) {
                    Some(failure) => match run.on_failure_route(state, Some(failure)) {
                        Some(t) => Ok(run.drive(t, 1).await?),
                        None => Ok(run.fail_here(state).await?),
                    },
                    None => Ok(run.fail_here(state).await?),
                };
            }
            // Nothing due (an answer lost with the claimer that had it): the run waits
            // again, for the same wait — its expiry is not pushed back.
            return Ok(run.suspend_again(state, wait.clone()).await?);
        }
        let Some(into) = run.current_transition() else {
            return Err(RunError::NotResumable {
                run: run_id.to_owned(),
                reason: "has no transition in its trail".into(),
            });
        };
        let attempt = run.attempts_here() + 1;
        Ok(run.drive(into, attempt).await?)
    }

    /// The in-memory state of a claimed run, rebuilt from its stored trail (checked
    /// against the record's count), its deadline counted from the run's creation.
    pub(super) async fn resumed_state<'e>(
        &'e self,
        fsm: &'e Fsm,
        record: &RunRecord,
        store: Arc<dyn RunStore>,
        owner: &str,
        lease: Duration,
        options: &RunOptions,
    ) -> Result<RunState<'e>, RunError> {
        let trail = store.trail(&record.id, 0).await?;
        if trail.len() as u64 != record.trail_len {
            return Err(StoreError::Corrupt {
                what: format!("run {}", record.id),
                message: format!(
                    "the record counts {} trail entries but {} are stored",
                    record.trail_len,
                    trail.len()
                ),
            }
            .into());
        }
        let deadline = run_deadline(options.deadline, fsm).map(|d| {
            let ends = record.created_at + d;
            let left = ends.duration_since(SystemTime::now()).unwrap_or_default();
            (Instant::now() + left, d)
        });
        let options = RunOptions {
            store: Some(store),
            owner: Some(owner.to_owned()),
            lease: Some(lease),
            ..options.clone()
        };
        let mut run = self.run_state(
            fsm,
            record.id.clone(),
            trail,
            record.context.clone(),
            deadline,
            &options,
        );
        run.committed = run.trail.len();
        run.spend = record.spend;
        if record.status == RunStatus::Suspended {
            run.spend.waiting_ms = run
                .spend
                .waiting_ms
                .saturating_add(crate::spend::millis_since(record.updated_at));
        }
        if let Some(durable) = &run.durable {
            let store = durable.store.clone();
            let above = match (&options.ledger, &record.parent) {
                (Some(ledger), _) => Some(ledger.clone()),
                (None, Some(parent)) => crate::spend::stored_ledger(store.as_ref(), parent).await?,
                (None, None) => None,
            };
            run.ledger = match record.budget {
                Some(limit) => {
                    let mut spent = store.tree_spend(&record.id).await?;
                    spent.time_ms = record.spend.time_ms;
                    Some(crate::spend::Ledger::new(
                        &record.id, limit, spent, true, above,
                    ))
                }
                None => above,
            };
        }
        if record.status == RunStatus::Running
            && let Some(pending) = &record.pending
        {
            run.record_lost_calls(pending);
        }
        let began = crate::observer::RunBegan {
            run_id: &run.run_id,
            fsm,
            parent: record.parent.as_deref(),
            resumed: true,
        };
        for o in &run.observers {
            o.run_began(&began);
            o.run_started(&run.run_id);
        }
        Ok(run)
    }
}

/// The state a suspended run waits in, from its definition.
fn waiting_state<'f>(fsm: &'f Fsm, before: &RunRecord) -> Result<&'f claij_core::State, RunError> {
    before
        .wait
        .as_ref()
        .and_then(|w| fsm.state(&w.state))
        .ok_or_else(|| RunError::NotResumable {
            run: before.id.clone(),
            reason: "waits in a state its definition does not have".into(),
        })
}
