//! Whether a new version of a JSON Schema accepts what the old one did, where that can
//! be decided from the two schemas alone: for the keywords documents use to narrow or
//! widen an answer (`type`, `required`, `properties`, `additionalProperties`, `enum`,
//! `const`, bounds on lengths, sizes and values, `pattern`), compared place by place. Any
//! other difference is not decided ([`Compat::Undecided`]): the caller says so rather than
//! guess.

use serde_json::{Map, Value};

/// How a new schema relates to an old one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compat {
    /// The same schema.
    Same,
    /// It accepts everything the old one did, and perhaps more.
    Wider,
    /// It refuses some of what the old one accepted: each place and how.
    Narrower(Vec<String>),
    /// They differ in a way not compared here.
    Undecided,
}

/// How `new` relates to `old` (both JSON Schemas); annotations (`description`, `title`,
/// `examples`, `default`) do not count.
pub fn compare(old: &Value, new: &Value) -> Compat {
    // `true` is the empty schema.
    let anything = |v: &Value| match v {
        Value::Bool(true) => Value::Object(Map::new()),
        other => without_annotations(other),
    };
    let (old, new) = (anything(old), anything(new));
    if old == new {
        return Compat::Same;
    }
    let mut narrower = Vec::new();
    if !compare_at("", &old, &new, &mut narrower) {
        return Compat::Undecided;
    }
    if narrower.is_empty() {
        Compat::Wider
    } else {
        Compat::Narrower(narrower)
    }
}

/// The keywords that only annotate.
const ANNOTATIONS: &[&str] = &["description", "title", "examples", "default"];

/// `schema` without its annotations, at every level.
fn without_annotations(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !ANNOTATIONS.contains(&k.as_str()))
                .map(|(k, v)| {
                    let v = match k.as_str() {
                        // Values, not schemas.
                        "enum" | "const" => v.clone(),
                        "properties" => match v {
                            Value::Object(props) => Value::Object(
                                props
                                    .iter()
                                    .map(|(name, p)| (name.clone(), without_annotations(p)))
                                    .collect(),
                            ),
                            other => other.clone(),
                        },
                        _ => without_annotations(v),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_annotations).collect()),
        other => other.clone(),
    }
}

/// The keywords compared; a difference in any other makes the comparison undecided.
const KNOWN: &[&str] = &[
    "type",
    "required",
    "properties",
    "additionalProperties",
    "enum",
    "const",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minItems",
    "maxItems",
    "pattern",
];

/// Compares the schemas at `place`, noting each narrowing; false when undecided.
fn compare_at(place: &str, old: &Value, new: &Value, narrower: &mut Vec<String>) -> bool {
    let anything = Map::new();
    let (old, new) = match (old, new) {
        // Nothing was accepted: anything is as wide.
        (Value::Bool(false), _) => return true,
        (_, Value::Bool(false)) => {
            narrower.push(format!("{}: nothing is accepted now", shown(place)));
            return true;
        }
        (Value::Object(o), Value::Object(n)) => (o, n),
        (Value::Bool(true), Value::Object(n)) => (&anything, n),
        (Value::Object(o), Value::Bool(true)) => (o, &anything),
        _ => return false,
    };
    let keys = old.keys().chain(new.keys());
    for key in keys {
        if old.get(key) == new.get(key) {
            continue;
        }
        if !KNOWN.contains(&key.as_str()) {
            return false;
        }
    }
    let at = |k: &str| format!("{place}/{k}");
    // `type`: a set of names.
    if old.get("type") != new.get("type") {
        let (o, n) = (types(old.get("type")), types(new.get("type")));
        match (o, n) {
            (Some(o), Some(n)) if o.iter().all(|t| n.contains(t)) => {}
            (None, _) => narrower.push(format!("{}: a type is required now", at("type"))),
            (Some(o), Some(n)) => {
                narrower.push(format!("{}: {} → {}", at("type"), o.join("|"), n.join("|")))
            }
            (Some(_), None) => {}
        }
    }
    let names = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let (old_required, new_required) = (names(old.get("required")), names(new.get("required")));
    let added: Vec<&String> = new_required
        .iter()
        .filter(|r| !old_required.contains(r))
        .collect();
    if !added.is_empty() {
        let added: Vec<&str> = added.iter().map(|s| s.as_str()).collect();
        narrower.push(format!("{}: now also {}", at("required"), added.join(", ")));
    }
    let empty = Map::new();
    let props = |m: &Map<String, Value>| m.get("properties").and_then(Value::as_object).cloned();
    let (old_props, new_props) = (props(old), props(new));
    let (old_props, new_props) = (
        old_props.as_ref().unwrap_or(&empty),
        new_props.as_ref().unwrap_or(&empty),
    );
    let closed =
        |m: &Map<String, Value>| m.get("additionalProperties") == Some(&Value::Bool(false));
    for (name, old_prop) in old_props {
        let inner = format!("{place}/properties/{name}");
        match new_props.get(name) {
            Some(new_prop) if !compare_at(&inner, old_prop, new_prop, narrower) => return false,
            Some(_) => {}
            None if closed(new) => {
                narrower.push(format!("{}: no longer allowed", shown(&inner)));
            }
            None => {}
        }
    }
    for (name, new_prop) in new_props {
        if old_props.contains_key(name) {
            continue;
        }
        // A property the old schema let through unchecked is checked now.
        if !closed(old) && new_prop != &Value::Bool(true) && new_prop != &Value::Object(Map::new())
        {
            narrower.push(format!("{place}/properties/{name}: checked now"));
        }
    }
    if closed(new) && !closed(old) {
        narrower.push(format!(
            "{}: other properties are refused now",
            at("additionalProperties")
        ));
    }
    if let (Some(o), Some(n)) = (old.get("enum"), new.get("enum")) {
        let (o, n) = (o.as_array(), n.as_array());
        if let (Some(o), Some(n)) = (o, n) {
            let gone: Vec<String> = o
                .iter()
                .filter(|v| !n.contains(v))
                .map(Value::to_string)
                .collect();
            if !gone.is_empty() {
                narrower.push(format!("{}: no longer {}", at("enum"), gone.join(", ")));
            }
        }
    } else if new.get("enum").is_some() && old.get("enum") != new.get("enum") {
        narrower.push(format!("{}: only listed values now", at("enum")));
    }
    if new.get("const").is_some() && old.get("const") != new.get("const") {
        narrower.push(format!("{}: {}", at("const"), new["const"]));
    }
    for (key, lower) in [
        ("minLength", true),
        ("minItems", true),
        ("minimum", true),
        ("exclusiveMinimum", true),
        ("maxLength", false),
        ("maxItems", false),
        ("maximum", false),
        ("exclusiveMaximum", false),
    ] {
        let (o, n) = (
            old.get(key).and_then(Value::as_f64),
            new.get(key).and_then(Value::as_f64),
        );
        let tighter = match (o, n) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(o), Some(n)) => {
                if lower {
                    n > o
                } else {
                    n < o
                }
            }
        };
        if tighter {
            let was = old
                .get(key)
                .map_or_else(|| "none".to_owned(), Value::to_string);
            narrower.push(format!("{}: {was} → {}", at(key), new[key]));
        }
    }
    if let Some(pattern) = new.get("pattern")
        && old.get("pattern") != Some(pattern)
    {
        narrower.push(format!("{}: {pattern}", at("pattern")));
    }
    true
}

/// A place for messages (`/` for the root).
fn shown(place: &str) -> &str {
    if place.is_empty() { "/" } else { place }
}

/// The type names a `type` keyword allows (`None`: any).
fn types(value: Option<&Value>) -> Option<Vec<String>> {
    let mut names: Vec<String> = match value? {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => return None,
    };
    // An integer is a number: a number type takes every integer the old one did.
    if names.iter().any(|n| n == "number") {
        names.push("integer".into());
    }
    Some(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn narrowings_are_named_at_their_place() {
        let old = json!({"type": "object", "required": ["approver"],
            "properties": {"approver": {"type": "string", "minLength": 2}, "note": {"type": "string"}}});
        assert_eq!(compare(&old, &old), Compat::Same);
        let wider = json!({"type": "object", "required": [],
            "properties": {"approver": {"type": "string", "minLength": 1}, "note": {"type": ["string", "null"]}}});
        assert_eq!(compare(&old, &wider), Compat::Wider);
        let narrower = json!({"type": "object", "required": ["approver", "ticket"], "additionalProperties": false,
            "properties": {"approver": {"type": "string", "minLength": 5}, "ticket": {"type": "string"}}});
        let Compat::Narrower(places) = compare(&old, &narrower) else {
            panic!("narrower: {:?}", compare(&old, &narrower));
        };
        assert!(
            places.iter().any(|p| p == "/required: now also ticket"),
            "{places:?}"
        );
        assert!(
            places
                .iter()
                .any(|p| p.starts_with("/properties/approver/minLength: 2 → 5")),
            "{places:?}"
        );
        assert!(
            places
                .iter()
                .any(|p| p == "/properties/note: no longer allowed"),
            "{places:?}"
        );
        assert!(
            places
                .iter()
                .any(|p| p == "/properties/ticket: checked now"),
            "{places:?}"
        );
        // An enum that loses a value; a keyword not compared.
        let Compat::Narrower(places) =
            compare(&json!({"enum": ["a", "b"]}), &json!({"enum": ["a"]}))
        else {
            panic!("narrower");
        };
        assert_eq!(places, ["/enum: no longer \"b\""]);
        assert_eq!(
            compare(&json!({"oneOf": [true]}), &json!({"oneOf": [false]})),
            Compat::Undecided
        );
        // Annotations do not count; `true` is the empty schema.
        let described = json!({"type": "object", "description": "Approve.", "properties": {"approver": {"type": "string", "title": "Who"}}});
        let plain = json!({"type": "object", "properties": {"approver": {"type": "string"}}});
        assert_eq!(compare(&described, &plain), Compat::Same);
        assert_eq!(compare(&json!(true), &json!({})), Compat::Same);
        assert!(matches!(
            compare(&json!(true), &json!({"required": ["a"]})),
            Compat::Narrower(_)
        ));
    }
}
