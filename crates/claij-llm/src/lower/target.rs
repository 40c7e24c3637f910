//! The targets: which keywords each structured-output mode enforces, and the rewrites
//! each needs.

use serde_json::{Map, Value, json};

use super::{Note, nullable};

/// A structured-output mode a schema is lowered for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// OpenAI's `json_schema` with `strict: true`: its supported subset, every object
    /// closed, every property required (optional ones nullable).
    OpenAiStrict,
    /// llama.cpp / llama-cpp-python's `json_object` with a schema, turned into a grammar
    /// that ignores `allOf` and numeric bounds.
    JsonObject,
    /// Gemini's `responseJsonSchema` (an OpenAPI-style subset).
    Gemini,
    /// Tool input schemas (Anthropic, OpenAI-compatible tools): JSON Schema as written,
    /// with `allOf` merged.
    Tools,
}

/// OpenAI strict mode's keywords.
const OPENAI_STRICT: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "description",
    "title",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
    "$defs",
    "$ref",
];

/// OpenAI strict mode's string formats.
const OPENAI_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// The keywords llama-cpp-python's schema-to-grammar conversion enforces.
const JSON_OBJECT: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "enum",
    "const",
    "anyOf",
    "oneOf",
    "pattern",
    "format",
    "minLength",
    "maxLength",
    "description",
    "title",
    "$defs",
    "$ref",
];

/// Gemini's keywords (`additionalProperties` is refused by its older `responseSchema`
/// and left out).
const GEMINI: &[&str] = &[
    "type",
    "properties",
    "required",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "enum",
    "anyOf",
    "description",
    "title",
    "format",
    "minimum",
    "maximum",
    "nullable",
    "propertyOrdering",
];

/// Annotations dropped without a note (they constrain nothing).
const ANNOTATIONS: &[&str] = &["$schema", "$id", "$comment", "examples", "default", "title"];

impl Target {
    /// Whether the target is OpenAI's strict mode.
    pub fn strict(self) -> bool {
        self == Target::OpenAiStrict
    }

    fn keywords(self) -> Option<&'static [&'static str]> {
        match self {
            Target::OpenAiStrict => Some(OPENAI_STRICT),
            Target::JsonObject => Some(JSON_OBJECT),
            Target::Gemini => Some(GEMINI),
            Target::Tools => None,
        }
    }

    /// Rewrites one schema (its subschemas already lowered) for the target.
    pub(super) fn apply(self, map: &mut Map<String, Value>, at: &str, notes: &mut Vec<Note>) {
        if self == Target::Gemini {
            gemini_const(map);
        }
        if (self.strict() || self == Target::Gemini)
            && map.get("oneOf").is_some()
            && !map.contains_key("anyOf")
        {
            // Exactly one becomes at least one (neither has `oneOf`).
            if let Some(branches) = map.remove("oneOf") {
                map.insert("anyOf".into(), branches);
                relaxed(notes, at, "oneOf");
            }
        }
        if self.strict()
            && let Some(Value::String(f)) = map.get("format")
            && !OPENAI_FORMATS.contains(&f.as_str())
        {
            map.remove("format");
            relaxed(notes, at, "format");
        }
        if let Some(allowed) = self.keywords() {
            let dropped: Vec<String> = map
                .keys()
                .filter(|k| !allowed.contains(&k.as_str()) && k.as_str() != "allOf")
                .cloned()
                .collect();
            for k in dropped {
                map.remove(&k);
                if !ANNOTATIONS.contains(&k.as_str()) {
                    relaxed(notes, at, &k);
                }
            }
            if map.contains_key("allOf") {
                // Only there when the merge was refused (noted then).
                if self.strict() {
                    notes.push(Note::Kept {
                        at: format!("{at}/allOf"),
                        why: "`allOf` is outside the strict subset".into(),
                    });
                }
            }
        }
        if self.strict() {
            strict_object(map, at, notes);
        }
    }
}

fn relaxed(notes: &mut Vec<Note>, at: &str, keyword: &str) {
    notes.push(Note::Relaxed {
        at: at.to_owned(),
        keyword: keyword.to_owned(),
    });
}

/// Gemini: `const` becomes a one-value `enum`.
fn gemini_const(map: &mut Map<String, Value>) {
    let Some(c) = map.remove("const") else { return };
    match map.get("enum").and_then(Value::as_array) {
        Some(values) if !values.contains(&c) => {
            // Nothing satisfies both: keep the contradiction visible.
            map.insert("enum".into(), json!([]));
        }
        Some(_) | None => {
            map.insert("enum".into(), json!([c]));
        }
    }
}

/// OpenAI strict: objects closed, every property required, optional ones nullable;
/// what cannot be said in the subset is kept (and `strict` is then off).
fn strict_object(map: &mut Map<String, Value>, at: &str, notes: &mut Vec<Note>) {
    let is_object = match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        None => map.contains_key("properties"),
        _ => false,
    };
    let is_array = match map.get("type") {
        Some(Value::String(t)) => t == "array",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "array"),
        _ => false,
    };
    let says_something = ["type", "enum", "const", "anyOf", "$ref", "allOf"]
        .iter()
        .any(|k| map.contains_key(*k));
    if !says_something && !is_object {
        notes.push(Note::Kept {
            at: at.to_owned(),
            why: "a schema admitting any value is outside the strict subset".into(),
        });
        return;
    }
    if is_array && !map.contains_key("items") {
        notes.push(Note::Kept {
            at: at.to_owned(),
            why: "an array without `items` is outside the strict subset".into(),
        });
    }
    if !is_object {
        return;
    }
    if !map.contains_key("type") {
        map.insert("type".into(), json!("object"));
    }
    let required: Vec<Value> = map
        .get("required")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let declared = |name: &Value| {
        name.as_str().is_some_and(|n| {
            map.get("properties")
                .and_then(Value::as_object)
                .is_some_and(|p| p.contains_key(n))
        })
    };
    let undeclared: Vec<Value> = required.iter().filter(|r| !declared(r)).cloned().collect();
    if !undeclared.is_empty() {
        // Required with no schema (any value): not expressible, and closing the object
        // would make it unsatisfiable.
        notes.push(Note::Kept {
            at: format!("{at}/required"),
            why: format!("{undeclared:?} required without a schema"),
        });
    }
    match map.get("additionalProperties") {
        None | Some(Value::Bool(true)) if undeclared.is_empty() => {
            map.insert("additionalProperties".into(), json!(false));
        }
        None | Some(Value::Bool(true) | Value::Bool(false)) => {}
        Some(_) => notes.push(Note::Kept {
            at: format!("{at}/additionalProperties"),
            why: "`additionalProperties` as a schema is outside the strict subset".into(),
        }),
    }
    let Some(Value::Object(props)) = map.get_mut("properties") else {
        map.insert("properties".into(), json!({}));
        map.insert("required".into(), Value::Array(undeclared));
        return;
    };
    let mut all = Vec::with_capacity(props.len() + undeclared.len());
    for (name, schema) in props.iter_mut() {
        all.push(Value::String(name.clone()));
        if !required.iter().any(|r| r == name) {
            *schema = nullable(std::mem::take(schema));
        }
    }
    all.extend(undeclared);
    map.insert("required".into(), Value::Array(all));
}
