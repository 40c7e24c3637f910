//! `publish`: publishes the state's input event on a topic, for the FSMs whose `triggers`
//! subscribe to it, then goes on. The event is written with the transition it takes, in
//! the same transaction (the outbox), so it is published exactly when that transition is
//! committed — never before, never twice.

use claij_core::store::Published;
use serde_json::{Value, json};

use claij_core::known_actions::ConfigRoute;

use crate::action::{Action, ActionError, ActionInput, ActionOutput, BoxFuture, Outcome};
use crate::capability::Field;
use crate::tree::content;

/// Publishes `event` (the state's input event without its `id`) on `config.topic` and
/// takes the transition to `config.next` (or the state's only one). The event's id is
/// `RUN:SEQ`, the trail entry that publishes it; the transition's event carries it
/// (`{"id": [state, next], "topic": …, "event_id": …}`). Needs a store: published events
/// are kept there until a worker dispatches them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Publish;

impl Action for Publish {
    fn config_schema(&self) -> Value {
        json!({
            "type": "object",
            "required": ["topic"],
            "properties": {
                "topic": {"type": "string", "pattern": "^[A-Za-z0-9_.-]+$", "minLength": 1, "maxLength": 128, "description": "The topic published on."},
                "next": {"type": "string", "minLength": 1, "description": "The state to go to after publishing (default: the state's only transition)."}
            },
            "additionalProperties": false
        })
    }

    /// A topic is a name in the store's queue, read only by the FSMs subscribed to it.
    fn touches(&self) -> &'static [Field] {
        const FIELDS: &[Field] = &[Field::inert("/topic"), Field::inert("/next")];
        FIELDS
    }

    fn routes(&self, config: &Value) -> Vec<ConfigRoute> {
        config
            .get("next")
            .and_then(Value::as_str)
            .map(|target| ConfigRoute {
                pointer: "/next".into(),
                target: target.to_owned(),
            })
            .into_iter()
            .collect()
    }

    fn run<'a>(&'a self, input: ActionInput<'a>) -> BoxFuture<'a, Result<Outcome, ActionError>> {
        Box::pin(async move {
            if input.scope.store.is_none() {
                return Err(ActionError::fatal(format!(
                    "state `{}` publishes an event, which needs a store (run with one)",
                    input.state.id
                )));
            }
            let config = &input.state.config;
            let topic = config
                .get("topic")
                .and_then(Value::as_str)
                .ok_or_else(|| ActionError::fatal("`config.topic` is missing"))?;
            let next = match config.get("next").and_then(Value::as_str) {
                Some(next) => next.to_owned(),
                None => match input.state.outgoing.as_slice() {
                    [only] => input.fsm.transitions[*only].to.to_string(),
                    _ => {
                        return Err(ActionError::fatal(format!(
                            "state `{}` has several transitions: name the one to take after publishing with `config.next`",
                            input.state.id
                        )));
                    }
                },
            };
            let event_id = format!("{}:{}", input.run_id, input.seq);
            let mut output = ActionOutput::event(json!({
                "id": [&*input.state.id, next],
                "topic": topic,
                "event_id": event_id,
            }));
            output.published.push(Published {
                id: event_id,
                topic: topic.to_owned(),
                event: content(input.event),
            });
            Ok(output.into())
        })
    }
}
