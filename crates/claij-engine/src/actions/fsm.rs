//! `fsm`: runs a child FSM (a sub-FSM, or a chain of them) as a run of its own in the
//! run tree, and emits its result.

use claij_core::ConfigIssue;
use claij_core::known_actions::ConfigRoute;
use serde_json::{Value, json};

use super::child::{
    Common, FSM_TOUCHES, FsmRef, check_common, child_error, child_input, child_view,
    common_properties, fsm_of, ref_needs, ref_schema, routes, status_word, stored, timed_out,
};
use crate::action::{
    Action, ActionError, ActionInput, ActionOutput, BoxFuture, Outcome, Suspension,
};
use crate::capability::{Field, Need, NeedsOf};
use crate::run::{RunOutcome, RunStatus};
use crate::tree::{ChildRun, content};

/// Runs a child FSM and emits its result.
///
/// Config: `fsm` (a file relative to this document, `{file}`, `{id, version}` of a stored
/// definition, or a list of those: a chain, each continuing the previous one's trail and
/// taking its result as input), `input` (a JSON Pointer into the event; default: the
/// event without `id`), `success_to`, `failure_to`, `timeout_to` (states; transitions
/// `[state, target]` must exist), `deadline` (the child's), `trail` (`omit`, `summary`,
/// `full`: what of the child's trail the event carries).
///
/// The child is a run of its own (id `PARENT.SEQ`, or `PARENT.SEQ.K` in a chain) with
/// its own trail and, with a store, a stored record linked to its parent. It emits
/// `{"id": [state, success_to], "result": …, "child": {…}}` when the child completes, and
/// `{"id": [state, failure_to | timeout_to], "error": …, "child": {…}}` when it fails or
/// times out (without such a route the attempt fails). A child that suspends (waiting for
/// a person) suspends the parent, which continues when the child is resumed and ends.
#[derive(Debug, Clone, Copy, Default)]
pub struct SubFsm;

impl Action for SubFsm {
    fn config_schema(&self) -> Value {
        let mut props = common_properties();
        props.insert(
            "fsm".into(),
            json!({"anyOf": [ref_schema(), {"type": "array", "minItems": 1, "items": ref_schema()}]}),
        );
        json!({
            "type": "object",
            "required": ["fsm", "success_to"],
            "properties": props,
            "additionalProperties": false
        })
    }

    /// A child's run: an hour, its own states bounded each.
    fn default_timeout(&self) -> Option<std::time::Duration> {
        Some(crate::action::CHILD_ATTEMPT_TIMEOUT)
    }

    /// The child FSMs' files (a stored definition touches nothing).
    fn touches(&self) -> &'static [Field] {
        &FSM_TOUCHES
    }

    fn needs(&self, of: NeedsOf<'_>) -> Vec<Need> {
        ref_needs(of, "fsm")
    }

    fn check_config(&self, config: &Value) -> Vec<ConfigIssue> {
        check_common(config)
    }

    fn routes(&self, config: &Value) -> Vec<ConfigRoute> {
        routes(config)
    }

    fn run<'a>(&'a self, input: ActionInput<'a>) -> BoxFuture<'a, Result<Outcome, ActionError>> {
        Box::pin(async move {
            let config = &input.state.config;
            let common = Common::read(config);
            let refs: Vec<FsmRef> = match config.get("fsm") {
                Some(Value::Array(items)) => items.iter().filter_map(FsmRef::parse).collect(),
                Some(one) => FsmRef::parse(one).into_iter().collect(),
                None => Vec::new(),
            };
            if refs.is_empty() {
                return Err(ActionError::fatal(format!(
                    "state `{}` names no child FSM (config.fsm)",
                    input.state.id
                )));
            }
            let chain = refs.len() > 1;
            let mut child_in = child_input(&input)?;
            let mut prior = Vec::new();
            let mut last: Option<(RunOutcome, std::sync::Arc<str>)> = None;
            for (k, r) in refs.iter().enumerate() {
                let run_id = if chain {
                    format!("{}.{}.{}", input.run_id, input.seq, k + 1)
                } else {
                    format!("{}.{}", input.run_id, input.seq)
                };
                let fsm = if stored(&input, &run_id).await {
                    None
                } else {
                    Some(r.load(&input).await?)
                };
                let child = ChildRun {
                    run_id: run_id.clone(),
                    fsm,
                    input: child_in.clone(),
                    context: input.context.clone(),
                    deadline: common.deadline,
                    prior_trail: std::mem::take(&mut prior),
                };
                let started = input
                    .scope
                    .engine
                    .run_child(
                        &input.scope,
                        input.run_id,
                        child,
                        input.cancel.child_token(),
                    )
                    .await;
                let outcome = match started {
                    Ok(outcome) => outcome,
                    // The child could not run at all (its input refused, say): a failure
                    // of the child like any other.
                    Err(e) => {
                        let error = format!("the child run {run_id} could not run: {e}");
                        let Some(to) = common.failure_to.as_deref() else {
                            return Err(ActionError::failed(error));
                        };
                        return Ok(Outcome::Emit(ActionOutput::event(json!({
                            "id": [&*input.state.id, to],
                            "status": "failed",
                            "error": error,
                        }))));
                    }
                };
                let fsm_id = fsm_of(&outcome).unwrap_or_else(|| "?".into());
                if outcome.status == RunStatus::Suspended {
                    return Ok(Outcome::Suspend(Suspension {
                        prompt: Some(format!(
                            "waits for its child run {} (suspended in `{}`)",
                            outcome.run_id, outcome.state
                        )),
                        children: vec![outcome.run_id.clone()],
                        ..Suspension::default()
                    }));
                }
                let done = outcome.status == RunStatus::Completed;
                if done {
                    child_in = outcome.result.as_ref().map(content).unwrap_or_default();
                    prior = outcome.trail.clone();
                }
                last = Some((outcome, fsm_id));
                if !done {
                    break;
                }
            }
            let Some((outcome, fsm_id)) = last else {
                return Err(ActionError::fatal("no child ran"));
            };
            let view = child_view(common.mode, &outcome, &fsm_id);
            let state = &input.state.id;
            let mut event = if outcome.status == RunStatus::Completed {
                let to = common.success_to.as_deref().unwrap_or_default();
                json!({
                    "id": [&**state, to],
                    "result": outcome.result.as_ref().map(content).unwrap_or(Value::Null),
                })
            } else {
                let Some(to) = common.failure_target(timed_out(&outcome)) else {
                    return Err(ActionError::failed(child_error(&outcome)));
                };
                json!({
                    "id": [&**state, to],
                    "error": child_error(&outcome),
                    "status": status_word(&outcome),
                })
            };
            if let Some(view) = view {
                event["child"] = view;
            }
            Ok(Outcome::Emit(ActionOutput::event(event)))
        })
    }
}
