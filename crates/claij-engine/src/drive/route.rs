//! Routing: an attempt's output is routed by its event's `id` to one of the state's
//! transitions and validated against that transition's schema; an event that names no
//! transition out of the state, or does not satisfy the schema, is a failure fed back to
//! the next attempt (with the valid ids, or every validation error). When attempts run
//! out, the state's `on_failure` route is taken with the failure.

use std::time::Instant;

use claij_core::{Failure, FailureKind, State};
use serde_json::{Value, json};

use super::attempt::Attempt;
use super::{CallRecord, RunState};
use crate::action::ActionOutput;

impl RunState<'_> {
    /// Finds the transition the output names and validates the output against it.
    pub(super) fn route(&self, state: &State, output: ActionOutput, attempt: u32) -> Attempt {
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
                votes: output.votes,
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
}

/// What kind of JSON value `v` is, for messages: `an object`, `a string`, ….
pub(crate) fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
