//! What an attempt's result does to the run: it is recorded in the trail (an event taken,
//! a failure fed back, a pause, an interruption), then the state is attempted again, left,
//! or the run ends (or suspends) there.

use std::time::Duration;

use claij_core::budget::BudgetPause;
use claij_core::store::RunStatus;
use claij_core::{Failure, FailureKind, Question, State};
use serde_json::Value;

use super::attempt::Attempt;
use super::{CallRecord, Leaving, RunState};
use crate::action::{ActionOutput, Suspension};

/// What follows an attempt.
pub(super) enum Settled {
    /// Another attempt, this one's failure fed back to it (if any are left).
    Retry(Failure),
    /// No other attempt: the run leaves the state, or ends there.
    Leave(Leaving),
}

impl RunState<'_> {
    /// Records `result`, attempt `attempt` of `state` that took `duration`, and says what
    /// follows.
    pub(super) fn settle(
        &mut self,
        state: &State,
        attempt: u32,
        result: Attempt,
        duration: Duration,
    ) -> Settled {
        let leaving = match result {
            Attempt::Took { transition, output } => {
                self.took(transition, output, attempt, duration);
                Leaving::By(transition)
            }
            Attempt::Failed {
                failure,
                output,
                retryable,
                call,
            } => {
                self.append_failure(state, output, failure.clone(), call, Some(duration));
                if retryable {
                    return Settled::Retry(failure);
                }
                Leaving::GaveUp(Some(failure))
            }
            Attempt::Suspend(suspension) => {
                let wait = self.wait_for(state, suspension);
                Leaving::Ends(RunStatus::Suspended, Some(Box::new(wait)))
            }
            Attempt::Paused { pause, usage } => self.paused(state, pause, attempt, usage, duration),
            Attempt::Asked { question, usage } => {
                self.asked(state, &question, attempt, usage, duration)
            }
            Attempt::Released { wait } => Leaving::Written(wait),
            Attempt::Interrupted { usage } => {
                let failure = Failure {
                    kind: FailureKind::Interrupted,
                    message: "the run was interrupted".into(),
                    errors: Vec::new(),
                    attempt,
                };
                let call = CallRecord {
                    usage,
                    ..CallRecord::default()
                };
                self.append_failure(state, Value::Null, failure, call, Some(duration));
                Leaving::Ends(RunStatus::Interrupted, None)
            }
            Attempt::LeaseLost => Leaving::LeaseLost,
            Attempt::Elsewhere => Leaving::Elsewhere,
            Attempt::DeadlineExceeded { usage } => {
                match self.deadline_passed(state, attempt, usage, Some(duration)) {
                    Some(failure) => Leaving::GaveUp(Some(failure)),
                    None => Leaving::Ends(RunStatus::Failed, None),
                }
            }
        };
        Settled::Leave(leaving)
    }

    /// Records the event of attempt `attempt`, which took `transition`: its context and
    /// published events kept, its model call with it.
    fn took(&mut self, transition: usize, output: ActionOutput, attempt: u32, duration: Duration) {
        let ActionOutput {
            event,
            context,
            model,
            usage,
            enforce,
            summary,
            votes,
            published,
        } = output;
        self.published.extend(published);
        if let Some(context) = context {
            self.context = context;
            self.context_dirty = true;
        }
        let call = CallRecord {
            model,
            usage,
            enforce,
            summary,
            votes,
        };
        self.append_full(transition, event, attempt, call, Some(duration), None);
    }

    /// A budget would be gone past: the pause recorded, then the `on_budget` route, else
    /// (durable runs) the run suspended until the budget allows the attempt, else the run
    /// fails (no store to wait in).
    fn paused(
        &mut self,
        state: &State,
        pause: Box<BudgetPause>,
        attempt: u32,
        usage: Option<Box<claij_core::Usage>>,
        duration: Duration,
    ) -> Leaving {
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
            return Leaving::By(t);
        }
        if self.durable.is_none() {
            return Leaving::Ends(RunStatus::Failed, None);
        }
        let mut wait = self.wait_for(state, Suspension::default());
        wait.budget = Some(pause);
        Leaving::Ends(RunStatus::Suspended, Some(Box::new(wait)))
    }

    /// An MCP server asked what the run has no answer for: the question's pause recorded,
    /// the run suspended on it.
    fn asked(
        &mut self,
        state: &State,
        question: &Question,
        attempt: u32,
        usage: Option<Box<claij_core::Usage>>,
        duration: Duration,
    ) -> Leaving {
        let call = CallRecord {
            usage,
            ..CallRecord::default()
        };
        let at = self.clock.wall();
        let pause = self.question_pause(state, question, attempt, call, Some(duration), at);
        self.push(pause);
        let wait = self.question_wait(state, question);
        Leaving::Ends(RunStatus::Suspended, Some(Box::new(wait)))
    }
}
