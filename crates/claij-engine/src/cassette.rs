//! The cassette: where a run's exchanges with the world outside it — the programs
//! `command` states start, the requests `mcp` states make (and the servers' listings) —
//! are recorded, or answered from when a run is replayed (`claij run --record` /
//! `--replay`). The engine only defines the seam: the binary installs an implementation
//! (the model layer's tape) in the registry ([`ActionRegistry::set_cassette`]) and the
//! actions ask it through [`ActionHost::cassette`].
//!
//! A request is the JSON of what was asked, without what changes from one run to the
//! next (run ids, trace contexts, idempotency keys); a reply is the JSON of what the
//! action consumed. Replaying, nothing is started: a request the cassette does not hold
//! is a failure naming the state and what was asked.
//!
//! [`ActionRegistry::set_cassette`]: crate::ActionRegistry::set_cassette
//! [`ActionHost::cassette`]: crate::ActionHost::cassette

use serde_json::Value;

/// What an exchange is with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A program a `command` state started: argv, stdin, the variables the state sets.
    Program,
    /// An MCP server: server, method, params.
    Mcp,
}

impl Kind {
    /// Its name in a cassette (`program`, `mcp`).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Program => "program",
            Kind::Mcp => "mcp",
        }
    }
}

/// Records exchanges, or answers them as recorded.
pub trait Cassette: Send + Sync + std::fmt::Debug {
    /// Whether requests are answered from the cassette (nothing is started).
    fn replaying(&self) -> bool;

    /// The reply recorded for `request` of `kind`, made by `state` (replaying; equal
    /// requests are answered in recorded order). `Err`: the cassette holds none (the
    /// message names the state and what was asked).
    fn replay(&self, kind: Kind, state: &str, request: &Value) -> Result<Value, String>;

    /// Stores the exchange (recording; a no-op when replaying). `Err`: the cassette
    /// could not be written (the message names it).
    fn record(&self, kind: Kind, state: &str, request: &Value, reply: &Value)
    -> Result<(), String>;
}

/// `value` with every object's keys in sorted order, so that equal requests have equal
/// JSON whatever order their keys were written in.
pub fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), canonical(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_does_not_depend_on_key_order() {
        let a = json!({"b": 1, "a": {"d": [{"y": 1, "x": 2}], "c": 3}});
        let b = json!({"a": {"c": 3, "d": [{"x": 2, "y": 1}]}, "b": 1});
        assert_eq!(
            serde_json::to_string(&canonical(&a)).ok(),
            serde_json::to_string(&canonical(&b)).ok()
        );
    }
}
