//! The built-in actions that need no model.

mod child;
mod command;
mod fork;
mod fsm;
mod human;
mod transform;

pub use child::TrailMode;
pub use command::Command;
pub use fork::{Fork, Join};
pub use fsm::SubFsm;
pub use human::{Human, HumanIo, TerminalIo};
pub use transform::Transform;

use serde_json::{Value, json};

use crate::action::{Action, ActionError, ActionInput, BoxFuture, Outcome};

/// `end`: terminal. The engine never runs it (runs stop on entering a terminal state);
/// it exists so the name is known and its config (none) is checked.
#[derive(Debug, Clone, Copy, Default)]
pub struct End;

impl Action for End {
    fn config_schema(&self) -> Value {
        json!({"type": "object", "additionalProperties": false})
    }

    fn run<'a>(&'a self, input: ActionInput<'a>) -> BoxFuture<'a, Result<Outcome, ActionError>> {
        let state = input.state.id.clone();
        Box::pin(async move {
            Err(ActionError::fatal(format!(
                "state `{state}` is terminal; the `end` action never runs"
            )))
        })
    }
}

/// What `join` says: there is no separate join state.
const JOIN_INSTEAD: &str =
    "a `fork` state, which joins its own branches (config `join: all | race | {at_least: k}`)";

/// Action names reserved for later layers (or, for `join`, done elsewhere), and what
/// brings each.
pub const RESERVED: [(&str, &str); 3] = [
    ("llm", "the model layer"),
    ("mcp", "the MCP client"),
    ("join", JOIN_INSTEAD),
];

/// An action whose name is known (so documents using it validate) but which this build
/// cannot run yet: running it fails at once with a message saying so.
#[derive(Debug, Clone, Copy)]
pub struct Reserved {
    /// The action's name.
    pub name: &'static str,
    /// What brings it.
    pub arrives_with: &'static str,
}

impl Action for Reserved {
    fn run<'a>(&'a self, _input: ActionInput<'a>) -> BoxFuture<'a, Result<Outcome, ActionError>> {
        Box::pin(async move {
            if self.arrives_with == JOIN_INSTEAD {
                return Err(ActionError::fatal(format!(
                    "there is no `join` action to run: use {JOIN_INSTEAD}"
                )));
            }
            Err(ActionError::fatal(format!(
                "the `{}` action is not available in this build yet (it arrives with {})",
                self.name, self.arrives_with
            )))
        })
    }
}

/// Dynamic schema names reserved for later layers: `mcp:…` (the MCP client). Documents
/// naming them load; resolving one fails clearly until the layer registers its provider
/// (which then takes precedence, see [`ActionRegistry::register_schemas`](crate::ActionRegistry::register_schemas)).
#[derive(Debug, Clone, Copy, Default)]
pub struct ReservedSchemas;

impl claij_core::DynamicSchemas for ReservedSchemas {
    fn serves(&self, name: &str) -> bool {
        name.starts_with("mcp:")
    }

    fn resolve(&self, name: &str) -> Result<std::sync::Arc<Value>, claij_core::SchemaError> {
        Err(claij_core::SchemaError::new(format!(
            "the dynamic schema `{name}` needs the MCP client, which this build has not registered"
        )))
    }
}
