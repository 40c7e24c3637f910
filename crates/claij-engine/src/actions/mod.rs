//! The built-in actions that need no model, and the placeholders of those that do.
//!
//! [`ActionRegistry::with_builtins`](crate::ActionRegistry::with_builtins) registers
//! them all; each is public so that a library user can build a registry of their own
//! choosing from [`ActionRegistry::empty`](crate::ActionRegistry::empty), or register one
//! under another name (a scripted [`Human::with_io`], say).

pub(crate) mod child;
mod command;
mod fork;
mod fsm;
mod human;
mod publish;
mod transform;

pub use child::child_path;
pub use command::Command;
pub use fork::Fork;
pub use fsm::SubFsm;
pub use human::{Human, HumanIo, TerminalIo};
pub use publish::Publish;
pub use transform::{DEFAULT_FUEL, MAX_FUEL, Transform, template_environment};

use serde_json::{Value, json};

use std::sync::Arc;

use crate::action::{Action, ActionError, ActionInput, BoxFuture, Outcome};
use crate::capability::Field;
use crate::registry::ActionRegistry;
use crate::run::Engine;

impl ActionRegistry {
    /// The built-in actions: `end`, `transform`, `command`, `human`, `fsm`, `fork` and
    /// `publish`, and the names of actions provided by layers (`llm` by claij-llm, `mcp`
    /// by claij-mcp, `http` by claij-http, each replacing its placeholder when
    /// registered) or done elsewhere (`join`), which load but fail clearly when run;
    /// likewise the dynamic schema names `mcp:…`.
    pub fn with_builtins() -> Self {
        let mut registry = ActionRegistry::empty();
        let builtins: [(&str, Arc<dyn Action>); 7] = [
            ("end", Arc::new(End)),
            ("fsm", Arc::new(SubFsm)),
            ("fork", Arc::new(Fork)),
            ("transform", Arc::new(Transform::default())),
            ("command", Arc::new(Command)),
            ("human", Arc::new(Human::terminal())),
            ("publish", Arc::new(Publish)),
        ];
        for (name, action) in builtins {
            registry.insert(name, action);
        }
        for (name, reserved) in RESERVED {
            registry.insert(name, Arc::new(reserved));
        }
        registry.register_schemas(Arc::new(ReservedSchemas));
        registry
    }

    /// The built-ins for runs kept in a store: as [`with_builtins`](ActionRegistry::with_builtins),
    /// except that `human` suspends the run to wait for input from outside (the CLI, a
    /// webhook, an MCP client) instead of asking at the terminal.
    pub fn durable() -> Self {
        let mut registry = ActionRegistry::with_builtins();
        registry.insert("human", Arc::new(Human::suspending()));
        registry
    }
}

impl Default for Engine {
    /// An engine running the built-in actions ([`ActionRegistry::with_builtins`]).
    fn default() -> Self {
        Self::new(Arc::new(ActionRegistry::with_builtins()))
    }
}

/// `end`: terminal. The engine never runs it (runs stop on entering a terminal state);
/// it exists so the name is known and its config (none) is checked.
#[derive(Debug, Clone, Copy, Default)]
pub struct End;

impl Action for End {
    fn config_schema(&self) -> Value {
        json!({"type": "object", "additionalProperties": false})
    }

    fn touches(&self) -> &'static [Field] {
        &[]
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

/// The action names [`with_builtins`](crate::ActionRegistry::with_builtins) reserves
/// without running them: those a layer provides (`llm`, `mcp`, `http`) and `join`, which
/// a `fork` state does.
pub(crate) const RESERVED: [(&str, Reserved); 4] = [
    (
        "llm",
        Reserved::Layer {
            layer: "claij-llm",
            register: "claij_llm::register(&mut registry, layer)",
        },
    ),
    (
        "mcp",
        Reserved::Layer {
            layer: "claij-mcp",
            register: "claij_mcp::register(&mut registry, &client)",
        },
    ),
    (
        "http",
        Reserved::Layer {
            layer: "claij-http",
            register: "claij_http::register(&mut registry)",
        },
    ),
    ("join", Reserved::Join),
];

/// An action whose name is known (so documents using it load) but which this registry
/// cannot run: running it fails at once, saying why and what to do.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Reserved {
    /// Provided by a layer this registry was built without.
    Layer {
        /// The crate that provides it.
        layer: &'static str,
        /// How to register it.
        register: &'static str,
    },
    /// `join`: a `fork` state joins its own branches.
    Join,
}

impl Action for Reserved {
    /// A placeholder's config is the layer's to check; running it touches nothing.
    fn touches(&self) -> &'static [Field] {
        &[]
    }

    fn run<'a>(&'a self, input: ActionInput<'a>) -> BoxFuture<'a, Result<Outcome, ActionError>> {
        let name = input.state.action.clone();
        Box::pin(async move {
            Err(ActionError::fatal(match self {
                Reserved::Join => format!("there is no `join` action to run: use {JOIN_INSTEAD}"),
                Reserved::Layer { layer, register } => format!(
                    "the `{name}` action is provided by {layer}, which this engine's action \
                     registry was built without; register it with `{register}` (the `claij` \
                     binary does)"
                ),
            }))
        })
    }
}

/// Dynamic schema names a layer serves: `mcp:…` (claij-mcp's client). Documents naming
/// them load; resolving one fails clearly until the layer registers its provider (which
/// then takes precedence, see [`ActionRegistry::register_schemas`](crate::ActionRegistry::register_schemas)).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ReservedSchemas;

impl claij_core::DynamicSchemas for ReservedSchemas {
    fn serves(&self, name: &str) -> bool {
        name.starts_with("mcp:")
    }

    fn resolve(&self, name: &str) -> Result<std::sync::Arc<Value>, claij_core::SchemaError> {
        Err(claij_core::SchemaError::new(format!(
            "the dynamic schema `{name}` is served by claij-mcp's client, which this engine's \
             action registry was built without; register it with \
             `claij_mcp::register(&mut registry, &client)`"
        )))
    }
}
