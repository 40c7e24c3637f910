//! The timeout rule, said once: an attempt is bounded by its state's timeout (else the
//! FSM's, else the operator's default for its action, else the action's own — see
//! [`ActionRegistry::attempt_limit`](crate::ActionRegistry::attempt_limit)), or by what is left of the run's deadline when that comes first; the run's
//! deadline is the one it was given, else the FSM's `config.deadline`, counted from the
//! run's creation. A deadline that passes is a failure like any other — its `on_failure`
//! route is followed, but only once, so a run past its deadline ends.

use std::time::{Duration, Instant};

use claij_core::{Failure, FailureKind, Fsm, State};
use serde_json::Value;

use super::{CallRecord, RunState};

/// What bounds an attempt.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Limit {
    /// How long the attempt may take.
    pub(super) after: Duration,
    /// Whether that is what is left of the run's deadline (else the state's timeout).
    pub(super) deadline: bool,
}

/// The run's deadline: `given` (the run's options), else the FSM's `config.deadline`.
pub(crate) fn run_deadline(given: Option<Duration>, fsm: &Fsm) -> Option<Duration> {
    given.or(fsm.settings.deadline)
}

impl RunState<'_> {
    /// What bounds an attempt of `state`: its timeout, or the run's deadline when that
    /// comes first (the clock is read only for a run with a deadline).
    pub(super) fn limit(&self, state: &State) -> Option<Limit> {
        let timeout = self
            .engine
            .registry()
            .attempt_limit(self.fsm, state)
            .timeout
            .duration();
        let left = self
            .deadline
            .map(|(at, _)| at.saturating_duration_since(Instant::now()));
        match (timeout, left) {
            (Some(t), Some(d)) if d < t => Some(Limit {
                after: d,
                deadline: true,
            }),
            (None, Some(d)) => Some(Limit {
                after: d,
                deadline: true,
            }),
            (t, _) => t.map(|after| Limit {
                after,
                deadline: false,
            }),
        }
    }

    /// Records that the run's deadline passed during attempt `attempt` of `state` (its
    /// calls' `usage`, its `duration`): the failure to route on, unless a deadline's
    /// `on_failure` route was taken already (`None`: the run ends).
    pub(crate) fn deadline_passed(
        &mut self,
        state: &State,
        attempt: u32,
        usage: Option<Box<claij_core::Usage>>,
        duration: Option<Duration>,
    ) -> Option<Failure> {
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
        let call = CallRecord {
            usage,
            ..CallRecord::default()
        };
        self.append_failure(state, Value::Null, failure.clone(), call, duration);
        (!std::mem::replace(&mut self.deadline_routed, true)).then_some(failure)
    }
}
