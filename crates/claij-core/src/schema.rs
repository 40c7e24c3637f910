//! Transition schemas: the effective schema (`id == [from, to]` added), compilation with
//! the document's shared `schemas` as `$defs`, validation with every error, and the trait
//! for dynamic (string-named) schemas.

use std::fmt;
use std::sync::Arc;

use jsonschema::ValidationError;
use jsonschema::error::ValidationErrorKind;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::diagnostic::{escape, unescape};

/// The keywords whose failures are about fields an object schema does not allow.
const UNKNOWN_FIELD_KEYWORDS: [&str; 2] = ["additionalProperties", "unevaluatedProperties"];

/// The JSON Schema type names.
const JSON_TYPES: [&str; 7] = [
    "array", "boolean", "integer", "null", "number", "object", "string",
];

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

impl ValidationIssue {
    /// The field an object schema does not allow (`additionalProperties: false`), when
    /// that is what this issue is about; the issue is then located at that field.
    pub fn unknown_field(&self) -> Option<String> {
        let keyword = self.schema_path.rsplit('/').next()?;
        if !UNKNOWN_FIELD_KEYWORDS.contains(&keyword) {
            return None;
        }
        let (_, field) = self.instance_path.rsplit_once('/')?;
        Some(unescape(field))
    }
}

/// The one wording of an unknown field, for documents and action configs alike:
/// "unknown field `name`{note}; known fields: a, b" (no list when `known` is empty).
pub(crate) fn unknown_field_message(field: &str, note: &str, known: &[String]) -> String {
    let mut message = format!("unknown field `{field}`{note}");
    if !known.is_empty() {
        message.push_str("; known fields: ");
        message.push_str(&known.join(", "));
    }
    message
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
    /// Where inside the schema: a JSON Pointer to the bad keyword (empty for the schema
    /// itself, or when not known).
    pub pointer: String,
    /// Why.
    pub message: String,
}

impl SchemaError {
    /// An error about the schema as a whole.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            pointer: String::new(),
            message: message.into(),
        }
    }

    /// An error jsonschema found in a schema (checking it against the draft's
    /// meta-schema, or compiling it): the error's instance is the schema, so its instance
    /// path locates the bad keyword.
    fn from_meta(e: &ValidationError<'_>) -> Self {
        let message = if e.schema_path().as_str().ends_with("/properties/type/anyOf") {
            bad_type_message(e.instance())
        } else {
            e.to_string()
        };
        Self {
            pointer: e.instance_path().to_string(),
            message,
        }
    }
}

/// Why the value of a `type` keyword is not one.
fn bad_type_message(value: &Value) -> String {
    let unknown = match value {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => items
            .iter()
            .find(|v| !v.as_str().is_some_and(|t| JSON_TYPES.contains(&t)))
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned)),
        _ => None,
    };
    let types = JSON_TYPES.join(", ");
    match unknown {
        Some(name) => format!("`{name}` is not a JSON Schema type; types are {types}"),
        None => format!("`type` is a type name or a list of distinct ones; types are {types}"),
    }
}

/// Every way `schema` breaks the JSON Schema (draft 2020-12) meta-schema, each located
/// at its keyword. Empty for a well-formed schema, which may still fail to compile (a
/// `$ref` that does not resolve, say).
pub(crate) fn meta_errors(schema: &Value) -> Vec<SchemaError> {
    jsonschema::draft202012::meta::validator()
        .iter_errors(schema)
        .map(|e| SchemaError::from_meta(&e))
        .collect()
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
            .map_err(|e| SchemaError::from_meta(&e))?;
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

    /// Every reason `instance` does not satisfy the schema (empty when it does), each
    /// located as precisely as possible: an unknown field (see
    /// [`ValidationIssue::unknown_field`]) or a property name that does not fit
    /// `propertyNames` at that field, one issue per field.
    pub fn issues(&self, instance: &Value) -> Vec<ValidationIssue> {
        let mut issues = Vec::new();
        for e in self.validator.iter_errors(instance) {
            self.push_issues(&e, instance, &mut issues);
        }
        issues
    }

    fn push_issues(
        &self,
        e: &ValidationError<'_>,
        instance: &Value,
        out: &mut Vec<ValidationIssue>,
    ) {
        let at = e.instance_path().to_string();
        let schema_path = e.schema_path().to_string();
        let issue = |instance_path: String, message: String| ValidationIssue {
            instance_path,
            schema_path: schema_path.clone(),
            message,
        };
        let field_at = |field: &str| format!("{at}/{}", escape(field));
        match e.kind() {
            ValidationErrorKind::AdditionalProperties { unexpected }
            | ValidationErrorKind::UnevaluatedProperties { unexpected } => {
                for field in unexpected {
                    out.push(issue(
                        field_at(field),
                        self.unknown_field(field, &schema_path),
                    ));
                }
            }
            // `additionalProperties: false` beside no `properties` is reported as a false
            // schema at the object, naming only its first field: every field is unknown.
            ValidationErrorKind::FalseSchema if schema_path.ends_with("/additionalProperties") => {
                let fields = instance.pointer(&at).and_then(Value::as_object);
                for field in fields.into_iter().flat_map(|map| map.keys()) {
                    out.push(issue(
                        field_at(field),
                        self.unknown_field(field, &schema_path),
                    ));
                }
            }
            ValidationErrorKind::FalseSchema if parent_is_object(instance, &at) => {
                let field = at.rsplit('/').next().map(unescape).unwrap_or_default();
                out.push(issue(at, format!("`{field}` is not allowed here")));
            }
            ValidationErrorKind::PropertyNames { error } => {
                let name = error.instance().as_str().map(field_at).unwrap_or(at);
                out.push(issue(name, error.to_string()));
            }
            _ => out.push(issue(at, e.to_string())),
        }
    }

    /// The message for `field`, rejected by the object schema whose `additionalProperties`
    /// (or `unevaluatedProperties`) is at `schema_path`.
    fn unknown_field(&self, field: &str, schema_path: &str) -> String {
        unknown_field_message(field, "", &self.known_fields(schema_path))
    }

    /// The fields declared (`properties`) by the object schema owning the keyword at
    /// `schema_path` (a path into [`source`](Self::source)), in order; empty when unknown.
    pub(crate) fn known_fields(&self, schema_path: &str) -> Vec<String> {
        let owner = schema_path.rsplit_once('/').map_or("", |(owner, _)| owner);
        self.source
            .pointer(owner)
            .and_then(|schema| schema.get("properties"))
            .and_then(Value::as_object)
            .map(|properties| properties.keys().cloned().collect())
            .unwrap_or_default()
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

/// Whether the value at JSON Pointer `at` inside `instance` is a field of an object.
fn parent_is_object(instance: &Value, at: &str) -> bool {
    at.rsplit_once('/')
        .and_then(|(parent, _)| instance.pointer(parent))
        .is_some_and(Value::is_object)
}

/// The `id` value of transition `[from, to]`.
pub(crate) fn transition_id(from: &str, to: &str) -> Value {
    json!([from, to])
}

/// The effective schema of a transition: the author's schema with `id == [from, to]`
/// required. An object schema gets `id` merged into its `properties`, last (readable for
/// models, and the order a constrained answer is written in); anything else is wrapped
/// in `allOf`. Refers to shared schemas by `$ref`.
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
            // `id` last: a model writes the content first and commits to a route after
            // it, with what it wrote before it (a small model that names the route first
            // picks it before it has read the facts that decide it).
            let mut properties = Map::new();
            if let Some(Value::Object(existing)) = map.get("properties") {
                for (k, v) in existing {
                    if k != "id" {
                        properties.insert(k.clone(), v.clone());
                    }
                }
            }
            properties.insert("id".into(), id_schema);
            let mut required: Vec<Value> = match map.get("required") {
                Some(Value::Array(existing)) => {
                    existing.iter().filter(|v| *v != "id").cloned().collect()
                }
                _ => Vec::new(),
            };
            required.push(json!("id"));
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
            "allOf": [other],
            "properties": { "id": id_schema },
            "required": ["id"],
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

/// An effective schema made ready to compile: shared `schemas` attached as `$defs`, and
/// every closed object schema that applies to the event itself (reached from the root
/// through `$ref`, `allOf`, `anyOf`, `oneOf`, `if`/`then`/`else`) opened for the
/// engine's `id` property. Without this, `{"$ref": "#/$defs/answer"}` to a schema with
/// `additionalProperties: false` would refuse every event, since events carry `id`.
/// (A shared schema patched this way also tolerates an `id` where it is used nested.)
pub fn compilable_effective(effective: &Value, defs: &Map<String, Value>) -> Value {
    let mut root = with_defs(effective, defs);
    let mut visited_defs = Vec::new();
    open_for_id(&mut root, "", &mut visited_defs, 0);
    root
}

/// The keywords whose subschemas apply to the same instance as their parent.
const SAME_INSTANCE: [&str; 6] = ["allOf", "anyOf", "oneOf", "if", "then", "else"];

/// Adds `id` to the properties of each closed object schema reached from `pointer`
/// (`""` for the root) that applies to the event itself.
fn open_for_id(root: &mut Value, pointer: &str, visited_defs: &mut Vec<String>, depth: usize) {
    if depth > 32 {
        return;
    }
    let Some(schema) = root.pointer_mut(pointer) else {
        return;
    };
    let Value::Object(map) = schema else { return };
    let closed = map.get("additionalProperties") == Some(&Value::Bool(false))
        || map.get("unevaluatedProperties") == Some(&Value::Bool(false));
    if closed {
        let properties = map
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(properties) = properties {
            properties.entry("id").or_insert(Value::Bool(true));
        }
    }
    let mut next: Vec<String> = Vec::new();
    if let Some(Value::String(target)) = map.get("$ref")
        && let Some(name) = target.strip_prefix("#/$defs/")
        && !name.contains('/')
        && !visited_defs.iter().any(|v| v == name)
    {
        visited_defs.push(name.to_owned());
        next.push(format!("/$defs/{}", crate::diagnostic::escape(name)));
    }
    for keyword in SAME_INSTANCE {
        match map.get(keyword) {
            Some(Value::Array(items)) => {
                next.extend((0..items.len()).map(|i| format!("{pointer}/{keyword}/{i}")));
            }
            Some(Value::Object(_)) => next.push(format!("{pointer}/{keyword}")),
            _ => {}
        }
    }
    for p in next {
        open_for_id(root, &p, visited_defs, depth + 1);
    }
}

/// Every `$ref` in `schema` with its JSON Pointer (relative to `schema`).
pub(crate) fn refs_in(schema: &Value) -> Vec<(String, String)> {
    let mut found = Vec::new();
    collect_refs(schema, String::new(), &mut found);
    found
}

fn collect_refs(value: &Value, at: String, found: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let here = format!("{at}/{}", escape(k));
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
pub(crate) fn local_ref_resolves(target: &str, root: &Value) -> Option<bool> {
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
        let s =
            json!({"type": "object", "required": ["x"], "properties": {"x": {"type": "integer"}}});
        let e = effective_schema("a", "b", Some(&s));
        assert_eq!(e["properties"]["id"], json!({"const": ["a", "b"]}));
        assert_eq!(e["required"], json!(["x", "id"]));
        let order: Vec<&str> = e["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(order, ["x", "id"], "the route comes after the content");
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

    fn located(schema: Value, instance: Value) -> Vec<(String, String)> {
        let compiled = CompiledSchema::compile(schema).unwrap();
        compiled
            .issues(&instance)
            .into_iter()
            .map(|i| (i.instance_path, i.message))
            .collect()
    }

    #[test]
    fn unknown_fields_are_located_one_issue_each_with_the_known_ones() {
        let declared = json!({"properties": {"a": {}, "b": {}}, "additionalProperties": false});
        let expected = |field: &str| {
            (
                format!("/{field}"),
                format!("unknown field `{field}`; known fields: a, b"),
            )
        };
        assert_eq!(
            located(declared, json!({"a": 1, "x": 2, "y/z": 3})),
            vec![
                expected("x"),
                (
                    "/y~1z".into(),
                    "unknown field `y/z`; known fields: a, b".into()
                )
            ]
        );
        // Without `properties`, jsonschema reports a false schema naming the first field.
        let nothing = json!({"type": "object", "additionalProperties": false});
        assert_eq!(
            located(nothing, json!({"x": 1, "y": 2})),
            vec![
                ("/x".into(), "unknown field `x`".into()),
                ("/y".into(), "unknown field `y`".into())
            ]
        );
    }

    #[test]
    fn unknown_field_issues_name_their_field() {
        let compiled =
            CompiledSchema::compile(json!({"properties": {"o": {"additionalProperties": false}}}))
                .unwrap();
        let issues = compiled.issues(&json!({"o": {"a~b": 1}}));
        assert_eq!(issues[0].unknown_field().as_deref(), Some("a~b"));
        assert_eq!(
            compiled.known_fields(&issues[0].schema_path),
            Vec::<String>::new()
        );
        let typed =
            CompiledSchema::compile(json!({"properties": {"n": {"type": "string"}}})).unwrap();
        assert_eq!(typed.issues(&json!({"n": 1}))[0].unknown_field(), None);
    }

    #[test]
    fn forbidden_fields_and_bad_property_names_are_located_at_the_field() {
        let forbidden = json!({"properties": {"secret": false}});
        assert_eq!(
            located(forbidden, json!({"secret": 1})),
            vec![("/secret".into(), "`secret` is not allowed here".into())]
        );
        let names = json!({"propertyNames": {"pattern": "^[a-z]+$"}});
        assert_eq!(
            located(names, json!({"ok": 1, "not ok": 2})),
            vec![(
                "/not ok".into(),
                "\"not ok\" does not match \"^[a-z]+$\"".into()
            )]
        );
    }

    #[test]
    fn schema_errors_locate_the_bad_keyword() {
        let errors = meta_errors(&json!({
            "properties": {"a": {"type": "strng"}, "b": {"minLength": -1}}
        }));
        let shown: Vec<(&str, &str)> = errors
            .iter()
            .map(|e| (e.pointer.as_str(), e.message.as_str()))
            .collect();
        assert_eq!(
            shown,
            vec![
                (
                    "/properties/a/type",
                    "`strng` is not a JSON Schema type; types are array, boolean, integer, \
                     null, number, object, string"
                ),
                (
                    "/properties/b/minLength",
                    "-1 is less than the minimum of 0"
                ),
            ]
        );
        assert!(meta_errors(&json!({"type": ["string", "null"]})).is_empty());
        let err = CompiledSchema::compile(json!({"items": {"type": ["string", 5]}})).unwrap_err();
        assert_eq!(err.pointer, "/items/type");
        assert!(
            err.message.starts_with("`5` is not a JSON Schema type"),
            "{err}"
        );
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

#[cfg(test)]
mod closed_schema_tests {
    use super::*;

    fn compile_for(from: &str, to: &str, schema: Value, defs: Value) -> CompiledSchema {
        let defs: Map<String, Value> = serde_json::from_value(defs).unwrap();
        let effective = effective_schema(from, to, Some(&schema));
        CompiledSchema::compile(compilable_effective(&effective, &defs)).unwrap()
    }

    #[test]
    fn closed_shared_schemas_accept_the_engine_id() {
        let defs = json!({"answer": {"type": "object", "additionalProperties": false, "required": ["a"], "properties": {"a": {"type": "integer"}}}});
        let c = compile_for("x", "y", json!({"$ref": "#/$defs/answer"}), defs.clone());
        assert!(c.is_valid(&json!({"id": ["x", "y"], "a": 1})));
        assert!(
            !c.is_valid(&json!({"id": ["x", "y"], "a": 1, "b": 2})),
            "still closed to other fields"
        );
        assert!(
            !c.is_valid(&json!({"id": ["x", "z"], "a": 1})),
            "id is still checked"
        );

        let c = compile_for(
            "x",
            "y",
            json!({"allOf": [{"$ref": "#/$defs/answer"}, {"required": ["a"]}]}),
            defs,
        );
        assert!(c.is_valid(&json!({"id": ["x", "y"], "a": 1})));
    }

    #[test]
    fn nested_closed_schemas_are_left_alone() {
        let defs = json!({"point": {"type": "object", "additionalProperties": false, "properties": {"x": {}}}});
        let c = compile_for(
            "x",
            "y",
            json!({"type": "object", "properties": {"p": {"$ref": "#/$defs/point"}}}),
            defs,
        );
        assert!(c.is_valid(&json!({"id": ["x", "y"], "p": {"x": 1}})));
        assert!(!c.is_valid(&json!({"id": ["x", "y"], "p": {"x": 1, "id": 2}})));
    }
}
