//! The MCP hat: a state that lists `servers` gets a tool-use loop added on load.
//!
//! For a state `S` (any action but `mcp`) with `servers: [a, b]` (names from the
//! document's top-level `servers`) or `servers: {a: {command: …}}` (given in place, lifted
//! into the top-level section), the loader adds:
//!
//! - a state `S.mcp` with action `mcp` and `config: {servers: [a, b]}`;
//! - a transition `[S, S.mcp]` with the dynamic schema `mcp:a,b:request` (the calls `S`
//!   may make: one `oneOf` branch per tool, resource and prompt of those servers);
//! - a transition `[S.mcp, S]` with the dynamic schema `mcp:a,b:response` (the results).
//!
//! The document kept in [`Fsm::document`](crate::Fsm) is the one authored; the expansion
//! is repeated, identically, whenever it is loaded.

use serde_json::{Map, Value, json};

use crate::diagnostic::{Collector, JsonPath, Problem};

/// The suffix of the state a hat adds (`S` → `S.mcp`).
pub(crate) const HAT_SUFFIX: &str = ".mcp";

/// The action run by the states hats add.
pub(crate) const MCP_ACTION: &str = "mcp";

/// Expands every state's `servers` (see the module docs). Problems (an unknown server
/// name, a server given twice differently, a clash with an existing state) go to `found`.
pub(crate) fn expand(document: &Value, found: &mut Collector) -> Value {
    let mut doc = document.clone();
    let Some(states) = document.get("states").and_then(Value::as_array) else {
        return doc;
    };
    let mut servers: Map<String, Value> = document
        .get("servers")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let ids: Vec<&str> = states.iter().filter_map(|s| s["id"].as_str()).collect();
    let mut added_states = Vec::new();
    let mut added_xitions = Vec::new();
    for (i, state) in states.iter().enumerate() {
        let Some(given) = state.get("servers") else {
            continue;
        };
        let at = JsonPath::root().join("states").join(i).join("servers");
        let Some(id) = state["id"].as_str() else {
            continue;
        };
        let mut names = Vec::new();
        match given {
            Value::Array(list) => {
                for (j, name) in list.iter().enumerate() {
                    let Some(name) = name.as_str() else { continue };
                    if !servers.contains_key(name) {
                        found.push(
                            Problem::Format,
                            at.join(j),
                            format!(
                                "no server `{name}` in the document's `servers` (known: {})",
                                known(&servers)
                            ),
                        );
                    }
                    names.push(name.to_owned());
                }
            }
            Value::Object(inline) => {
                for (name, spec) in inline {
                    match servers.get(name) {
                        Some(existing) if existing != spec => found.push(
                            Problem::Duplicate,
                            at.join(name),
                            format!(
                                "server `{name}` is already declared differently; give it another name or use the declared one"
                            ),
                        ),
                        _ => {
                            servers.insert(name.clone(), spec.clone());
                        }
                    }
                    names.push(name.clone());
                }
            }
            _ => continue, // reported by the meta-schema
        }
        if state["action"] == MCP_ACTION {
            found.push(
                Problem::Format,
                at,
                "an `mcp` state names its servers in `config.servers`; `servers` on a state adds an `mcp` state to it",
            );
            continue;
        }
        let hat = format!("{id}{HAT_SUFFIX}");
        if ids.contains(&hat.as_str()) {
            found.push(
                Problem::Duplicate,
                at,
                format!("the state `{hat}` the MCP hat adds already exists; rename it"),
            );
            continue;
        }
        let list = names.join(",");
        added_states.push(json!({
            "id": hat,
            "action": MCP_ACTION,
            "description": format!("MCP servers of `{id}`: {}", names.join(", ")),
            "config": {"servers": names},
        }));
        added_xitions.push(json!({
            "id": [id, hat],
            "description": format!("Call tools, read resources or get prompts of the MCP servers {}; the results come back here.", names.join(", ")),
            "schema": format!("mcp:{list}:request"),
        }));
        added_xitions.push(json!({
            "id": [hat, id],
            "description": "The results of the MCP requests.",
            "schema": format!("mcp:{list}:response"),
        }));
    }
    if added_states.is_empty() {
        return doc;
    }
    if let Value::Object(map) = &mut doc {
        if !servers.is_empty() {
            map.insert("servers".into(), Value::Object(servers));
        }
        if let Some(Value::Array(states)) = map.get_mut("states") {
            states.extend(added_states);
        }
        let key = if map.contains_key("transitions") {
            "transitions"
        } else {
            "xitions"
        };
        match map.get_mut(key) {
            Some(Value::Array(xitions)) => xitions.extend(added_xitions),
            _ => {
                map.insert(key.into(), Value::Array(added_xitions));
            }
        }
    }
    doc
}

fn known(servers: &Map<String, Value>) -> String {
    if servers.is_empty() {
        "none".to_owned()
    } else {
        servers
            .keys()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(servers: Value) -> Value {
        json!({
            "id": "f",
            "servers": {"files": {"command": "x"}},
            "states": [{"id": "a", "action": "llm", "servers": servers}, {"id": "end", "action": "end"}],
            "xitions": [{"id": ["start", "a"]}, {"id": ["a", "end"]}]
        })
    }

    #[test]
    fn a_hat_adds_its_state_and_transitions() {
        let mut found = Collector::new("f.json");
        let out = expand(&doc(json!(["files"])), &mut found);
        assert!(found.is_empty());
        assert_eq!(out["states"][2]["id"], "a.mcp");
        assert_eq!(out["states"][2]["config"], json!({"servers": ["files"]}));
        assert_eq!(out["xitions"][2]["id"], json!(["a", "a.mcp"]));
        assert_eq!(out["xitions"][2]["schema"], "mcp:files:request");
        assert_eq!(out["xitions"][3]["id"], json!(["a.mcp", "a"]));
        assert_eq!(out["xitions"][3]["schema"], "mcp:files:response");
    }

    #[test]
    fn inline_servers_are_lifted_and_conflicts_reported() {
        let mut found = Collector::new("f.json");
        let out = expand(
            &doc(json!({"web": {"url": "http://127.0.0.1:1/mcp"}})),
            &mut found,
        );
        assert!(found.is_empty());
        assert_eq!(out["servers"]["web"]["url"], "http://127.0.0.1:1/mcp");
        assert_eq!(out["xitions"][2]["schema"], "mcp:web:request");

        let mut found = Collector::new("f.json");
        expand(&doc(json!({"files": {"command": "y"}})), &mut found);
        let report = found.finish().unwrap_err().to_string();
        assert!(report.contains("$.states[0].servers.files"), "{report}");

        let mut found = Collector::new("f.json");
        expand(&doc(json!(["nope"])), &mut found);
        let report = found.finish().unwrap_err().to_string();
        assert!(
            report.contains("$.states[0].servers[0]") && report.contains("`files`"),
            "{report}"
        );
    }
}
