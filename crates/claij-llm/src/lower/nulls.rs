//! The `null`s of OpenAI's strict mode: it requires every property, so optional ones are
//! sent nullable and a model writes `null` for a property it would leave out.
//! [`strip`] takes those `null`s out of an answer (where the original schema does not
//! admit `null` there); [`fill`] puts them into an instance (for [`super::faithful`]).
//!
//! Unions are followed into the branch whose `const` properties the instance matches
//! (the transitions' `id`s tell them apart), else into every object branch.

use serde_json::{Map, Value};

use super::{admits_null, properties};

/// How deep instances are walked.
const MAX_DEPTH: usize = 64;

/// `answer` with each `null` property removed where `original` (with `$ref`s inlined)
/// neither requires the property nor admits `null` for it.
pub fn strip(answer: &Value, original: &Value) -> Value {
    let mut out = answer.clone();
    walk(&mut out, original, Edit::Strip, 0);
    out
}

/// `instance` as OpenAI's strict mode would write it: each optional property `original`
/// declares and the instance leaves out set to `null`, and (the lowering closes every
/// object) each property `original` does not declare removed.
pub fn fill(instance: &Value, original: &Value) -> Value {
    let mut out = instance.clone();
    walk(&mut out, original, Edit::Fill, 0);
    out
}

#[derive(Clone, Copy, PartialEq)]
enum Edit {
    Strip,
    Fill,
}

fn walk(instance: &mut Value, schema: &Value, edit: Edit, depth: usize) {
    let Value::Object(s) = schema else { return };
    if depth > MAX_DEPTH {
        return;
    }
    for union in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = s.get(union) {
            let matching: Vec<&Value> = branches
                .iter()
                .filter(|b| consts_match(instance, b))
                .collect();
            if let [one] = matching.as_slice() {
                walk(instance, one, edit, depth + 1);
            } else if edit == Edit::Strip {
                for b in matching {
                    walk(instance, b, edit, depth + 1);
                }
            }
        }
    }
    if let Some(Value::Array(branches)) = s.get("allOf") {
        for b in branches {
            walk(instance, b, edit, depth + 1);
        }
    }
    match instance {
        Value::Object(fields) => {
            if let Some(props) = properties(s) {
                object(fields, s, props, edit, depth);
            }
        }
        Value::Array(items) => {
            if let Some(item) = s.get("items") {
                for v in items.iter_mut() {
                    walk(v, item, edit, depth + 1);
                }
            }
        }
        _ => {}
    }
}

fn object(
    fields: &mut Map<String, Value>,
    s: &Map<String, Value>,
    props: &Map<String, Value>,
    edit: Edit,
    depth: usize,
) {
    let required = |name: &str| {
        s.get("required")
            .and_then(Value::as_array)
            .is_some_and(|r| r.iter().any(|v| v == name))
    };
    match edit {
        Edit::Strip => fields.retain(|k, v| {
            !(v.is_null() && !required(k) && props.get(k).is_some_and(|p| !admits_null(p)))
        }),
        Edit::Fill => {
            fields.retain(|k, _| props.contains_key(k));
            for k in props.keys() {
                if !fields.contains_key(k) && !required(k) {
                    fields.insert(k.clone(), Value::Null);
                }
            }
        }
    }
    for (k, v) in fields.iter_mut() {
        if let Some(p) = props.get(k) {
            walk(v, p, edit, depth + 1);
        }
    }
}

/// Whether `instance` has every `const` property value `branch` declares (and is an
/// object when the branch declares properties).
fn consts_match(instance: &Value, branch: &Value) -> bool {
    let Some(props) = branch.as_object().and_then(properties) else {
        return true;
    };
    let Value::Object(fields) = instance else {
        return false;
    };
    props.iter().all(|(k, p)| match p.get("const") {
        Some(c) => fields.get(k) == Some(c),
        None => true,
    })
}
