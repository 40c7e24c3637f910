//! `transform`: builds the next event from a template over the input; no model.
//!
//! A template is a program (loops, recursion through macros): it is rendered on a
//! blocking thread, never on the async runtime's workers, so a long render cannot stall
//! the other runs or a server's answers; the attempt waits for it as it waits for any
//! action, so a state's timeout, the run's deadline and an interrupt end the attempt at
//! once. The render itself is bounded by its fuel (minijinja counts the instructions it
//! runs, and the data it makes): a template that runs out fails, naming its state, and its
//! thread is free again.

use std::sync::Arc;

use claij_core::ConfigIssue;
use minijinja::Environment;
use serde_json::{Value, json};

use crate::action::{Action, ActionError, ActionInput, ActionOutput, BoxFuture, Outcome};
use crate::capability::Field;

/// The fuel of a render unless its state's `config.fuel` says otherwise (minijinja's fuel:
/// about one per instruction run, and one per 64 bytes of data the template makes): far
/// more than a template building an event needs (a loop over 50,000 items fits), under a
/// second of one core in a release build.
pub const DEFAULT_FUEL: u64 = 10_000_000;

/// The most fuel a state may give its template (`config.fuel`): about a minute of one core.
pub const MAX_FUEL: u64 = 1_000_000_000;

/// Renders `config.template` (minijinja) with `event`, `context`, `state` (the state's id)
/// and `run_id`, and parses the result as the JSON output event (which names its own
/// transition). Use the `tojson` filter to embed values. Its failures are not retried:
/// the same input renders the same output. Each render may run at most `config.fuel`
/// instructions ([`DEFAULT_FUEL`] by default).
pub struct Transform {
    /// The environment of renders with the default fuel (one with its own fuel is made
    /// for a state that sets `config.fuel`).
    env: Arc<Environment<'static>>,
    /// The default fuel.
    fuel: u64,
}

impl Default for Transform {
    fn default() -> Self {
        Self::with_fuel(DEFAULT_FUEL)
    }
}

impl Transform {
    /// A transform whose renders may run `fuel` instructions unless their state says
    /// otherwise.
    pub fn with_fuel(fuel: u64) -> Self {
        Self {
            env: Arc::new(template_environment(fuel)),
            fuel,
        }
    }
}

/// The template environment `transform` renders in, each render bounded by `fuel`
/// instructions: minijinja with its built-in filters, undefined values semi-strict (an
/// undefined value may be tested for truth; any other use of it fails). Public so that
/// actions of other crates (claij-http's `http`) render their templates as `transform`
/// does.
pub fn template_environment(fuel: u64) -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::SemiStrict);
    env.set_fuel(Some(fuel));
    env
}

impl std::fmt::Debug for Transform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transform")
            .field("fuel", &self.fuel)
            .finish_non_exhaustive()
    }
}

impl Action for Transform {
    fn config_schema(&self) -> Value {
        json!({
            "type": "object",
            "required": ["template"],
            "properties": {
                "template": {"type": "string", "minLength": 1, "description": "A minijinja template whose output is the JSON event."},
                "fuel": {"type": "integer", "minimum": 1, "maximum": MAX_FUEL, "description": "The most instructions a render may run (default 10,000,000); a render that needs more fails."}
            },
            "additionalProperties": false
        })
    }

    /// A template renders the run's own values; it reads no file (the environment has no
    /// loader) and touches nothing else.
    fn touches(&self) -> &'static [Field] {
        const FIELDS: &[Field] = &[Field::inert("/template"), Field::inert("/fuel")];
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
            let config = &input.state.config;
            let template = config
                .get("template")
                .and_then(Value::as_str)
                .ok_or_else(|| ActionError::fatal("`config.template` is missing"))?
                .to_owned();
            let (env, fuel) = match config.get("fuel").and_then(Value::as_u64) {
                Some(fuel) if fuel != self.fuel => (Arc::new(template_environment(fuel)), fuel),
                _ => (self.env.clone(), self.fuel),
            };
            let (event, context) = (input.event.clone(), input.context.clone());
            let (state, run_id) = (input.state.id.to_string(), input.run_id.to_owned());
            let render = {
                let state = state.clone();
                tokio::task::spawn_blocking(move || {
                    env.render_str(
                        &template,
                        minijinja::context! {
                            event => minijinja::value::Serde(&event),
                            context => minijinja::value::Serde(&context),
                            state => state,
                            run_id => run_id,
                        },
                    )
                })
            };
            let rendered = match render.await {
                Ok(Ok(text)) => text,
                Ok(Err(e)) if e.kind() == minijinja::ErrorKind::OutOfFuel => {
                    return Err(deterministic(ActionError::failed(format!(
                        "the template of state `{state}` ran out of fuel ({fuel}) before it finished: a loop too long, or one that never ends (its `config.fuel` raises the limit, up to {MAX_FUEL})"
                    ))));
                }
                Ok(Err(e)) => {
                    return Err(deterministic(ActionError::failed(format!(
                        "the template failed: {e}"
                    ))));
                }
                Err(e) => {
                    return Err(ActionError::failed(format!(
                        "the template of state `{state}` stopped: {e}"
                    )));
                }
            };
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
