//! `transform`: builds the next event from a template over the input; no model.

use claij_core::ConfigIssue;
use minijinja::Environment;
use serde_json::{Value, json};

use crate::action::{Action, ActionError, ActionInput, ActionOutput, BoxFuture, Outcome};
use crate::capability::Field;

/// Renders `config.template` (minijinja) with `event`, `context`, `state` (the state's id)
/// and `run_id`, and parses the result as the JSON output event (which names its own
/// transition). Use the `tojson` filter to embed values. Its failures are not retried:
/// the same input renders the same output.
pub struct Transform {
    env: Environment<'static>,
}

impl Default for Transform {
    fn default() -> Self {
        let mut env = Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::SemiStrict);
        Self { env }
    }
}

impl std::fmt::Debug for Transform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Transform")
    }
}

impl Action for Transform {
    fn config_schema(&self) -> Value {
        json!({
            "type": "object",
            "required": ["template"],
            "properties": {
                "template": {"type": "string", "minLength": 1, "description": "A minijinja template whose output is the JSON event."}
            },
            "additionalProperties": false
        })
    }

    /// A template renders the run's own values; it reads no file (the environment has no
    /// loader) and touches nothing else.
    fn touches(&self) -> &'static [Field] {
        const FIELDS: &[Field] = &[Field::inert("/template")];
        FIELDS
    }

    fn check_config(&self, config: &Value) -> Vec<ConfigIssue> {
        let Some(template) = config.get("template").and_then(Value::as_str) else {
            return Vec::new();
        };
        match self.env.template_from_str(template) {
            Ok(_) => Vec::new(),
            Err(e) => vec![ConfigIssue {
                pointer: "/template".into(),
                message: format!("the template does not parse: {e}"),
            }],
        }
    }

    fn run<'a>(&'a self, input: ActionInput<'a>) -> BoxFuture<'a, Result<Outcome, ActionError>> {
        Box::pin(async move {
            let template = input
                .state
                .config
                .get("template")
                .and_then(Value::as_str)
                .ok_or_else(|| ActionError::fatal("`config.template` is missing"))?;
            let rendered = self
                .env
                .render_str(
                    template,
                    minijinja::context! {
                        event => minijinja::value::Serde(input.event),
                        context => minijinja::value::Serde(input.context),
                        state => &*input.state.id,
                        run_id => input.run_id,
                    },
                )
                .map_err(|e| {
                    deterministic(ActionError::failed(format!("the template failed: {e}")))
                })?;
            let event: Value = serde_json::from_str(&rendered).map_err(|e| {
                deterministic(ActionError::parse(
                    format!("the template's output is not JSON ({e})"),
                    Value::String(rendered.clone()),
                ))
            })?;
            Ok(ActionOutput::event(event).into())
        })
    }
}

/// A template renders the same output from the same input: trying again cannot help.
fn deterministic(mut error: ActionError) -> ActionError {
    error.retryable = false;
    error
}
