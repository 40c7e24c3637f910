//! A server's catalog: what it offers, as last listed — its tools, resources and prompts
//! (as the MCP spec's JSON). Resource bodies are not kept: they are read when asked for.
//! (claij-embedded has a catalog too: the models it knows how to fetch. The actions a
//! document may name are `claij_core::KnownActions`.)

use serde_json::{Value, json};

/// One server's catalog: its tools, resources and prompts as last listed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    /// `tools/list` entries (`name`, `description`, `inputSchema`, …).
    pub tools: Vec<Value>,
    /// `resources/list` entries (`uri`, `name`, `mimeType`, …).
    pub resources: Vec<Value>,
    /// `prompts/list` entries (`name`, `description`, `arguments`).
    pub prompts: Vec<Value>,
    /// Whether the server completes arguments (`completion/complete`: its `completions`
    /// capability).
    pub completions: bool,
}

impl Catalog {
    /// The three lists as one JSON object, with whether the server completes arguments
    /// (what `claij mcp tools --json` prints).
    pub fn to_json(&self) -> Value {
        json!({
            "tools": self.tools,
            "resources": self.resources,
            "prompts": self.prompts,
            "completions": self.completions,
        })
    }

    /// A catalog from its [`to_json`](Self::to_json) form (what is missing is empty).
    pub fn from_json(value: &Value) -> Self {
        let list = |key: &str| value[key].as_array().cloned().unwrap_or_default();
        Self {
            tools: list("tools"),
            resources: list("resources"),
            prompts: list("prompts"),
            completions: value["completions"] == true,
        }
    }

    /// The tool named `name`.
    pub fn tool(&self, name: &str) -> Option<&Value> {
        self.tools.iter().find(|t| t["name"] == name)
    }
}

/// Which list changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    /// `tools/list`.
    Tools,
    /// `resources/list`.
    Resources,
    /// `prompts/list`.
    Prompts,
}
