//! Lowering: a transition's schema (as [`crate::enforce`] builds it, `$ref`s inlined)
//! rewritten, for the provider at hand, into the subset of JSON Schema its structured
//! output mode enforces.
//!
//! - `allOf` is merged into one schema ([`merge`]); a merge that is not expressible (two
//!   branches that conflict, keywords whose meaning depends on their siblings) is kept
//!   as written and said so ([`Note::Kept`]).
//! - What is said beside a `oneOf`/`anyOf` (an MCP call's `id` beside its one branch per
//!   tool) is merged into each branch ([`merge::distribute`]): the grammar converters
//!   enforce a branch alone (not for [`Target::Tools`], read as written).
//! - Keywords the target does not enforce are dropped ([`Note::Relaxed`]): the lowered
//!   schema then admits more, which is safe, since the engine validates every answer
//!   against the original and feeds failures back.
//! - OpenAI's strict mode ([`Target::OpenAiStrict`]) also closes every object
//!   (`additionalProperties: false`) and requires every property, optional ones made
//!   nullable; [`nulls::strip`] takes the added `null`s out of its answers again.
//!
//! [`faithful`] checks a lowering on sample instances.

pub mod faithful;
pub mod merge;
pub mod nulls;
mod target;

use std::fmt;

use serde_json::{Map, Value, json};

pub use target::Target;

/// What a lowering changed beyond rewriting a schema into an equivalent one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// A keyword the target does not enforce was dropped (or weakened): the lowered
    /// schema admits more there.
    Relaxed {
        /// Where in the schema (JSON Pointer).
        at: String,
        /// The keyword.
        keyword: String,
    },
    /// A part could not be lowered and is sent as written: the target may not enforce
    /// it (OpenAI's strict mode rejects it; `strict` is then off).
    Kept {
        /// Where in the schema (JSON Pointer).
        at: String,
        /// Why.
        why: String,
    },
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Note::Relaxed { at, keyword } => write!(f, "at {at:?}: `{keyword}` not enforced"),
            Note::Kept { at, why } => write!(f, "at {at:?}: kept as written ({why})"),
        }
    }
}

/// A lowered schema and what the lowering could not keep.
#[derive(Debug, Clone, PartialEq)]
pub struct Lowered {
    /// The schema to send.
    pub schema: Value,
    /// The target it was lowered for.
    pub target: Target,
    /// Every keyword relaxed and every part kept as written, in schema order.
    pub notes: Vec<Note>,
}

impl Lowered {
    /// Whether the lowered schema is within the target's subset (nothing kept as
    /// written): for OpenAI, whether `strict: true` may be sent.
    pub fn complete(&self) -> bool {
        !self.notes.iter().any(|n| matches!(n, Note::Kept { .. }))
    }

    /// Whether the lowered schema admits exactly what the original does, up to the
    /// target's encoding (nullable optionals for OpenAI's strict mode): complete and
    /// nothing relaxed.
    pub fn exact(&self) -> bool {
        self.notes.is_empty()
    }
}

/// How deep schemas are walked; deeper parts are kept as written.
const MAX_DEPTH: usize = 64;

/// Lowers `schema` (with `$ref`s inlined) for `target`.
pub fn lower(schema: &Value, target: Target) -> Lowered {
    let mut notes = Vec::new();
    let schema = node(schema, target, "", 0, &mut notes);
    Lowered {
        schema,
        target,
        notes,
    }
}

/// Lowers one schema at JSON Pointer `at`.
fn node(schema: &Value, target: Target, at: &str, depth: usize, notes: &mut Vec<Note>) -> Value {
    let map = match schema {
        Value::Object(map) => map,
        Value::Bool(b) => {
            if target.strict() {
                notes.push(Note::Kept {
                    at: at.to_owned(),
                    why: format!("the schema `{b}` is not in the strict subset"),
                });
            }
            return schema.clone();
        }
        other => return other.clone(),
    };
    if depth > MAX_DEPTH {
        notes.push(Note::Kept {
            at: at.to_owned(),
            why: "nested too deep".into(),
        });
        return schema.clone();
    }
    let mut map = match merge::flatten(map) {
        Ok(merged) => merged,
        Err(why) => {
            notes.push(Note::Kept {
                at: format!("{at}/allOf"),
                why,
            });
            map.clone()
        }
    };
    // What is said beside a `oneOf`/`anyOf` goes into its branches, for the targets that
    // enforce the branches alone (JSON Schema tools read it as written).
    if target != Target::Tools {
        match merge::distribute(&map) {
            Ok(distributed) => map = distributed,
            Err(why) => notes.push(Note::Kept {
                at: at.to_owned(),
                why: format!("what is beside `oneOf`/`anyOf` could not go into it: {why}"),
            }),
        }
    }
    // The subschemas, lowered.
    for (keyword, value) in map.iter_mut() {
        let here = format!("{at}/{}", escape(keyword));
        match (keyword.as_str(), value) {
            (
                "properties" | "$defs" | "patternProperties" | "dependentSchemas",
                Value::Object(m),
            ) => {
                for (k, v) in m.iter_mut() {
                    *v = node(
                        v,
                        target,
                        &format!("{here}/{}", escape(k)),
                        depth + 1,
                        notes,
                    );
                }
            }
            ("anyOf" | "oneOf" | "allOf" | "prefixItems", Value::Array(items)) => {
                for (i, v) in items.iter_mut().enumerate() {
                    *v = node(v, target, &format!("{here}/{i}"), depth + 1, notes);
                }
            }
            (
                "items" | "not" | "if" | "then" | "else" | "contains" | "propertyNames",
                v @ Value::Object(_),
            ) => *v = node(v, target, &here, depth + 1, notes),
            ("additionalProperties", v @ Value::Object(_)) => {
                *v = node(v, target, &here, depth + 1, notes);
            }
            _ => {}
        }
    }
    target.apply(&mut map, at, notes);
    Value::Object(map)
}

/// `segment` escaped for a JSON Pointer.
fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// The `null` alternative added to optional properties in OpenAI's strict mode.
fn nullable(schema: Value) -> Value {
    if let Value::Object(m) = &schema
        && !m.contains_key("enum")
        && !m.contains_key("const")
        && !m.contains_key("anyOf")
    {
        match m.get("type") {
            Some(Value::String(t)) => {
                let mut out = m.clone();
                out.insert("type".into(), json!([t, "null"]));
                return Value::Object(out);
            }
            Some(Value::Array(ts)) => {
                let mut out = m.clone();
                let mut ts = ts.clone();
                if !ts.contains(&json!("null")) {
                    ts.push(json!("null"));
                }
                out.insert("type".into(), Value::Array(ts));
                return Value::Object(out);
            }
            _ => {}
        }
    }
    json!({"anyOf": [schema, {"type": "null"}]})
}

/// Whether `schema` admits `null` (structurally: a `null` type, const or enum value, or
/// an `anyOf`/`oneOf` branch that does; `true` and `{}` do).
pub(crate) fn admits_null(schema: &Value) -> bool {
    match schema {
        Value::Bool(b) => *b,
        Value::Object(m) => {
            if let Some(c) = m.get("const") {
                return c.is_null();
            }
            if let Some(Value::Array(e)) = m.get("enum") {
                return e.iter().any(Value::is_null);
            }
            for union in ["anyOf", "oneOf"] {
                if let Some(Value::Array(branches)) = m.get(union) {
                    return branches.iter().any(admits_null);
                }
            }
            match m.get("type") {
                Some(Value::String(t)) => t == "null",
                Some(Value::Array(ts)) => ts.iter().any(|t| t == "null"),
                _ => !m.contains_key("properties") && !m.contains_key("items"),
            }
        }
        _ => false,
    }
}

/// The object schema's `properties`, when it has some.
pub(crate) fn properties(m: &Map<String, Value>) -> Option<&Map<String, Value>> {
    m.get("properties").and_then(Value::as_object)
}

#[cfg(test)]
mod tests;
