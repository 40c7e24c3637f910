//! One attempt of a state: the action run (bounded by the state's timeout or the run's
//! deadline, stopped by cancellation, its MCP servers' questions held open meanwhile),
//! then what came of it — an output to route, a failure, or a reason the run stops.

use std::future::Future;
use std::sync::atomic::Ordering;

use claij_core::budget::BudgetPause;
use claij_core::store::Wait;
use claij_core::{Failure, FailureKind, Question, State, TrailEntry};
use serde_json::Value;

use super::budget::metered;
use super::deadline::Limit;
use super::hold::Held;
use super::{CallRecord, RunState};
use crate::action::{ActionError, ActionInput, ActionOutput, Outcome, Suspension};
use crate::questions::{HoldRequest, Questions};
use crate::spend::{Ledger, Meter};

/// What the action's run came to: its result, or `None` when it timed out (the limit
/// passed); `None` when the run was cancelled first.
type Ran = Option<Option<Result<Outcome, ActionError>>>;

/// The requests for a question's hold an attempt may make (durable runs only).
type HoldRequests = Option<tokio::sync::mpsc::UnboundedReceiver<HoldRequest>>;

/// One attempt's result, before it is recorded.
pub(super) enum Attempt {
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

/// What the questions held open during an attempt came to: their entries (stored
/// already), and how the last hold ended when nobody answered in time.
#[derive(Default)]
struct Holds {
    entries: Vec<TrailEntry>,
    released: Option<Box<Wait>>,
    elsewhere: bool,
}

impl RunState<'_> {
    /// One attempt: run the action (bounded by timeout, deadline and cancellation), then
    /// route and validate its output.
    pub(super) async fn attempt(
        &mut self,
        state: &State,
        input_transition: usize,
        attempt: u32,
    ) -> Attempt {
        if let Some(stop) = self.before_attempt(state, attempt) {
            return stop;
        }
        let Some(action) = self.engine.registry().action(&state.action) else {
            return failed(
                FailureKind::Action,
                format!("no action `{}` is registered", state.action),
                attempt,
                false,
            );
        };
        let meter = self.meter();
        // Only a durable run can hold a question's request open (it has a store to wait in).
        let (questions, hold_requests) = if self.durable.is_some() {
            let (holds, requests) = tokio::sync::mpsc::unbounded_channel();
            (Questions::durable(&self.trail, Some(holds)), Some(requests))
        } else {
            (Questions::none(), None)
        };
        let limit = self.limit(state);
        let input = self.action_input(state, input_transition, attempt, &meter, &questions);
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
        let run = tracing::Instrument::instrument(action.run(input), span);
        let (ran, holds) = self
            .run_holding(run, limit, hold_requests, &questions, state, attempt)
            .await;
        if !holds.entries.is_empty() {
            // Stored with what was not committed yet: the trail in memory follows.
            self.trail.extend(holds.entries);
            self.committed = self.trail.len();
            self.published.clear();
            self.context_dirty = false;
        }
        if let Some(wait) = holds.released {
            return Attempt::Released { wait };
        }
        if holds.elsewhere {
            return Attempt::Elsewhere;
        }
        let Some(result) = ran else {
            return self.stopped(meter.usage_with_outstanding());
        };
        if let Some(stop) = stopped_for(&meter, &questions) {
            return stop;
        }
        match result {
            None => timed_out(state, attempt, limit, &meter),
            Some(Err(error)) => action_failed(error, attempt, &meter),
            Some(Ok(Outcome::Emit(mut output))) => {
                output.usage = metered(&meter, output.usage.take());
                self.route(state, output, attempt)
            }
            Some(Ok(Outcome::Suspend(suspension))) => self.suspended(state, suspension, attempt),
        }
    }

    /// Why the attempt is not made at all: the run was cancelled, or its tree's budget is
    /// gone (by more than its calls were expected to cost) or its time is up. Else the
    /// observers are told it starts.
    fn before_attempt(&self, state: &State, attempt: u32) -> Option<Attempt> {
        if self.cancel.is_cancelled() {
            return Some(self.stopped(None));
        }
        if !self.budget_routed
            && let Some(pause) = self.ledger.as_ref().and_then(Ledger::exceeded)
        {
            return Some(Attempt::Paused { pause, usage: None });
        }
        for o in &self.observers {
            o.attempt_started(&self.run_id, state, attempt);
        }
        None
    }

    /// The meter the attempt's model calls go through: the run tree's budget, and (durable
    /// runs) the store that records calls in flight.
    fn meter(&self) -> Meter {
        Meter::new(
            self.ledger.clone(),
            self.durable
                .as_ref()
                .map(|d| (d.store.clone(), self.run_id.clone(), d.owner.clone())),
        )
    }

    /// What the action of `state` sees for attempt `attempt`.
    fn action_input<'a>(
        &'a self,
        state: &'a State,
        input_transition: usize,
        attempt: u32,
        meter: &'a Meter,
        questions: &'a Questions,
    ) -> ActionInput<'a> {
        let fsm = self.fsm;
        let event = self
            .trail
            .iter()
            .rev()
            .find(|e| e.is_transition())
            .map(|e| &e.event)
            .unwrap_or(&Value::Null);
        ActionInput {
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
            meter,
            questions,
        }
    }

    /// Runs the action's future `run` within `limit` until it ends or the run is
    /// cancelled, holding open meanwhile the requests whose questions the attempt's MCP
    /// servers ask to hold.
    async fn run_holding(
        &self,
        run: impl Future<Output = Result<Outcome, ActionError>>,
        limit: Option<Limit>,
        mut hold_requests: HoldRequests,
        questions: &Questions,
        state: &State,
        attempt: u32,
    ) -> (Ran, Holds) {
        let mut holds = Holds::default();
        let bounded = async {
            match limit {
                // Boxed: a timer is most of this future, and most states have none.
                Some(limit) => Box::pin(tokio::time::timeout(limit.after, run)).await.ok(),
                None => Some(run.await),
            }
        };
        tokio::pin!(bounded);
        let ran = loop {
            tokio::select! {
                biased;
                _ = self.cancel.cancelled() => break None,
                Some(request) = next_hold(&mut hold_requests) => {
                    let answer = match self
                        .hold(state, attempt, &request.question, request.window)
                        .await
                    {
                        Held::Answered { answer, entries } => {
                            holds.entries.extend(entries);
                            Some(answer)
                        }
                        Held::Released { wait, entries } => {
                            holds.entries.extend(entries);
                            holds.released = Some(wait);
                            None
                        }
                        Held::Refused => {
                            questions.ask(request.question);
                            None
                        }
                        Held::Lost => {
                            holds.elsewhere = true;
                            None
                        }
                    };
                    let _ = request.reply.send(answer);
                }
                r = &mut bounded => break Some(r),
            }
        };
        (ran, holds)
    }

    /// The action suspends the run to wait for input: only a durable run can.
    fn suspended(&self, state: &State, suspension: Suspension, attempt: u32) -> Attempt {
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
        Attempt::Suspend(suspension)
    }

    /// Why the cancellation handle fired: an interrupt, or (durable runs) the lease was
    /// taken over by another process, which then owns the trail.
    /// (`usage`: what the attempt's calls cost, those in flight counted at most.)
    pub(super) fn stopped(&self, usage: Option<claij_core::Usage>) -> Attempt {
        match &self.durable {
            Some(d) if d.lost.load(Ordering::SeqCst) => Attempt::LeaseLost,
            _ => Attempt::Interrupted {
                usage: usage.map(Box::new),
            },
        }
    }
}

/// Whatever the action made of it, the run stops here when one of its calls was refused
/// for a budget (the attempt is made again once the budget allows it), or a server asked
/// what the run has no answer for (made again once it is answered).
fn stopped_for(meter: &Meter, questions: &Questions) -> Option<Attempt> {
    if let Some(pause) = meter.pause() {
        return Some(Attempt::Paused {
            pause,
            usage: meter.usage().map(Box::new),
        });
    }
    let question = questions.asked()?;
    Some(Attempt::Asked {
        question: Box::new(question),
        usage: meter.usage().map(Box::new),
    })
}

/// The action did not finish within `limit`: the run's deadline passed, or the state's
/// timeout (a failure that may be retried).
fn timed_out(state: &State, attempt: u32, limit: Option<Limit>, meter: &Meter) -> Attempt {
    let usage = meter.usage_with_outstanding().map(Box::new);
    let limit = limit.unwrap_or_default();
    if limit.deadline {
        return Attempt::DeadlineExceeded { usage };
    }
    let mut timed_out = failed(
        FailureKind::Timeout,
        format!(
            "state `{}` did not finish within its timeout of {}",
            state.id,
            humantime::format_duration(limit.after)
        ),
        attempt,
        true,
    );
    if let Attempt::Failed { call, .. } = &mut timed_out {
        call.usage = usage;
    }
    timed_out
}

/// The action failed: the failure, with the model call behind it (if any).
fn action_failed(error: ActionError, attempt: u32, meter: &Meter) -> Attempt {
    let ActionError {
        kind,
        message,
        output,
        retryable,
        model_call,
    } = error;
    let reported = model_call.as_ref().and_then(|c| c.usage.clone());
    let usage = metered(meter, reported.map(Box::new));
    let call = match model_call {
        Some(call) => CallRecord {
            model: Some(call.model),
            usage,
            enforce: call.enforce,
            summary: None,
            votes: None,
        },
        None => CallRecord {
            usage,
            ..CallRecord::default()
        },
    };
    Attempt::Failed {
        failure: Failure {
            kind,
            message,
            errors: Vec::new(),
            attempt,
        },
        output,
        retryable,
        call,
    }
}

/// The next hold asked for, when the run can hold (else never).
async fn next_hold(requests: &mut HoldRequests) -> Option<HoldRequest> {
    match requests {
        Some(requests) => requests.recv().await,
        None => std::future::pending().await,
    }
}

/// A failed attempt that called no model and output nothing.
pub(super) fn failed(kind: FailureKind, message: String, attempt: u32, retryable: bool) -> Attempt {
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
