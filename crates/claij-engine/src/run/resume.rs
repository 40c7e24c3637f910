//! Continuing a stored run: [`Engine::resume`] gives a suspended run its input, follows
//! an expired wait, or takes over a run whose process died, and wakes the parent of a
//! child run that ends.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use claij_core::Fsm;
use claij_core::store::{ClaimFrom, RunRecord, RunStore, StoreError, Wait};
use serde_json::Value;

use super::{Engine, InputError, RunError, RunOptions, RunOutcome, RunStatus};
use crate::durable::{DEFAULT_LEASE, is_dead_local_owner, process_owner};

impl Engine {
    /// Continues a stored run of `fsm` (the definition it is pinned to):
    ///
    /// - a **suspended** run with `input`: the input must take one of the transitions the
    ///   run waits on and satisfy its schema (else nothing changes); of concurrent
    ///   resumes exactly one wins, the others get [`StoreError::Conflict`] — per wait:
    ///   a resume that read the run in a wait it has since moved past is refused, even if
    ///   the run waits again, and with [`RunOptions::wait_seq`] an input is taken only by
    ///   the wait it was meant for;
    /// - a suspended run whose wait **expired**, without input: follows the wait's
    ///   `on_expiry` route, or fails;
    /// - a **running** run whose process died (or whose lease expired): continues from
    ///   its last committed transition; the action that was in flight runs again, with
    ///   the same idempotency key.
    ///
    /// A run suspended while it waits for its child runs takes no input: resumed without
    /// one, its state's action tries again (finding its children where they are). When
    /// the resumed run is itself a child and it ends, its parent continues if it waited
    /// for it (see [`RunOutcome::parent`]).
    ///
    /// A run this claimed is never left claimed: when continuing it fails, it is given
    /// back (waiting again as it was found, if nothing was committed; else handed back to
    /// whoever continues runs).
    pub async fn resume(
        &self,
        fsm: Arc<Fsm>,
        run_id: &str,
        input: Option<Value>,
        options: RunOptions,
    ) -> Result<RunOutcome, RunError> {
        let mut outcome = self.resume_run(fsm, run_id, input, options.clone()).await?;
        if outcome.status.is_final()
            && let Some(store) = &options.store
            && let Some(parent) = store.run(run_id).await?.parent
        {
            outcome.parent = self.wake(store, &parent, &options).await?.map(Box::new);
        }
        Ok(outcome)
    }

    /// [`resume`](Self::resume) without waking the parent.
    pub(crate) async fn resume_run(
        &self,
        fsm: Arc<Fsm>,
        run_id: &str,
        input: Option<Value>,
        options: RunOptions,
    ) -> Result<RunOutcome, RunError> {
        let not_resumable = |reason: String| RunError::NotResumable {
            run: run_id.to_owned(),
            reason,
        };
        let Some(store) = options.store.clone() else {
            return Err(not_resumable("cannot be resumed without a store".into()));
        };
        let record = store.run(run_id).await?;
        super::claim::check_pinned(&record, &fsm)?;
        super::claim::check_wait(&record, options.wait_seq)?;
        let owner = options.owner.clone().unwrap_or_else(process_owner);
        let lease = options.lease.unwrap_or(DEFAULT_LEASE);
        match record.status {
            RunStatus::Suspended => {
                let wait = record
                    .wait
                    .clone()
                    .ok_or_else(|| not_resumable("is suspended but its wait is missing".into()))?;
                self.resume_suspended(
                    &fsm,
                    &record,
                    &wait,
                    input,
                    store,
                    (&owner, lease),
                    &options,
                )
                .await
            }
            // Running with an input: another resume may have just won the race, or the
            // run never waited; either way the input cannot be used.
            RunStatus::Running if input.is_some() => Err(StoreError::Conflict {
                run: run_id.to_owned(),
                reason: "is running, not suspended: only a suspended run takes an input".into(),
            }
            .into()),
            RunStatus::Running => {
                let dead_owners = record
                    .lease
                    .iter()
                    .map(|l| l.owner.clone())
                    .filter(|o| is_dead_local_owner(o))
                    .collect();
                self.claim_and_continue(
                    &fsm,
                    &record,
                    ClaimFrom::Stale { dead_owners },
                    store,
                    &owner,
                    lease,
                    &options,
                )
                .await
            }
            // A finished run: for an input, another resume may just have won the race;
            // either way it is a conflict with the run's state, not a bad request.
            status => Err(StoreError::Conflict {
                run: run_id.to_owned(),
                reason: format!("is {status}, not suspended or running: only those can be resumed"),
            }
            .into()),
        }
    }

    /// [`resume_run`](Self::resume_run) for `record`, suspended on `wait`: claimed in that
    /// wait (never in a later one) and continued with `input` — an answer to its question,
    /// an event taking a waited transition — or without one when the wait is due or takes
    /// none.
    #[allow(clippy::too_many_arguments)]
    async fn resume_suspended(
        &self,
        fsm: &Fsm,
        record: &RunRecord,
        wait: &Wait,
        input: Option<Value>,
        store: Arc<dyn RunStore>,
        (owner, lease): (&str, Duration),
        options: &RunOptions,
    ) -> Result<RunOutcome, RunError> {
        let run_id = record.id.as_str();
        let not_resumable = |reason: String| RunError::NotResumable {
            run: run_id.to_owned(),
            reason,
        };
        // Claimed in the wait it was found in, never in a later one.
        let this_wait = ClaimFrom::wait_of(record);
        if !wait.takes_input() {
            if input.is_some() {
                return Err(not_resumable(match &wait.budget {
                    Some(pause) => format!(
                        "stopped for a budget ({pause}), not for an input: resume it without one once the budget is raised"
                    ),
                    None => format!(
                        "waits for its child runs ({}), not for an input: resume those",
                        wait.children.join(", ")
                    ),
                }));
            }
            return self
                .claim_and_continue(fsm, record, this_wait, store, owner, lease, options)
                .await;
        }
        if let (Some(question), Some(input)) = (&wait.question, &input) {
            let answer = crate::questions::checked_answer(question, input)?;
            store
                .claim(run_id, this_wait, owner, SystemTime::now() + lease)
                .await?;
            let given = (question.as_ref(), &answer);
            let answered = match wait.held_at(SystemTime::now()) {
                Some(held) => {
                    self.answer_held(
                        fsm,
                        record,
                        given,
                        held.until,
                        store.clone(),
                        owner,
                        options,
                    )
                    .await
                }
                None => {
                    self.continue_answered_run(
                        fsm,
                        record,
                        Some(given),
                        store.clone(),
                        owner,
                        lease,
                        options,
                    )
                    .await
                }
            };
            return super::claim::released_on_error(store.as_ref(), record, owner, answered).await;
        }
        let now = SystemTime::now();
        let due = wait.wakes_at().is_some_and(|at| at <= now);
        let taking = match (&input, due) {
            (Some(input), _) => Some(self.waited_transition(fsm, run_id, wait, input)?),
            (None, true) => None,
            (None, false) => {
                return Err(not_resumable(format!(
                    "is suspended in `{}` and waits for an input taking one of: {}",
                    wait.state,
                    pairs(&wait.transitions)
                )));
            }
        };
        store
            .claim(run_id, this_wait, owner, SystemTime::now() + lease)
            .await?;
        let given = taking.zip(input);
        let continued = self
            .continue_claimed_run(fsm, record, given, store.clone(), owner, lease, options)
            .await;
        super::claim::released_on_error(store.as_ref(), record, owner, continued).await
    }

    /// The transition a resume input takes, checked against the run's wait and the
    /// transition's schema.
    pub(super) fn waited_transition(
        &self,
        fsm: &Fsm,
        run_id: &str,
        wait: &Wait,
        input: &Value,
    ) -> Result<usize, InputError> {
        let id = input.get("id");
        let target = id
            .and_then(Value::as_array)
            .and_then(|pair| match pair.as_slice() {
                [Value::String(from), Value::String(to)] => wait
                    .transitions
                    .iter()
                    .find(|(f, t)| f == from && t == to)
                    .and_then(|(f, t)| fsm.transition_idx(f, t)),
                _ => None,
            });
        let Some(t) = target else {
            return Err(InputError::NotWaitedFor {
                run: run_id.to_owned(),
                id: id.map_or_else(|| "(none)".to_owned(), Value::to_string),
                waiting: pairs(&wait.transitions),
            });
        };
        self.check_event(fsm, &fsm.transitions[t], input)?;
        Ok(t)
    }
}

/// `[a, b], [a, c]` for messages.
fn pairs(transitions: &[(String, String)]) -> String {
    transitions
        .iter()
        .map(|(f, t)| format!("[{f}, {t}]"))
        .collect::<Vec<_>>()
        .join(", ")
}
