//! The registry of actions and dynamic schema providers a document may name.

use std::collections::BTreeMap;
use std::sync::Arc;

use claij_core::known_actions::ConfigRoute;
use claij_core::schema::SchemaError;
use claij_core::{CompiledSchema, ConfigIssue, DynamicSchemas, KnownActions};
use serde_json::Value;

use crate::action::Action;
use crate::actions;

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
}

impl std::fmt::Debug for ActionRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActionRegistry")
            .field("actions", &self.actions.keys().collect::<Vec<_>>())
            .field("schema_providers", &self.schemas.len())
            .finish()
    }
}

impl ActionRegistry {
    /// A registry with nothing in it.
    pub fn empty() -> Self {
        Self::default()
    }

    /// The built-in actions: `end`, `transform`, `command`, `human`, `fsm` and `fork`,
    /// and the names of actions provided by layers (`llm` by claij-llm, `mcp` by
    /// claij-mcp, each replacing its placeholder when registered) or done elsewhere
    /// (`join`), which load but fail clearly when run; likewise the dynamic schema names
    /// `mcp:…`.
    pub fn with_builtins() -> Self {
        let mut registry = Self::empty();
        let builtins: [(&str, Arc<dyn Action>); 7] = [
            ("end", Arc::new(actions::End)),
            ("fsm", Arc::new(actions::SubFsm)),
            ("fork", Arc::new(actions::Fork)),
            ("transform", Arc::new(actions::Transform::default())),
            ("command", Arc::new(actions::Command)),
            ("human", Arc::new(actions::Human::terminal())),
            ("publish", Arc::new(actions::Publish)),
        ];
        for (name, action) in builtins {
            registry.insert(name, action);
        }
        for (name, reserved) in actions::RESERVED {
            registry.insert(name, Arc::new(reserved));
        }
        registry.register_schemas(Arc::new(actions::ReservedSchemas));
        registry
    }

    /// The built-ins for runs kept in a store: as [`with_builtins`](Self::with_builtins),
    /// except that `human` suspends the run to wait for input from outside (the CLI, a
    /// webhook, an MCP client) instead of asking at the terminal.
    pub fn durable() -> Self {
        let mut registry = Self::with_builtins();
        registry.insert("human", Arc::new(actions::Human::suspending()));
        registry
    }

    fn insert(&mut self, name: &str, action: Arc<dyn Action>) {
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

    /// The action registered under `name`.
    pub fn action(&self, name: &str) -> Option<&Arc<dyn Action>> {
        self.actions.get(name).map(|r| &r.action)
    }

    /// The config schema of the action registered under `name`.
    pub fn config_schema(&self, name: &str) -> Option<&Value> {
        self.actions.get(name).map(|r| &r.config_schema.source)
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
