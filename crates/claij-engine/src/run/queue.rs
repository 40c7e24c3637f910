//! Work for workers: [`Engine::submit`] puts a new run in its store's queue (validated,
//! created held by no one, optionally for later and under an idempotency key), and
//! [`Engine::answer`] gives a suspended run its input and queues it, instead of driving
//! either here. Workers take both up with
//! the store's `WorkQueue::claim_due` and
//! [`Engine::continue_claimed`].

use crate::drive::CallRecord;
use std::sync::Arc;
use std::time::SystemTime;

use claij_core::Fsm;
use claij_core::store::{ClaimFrom, Notice, RunRecord, RunStore, StoreError, Wait};
use serde_json::Value;

use super::{Engine, RunError, RunOptions, RunStatus};
use crate::durable::{DEFAULT_LEASE, process_owner};

/// How a run is queued.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Submission {
    /// Not before this time (a scheduled start); at once when `None`.
    pub not_before: Option<SystemTime>,
    /// A second submission with the same key finds the first run instead of creating
    /// another.
    pub idempotency_key: Option<String>,
}

/// What [`Engine::submit`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submitted {
    /// The run.
    pub run_id: String,
    /// Whether it was created now (`false`: its key found a run submitted before).
    pub created: bool,
}

impl Engine {
    /// Validates `input` as [`run`](Self::run) does and creates the run in
    /// `options.store`'s queue, held by no one, for a worker to drive. With an idempotency
    /// key already used, nothing is created and the earlier run is returned.
    pub async fn submit(
        &self,
        fsm: Arc<Fsm>,
        input: Value,
        options: RunOptions,
        submission: Submission,
    ) -> Result<Submitted, RunError> {
        let Some(store) = options.store.clone() else {
            return Err(RunError::NotResumable {
                run: options.run_id.clone().unwrap_or_default(),
                reason: "cannot be queued without a store".into(),
            });
        };
        let earlier = |record: claij_core::store::RunRecord| Submitted {
            run_id: record.id,
            created: false,
        };
        if let Some(key) = &submission.idempotency_key
            && let Some(record) = store.run_by_key(key).await?
        {
            return Ok(earlier(record));
        }
        match Box::pin(self.start(&fsm, input, options, Some(&submission))).await {
            Ok((run, _)) => Ok(Submitted {
                run_id: run.run_id,
                created: true,
            }),
            // Submitted twice at once: the other one created it.
            Err(RunError::Store(StoreError::Conflict { .. }))
                if let Some(key) = &submission.idempotency_key
                    && let Ok(Some(record)) = store.run_by_key(key).await =>
            {
                Ok(earlier(record))
            }
            Err(e) => Err(e),
        }
    }

    /// Gives the suspended run `run_id` of `fsm` its `input` and queues it for a worker:
    /// the input is checked as [`resume`](Self::resume) checks it (refused, nothing
    /// changes), committed to the trail, and the run handed back running and held by no
    /// one. Of concurrent answers to a wait exactly one wins; the others get
    /// [`StoreError::Conflict`] (with [`RunOptions::wait_seq`], so does an answer meant for
    /// a wait the run has moved past). A run claimed for an answer that then fails is
    /// given back as it was found.
    pub async fn answer(
        &self,
        fsm: Arc<Fsm>,
        run_id: &str,
        input: Value,
        options: RunOptions,
    ) -> Result<(), RunError> {
        let not_answerable = |reason: String| RunError::NotResumable {
            run: run_id.to_owned(),
            reason,
        };
        let Some(store) = options.store.clone() else {
            return Err(not_answerable("cannot be answered without a store".into()));
        };
        let record = store.run(run_id).await?;
        super::claim::check_pinned(&record, &fsm)?;
        super::claim::check_wait(&record, options.wait_seq)?;
        let wait = match (record.status, &record.wait) {
            (RunStatus::Suspended, Some(wait)) if wait.takes_input() => wait.clone(),
            (RunStatus::Suspended, Some(wait)) if wait.budget.is_some() => {
                return Err(not_answerable(
                    "stopped for its budget, not for an input: resume it once the budget is raised"
                        .to_owned(),
                ));
            }
            (RunStatus::Suspended, Some(wait)) => {
                return Err(not_answerable(format!(
                    "waits for its child runs ({}), not for an input: answer those",
                    wait.children.join(", ")
                )));
            }
            (status, _) => {
                return Err(StoreError::Conflict {
                    run: run_id.to_owned(),
                    reason: format!(
                        "is {status}, not suspended: only a waiting run takes an input"
                    ),
                }
                .into());
            }
        };
        // An answer to a server's question, checked now; else the transition it takes.
        let given = match &wait.question {
            Some(question) => {
                let answer = crate::questions::checked_answer(question, &input)?;
                Given::Answer(question.as_ref().clone(), answer)
            }
            None => Given::Transition(self.waited_transition(&fsm, run_id, &wait, &input)?),
        };
        let owner = options.owner.clone().unwrap_or_else(process_owner);
        let lease = options.lease.unwrap_or(DEFAULT_LEASE);
        store
            .claim(
                run_id,
                ClaimFrom::wait_of(&record),
                &owner,
                SystemTime::now() + lease,
            )
            .await?;
        let answered = self
            .answer_claimed(
                &fsm,
                &record,
                (&wait, given, input),
                store.clone(),
                &owner,
                &options,
            )
            .await;
        super::claim::released_on_error(store.as_ref(), &record, &owner, answered).await?;
        // Workers hear of it now; if the notice is lost, they find it at their next poll.
        // An answer to a question whose request is held open is for its holder, which
        // looks every 100 ms: workers find it at their next poll, should the holder be gone.
        if wait.held_at(SystemTime::now()).is_none() {
            let _ = store.notify(&Notice::Work { at: None }).await;
        }
        Ok(())
    }

    /// Records the answer `given` (its `input`) of a run this process claimed in `store`
    /// (`record`: as found, waiting on `wait`), and hands the run back to the queue.
    async fn answer_claimed(
        &self,
        fsm: &Fsm,
        record: &RunRecord,
        (wait, given, input): (&Wait, Given, Value),
        store: Arc<dyn RunStore>,
        owner: &str,
        options: &RunOptions,
    ) -> Result<(), RunError> {
        let lease = options.lease.unwrap_or(DEFAULT_LEASE);
        let mut run = self
            .resumed_state(fsm, record, store, owner, lease, options)
            .await?;
        // The answer recorded (the state's attempt is made again by a worker), or the
        // transition taken.
        let at = match given {
            Given::Answer(question, answer) => {
                let state = fsm
                    .state(&wait.state)
                    .ok_or_else(|| RunError::NotResumable {
                        run: record.id.clone(),
                        reason: format!("waits in unknown state `{}`", wait.state),
                    })?;
                run.append_answer(state, &question, &answer);
                wait.state.clone()
            }
            Given::Transition(t) => {
                let attempt = run.attempts_here() + 1;
                run.append_full(t, input, attempt, CallRecord::default(), None, None);
                fsm.transitions[t].to.to_string()
            }
        };
        run.hand_back(&at).await?;
        Ok(())
    }
}

/// What an answer given through the queue does.
enum Given {
    /// Answers the server's question the run stopped for.
    Answer(claij_core::Question, claij_core::Answer),
    /// Takes this waited transition.
    Transition(usize),
}
