//! What an answer looks like: a template written from a transition's schema, shown in a
//! request under its JSON Schema, so that a model reading the schema loosely (no
//! constrained decoding, a small model) still sees the object to write — its fields in
//! order, each as a placeholder saying what goes there, and its `id` last and exact.
//!
//! Measured: with the schema alone, Qwen2.5-Coder-1.5B behind an OpenAI-compatible server
//! in `prompt` mode answered the triage example's first state with `"id": "extract"` and
//! its facts nested under `"facts"` (the shared definition's name), twice.
//!
//! The template is text, not JSON: a string is `"<what it holds, at most N characters>"`,
//! a number `<integer 1–3>`, an enum its values joined by `|`, a const (the `id`) its
//! value. Bounds are in the template because a model that has not read them in the
//! schema writes past them (measured: the same model's `reason` ran to 166 characters
//! against a `maxLength` of 120, and again after the error was fed back).

use std::fmt::Write as _;

use serde_json::{Map, Value};

/// How deep the template follows nested objects, arrays and references (a recursive
/// definition stops there with `<…>`).
const MAX_DEPTH: usize = 6;

/// A string bound this short is asked for "in a few words": measured, Qwen2.5-Coder-1.5B
/// in `prompt` mode wrote a 166-character reason against a bound of 120 told in
/// characters and words, and kept to it once the words "in a few words" were there.
const SHORT_TEXT: u64 = 200;

/// How many characters of a description a string's placeholder keeps.
const MAX_HINT: usize = 80;

/// The template of an answer satisfying `schema`, its references resolved in `defs` (the
/// FSM's shared schemas). `id`, when `id` is given, replaces the schema's `id` property by
/// that text (a placeholder naming the choice among several routes).
pub(super) fn answer_shape(schema: &Value, defs: &Map<String, Value>, id: Option<&str>) -> String {
    let mut out = String::new();
    Shaper { defs, id }.value(&mut out, schema, 0, true);
    out
}

struct Shaper<'a> {
    defs: &'a Map<String, Value>,
    /// Replaces the top-level `id`'s value.
    id: Option<&'a str>,
}

impl Shaper<'_> {
    /// `schema` with its local reference followed (`#/$defs/NAME`).
    fn resolve<'s>(&'s self, schema: &'s Value) -> &'s Value {
        let mut s = schema;
        for _ in 0..MAX_DEPTH {
            match s
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix("#/$defs/"))
                .and_then(|name| self.defs.get(name))
            {
                Some(target) => s = target,
                None => break,
            }
        }
        s
    }

    fn value(&self, out: &mut String, schema: &Value, depth: usize, top: bool) {
        let schema = self.resolve(schema);
        if depth > MAX_DEPTH {
            out.push_str("<…>");
            return;
        }
        if let Some(c) = schema.get("const") {
            out.push_str(&c.to_string());
            return;
        }
        if let Some(Value::Array(values)) = schema.get("enum") {
            let shown: Vec<String> = values.iter().map(Value::to_string).collect();
            out.push_str(&shown.join(" | "));
            return;
        }
        for key in ["oneOf", "anyOf"] {
            if let Some(Value::Array(options)) = schema.get(key)
                && !options.is_empty()
                && !is_object(self, schema)
            {
                for (i, option) in options.iter().enumerate() {
                    if i > 0 {
                        out.push_str(" | ");
                    }
                    self.value(out, option, depth + 1, false);
                }
                return;
            }
        }
        if is_object(self, schema) {
            self.object(out, schema, depth, top);
            return;
        }
        match main_type(schema) {
            Some("array") => {
                out.push('[');
                match schema.get("items") {
                    Some(items) if items.is_object() => {
                        self.value(out, items, depth + 1, false);
                        out.push_str(", …");
                    }
                    _ => out.push_str("<…>"),
                }
                out.push(']');
            }
            Some("string") => {
                out.push_str("\"<");
                out.push_str(&hint(schema).unwrap_or_else(|| "text".into()));
                if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
                    // Small models count words, not characters (about six a word), and
                    // keep to a bound only when told plainly that the text is short.
                    if max <= SHORT_TEXT {
                        out.push_str(", in a few words");
                    }
                    let _ = write!(out, ", at most {max} characters (about {} words)", max / 6);
                }
                out.push_str(">\"");
            }
            Some(kind @ ("integer" | "number")) => {
                out.push('<');
                out.push_str(kind);
                match (schema.get("minimum"), schema.get("maximum")) {
                    (Some(lo), Some(hi)) => {
                        let _ = write!(out, " {lo}–{hi}");
                    }
                    (Some(lo), None) => {
                        let _ = write!(out, " ≥ {lo}");
                    }
                    (None, Some(hi)) => {
                        let _ = write!(out, " ≤ {hi}");
                    }
                    (None, None) => {}
                }
                if let Some(h) = hint(schema) {
                    out.push_str(": ");
                    out.push_str(&h);
                }
                out.push('>');
            }
            Some("boolean") => out.push_str("true | false"),
            Some("null") => out.push_str("null"),
            _ => out.push_str("<any JSON value>"),
        }
        if nullable(schema) {
            out.push_str(" | null");
        }
    }

    /// An object: every property its schema and its `allOf` members declare, in order,
    /// `id` last.
    fn object(&self, out: &mut String, schema: &Value, depth: usize, top: bool) {
        let mut properties: Vec<(&str, &Value)> = Vec::new();
        self.collect(schema, &mut properties, 0);
        let (ids, mut fields): (Vec<_>, Vec<_>) =
            properties.into_iter().partition(|(k, _)| top && *k == "id");
        fields.extend(ids.into_iter().last());
        if fields.is_empty() {
            out.push_str("{<…>}");
            return;
        }
        out.push('{');
        for (i, (key, property)) in fields.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(&Value::String((*key).to_owned()).to_string());
            out.push_str(": ");
            match (top && *key == "id", self.id) {
                (true, Some(id)) => out.push_str(id),
                _ => self.value(out, property, depth + 1, false),
            }
        }
        out.push('}');
    }

    /// The properties of `schema` and of its `allOf` members (followed through references),
    /// a later declaration of a name replacing an earlier one in place.
    fn collect<'s>(
        &'s self,
        schema: &'s Value,
        into: &mut Vec<(&'s str, &'s Value)>,
        depth: usize,
    ) {
        let schema = self.resolve(schema);
        if depth > MAX_DEPTH {
            return;
        }
        if let Some(Value::Array(members)) = schema.get("allOf") {
            for member in members {
                self.collect(member, into, depth + 1);
            }
        }
        if let Some(Value::Object(props)) = schema.get("properties") {
            for (k, v) in props {
                match into.iter_mut().find(|(name, _)| name == k) {
                    // `true` or `{}` adds nothing to a property declared before.
                    Some(slot) if is_trivial(v) => {
                        let _ = slot;
                    }
                    Some(slot) => slot.1 = v,
                    None => into.push((k, v)),
                }
            }
        }
    }
}

/// Whether `schema` describes an object (its type, its properties or its `allOf`).
fn is_object(shaper: &Shaper, schema: &Value) -> bool {
    let schema = shaper.resolve(schema);
    main_type(schema) == Some("object")
        || schema.get("properties").is_some()
        || schema
            .get("allOf")
            .and_then(Value::as_array)
            .is_some_and(|m| m.iter().any(|s| is_object(shaper, s)))
}

/// The schema's type, the first non-null one of a list.
fn main_type(schema: &Value) -> Option<&str> {
    match schema.get("type")? {
        Value::String(t) => Some(t),
        Value::Array(types) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null"),
        _ => None,
    }
}

/// Whether the schema's type list admits `null` beside another type.
fn nullable(schema: &Value) -> bool {
    matches!(schema.get("type"), Some(Value::Array(types))
        if types.len() > 1 && types.iter().any(|t| t == "null"))
}

/// `true` or an empty schema.
fn is_trivial(schema: &Value) -> bool {
    schema == &Value::Bool(true) || schema.as_object().is_some_and(Map::is_empty)
}

/// A placeholder's words: the description (shortened, on one line), else the title.
fn hint(schema: &Value) -> Option<String> {
    let text = schema
        .get("description")
        .or_else(|| schema.get("title"))
        .and_then(Value::as_str)?;
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.is_empty() {
        return None;
    }
    let mut kept: String = one_line.chars().take(MAX_HINT).collect();
    if kept.len() < one_line.len() {
        kept.push('…');
    }
    // A placeholder sits inside quotes: keep it a valid-looking string.
    Some(kept.replace(['"', '<', '>'], "'"))
}
