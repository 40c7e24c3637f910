//! Transition schemas: the effective schema (`id == [from, to]` added), compilation with
//! the document's shared `schemas` as `$defs`, validation with every error, and the trait
//! for dynamic (string-named) schemas.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// One reason an instance does not satisfy a schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValidationIssue {
    /// Where in the instance (JSON Pointer; empty for the root).
    pub instance_path: String,
    /// Which part of the schema (JSON Pointer).
    pub schema_path: String,
    /// The reason.
    pub message: String,
}

impl fmt::Display for ValidationIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.instance_path.is_empty() {
            "/"
        } else {
            &self.instance_path
        };
        write!(f, "at {at}: {} (schema {})", self.message, self.schema_path)
    }
}

/// A schema could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SchemaError {
    /// Why.
    pub message: String,
}

/// A compiled JSON Schema (draft 2020-12) and the value it came from.
pub struct CompiledSchema {
    validator: jsonschema::Validator,
    /// The schema as compiled (including `$defs`).
    pub source: Value,
}

impl fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledSchema")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl CompiledSchema {
    /// Compiles `schema` (draft 2020-12). External references are not fetched.
    pub fn compile(schema: Value) -> Result<Self, SchemaError> {
        let validator = jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(&schema)
            .map_err(|e| SchemaError {
                message: e.to_string(),
            })?;
        Ok(Self {
            validator,
            source: schema,
        })
    }

    /// Whether `instance` satisfies the schema (the fast path: no error details).
    #[inline]
    pub fn is_valid(&self, instance: &Value) -> bool {
        self.validator.is_valid(instance)
    }

    /// Every reason `instance` does not satisfy the schema (empty when it does).
    pub fn issues(&self, instance: &Value) -> Vec<ValidationIssue> {
        self.validator
            .iter_errors(instance)
            .map(|e| ValidationIssue {
                instance_path: e.instance_path().to_string(),
                schema_path: e.schema_path().to_string(),
                message: e.to_string(),
            })
            .collect()
    }

    /// `Ok` when `instance` is valid, else every issue.
    #[inline]
    pub fn check(&self, instance: &Value) -> Result<(), Vec<ValidationIssue>> {
        if self.is_valid(instance) {
            Ok(())
        } else {
            Err(self.issues(instance))
        }
    }
}

/// The `id` value of transition `[from, to]`.
pub fn transition_id(from: &str, to: &str) -> Value {
    json!([from, to])
}

/// The effective schema of a transition: the author's schema with `id == [from, to]`
/// required. An object schema gets `id` merged into its `properties` (readable for
/// models); anything else is wrapped in `allOf`. Refers to shared schemas by `$ref`.
pub fn effective_schema(from: &str, to: &str, schema: Option<&Value>) -> Value {
    let id_schema = json!({ "const": transition_id(from, to) });
    match schema {
        None | Some(Value::Bool(true)) => json!({
            "type": "object",
            "properties": { "id": id_schema },
            "required": ["id"],
        }),
        Some(Value::Object(map)) if is_plain_object_schema(map) => {
            let mut out = Map::with_capacity(map.len() + 2);
            out.insert("type".into(), json!("object"));
            let mut properties = Map::new();
            properties.insert("id".into(), id_schema);
            if let Some(Value::Object(existing)) = map.get("properties") {
                for (k, v) in existing {
                    if k != "id" {
                        properties.insert(k.clone(), v.clone());
                    }
                }
            }
            let mut required = vec![json!("id")];
            if let Some(Value::Array(existing)) = map.get("required") {
                required.extend(existing.iter().filter(|v| *v != "id").cloned());
            }
            for (k, v) in map {
                match k.as_str() {
                    "properties" | "required" | "type" => {}
                    _ => {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
            out.insert("properties".into(), Value::Object(properties));
            out.insert("required".into(), Value::Array(required));
            Value::Object(out)
        }
        Some(other) => json!({
            "type": "object",
            "properties": { "id": id_schema },
            "required": ["id"],
            "allOf": [other],
        }),
    }
}

/// An object schema we can merge `id` into without changing its meaning: it says
/// `type: object` (or nothing about type but has `properties`) and uses no keyword
/// that would interact with a merged property.
fn is_plain_object_schema(map: &Map<String, Value>) -> bool {
    let typed_object = match map.get("type") {
        Some(Value::String(t)) => t == "object",
        None => map.contains_key("properties"),
        _ => false,
    };
    typed_object
        && !map.contains_key("$ref")
        && !map.contains_key("$defs")
        && !map.contains_key("$id")
        && !matches!(map.get("properties"), Some(p) if !p.is_object())
        && !matches!(map.get("required"), Some(r) if !r.is_array())
}

/// `schema` made compilable on its own: shared `schemas` attached as `$defs`.
pub fn with_defs(schema: &Value, defs: &Map<String, Value>) -> Value {
    match schema {
        Value::Object(map) if !defs.is_empty() => {
            let mut out = map.clone();
            out.insert("$defs".into(), Value::Object(defs.clone()));
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// Every `$ref` in `schema` with its JSON Pointer (relative to `schema`).
pub fn refs_in(schema: &Value) -> Vec<(String, String)> {
    let mut found = Vec::new();
    collect_refs(schema, String::new(), &mut found);
    found
}

fn collect_refs(value: &Value, at: String, found: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let here = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                if k == "$ref" {
                    if let Value::String(target) = v {
                        found.push((here, target.clone()));
                    }
                } else if k != "const" && k != "enum" && k != "examples" && k != "default" {
                    collect_refs(v, here, found);
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                collect_refs(v, format!("{at}/{i}"), found);
            }
        }
        _ => {}
    }
}

/// Whether a local `$ref` (`#/$defs/name/...` or `#/...`) resolves inside `root`.
pub fn local_ref_resolves(target: &str, root: &Value) -> Option<bool> {
    let pointer = target.strip_prefix('#')?;
    Some(pointer.is_empty() || root.pointer(pointer).is_some())
}

/// Resolves string-named schemas (`"mcp:request"`) at transition time. The engine keeps a
/// registry of providers; the MCP client's tool cache is the first one.
pub trait DynamicSchemas: Send + Sync {
    /// Whether this provider serves `name` (checked when documents load).
    fn serves(&self, name: &str) -> bool;

    /// The current schema for `name` (without `id`; the engine adds it). Providers are
    /// expected to cache what they compile and recompile only when their source changes.
    fn resolve(&self, name: &str) -> Result<Arc<Value>, SchemaError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effective_schema_merges_id_into_object_schemas() {
        let s = json!({"type": "object", "required": ["x"], "properties": {"x": {"type": "integer"}}});
        let e = effective_schema("a", "b", Some(&s));
        assert_eq!(e["properties"]["id"], json!({"const": ["a", "b"]}));
        assert_eq!(e["required"], json!(["id", "x"]));
        let c = CompiledSchema::compile(e).unwrap();
        assert!(c.is_valid(&json!({"id": ["a", "b"], "x": 1})));
        assert!(!c.is_valid(&json!({"id": ["a", "c"], "x": 1})));
        assert!(!c.is_valid(&json!({"id": ["a", "b"]})));
    }

    #[test]
    fn effective_schema_wraps_refs() {
        let defs: Map<String, Value> =
            serde_json::from_value(json!({"n": {"type": "object", "required": ["n"]}})).unwrap();
        let e = effective_schema("start", "a", Some(&json!({"$ref": "#/$defs/n"})));
        let c = CompiledSchema::compile(with_defs(&e, &defs)).unwrap();
        assert!(c.is_valid(&json!({"id": ["start", "a"], "n": 1})));
        let issues = c.issues(&json!({"id": ["start", "a"]}));
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert!(issues[0].message.contains("\"n\""));
    }

    #[test]
    fn refs_are_found_with_their_paths() {
        let s = json!({"properties": {"a": {"$ref": "#/$defs/x"}, "b": {"items": [{"$ref": "#/$defs/y"}]}}});
        let refs = refs_in(&s);
        assert_eq!(
            refs,
            vec![
                ("/properties/a/$ref".into(), "#/$defs/x".into()),
                ("/properties/b/items/0/$ref".into(), "#/$defs/y".into())
            ]
        );
    }
}
