//! The loop that drives one run: attempt → route by the event's `id` → validate →
//! append, failures kept and fed back, bounded attempts, `on_failure` routes, timeouts,
//! the run deadline, the run's steps, interruption, suspension — and, with a store, a
//! checkpoint before every attempt, so each transition is committed before the next
//! state starts.
//!
//! - `attempt`: one attempt: the action run, bounded by its timeout or the deadline;
//! - `route`: its output routed by the event's `id` and validated (or fed back);
//! - `settle`: what an attempt's result does: recorded, then retried, left or ended;
//! - `deadline`: the timeout rule (a state's timeout, the run's deadline);
//! - `trail`: entries appended to the run's trail;
//! - `commit`: checkpoints, and the run's end written and told;
//! - `budget`, `hold`, `steps`: budgets, a question's request held open, `max_steps`.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use claij_core::budget::Spend;
use claij_core::store::{StoreError, Wait};
use claij_core::{Failure, Fsm, TrailEntry};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::durable::Durable;
use crate::observer::Observer;
use claij_core::store::RunStatus;

use crate::engine::Engine;
use crate::outcome::RunOutcome;
use crate::spend::Ledger;

mod attempt;
mod budget;
mod commit;
mod deadline;
mod hold;
mod route;
mod settle;
mod steps;
mod trail;

pub(crate) use deadline::run_deadline;
pub(crate) use hold::GRACE as HOLD_GRACE;
pub(crate) use route::kind_of;

/// The model call behind an attempt, as its trail entry records it (all `None` when no
/// model was called).
#[derive(Debug, Default)]
pub(crate) struct CallRecord {
    /// The model.
    pub(crate) model: Option<String>,
    /// Tokens and cost.
    pub(crate) usage: Option<Box<claij_core::Usage>>,
    /// How the answer was held to the schemas.
    pub(crate) enforce: Option<String>,
    /// What the model wrote about the state's visit as it left it.
    pub(crate) summary: Option<String>,
    /// The routes the answers voted for (`vote: k`).
    pub(crate) votes: Option<Vec<serde_json::Value>>,
}

/// One run being driven: its trail and context in memory, and (with a store) how much of
/// the trail is committed.
pub(crate) struct RunState<'e> {
    pub engine: &'e Engine,
    pub fsm: &'e Fsm,
    pub run_id: String,
    /// How many transitions the trail holds: the steps the run took (`config.max_steps`
    /// bounds them).
    pub steps: u64,
    pub trail: Vec<TrailEntry>,
    pub context: Value,
    pub deadline: Option<(Instant, Duration)>,
    pub cancel: CancellationToken,
    pub observers: Vec<Arc<dyn Observer>>,
    pub clock: Clock,
    /// Whether an `on_failure` route was already taken because the deadline passed.
    pub deadline_routed: bool,
    /// Events published by entries not committed yet (written with them).
    pub published: Vec<claij_core::store::Published>,
    /// The store and lease, for durable runs.
    pub durable: Option<Durable>,
    /// How many trail entries the store holds.
    pub committed: usize,
    /// Whether the context changed since the last commit.
    pub context_dirty: bool,
    /// The budget the run's tree shares (the run's own, or its ancestors'), if any.
    pub ledger: Option<Ledger>,
    /// The run's model ([`RunOptions::model`](crate::RunOptions::model)).
    pub model: Option<String>,
    /// What the run spent: its entries' tokens, cost and calls, its time running before
    /// `taken_up`, its time waiting.
    pub spend: Spend,
    /// When this process took the run up (its time running counts from here).
    pub taken_up: Instant,
    /// Whether an `on_budget` route was already taken (the run then stops at the next
    /// call its budget refuses).
    pub budget_routed: bool,
}

/// Wall-clock times for trail entries from one reading of the monotonic clock per
/// attempt (when it ends: its entry's time and its duration): the wall time at the run's
/// start plus the monotonic time elapsed since. The loop reads the clock again only to
/// bound an attempt by the run's deadline (runs with one), to stamp an `on_failure`
/// route, and (durable runs) for the lease written with each checkpoint; a timeout's timer
/// (state timeout or deadline) is tokio's, which reads its own.
pub(crate) struct Clock {
    base: Instant,
    base_wall: SystemTime,
    /// When the last attempt ended (or the run started).
    pub stamp: Instant,
}

impl Clock {
    pub(crate) fn start() -> Self {
        let base = Instant::now();
        Self {
            base,
            base_wall: SystemTime::now(),
            stamp: base,
        }
    }

    /// The wall time of the last stamp, to the microsecond (what the trail keeps, in
    /// its JSON form and in stores, so an entry read back equals the one written).
    fn wall(&self) -> SystemTime {
        to_micros(self.base_wall + self.stamp.saturating_duration_since(self.base))
    }
}

/// `at` truncated to the microsecond.
pub(crate) fn to_micros(at: SystemTime) -> SystemTime {
    let micros = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0);
    SystemTime::UNIX_EPOCH + Duration::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
}

/// How the run leaves a state once its attempts there are over.
enum Leaving {
    /// By this transition (an attempt's event, or the `on_budget` route).
    By(usize),
    /// Its attempts ran out, or one failed for good: by its `on_failure` route with the
    /// last failure, else the run fails there.
    GaveUp(Option<Failure>),
    /// The run ends (or suspends, waiting on the wait) there.
    Ends(RunStatus, Option<Box<Wait>>),
    /// The run is suspended on the wait already, as written (a held question released).
    Written(Box<Wait>),
    /// The lease was taken over by another process, which owns the trail now.
    LeaseLost,
    /// The run was taken elsewhere while its question's request was held open.
    Elsewhere,
}

impl<'e> RunState<'e> {
    /// Drives the run from the state `transition` entered until it ends or suspends,
    /// starting at attempt `first_attempt` (above 1 when a resumed run had already spent
    /// attempts in that state).
    ///
    /// Not an `async fn`: that would keep the state twice in the future (the argument and
    /// the body's copy of it, 330 bytes more for every live run). The block below uses the
    /// captured `self` in place.
    #[allow(clippy::manual_async_fn)]
    pub(crate) fn drive(
        mut self,
        mut transition: usize,
        mut first_attempt: u32,
    ) -> impl Future<Output = Result<RunOutcome, StoreError>> + Send + 'e {
        async move {
            let _heartbeat = self
                .durable
                .as_ref()
                .map(|d| d.heartbeat(&self.run_id, &self.cancel));
            loop {
                let fsm = self.fsm;
                let Some(state_idx) = fsm.transitions[transition].to_idx else {
                    let to = fsm.transitions[transition].to.clone();
                    return Box::pin(self.finish(RunStatus::Failed, &to, None)).await;
                };
                let state = &fsm.states[state_idx];
                if state.is_terminal() {
                    return Box::pin(self.finish(RunStatus::Completed, &state.id, None)).await;
                }
                if self.steps >= fsm.max_steps() {
                    // No attempt, no route: the run ends here, whatever the state would do.
                    self.append_out_of_steps(state, first_attempt);
                    return Box::pin(self.finish(RunStatus::Failed, &state.id, None)).await;
                }
                // How the run leaves the state: acted on here, so that no attempt's result
                // is held across the run's end.
                let leaving = self.attempts(state, transition, first_attempt).await?;
                first_attempt = 1;
                transition = match leaving {
                    Leaving::By(t) => t,
                    Leaving::GaveUp(failure) => match self.on_failure_route(state, failure) {
                        Some(t) => t,
                        None => {
                            return Box::pin(self.finish(RunStatus::Failed, &state.id, None)).await;
                        }
                    },
                    Leaving::Ends(status, wait) => {
                        return Box::pin(self.finish(status, &state.id, wait.map(|w| *w))).await;
                    }
                    Leaving::Written(wait) => {
                        return self.end_as_written(RunStatus::Suspended, &state.id, Some(*wait));
                    }
                    Leaving::LeaseLost => {
                        return Err(StoreError::LostLease {
                            run: self.run_id.clone(),
                        });
                    }
                    Leaving::Elsewhere => return Box::pin(self.taken_elsewhere()).await,
                };
            }
        }
    }

    /// The attempts made in `state` (entered by `transition`) from `first_attempt` on,
    /// each checkpointed before it and recorded after it, until one leaves the state,
    /// the run ends there, or they run out.
    async fn attempts(
        &mut self,
        state: &claij_core::State,
        transition: usize,
        first_attempt: u32,
    ) -> Result<Leaving, StoreError> {
        let mut last_failure = self.last_failure_here();
        for attempt in first_attempt..=self.fsm.max_attempts(state) {
            self.checkpoint(RunStatus::Running, &state.id).await?;
            let started = self.clock.stamp;
            let result = self.attempt(state, transition, attempt).await;
            self.clock.stamp = Instant::now();
            let duration = self.clock.stamp.saturating_duration_since(started);
            match self.settle(state, attempt, result, duration) {
                settle::Settled::Retry(failure) => last_failure = Some(failure),
                settle::Settled::Leave(leaving) => return Ok(leaving),
            }
        }
        Ok(Leaving::GaveUp(last_failure))
    }
}
