//! Output enforcement: how the answer is constrained to the transitions' schemas.
//!
//! - `prompt`: the schemas are in the prompt; the answer is parsed and validated.
//! - `json_schema`: the provider's structured output. Strict modes reject a root
//!   `oneOf`/`anyOf`, so the union is wrapped: `{"type": "object", "required":
//!   ["event"], "properties": {"event": {"anyOf": [...]}}}`; the answer's `event` is the
//!   event ([`unwrap_answer`]).
//! - `tools`: one tool per transition; the call's arguments plus the transition's `id`
//!   are the event.
//! - `grammar`: token-level constrained decoding (the embedded model) with the plain
//!   union as the schema.
//!
//! Schemas sent to providers have the document's shared schemas inlined (`$ref` to
//! `#/$defs/NAME` replaced by the definition), since not every provider resolves
//! `$defs`; the prompt keeps the `$ref`s (the definitions are in the system message).
//! Each provider then lowers them to what its mode enforces ([`crate::lower`]): the
//! [`Enforcement`] itself stays provider-neutral (it is part of a recorded request's
//! digest).

use serde_json::{Map, Value, json};

pub use crate::request::Mode;
use crate::request::{Enforcement, ToolSpec};

/// The property of the wrapped answer holding the event.
pub const WRAP_KEY: &str = "event";

/// How deep `$ref`s are followed when inlined (recursive definitions stop there and
/// become `{}`).
const MAX_REF_DEPTH: usize = 16;

/// A transition offered to the model: its id `[from, to]`, its description and its
/// effective schema (with `$ref`s into `defs`).
#[derive(Debug, Clone)]
pub struct Route<'a> {
    /// The transition's id.
    pub id: &'a Value,
    /// Its target state.
    pub to: &'a str,
    /// Its description.
    pub description: Option<&'a str>,
    /// Its effective schema.
    pub schema: Value,
}

/// A route's effective schema as the answer must satisfy it: closed shared schemas opened
/// for the engine's `id` (as validation does, `claij_core::schema::compilable_effective`),
/// then every `$ref` inlined. Without the opening, a closed shared schema plus the
/// required `id` would be unsatisfiable for a constrained decoder.
fn enforceable(schema: &Value, defs: &Map<String, Value>) -> Value {
    let mut ready = claij_core::schema::compilable_effective(schema, defs);
    let opened = ready
        .as_object_mut()
        .and_then(|o| o.remove("$defs"))
        .and_then(|d| match d {
            Value::Object(m) => Some(m),
            _ => None,
        })
        .unwrap_or_else(|| defs.clone());
    decision_last(inline_refs(&ready, &opened, 0))
}

/// `schema` written so that an answer to it names its route last: an `allOf` (the form
/// an effective schema takes around a shared schema) merged into one object schema where
/// that keeps its meaning ([`crate::lower::merge::flatten`]), then `id` moved to the end
/// of `properties` and `required`. Constrained decoders and structured-output modes write
/// properties in schema order; a model that writes the content first chooses the route
/// with that content before it, not before it has read the facts that decide it.
fn decision_last(schema: Value) -> Value {
    let Value::Object(map) = schema else {
        return schema;
    };
    let mut map = crate::lower::merge::flatten(&map).unwrap_or(map);
    if let Some(Value::Object(properties)) = map.get_mut("properties")
        && let Some(id) = properties.shift_remove("id")
    {
        properties.insert("id".into(), id);
    }
    if let Some(Value::Array(required)) = map.get_mut("required")
        && let Some(at) = required.iter().position(|r| r == "id")
    {
        let id = required.remove(at);
        required.push(id);
    }
    Value::Object(map)
}

/// Builds the enforcement for `mode` over `routes`, inlining the shared `defs`.
pub fn build(mode: Mode, routes: &[Route<'_>], defs: &Map<String, Value>) -> Enforcement {
    let schemas: Vec<Value> = routes
        .iter()
        .map(|r| enforceable(&r.schema, defs))
        .collect();
    let union = match schemas.as_slice() {
        [one] => one.clone(),
        _ => json!({"anyOf": schemas}),
    };
    match mode {
        Mode::Prompt => Enforcement {
            mode,
            schema: union,
            tools: Vec::new(),
        },
        Mode::Grammar => Enforcement {
            mode,
            schema: union,
            tools: Vec::new(),
        },
        Mode::JsonSchema => Enforcement {
            mode,
            schema: json!({
                "type": "object",
                "properties": {WRAP_KEY: {"anyOf": schemas}},
                "required": [WRAP_KEY],
                "additionalProperties": false,
            }),
            tools: Vec::new(),
        },
        Mode::Tools => Enforcement {
            mode,
            schema: union,
            tools: routes
                .iter()
                .zip(schemas)
                .map(|(r, s)| ToolSpec {
                    name: tool_name(r.to),
                    description: r
                        .description
                        .map(str::to_owned)
                        .unwrap_or_else(|| format!("Go to `{}`.", r.to)),
                    parameters: without_id(s),
                    id: r.id.clone(),
                })
                .collect(),
        },
    }
}

/// The tool name for the transition to `to`: `to_` + the state id with characters
/// outside `[A-Za-z0-9_-]` replaced by `_` (the common subset of providers' tool names).
pub fn tool_name(to: &str) -> String {
    let mut out = String::from("to_");
    out.extend(to.chars().map(|c| {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            c
        } else {
            '_'
        }
    }));
    out.truncate(64);
    out
}

/// The event a tool call stands for: its arguments with the transition's `id`.
pub fn tool_event(enforcement: &Enforcement, name: &str, args: &Value) -> Option<Value> {
    let tool = enforcement.tools.iter().find(|t| t.name == name)?;
    let mut event = match args {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    event.insert("id".into(), tool.id.clone());
    Some(Value::Object(event))
}

/// The union inside a `json_schema` enforcement's wrapper (`{"properties": {"event":
/// UNION}}`), for the providers whose structured output takes a root union (llama.cpp's
/// `json_object` grammar): the wrapper exists for strict modes that reject one, and a
/// small model writing under it mistakes the word for part of the task (measured on the
/// labelled set: Qwen2.5-Coder-0.5B behind the stock server wrote `"name": "extract"`,
/// the state's name, in 16 of 16 extractions; docs/EMBEDDED-MODEL.md). Any other schema
/// as it is.
pub fn unwrapped(schema: &Value) -> &Value {
    schema
        .get("properties")
        .and_then(|p| p.get(WRAP_KEY))
        .filter(|_| schema.get("required") == Some(&json!([WRAP_KEY])))
        .unwrap_or(schema)
}

/// The event inside a `json_schema` answer (`{"event": {...}}`); other answers as they are.
pub fn unwrap_answer(mode: Mode, answer: Value) -> Value {
    match (mode, answer) {
        (Mode::JsonSchema, Value::Object(mut m)) if m.len() == 1 && m.contains_key(WRAP_KEY) => {
            m.remove(WRAP_KEY).unwrap_or(Value::Null)
        }
        (_, a) => a,
    }
}

/// A schema with `id` removed from `properties` and `required` (tool arguments).
fn without_id(mut schema: Value) -> Value {
    if let Value::Object(m) = &mut schema {
        if let Some(Value::Object(p)) = m.get_mut("properties") {
            p.remove("id");
        }
        if let Some(Value::Array(r)) = m.get_mut("required") {
            r.retain(|v| v != "id");
        }
    }
    schema
}

/// `schema` with every `{"$ref": "#/$defs/NAME"}` replaced by the definition.
pub fn inline_refs(schema: &Value, defs: &Map<String, Value>, depth: usize) -> Value {
    match schema {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref")
                && let Some(name) = r.strip_prefix("#/$defs/")
            {
                if depth >= MAX_REF_DEPTH {
                    return json!({});
                }
                let Some(def) = defs.get(name) else {
                    return schema.clone();
                };
                let mut inlined = inline_refs(def, defs, depth + 1);
                // Keywords beside the `$ref` (a description, say) are kept.
                if let Value::Object(target) = &mut inlined {
                    for (k, v) in m {
                        if k != "$ref" {
                            target.insert(k.clone(), inline_refs(v, defs, depth));
                        }
                    }
                }
                return inlined;
            }
            Value::Object(
                m.iter()
                    .filter(|(k, _)| k.as_str() != "$defs")
                    .map(|(k, v)| (k.clone(), inline_refs(v, defs, depth)))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(|v| inline_refs(v, defs, depth)).collect()),
        v => v.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes(ids: &[(&Value, &'static str)]) -> Vec<Route<'static>> {
        ids.iter()
            .map(|(id, to)| Route {
                id: Box::leak(Box::new((*id).clone())),
                to,
                description: None,
                schema: json!({"type": "object", "required": ["id", "x"], "properties": {
                    "id": {"const": id}, "x": {"$ref": "#/$defs/n"}}}),
            })
            .collect()
    }

    fn keys(schema: &Value, key: &str) -> Vec<String> {
        match &schema[key] {
            Value::Object(m) => m.keys().cloned().collect(),
            Value::Array(a) => a
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        }
    }

    #[test]
    fn the_route_is_written_last_around_a_shared_schema_too() {
        let defs: Map<String, Value> = serde_json::from_value(json!({"facts": {
            "type": "object", "required": ["a", "b"],
            "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}}))
        .unwrap();
        let id = json!(["s", "t"]);
        let plain = build(Mode::Grammar, &routes(&[(&id, "t")]), &defs);
        assert_eq!(keys(&plain.schema, "properties"), ["x", "id"]);
        assert_eq!(keys(&plain.schema, "required"), ["x", "id"]);
        // The effective schema around a `$ref` is an `allOf`: merged, then `id` last.
        let shared =
            claij_core::schema::effective_schema("s", "t", Some(&json!({"$ref": "#/$defs/facts"})));
        let route = Route {
            id: &id,
            to: "t",
            description: None,
            schema: shared,
        };
        let e = build(Mode::Grammar, &[route], &defs);
        assert!(e.schema.get("allOf").is_none(), "{}", e.schema);
        assert_eq!(keys(&e.schema, "properties"), ["a", "b", "id"]);
        assert_eq!(keys(&e.schema, "required"), ["a", "b", "id"]);
    }

    #[test]
    fn json_schema_wraps_the_union_in_an_object_with_any_of() {
        let defs: Map<String, Value> =
            serde_json::from_value(json!({"n": {"type": "integer"}})).unwrap();
        let a = json!(["s", "a"]);
        let b = json!(["s", "b"]);
        let e = build(Mode::JsonSchema, &routes(&[(&a, "a"), (&b, "b")]), &defs);
        assert_eq!(e.schema["type"], "object");
        assert_eq!(
            e.schema["properties"]["event"]["anyOf"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        assert_eq!(
            e.schema["properties"]["event"]["anyOf"][0]["properties"]["x"],
            json!({"type": "integer"}),
            "refs are inlined"
        );
        assert_eq!(
            unwrap_answer(Mode::JsonSchema, json!({"event": {"id": ["s", "a"]}})),
            json!({"id": ["s", "a"]})
        );
    }

    #[test]
    fn tools_are_one_per_transition_and_calls_become_events() {
        let a = json!(["s", "a b"]);
        let e = build(Mode::Tools, &routes(&[(&a, "a b")]), &Map::new());
        assert_eq!(e.tools[0].name, "to_a_b");
        assert!(e.tools[0].parameters["properties"].get("id").is_none());
        assert_eq!(
            tool_event(&e, "to_a_b", &json!({"x": 1})).unwrap(),
            json!({"x": 1, "id": ["s", "a b"]})
        );
        assert!(tool_event(&e, "nope", &json!({})).is_none());
    }

    #[test]
    fn recursive_refs_stop() {
        let defs: Map<String, Value> = serde_json::from_value(
            json!({"t": {"type": "object", "properties": {"k": {"$ref": "#/$defs/t"}}}}),
        )
        .unwrap();
        let s = inline_refs(&json!({"$ref": "#/$defs/t"}), &defs, 0);
        assert_eq!(s["type"], "object");
    }
}
