//! The loop that drives one run: attempt → route by the event's `id` → validate →
//! append, failures kept and fed back, bounded attempts, `on_failure` routes, timeouts,
//! the run deadline, the run's steps (`drive/steps.rs`), interruption, suspension — and,
//! with a store, a checkpoint before every attempt, so each transition is committed
//! before the next state starts.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use claij_core::store::{Checkpoint, StoreError, Wait};
use claij_core::{Answer, Failure, FailureKind, Fsm, Question, START, State, TrailEntry};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use claij_core::budget::{BudgetPause, Spend, is_pause};

use crate::action::{ActionError, ActionInput, ActionOutput, Outcome, Suspension};
use crate::durable::Durable;
use crate::observer::{Commit, Observer};
use crate::questions::Questions;
use crate::run::{Engine, RunOutcome, RunStatus, kind_of};
use crate::spend::{Ledger, Meter};

mod budget;
mod hold;
mod steps;
use budget::metered;
pub(crate) use hold::GRACE as HOLD_GRACE;
use hold::Held;

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
}

/// One attempt's result, before it is recorded.
enum Attempt {
    Took {
        transition: usize,
        output: ActionOutput,
    },
    Failed {
        failure: Failure,
        output: Value,
        retryable: bool,
        call: CallRecord,
    },
    Suspend(Suspension),
    /// A budget would be gone past: the run stops for it (what calls the attempt made
    /// before are in `usage`).
    Paused {
        pause: Box<BudgetPause>,
        usage: Option<Box<claij_core::Usage>>,
    },
    /// An MCP server asked a question the run has no answer for: the run stops for it
    /// (what calls the attempt made before are in `usage`).
    Asked {
        question: Box<Question>,
        usage: Option<Box<claij_core::Usage>>,
    },
    /// The server's request was held open for its question and nobody answered in time:
    /// the run, suspended on it (`wait`), is already written so.
    Released {
        wait: Box<Wait>,
    },
    Interrupted {
        usage: Option<Box<claij_core::Usage>>,
    },
    LeaseLost,
    /// While its question's request was held open, the run was taken elsewhere
    /// (interrupted, or answered and continued by another process once the hold was over).
    Elsewhere,
    DeadlineExceeded {
        usage: Option<Box<claij_core::Usage>>,
    },
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
                let max_attempts = fsm.max_attempts(state);
                let mut last_failure = self.last_failure_here();
                let mut next = None;
                // How the run ends here, if it does: finished after the loop, so that no
                // attempt's result is held across that await, and the wait boxed, since
                // this is held across every attempt (either would grow every run's future).
                let mut ending: Option<(RunStatus, Option<Box<Wait>>)> = None;
                for attempt in first_attempt..=max_attempts {
                    self.checkpoint(RunStatus::Running, &state.id).await?;
                    let started = self.clock.stamp;
                    let result = self.attempt(state, transition, attempt).await;
                    self.clock.stamp = Instant::now();
                    let duration = self.clock.stamp.saturating_duration_since(started);
                    match result {
                        Attempt::Took {
                            transition: t,
                            output,
                        } => {
                            let ActionOutput {
                                event,
                                context,
                                model,
                                usage,
                                enforce,
                                summary,
                                published,
                            } = output;
                            self.published.extend(published);
                            if let Some(context) = context {
                                self.context = context;
                                self.context_dirty = true;
                            }
                            self.append_full(
                                t,
                                event,
                                attempt,
                                CallRecord {
                                    model,
                                    usage,
                                    enforce,
                                    summary,
                                },
                                Some(duration),
                                None,
                            );
                            next = Some(t);
                            break;
                        }
                        Attempt::Failed {
                            failure,
                            output,
                            retryable,
                            call,
                        } => {
                            self.append_failure(
                                state,
                                output,
                                failure.clone(),
                                call,
                                Some(duration),
                            );
                            last_failure = Some(failure);
                            if !retryable {
                                break;
                            }
                        }
                        Attempt::Suspend(suspension) => {
                            let wait = self.wait_for(state, suspension);
                            ending = Some((RunStatus::Suspended, Some(Box::new(wait))));
                            break;
                        }
                        Attempt::Paused { pause, usage } => {
                            let event = serde_json::to_value(&pause).unwrap_or_default();
                            let message = pause.to_string();
                            self.append_pause(
                                state,
                                (FailureKind::Budget, message, event),
                                attempt,
                                usage,
                                duration,
                            );
                            if let Some(t) = self.on_budget_route(state, &pause, attempt) {
                                next = Some(t);
                                break;
                            }
                            if self.durable.is_none() {
                                // No store to wait in for a larger budget: the run ends here.
                                ending = Some((RunStatus::Failed, None));
                                break;
                            }
                            let mut wait = self.wait_for(state, Suspension::default());
                            wait.budget = Some(pause);
                            ending = Some((RunStatus::Suspended, Some(Box::new(wait))));
                            break;
                        }
                        Attempt::Asked { question, usage } => {
                            let call = CallRecord {
                                usage,
                                ..CallRecord::default()
                            };
                            let at = self.clock.wall();
                            let pause = self.question_pause(
                                state,
                                &question,
                                attempt,
                                call,
                                Some(duration),
                                at,
                            );
                            self.push(pause);
                            let wait = self.question_wait(state, &question);
                            ending = Some((RunStatus::Suspended, Some(Box::new(wait))));
                            break;
                        }
                        Attempt::Released { wait } => {
                            return self.end_as_written(
                                RunStatus::Suspended,
                                &state.id,
                                Some(*wait),
                            );
                        }
                        Attempt::Interrupted { usage } => {
                            self.append_failure(
                                state,
                                Value::Null,
                                Failure {
                                    kind: FailureKind::Interrupted,
                                    message: "the run was interrupted".into(),
                                    errors: Vec::new(),
                                    attempt,
                                },
                                CallRecord {
                                    usage,
                                    ..CallRecord::default()
                                },
                                Some(duration),
                            );
                            ending = Some((RunStatus::Interrupted, None));
                            break;
                        }
                        Attempt::LeaseLost => {
                            return Err(StoreError::LostLease {
                                run: self.run_id.clone(),
                            });
                        }
                        Attempt::Elsewhere => return Box::pin(self.taken_elsewhere()).await,
                        Attempt::DeadlineExceeded { usage } => {
                            let limit = self.deadline.map(|(_, d)| d).unwrap_or_default();
                            let failure = Failure {
                                kind: FailureKind::Timeout,
                                message: format!(
                                    "the run's deadline of {} passed",
                                    humantime::format_duration(limit)
                                ),
                                errors: Vec::new(),
                                attempt,
                            };
                            self.append_failure(
                                state,
                                Value::Null,
                                failure.clone(),
                                CallRecord {
                                    usage,
                                    ..CallRecord::default()
                                },
                                Some(duration),
                            );
                            // The deadline is a failure like any other: its `on_failure` route
                            // is followed, but only once, so a run past its deadline ends.
                            if std::mem::replace(&mut self.deadline_routed, true) {
                                ending = Some((RunStatus::Failed, None));
                                break;
                            }
                            last_failure = Some(failure);
                            break;
                        }
                    }
                }
                if let Some((status, wait)) = ending {
                    return Box::pin(self.finish(status, &state.id, wait.map(|w| *w))).await;
                }
                first_attempt = 1;
                match next {
                    Some(t) => transition = t,
                    None => match self.on_failure_route(state, last_failure) {
                        Some(t) => transition = t,
                        None => {
                            return Box::pin(self.finish(RunStatus::Failed, &state.id, None)).await;
                        }
                    },
                }
            }
        }
    }

    /// The sequence number an attempt's key is made of: the trail's length, pauses at its
    /// end not counted, so that an attempt made again after a pause (for a budget, or a
    /// call lost in a crash) has the key it had — and a state that starts child runs
    /// finds the children it started.
    fn attempt_seq(&self) -> u64 {
        let pauses = self.trail.iter().rev().take_while(|e| is_pause(e)).count();
        (self.trail.len() - pauses) as u64
    }

    /// How many attempts were recorded since the current state was entered (pauses for
    /// a budget are not attempts).
    pub(crate) fn attempts_here(&self) -> u32 {
        self.trail
            .iter()
            .rev()
            .take_while(|e| !e.is_transition())
            .filter(|e| !is_pause(e))
            .count() as u32
    }

    /// The transition of the last transition entry: the one that led into the current
    /// state (its states renamed by the migrations since, if the run moved).
    pub(crate) fn current_transition(&self) -> Option<usize> {
        let (from, to) = claij_core::migration::entered_by(&self.trail)?;
        self.fsm.transition_idx(&from, &to)
    }

    /// Commits what is not committed yet and hands the run back to the queue, running and
    /// held by no one, in `state` (an answered wait, for a worker to continue).
    pub(crate) async fn hand_back(mut self, state: &str) -> Result<(), StoreError> {
        self.commit(RunStatus::Running, state, None, None).await
    }

    /// Records a pause of the attempt `attempt` of `state` (what it is: its kind, message
    /// and event), with what its calls cost: an entry that is not an attempt.
    fn append_pause(
        &mut self,
        state: &State,
        (kind, message, event): (FailureKind, String, Value),
        attempt: u32,
        usage: Option<Box<claij_core::Usage>>,
        duration: Duration,
    ) {
        let failure = Failure {
            kind,
            message,
            errors: Vec::new(),
            attempt,
        };
        let call = CallRecord {
            usage,
            ..CallRecord::default()
        };
        self.append_failure(state, event, failure, call, Some(duration));
    }

    /// Records `answer` to the `question` the run stopped for in `state` (a pause entry,
    /// not an attempt: the attempt made next is answered from it).
    pub(crate) fn append_answer(&mut self, state: &State, question: &Question, answer: &Answer) {
        let attempt = self.attempts_here() + 1;
        self.append_failure(
            state,
            crate::questions::answer_event(question, answer),
            Failure {
                kind: FailureKind::Answer,
                message: format!("answered the MCP server `{}`", question.server),
                errors: Vec::new(),
                attempt,
            },
            CallRecord::default(),
            None,
        );
    }

    /// Commits the answer just appended (and clears the wait), still running in `state`.
    pub(crate) async fn commit_answer(&mut self, state: &str) -> Result<(), StoreError> {
        let lease_until = self.durable.as_ref().map(Durable::lease_until);
        self.commit(RunStatus::Running, state, None, lease_until)
            .await
    }

    /// Suspends the run again in `state` with the wait it had (a claim that was not used).
    pub(crate) async fn suspend_again(
        self,
        state: &State,
        wait: Wait,
    ) -> Result<RunOutcome, StoreError> {
        Box::pin(self.finish(RunStatus::Suspended, &state.id, Some(wait))).await
    }

    /// Ends the run `failed` in `state` (an expired wait with nowhere to go).
    pub(crate) async fn fail_here(self, state: &State) -> Result<RunOutcome, StoreError> {
        let _heartbeat = self
            .durable
            .as_ref()
            .map(|d| d.heartbeat(&self.run_id, &self.cancel));
        Box::pin(self.finish(RunStatus::Failed, &state.id, None)).await
    }

    /// The last failure recorded since the current state was entered (a resumed run
    /// that had already failed there).
    fn last_failure_here(&self) -> Option<Failure> {
        self.trail
            .iter()
            .rev()
            .take_while(|e| !e.is_transition())
            .filter(|e| !is_pause(e))
            .find_map(|e| e.failure.as_deref().cloned())
    }

    /// What a suspended run waits for: an event taking one of the state's transitions.
    fn wait_for(&self, state: &State, suspension: Suspension) -> Wait {
        let fsm = self.fsm;
        Wait {
            state: state.id.to_string(),
            transitions: fsm.outgoing_pairs(&state.id),
            schema: fsm.output_schema(&state.id),
            // To the microsecond, as stores keep times (the wait's timer is `wake_at` too).
            expires_at: suspension
                .expires_in
                .map(|d| to_micros(SystemTime::now() + d)),
            on_expiry: suspension.on_expiry,
            prompt: suspension.prompt,
            children: suspension.children,
            deadline_at: self.deadline.map(|(at, _)| {
                to_micros(SystemTime::now() + at.saturating_duration_since(Instant::now()))
            }),
            budget: None,
            question: None,
            held: None,
        }
    }

    /// Commits what is not committed yet (no-op without a store, or when nothing
    /// changed), renewing the lease.
    async fn checkpoint(&mut self, status: RunStatus, state: &str) -> Result<(), StoreError> {
        if self.committed == self.trail.len() && !self.context_dirty {
            return Ok(());
        }
        let lease_until = self.durable.as_ref().map(Durable::lease_until);
        self.commit(status, state, None, lease_until).await
    }

    /// Writes the uncommitted trail delta, the position, the context if it changed, the
    /// wait and the lease (`None` releases it) — nothing without a store.
    async fn commit(
        &mut self,
        status: RunStatus,
        state: &str,
        wait: Option<Wait>,
        lease_until: Option<SystemTime>,
    ) -> Result<(), StoreError> {
        let Some(durable) = &self.durable else {
            return Ok(());
        };
        let (began, clock) = (SystemTime::now(), Instant::now());
        let entries = self.trail.len() - self.committed;
        let written = durable
            .store
            .commit(Checkpoint {
                run_id: self.run_id.clone(),
                owner: durable.owner.clone(),
                entries: self.trail[self.committed..].to_vec(),
                status,
                state: state.to_owned(),
                context: self.context_dirty.then(|| self.context.clone()),
                wait,
                lease_until,
                published: std::mem::take(&mut self.published),
                spend: self.spend_now(),
            })
            .await;
        let error = written.as_ref().err().map(ToString::to_string);
        let commit = Commit {
            entries,
            status,
            began,
            took: clock.elapsed(),
            error: error.as_deref(),
        };
        for o in &self.observers {
            o.committed(&self.run_id, &commit);
        }
        written?;
        self.committed = self.trail.len();
        self.context_dirty = false;
        Ok(())
    }

    /// Attempts ran out: follow `on_failure` with an event carrying the failure.
    pub(crate) fn on_failure_route(
        &mut self,
        state: &State,
        failure: Option<Failure>,
    ) -> Option<usize> {
        let target = state.settings.on_failure.as_ref()?;
        self.clock.stamp = Instant::now();
        let t = self.fsm.transition_idx(&state.id, target)?;
        let attempts = failure.as_ref().map_or(0, |f| f.attempt);
        let event = json!({
            "id": self.fsm.transitions[t].id_value,
            "failure": failure,
            "state": &*state.id,
        });
        self.append_full(t, event, attempts, CallRecord::default(), None, None);
        Some(t)
    }

    /// One attempt: run the action (bounded by timeout, deadline and cancellation), then
    /// route and validate its output.
    async fn attempt(&mut self, state: &State, input_transition: usize, attempt: u32) -> Attempt {
        let fsm = self.fsm;
        if self.cancel.is_cancelled() {
            return self.stopped(None);
        }
        // A tree whose calls went past its budget (by more than they were expected to
        // cost), or whose time is up, stops before anything else is done.
        if !self.budget_routed
            && let Some(pause) = self.ledger.as_ref().and_then(Ledger::exceeded)
        {
            return Attempt::Paused { pause, usage: None };
        }
        for o in &self.observers {
            o.attempt_started(&self.run_id, state, attempt);
        }
        let Some(action) = self.engine.registry().action(&state.action) else {
            return failed(
                FailureKind::Action,
                format!("no action `{}` is registered", state.action),
                attempt,
                false,
            );
        };
        let event = self
            .trail
            .iter()
            .rev()
            .find(|e| e.is_transition())
            .map(|e| &e.event)
            .unwrap_or(&Value::Null);
        let meter = Meter::new(
            self.ledger.clone(),
            self.durable
                .as_ref()
                .map(|d| (d.store.clone(), self.run_id.clone(), d.owner.clone())),
        );
        // Only a durable run can hold a question's request open (it has a store to wait in).
        let (questions, mut hold_requests) = if self.durable.is_some() {
            let (holds, requests) = tokio::sync::mpsc::unbounded_channel();
            (Questions::durable(&self.trail, Some(holds)), Some(requests))
        } else {
            (Questions::none(), None)
        };
        let input = ActionInput {
            run_id: &self.run_id,
            fsm,
            state,
            input_transition: &fsm.transitions[input_transition],
            event,
            trail: &self.trail,
            context: &self.context,
            attempt,
            seq: self.attempt_seq(),
            cancel: &self.cancel,
            schemas: self.engine.registry(),
            scope: crate::action::RunScope {
                engine: self.engine,
                store: self.durable.as_ref().map(|d| &d.store),
                owner: self.durable.as_ref().map(|d| d.owner.as_str()),
                lease: self.durable.as_ref().map(|d| d.lease),
                lease_keeper: self.durable.as_ref().and_then(|d| d.keeper.as_ref()),
                ledger: self.ledger.as_ref(),
                model: self.model.as_deref(),
            },
            observers: &self.observers,
            meter: &meter,
            questions: &questions,
        };
        let state_timeout = fsm.timeout(state);
        // The clock is read here only for a run with a deadline.
        let deadline_left = self
            .deadline
            .map(|(at, _)| at.saturating_duration_since(Instant::now()));
        let (limit, limit_is_deadline) = match (state_timeout, deadline_left) {
            (Some(t), Some(d)) if d < t => (Some(d), true),
            (None, Some(d)) => (Some(d), true),
            (t, _) => (t, false),
        };
        // The entries of the questions whose requests were held open (stored already), and
        // how the last hold ended when nobody answered in time.
        let mut held = Vec::new();
        let mut released = None;
        let mut elsewhere = false;
        // Log lines written while the action runs name the run, the state, the attempt and,
        // when the run is traced, the attempt's span.
        let span = tracing::error_span!(
            "attempt",
            run = %self.run_id,
            state = %state.id,
            attempt,
            traceparent = tracing::field::Empty,
        );
        if !span.is_disabled()
            && let Some(traceparent) = input.trace_context(crate::Call::Attempt)
        {
            span.record("traceparent", traceparent);
        }
        let ran = {
            let run = tracing::Instrument::instrument(action.run(input), span);
            let bounded = async {
                match limit {
                    // Boxed: a timer is most of this future, and most states have none.
                    Some(limit) => Box::pin(tokio::time::timeout(limit, run)).await.ok(),
                    None => Some(run.await),
                }
            };
            tokio::pin!(bounded);
            loop {
                tokio::select! {
                    biased;
                    _ = self.cancel.cancelled() => break None,
                    Some(request) = next_hold(&mut hold_requests) => {
                        let answer = match self
                            .hold(state, attempt, &request.question, request.window)
                            .await
                        {
                            Held::Answered { answer, entries } => {
                                held.extend(entries);
                                Some(answer)
                            }
                            Held::Released { wait, entries } => {
                                held.extend(entries);
                                released = Some(wait);
                                None
                            }
                            Held::Refused => {
                                questions.ask(request.question);
                                None
                            }
                            Held::Lost => {
                                elsewhere = true;
                                None
                            }
                        };
                        let _ = request.reply.send(answer);
                    }
                    r = &mut bounded => break Some(r),
                }
            }
        };
        if !held.is_empty() {
            // Stored with what was not committed yet: the trail in memory follows.
            self.trail.extend(held);
            self.committed = self.trail.len();
            self.published.clear();
            self.context_dirty = false;
        }
        if let Some(wait) = released {
            return Attempt::Released { wait };
        }
        if elsewhere {
            return Attempt::Elsewhere;
        }
        let Some(result) = ran else {
            return self.stopped(meter.usage_with_outstanding());
        };
        if let Some(pause) = meter.pause() {
            // A call was refused for a budget: whatever the action made of that, the run
            // stops here, and the attempt is made again once the budget allows it.
            return Attempt::Paused {
                pause,
                usage: meter.usage().map(Box::new),
            };
        }
        if let Some(question) = questions.asked() {
            // A server asked what the run has no answer for: whatever the action made of
            // that, the run stops here; the attempt is made again once it is answered.
            return Attempt::Asked {
                question: Box::new(question),
                usage: meter.usage().map(Box::new),
            };
        }
        let output = match result {
            None if limit_is_deadline => {
                return Attempt::DeadlineExceeded {
                    usage: meter.usage_with_outstanding().map(Box::new),
                };
            }
            None => {
                let limit = limit.unwrap_or_default();
                let mut timed_out = failed(
                    FailureKind::Timeout,
                    format!(
                        "state `{}` did not finish within its timeout of {}",
                        state.id,
                        humantime::format_duration(limit)
                    ),
                    attempt,
                    true,
                );
                if let Attempt::Failed { call, .. } = &mut timed_out {
                    call.usage = meter.usage_with_outstanding().map(Box::new);
                }
                return timed_out;
            }
            Some(Err(ActionError {
                kind,
                message,
                output,
                retryable,
                model_call,
            })) => {
                let reported = model_call.as_ref().and_then(|c| c.usage.clone());
                let usage = metered(&meter, reported.map(Box::new));
                let call = match model_call {
                    Some(call) => CallRecord {
                        model: Some(call.model),
                        usage,
                        enforce: call.enforce,
                        summary: None,
                    },
                    None => CallRecord {
                        usage,
                        ..CallRecord::default()
                    },
                };
                return Attempt::Failed {
                    failure: Failure {
                        kind,
                        message,
                        errors: Vec::new(),
                        attempt,
                    },
                    output,
                    retryable,
                    call,
                };
            }
            Some(Ok(Outcome::Emit(mut output))) => {
                output.usage = metered(&meter, output.usage.take());
                output
            }
            Some(Ok(Outcome::Suspend(suspension))) => {
                if self.durable.is_none() {
                    return failed(
                        FailureKind::Action,
                        format!(
                            "state `{}` suspends the run to wait for input, which needs a store (run with one, or ask at the terminal)",
                            state.id
                        ),
                        attempt,
                        false,
                    );
                }
                return Attempt::Suspend(suspension);
            }
        };
        self.route(state, output, attempt)
    }

    /// Why the cancellation handle fired: an interrupt, or (durable runs) the lease was
    /// taken over by another process, which then owns the trail.
    /// (`usage`: what the attempt's calls cost, those in flight counted at most.)
    fn stopped(&self, usage: Option<claij_core::Usage>) -> Attempt {
        match &self.durable {
            Some(d) if d.lost.load(Ordering::SeqCst) => Attempt::LeaseLost,
            _ => Attempt::Interrupted {
                usage: usage.map(Box::new),
            },
        }
    }

    /// Finds the transition the output names and validates the output against it.
    fn route(&self, state: &State, output: ActionOutput, attempt: u32) -> Attempt {
        let fsm = self.fsm;
        let valid_ids = || {
            state
                .outgoing
                .iter()
                .map(|&t| fsm.transitions[t].id_value.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let reject = |kind, message: String, errors, output: ActionOutput| Attempt::Failed {
            failure: Failure {
                kind,
                message,
                errors,
                attempt,
            },
            output: output.event,
            retryable: true,
            call: CallRecord {
                model: output.model,
                usage: output.usage,
                enforce: output.enforce,
                summary: None,
            },
        };
        let target = match output
            .event
            .get("id")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
        {
            Some([Value::String(from), Value::String(to)]) if **from == *state.id => state
                .outgoing
                .iter()
                .copied()
                .find(|&t| *fsm.transitions[t].to == **to),
            _ => None,
        };
        let Some(t) = target else {
            let message = match output.event.get("id") {
                None if output.event.is_object() => "the event has no `id`".to_owned(),
                None => format!(
                    "the output is {}, not a JSON object event",
                    kind_of(&output.event)
                ),
                Some(id) => format!("`id` {id} is not a transition out of `{}`", state.id),
            };
            return reject(
                FailureKind::UnknownTransition,
                format!("{message}; valid ids: {}", valid_ids()),
                Vec::new(),
                output,
            );
        };
        let schema = match self.engine.compiled_schema(fsm, &fsm.transitions[t]) {
            Ok(s) => s,
            Err(message) => return reject(FailureKind::Validation, message, Vec::new(), output),
        };
        if schema.is_valid(&output.event) {
            Attempt::Took {
                transition: t,
                output,
            }
        } else {
            let issues = schema.issues(&output.event);
            let transition = &fsm.transitions[t];
            reject(
                FailureKind::Validation,
                format!(
                    "the event does not satisfy the schema of [{}, {}] ({} error(s))",
                    transition.from,
                    transition.to,
                    issues.len()
                ),
                issues,
                output,
            )
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn append_full(
        &mut self,
        transition: usize,
        event: Value,
        attempt: u32,
        call: CallRecord,
        duration: Option<Duration>,
        failure: Option<Failure>,
    ) {
        let t = &self.fsm.transitions[transition];
        let entry = TrailEntry {
            seq: self.trail.len() as u64,
            fsm: self.fsm.id.clone(),
            version: self.fsm.version,
            from: t.from.clone(),
            to: Some(t.to.clone()),
            event,
            at: self.clock.wall(),
            attempt,
            model: call.model,
            enforce: call.enforce,
            summary: call.summary,
            usage: call.usage,
            duration_ms: duration.map(|d| d.as_millis() as u64),
            failure: failure.map(Box::new),
        };
        self.steps += 1;
        self.push(entry);
    }

    /// Appends a failed attempt of `state`, with the model call behind it (if any).
    pub(crate) fn append_failure(
        &mut self,
        state: &State,
        output: Value,
        failure: Failure,
        call: CallRecord,
        duration: Option<Duration>,
    ) {
        let at = self.clock.wall();
        let entry = self.failure_entry(state, output, failure, call, duration, at);
        self.push(entry);
    }

    /// The entry of a failed attempt of `state` (or a pause there), made at `at`, to
    /// follow the trail as it stands.
    fn failure_entry(
        &self,
        state: &State,
        output: Value,
        failure: Failure,
        call: CallRecord,
        duration: Option<Duration>,
        at: SystemTime,
    ) -> TrailEntry {
        TrailEntry {
            seq: self.trail.len() as u64,
            fsm: self.fsm.id.clone(),
            version: self.fsm.version,
            from: state.id.clone(),
            to: None,
            event: output,
            at,
            attempt: failure.attempt,
            model: call.model,
            enforce: call.enforce,
            summary: None,
            usage: call.usage,
            duration_ms: duration.map(|d| d.as_millis() as u64),
            failure: Some(Box::new(failure)),
        }
    }

    fn push(&mut self, entry: TrailEntry) {
        self.spend.add_calls(&Spend::of_entry(&entry));
        self.trail.push(entry);
        if !self.observers.is_empty()
            && let Some(entry) = self.trail.last()
        {
            for o in &self.observers {
                o.entry_appended(&self.run_id, entry);
            }
        }
    }

    /// Ends (or suspends) the run: commits the rest of the trail with the final status,
    /// releasing the lease, then tells the observers.
    ///
    /// Its callers box it: a run's future lives as long as the run, and this one's 1.4 KB
    /// is needed only once, at the end (it would otherwise be part of every run's size).
    async fn finish(
        mut self,
        status: RunStatus,
        state: &str,
        wait: Option<Wait>,
    ) -> Result<RunOutcome, StoreError> {
        if self
            .durable
            .as_ref()
            .is_some_and(|d| d.lost.load(Ordering::SeqCst))
        {
            return Err(StoreError::LostLease {
                run: self.run_id.clone(),
            });
        }
        self.commit(status, state, wait.clone(), None).await?;
        self.end_as_written(status, state, wait)
    }

    /// The run as its store has it, taken elsewhere while this process held its question's
    /// request open: its end told to the observers when it has ended.
    async fn taken_elsewhere(self) -> Result<RunOutcome, StoreError> {
        let Some(durable) = &self.durable else {
            return Err(StoreError::LostLease {
                run: self.run_id.clone(),
            });
        };
        let record = durable.store.run(&self.run_id).await?;
        if record.status.is_final() {
            for o in &self.observers {
                o.run_finished(&self.run_id, record.status);
            }
        }
        RunOutcome::stored(durable.store.as_ref(), record).await
    }

    /// Ends (or suspends) a run whose end is written already: tells the observers.
    fn end_as_written(
        self,
        status: RunStatus,
        state: &str,
        wait: Option<Wait>,
    ) -> Result<RunOutcome, StoreError> {
        for o in &self.observers {
            o.run_finished(&self.run_id, status);
        }
        let result = (status == RunStatus::Completed)
            .then(|| claij_core::trail::last_event(&self.trail).cloned())
            .flatten();
        let spend = self.spend_now();
        Ok(RunOutcome {
            spend,
            run_id: self.run_id,
            status,
            trail: self.trail,
            context: self.context,
            result,
            state: if state == START {
                START.into()
            } else {
                state.into()
            },
            wait,
            parent: None,
        })
    }
}

/// The next hold asked for, when the run can hold (else never).
async fn next_hold(
    requests: &mut Option<tokio::sync::mpsc::UnboundedReceiver<crate::questions::HoldRequest>>,
) -> Option<crate::questions::HoldRequest> {
    match requests {
        Some(requests) => requests.recv().await,
        None => std::future::pending().await,
    }
}

fn failed(kind: FailureKind, message: String, attempt: u32, retryable: bool) -> Attempt {
    Attempt::Failed {
        failure: Failure {
            kind,
            message,
            errors: Vec::new(),
            attempt,
        },
        output: Value::Null,
        retryable,
        call: CallRecord::default(),
    }
}
