//! The registry of actions and dynamic schema providers a document may name, and what
//! a document would touch as its actions declare it ([`document_needs`]), which the
//! operator's [`Policy`] refuses or not ([`Policy::refusals`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use claij_core::known_actions::ConfigRoute;
use claij_core::schema::SchemaError;
use claij_core::{
    AttemptLimit, CompiledSchema, ConfigIssue, DynamicSchemas, Fsm, JsonPath, KnownActions, State,
    Timeout,
};
use serde_json::{Map, Value};

use crate::action::Action;
use crate::capability::{Need, NeedsOf, Policy, Refused, config_path};
use crate::cassette::Cassette;

struct Registered {
    action: Arc<dyn Action>,
    config_schema: CompiledSchema,
}

/// Actions by name, each with its compiled config schema, and the dynamic schema
/// providers. Implements [`KnownActions`] so documents are checked against it on load.
#[derive(Default)]
pub struct ActionRegistry {
    actions: BTreeMap<String, Registered>,
    schemas: Vec<Arc<dyn DynamicSchemas>>,
    /// The operator's attempt timeouts by action (`[timeouts]` in claij.toml).
    timeouts: BTreeMap<String, Timeout>,
    /// Where programs' and MCP servers' exchanges are recorded or replayed from.
    cassette: Option<Arc<dyn Cassette>>,
}

/// An operator's default timeout names an action the registry does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("there is no action `{action}` to give a default timeout; the actions are: {known}")]
pub struct UnknownTimeoutAction {
    /// The name given.
    pub action: String,
    /// The registered actions, comma-separated.
    pub known: String,
}

impl std::fmt::Debug for ActionRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActionRegistry")
            .field("actions", &self.actions.keys().collect::<Vec<_>>())
            .field("schema_providers", &self.schemas.len())
            .field("timeouts", &self.timeouts)
            .field("cassette", &self.cassette)
            .finish()
    }
}

impl ActionRegistry {
    /// A registry with nothing in it.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Registers a built-in action (its config schema a constant checked by tests).
    pub(crate) fn insert(&mut self, name: &str, action: Arc<dyn Action>) {
        // Built-in config schemas are constants checked by tests.
        if let Err(e) = self.register(name, action) {
            panic!("built-in action `{name}` has a bad config schema: {e}");
        }
    }

    /// Registers (or replaces) an action under `name`; fails when its config schema does
    /// not compile.
    pub fn register(&mut self, name: &str, action: Arc<dyn Action>) -> Result<(), SchemaError> {
        let config_schema = CompiledSchema::compile(action.config_schema())?;
        self.actions.insert(
            name.to_owned(),
            Registered {
                action,
                config_schema,
            },
        );
        Ok(())
    }

    /// Adds a provider of dynamic (string-named) schemas. The latest added comes first:
    /// a layer's provider takes over names the built-ins only reserve (`mcp:…`).
    pub fn register_schemas(&mut self, provider: Arc<dyn DynamicSchemas>) {
        self.schemas.insert(0, provider);
    }

    /// Records the exchanges of the programs and MCP servers its actions call on
    /// `cassette`, or answers them from it (see [`crate::cassette`]).
    pub fn set_cassette(&mut self, cassette: Arc<dyn Cassette>) {
        self.cassette = Some(cassette);
    }

    /// The cassette exchanges are recorded on or replayed from, if any.
    pub fn cassette(&self) -> Option<&Arc<dyn Cassette>> {
        self.cassette.as_ref()
    }

    /// The action registered under `name`.
    pub fn action(&self, name: &str) -> Option<&Arc<dyn Action>> {
        self.actions.get(name).map(|r| &r.action)
    }

    /// The config schema of the action registered under `name`.
    pub fn config_schema(&self, name: &str) -> Option<&Value> {
        self.actions.get(name).map(|r| &r.config_schema.source)
    }

    /// Makes `timeout` the operator's default for attempts of `action`'s states (used
    /// when neither the state nor the document sets one); fails for an action not
    /// registered.
    pub fn set_default_timeout(
        &mut self,
        action: &str,
        timeout: Timeout,
    ) -> Result<(), UnknownTimeoutAction> {
        if !self.actions.contains_key(action) {
            return Err(UnknownTimeoutAction {
                action: action.to_owned(),
                known: self.action_names().join(", "),
            });
        }
        self.timeouts.insert(action.to_owned(), timeout);
        Ok(())
    }

    /// The limit of one attempt of `state` and where it comes from: the state's
    /// `timeout`, else the document's, else the operator's default for its action, else
    /// the action's own ([`Action::default_timeout`]).
    pub fn attempt_limit(&self, fsm: &Fsm, state: &State) -> AttemptLimit {
        let built_in = self
            .action(&state.action)
            .map_or(Some(crate::action::DEFAULT_ATTEMPT_TIMEOUT), |a| {
                a.default_timeout()
            });
        fsm.attempt_limit(state, self.timeouts.get(&*state.action).copied(), built_in)
    }

    /// The provider serving the dynamic schema `name`.
    pub(crate) fn schema_provider(&self, name: &str) -> Option<&Arc<dyn DynamicSchemas>> {
        self.schemas.iter().find(|p| p.serves(name))
    }
}

/// The registry resolves a dynamic schema through the first provider serving it.
impl DynamicSchemas for ActionRegistry {
    fn serves(&self, name: &str) -> bool {
        self.schema_provider(name).is_some()
    }

    fn resolve(&self, name: &str) -> Result<Arc<Value>, SchemaError> {
        match self.schema_provider(name) {
            Some(provider) => provider.resolve(name),
            None => Err(SchemaError {
                pointer: String::new(),
                message: format!("no provider serves the dynamic schema `{name}`"),
            }),
        }
    }
}

impl KnownActions for ActionRegistry {
    fn has_action(&self, action: &str) -> bool {
        self.actions.contains_key(action)
    }

    fn action_names(&self) -> Vec<String> {
        self.actions.keys().cloned().collect()
    }

    fn check_config(&self, action: &str, config: &Value) -> Vec<ConfigIssue> {
        let Some(registered) = self.actions.get(action) else {
            return Vec::new();
        };
        let issues: Vec<ConfigIssue> = registered
            .config_schema
            .issues(config)
            .into_iter()
            .map(|i| ConfigIssue {
                pointer: i.instance_path,
                message: i.message,
            })
            .collect();
        if issues.is_empty() {
            registered.action.check_config(config)
        } else {
            issues
        }
    }

    fn config_routes(&self, action: &str, config: &Value) -> Vec<ConfigRoute> {
        self.actions
            .get(action)
            .map(|registered| registered.action.routes(config))
            .unwrap_or_default()
    }

    fn has_dynamic_schema(&self, name: &str) -> bool {
        self.schema_provider(name).is_some()
    }
}

/// Everything `fsm` would touch, in document order: each state's needs as its action
/// declares them, and the document's MCP servers (as the registered `mcp` action
/// declares them, whether or not a state of its own calls them: declaring a server
/// connects it).
pub fn document_needs(fsm: &Fsm, registry: &ActionRegistry) -> Vec<Need> {
    let mut needs = Vec::new();
    for state in &fsm.states {
        let Some(action) = registry.action(&state.action) else {
            continue;
        };
        let at = config_path(fsm, &state.id);
        needs.extend(action.needs(NeedsOf {
            config: &state.config,
            at: &at,
            fsm,
        }));
    }
    if !fsm.servers.is_empty()
        && let Some(mcp) = registry.action("mcp")
    {
        let every_server = Value::Object(Map::new());
        needs.extend(mcp.needs(NeedsOf {
            config: &every_server,
            at: &JsonPath::root().join("servers"),
            fsm,
        }));
    }
    let mut seen = std::collections::HashSet::new();
    needs.retain(|n| seen.insert((n.path.pointer().to_owned(), n.touch, n.value.clone())));
    needs
}

impl Policy {
    /// The needs of `fsm` its owner may not have, each with why.
    pub fn refusals(&self, fsm: &Fsm, registry: &ActionRegistry) -> Vec<(Need, Refused)> {
        document_needs(fsm, registry)
            .into_iter()
            .filter_map(|need| self.permit(fsm.owner, &need).err().map(|r| (need, r)))
            .collect()
    }
}
