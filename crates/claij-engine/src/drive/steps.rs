//! The run's steps: a run takes at most `config.max_steps` transitions (the FSM's
//! [`max_steps`](claij_core::Fsm::max_steps)), so that no loop — a model that never
//! leaves, a template or a person answering a self-loop — grows its trail without end.
//! The run that enters a state (not a terminal one) with none left ends there, `failed`,
//! with a `steps` failure: no attempt is made and no `on_failure` route is taken.

use claij_core::{Failure, FailureKind, State};
use serde_json::Value;

use super::{CallRecord, RunState};

impl RunState<'_> {
    /// Records that the run, entering `state` (for its attempt `attempt`), took the most
    /// steps it may.
    pub(super) fn append_out_of_steps(&mut self, state: &State, attempt: u32) {
        let limit = self.fsm.max_steps();
        let failure = Failure {
            kind: FailureKind::Steps,
            message: format!(
                "the run took {} steps, the most it may (config.max_steps: {limit}): it ends in `{}`",
                self.steps, state.id
            ),
            errors: Vec::new(),
            attempt,
        };
        self.append_failure(state, Value::Null, failure, CallRecord::default(), None);
    }
}
