//! What a document touches outside its runs, and who may touch what.
//!
//! Every [`Action`](crate::Action) says, field by field, what its `config` touches outside the run
//! ([`Action::touches`](crate::Action::touches): files, programs, hosts, environment variables, models, MCP
//! servers), and from that what one state's config needs ([`Action::needs`](crate::Action::needs)). The
//! needs of a whole document ([`document_needs`](crate::document_needs)) are what registration checks against
//! the operator's [`Policy`]; the same policy is asked again by the actions themselves
//! when they run ([`Policy::program`], [`Policy::file`], [`Policy::host`], …), so a
//! document that registration missed still cannot open a path or start a program.
//!
//! Whose document it is decides ([`Owner`](claij_core::Owner)): the operator's touch what the process can;
//! an API client's touch only what the policy names — programs by absolute path, files
//! under named folders, hosts by name, environment variables by name. See
//! docs/SECURITY.md.

use std::fmt;

use claij_core::{Fsm, JsonPath};
use serde_json::Value;

mod classify;
mod hosts;
mod policy;

pub use classify::unclassified_in;
pub use policy::{Policy, PolicyError, Refused};

/// What a config field touches outside the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Touch {
    /// Nothing outside the run: a prompt, a route, a number, a template.
    Nothing,
    /// A file or folder of the host (a child FSM's document, a working directory, a root
    /// shown to an MCP server).
    File,
    /// A program started (looked up on the process's `PATH` when it has no `/`).
    Program,
    /// A host connected to: the field holds a URL.
    Host,
    /// Environment variables a program is given: the field's keys name them.
    Environment,
    /// A model the operator configured, called with its provider's key (which never
    /// leaves the process; budgets bound what calls cost).
    Model,
    /// MCP servers by name: each touches what its entry in the document's `servers`
    /// says (and a server reached over HTTP, the operator's stored credential for it).
    Servers,
    /// A credential the process holds for a host (an MCP server's OAuth token): never a
    /// config field of its own, implied by a server's URL.
    Credential,
}

impl Touch {
    /// In words, for refusals.
    pub fn noun(self) -> &'static str {
        match self {
            Touch::Nothing => "nothing",
            Touch::File => "file",
            Touch::Program => "program",
            Touch::Host => "host",
            Touch::Environment => "environment variable",
            Touch::Model => "model",
            Touch::Servers => "MCP server",
            Touch::Credential => "stored credential",
        }
    }
}

/// One field of an action's config (or of an MCP server's entry) and what it touches.
///
/// `pointer` is a JSON Pointer into the config whose segments may be `*` (every member
/// or item). A field covers everything under it, so `{"/argv", Nothing}` with
/// `{"/argv/0", Program}` says that the first item starts a program and the rest touch
/// nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Where, in the config.
    pub pointer: &'static str,
    /// What the value there touches.
    pub touch: Touch,
}

impl Field {
    /// A field touching `touch`.
    pub const fn new(pointer: &'static str, touch: Touch) -> Self {
        Self { pointer, touch }
    }

    /// A field touching nothing outside the run.
    pub const fn inert(pointer: &'static str) -> Self {
        Self::new(pointer, Touch::Nothing)
    }
}

/// One thing a document would touch, and where it says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// Where in the document (`$.states[2].config.argv[0]`).
    pub path: JsonPath,
    /// What kind of thing.
    pub touch: Touch,
    /// The thing: the path, program, URL, variable, model or server name as written.
    pub value: String,
}

impl fmt::Display for Need {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the {} `{}`", self.touch.noun(), self.value)
    }
}

/// Where an action's needs are asked for: one state's config, where it is written, and
/// the document it belongs to.
#[derive(Clone, Copy)]
pub struct NeedsOf<'a> {
    /// The state's config.
    pub config: &'a Value,
    /// Where the config is written in the document.
    pub at: &'a JsonPath,
    /// The document.
    pub fsm: &'a Fsm,
}

impl NeedsOf<'_> {
    /// The needs `fields` derive from the config: for each field that touches
    /// something, every value at its pointer (for [`Touch::Environment`], the keys of
    /// the object there).
    pub fn from_fields(&self, fields: &[Field]) -> Vec<Need> {
        let mut needs = Vec::new();
        for field in fields.iter().filter(|f| f.touch != Touch::Nothing) {
            let segments: Vec<&str> = field.pointer.split('/').skip(1).collect();
            values_at(
                self.config,
                &segments,
                self.at.clone(),
                &mut |path, value| {
                    needs.extend(values_of(field.touch, path, value));
                },
            );
        }
        needs
    }
}

/// Every value under `value` at `segments` (`*`: every member or item), with its path.
fn values_at(
    value: &Value,
    segments: &[&str],
    path: JsonPath,
    found: &mut dyn FnMut(JsonPath, &Value),
) {
    let Some((first, rest)) = segments.split_first() else {
        found(path, value);
        return;
    };
    match (value, *first) {
        (Value::Object(map), "*") => {
            for (key, member) in map {
                values_at(member, rest, path.join(key), found);
            }
        }
        (Value::Array(items), "*") => {
            for (i, item) in items.iter().enumerate() {
                values_at(item, rest, path.join(i), found);
            }
        }
        (Value::Object(map), key) => {
            if let Some(member) = map.get(key) {
                values_at(member, rest, path.join(key), found);
            }
        }
        (Value::Array(items), index) => {
            if let Some(item) = index.parse::<usize>().ok().and_then(|i| items.get(i)) {
                values_at(item, rest, path.join(index), found);
            }
        }
        _ => {}
    }
}

/// The needs of one value a field points at.
fn values_of(touch: Touch, path: JsonPath, value: &Value) -> Vec<Need> {
    let need = |path: JsonPath, value: &str| Need {
        path,
        touch,
        value: value.to_owned(),
    };
    match (touch, value) {
        (Touch::Environment, Value::Object(map)) => {
            map.keys().map(|k| need(path.join(k), k)).collect()
        }
        (_, Value::String(s)) => vec![need(path, s)],
        (_, Value::Array(items)) => items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| item.as_str().map(|s| need(path.join(i), s)))
            .collect(),
        _ => Vec::new(),
    }
}

/// Where the config of state `id` is written in `fsm`'s document: `$.states[i].config`,
/// or, for the state an MCP hat added (`S.mcp`), `$.states[i].servers` of `S`.
pub fn config_path(fsm: &Fsm, id: &str) -> JsonPath {
    let states = fsm.document.get("states").and_then(Value::as_array);
    let index_of = |id: &str| {
        states
            .into_iter()
            .flatten()
            .position(|s| s.get("id").and_then(Value::as_str) == Some(id))
    };
    let root = JsonPath::root().join("states");
    if let Some(i) = index_of(id) {
        return root.join(i).join("config");
    }
    match id.strip_suffix(".mcp").and_then(index_of) {
        Some(i) => root.join(i).join("servers"),
        None => JsonPath::root(),
    }
}

/// Where the MCP server `name` of `fsm` is written: `$.servers.NAME`, or in the state that
/// declares it (`$.states[i].servers.NAME`, `$.states[i].config.servers.NAME`).
pub fn server_path(fsm: &Fsm, name: &str) -> JsonPath {
    let document = &fsm.document;
    if document.get("servers").and_then(|s| s.get(name)).is_some() {
        return JsonPath::root().join("servers").join(name);
    }
    let states = document.get("states").and_then(Value::as_array);
    for (i, state) in states.into_iter().flatten().enumerate() {
        let at = JsonPath::root().join("states").join(i);
        if state.get("servers").and_then(|s| s.get(name)).is_some() {
            return at.join("servers").join(name);
        }
        if state
            .get("config")
            .and_then(|c| c.get("servers"))
            .and_then(|s| s.get(name))
            .is_some()
        {
            return at.join("config").join("servers").join(name);
        }
    }
    JsonPath::root().join("servers").join(name)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn environment_needs_are_the_keys_and_others_the_values() {
        let env = values_of(
            Touch::Environment,
            JsonPath::root().join("env"),
            &json!({"PATH": "/x", "LANG": "C"}),
        );
        let names: Vec<&str> = env.iter().map(|n| n.value.as_str()).collect();
        assert_eq!(names, ["PATH", "LANG"]);
        assert_eq!(env[1].path.to_string(), "$.env.LANG");
        let list = values_of(
            Touch::Model,
            JsonPath::root().join("fallback"),
            &json!(["a", 3, "b"]),
        );
        let paths: Vec<String> = list.iter().map(|n| n.path.to_string()).collect();
        assert_eq!(paths, ["$.fallback[0]", "$.fallback[2]"]);
    }
}
