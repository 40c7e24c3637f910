//! What the loader needs to know about the outside world: which actions exist, what
//! configuration each accepts, and which dynamic schema names are served. The engine's
//! registries implement it; the core stays free of them.

use serde_json::Value;

/// One problem with a state's `config`, as its action reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// Where inside `config` (JSON Pointer; empty for `config` itself).
    pub pointer: String,
    /// Why.
    pub message: String,
}

/// A state the action of a state may send a run to by itself, as its `config` says:
/// `command`'s capture `routes` by exit code (and, later, the success, failure and
/// timeout routes of `fsm` and `fork`). The loader checks that a transition
/// [state, target] exists for each, as it does for the engine's own `on_failure`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigRoute {
    /// Where inside `config` the target is written (JSON Pointer, `/routes/0`).
    pub pointer: String,
    /// The target state.
    pub target: String,
}

/// The actions and dynamic schemas a document may name.
pub trait KnownActions {
    /// Whether an action of this name is registered.
    fn has_action(&self, action: &str) -> bool;

    /// The registered action names, sorted, for error messages.
    fn action_names(&self) -> Vec<String>;

    /// Checks a state's `config` (the engine's own keys removed) against what the action
    /// accepts: its declared config schema and any further checks (a template that does
    /// not parse, say). Empty when the config is fine.
    fn check_config(&self, action: &str, config: &Value) -> Vec<ConfigIssue>;

    /// The routes a state's `config` (the engine's own keys removed) declares for its
    /// action: see [`ConfigRoute`]. None by default.
    fn config_routes(&self, _action: &str, _config: &Value) -> Vec<ConfigRoute> {
        Vec::new()
    }

    /// Whether a dynamic schema of this name (`"mcp:request"`) is served.
    fn has_dynamic_schema(&self, name: &str) -> bool;
}

/// The built-in action names (docs/FORMAT.md, "Built-in actions"), accepting any
/// `config`: for tools that only need the format checked (and for tests of the core).
#[derive(Debug, Clone, Copy, Default)]
pub struct BuiltinNames;

/// The action names claij knows without any registration.
pub(crate) const BUILTIN_ACTIONS: [&str; 10] = [
    "command",
    "end",
    "fork",
    "fsm",
    "http",
    "human",
    "join",
    "llm",
    "mcp",
    "transform",
];

impl KnownActions for BuiltinNames {
    fn has_action(&self, action: &str) -> bool {
        BUILTIN_ACTIONS.contains(&action)
    }

    fn action_names(&self) -> Vec<String> {
        BUILTIN_ACTIONS.iter().map(|s| s.to_string()).collect()
    }

    fn check_config(&self, _action: &str, _config: &Value) -> Vec<ConfigIssue> {
        Vec::new()
    }

    fn has_dynamic_schema(&self, _name: &str) -> bool {
        false
    }
}
