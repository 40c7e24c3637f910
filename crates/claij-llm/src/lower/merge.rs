//! `allOf` merged into one schema: properties merged (a property in several branches
//! gets the merge of its schemas), `required` unioned, `type`s and `enum`s intersected,
//! bounds tightened (the largest minimum, the smallest maximum). Everything else a branch
//! says is kept when no other branch says it differently. A merge is refused, with the
//! reason, where the result would not mean what the branches mean together: differing
//! `const`s or keywords, an empty intersection, keywords whose meaning depends on their
//! siblings across branches (`unevaluatedProperties`, `additionalProperties` as a schema
//! beside another branch's properties, `patternProperties` of a closed branch).

use serde_json::{Map, Value};

/// Keywords whose largest value wins.
const LOWER_BOUNDS: [&str; 5] = [
    "minimum",
    "exclusiveMinimum",
    "minLength",
    "minItems",
    "minProperties",
];
/// Keywords whose smallest value wins.
const UPPER_BOUNDS: [&str; 5] = [
    "maximum",
    "exclusiveMaximum",
    "maxLength",
    "maxItems",
    "maxProperties",
];
/// Annotations: the first branch's is kept.
const ANNOTATIONS: [&str; 6] = [
    "description",
    "title",
    "$comment",
    "examples",
    "default",
    "$schema",
];

/// `map` with its `allOf` (recursively) merged into it; `Err` with the reason when that
/// is not expressible as one schema.
pub fn flatten(map: &Map<String, Value>) -> Result<Map<String, Value>, String> {
    let Some(all_of) = map.get("allOf") else {
        return Ok(map.clone());
    };
    let Value::Array(branches) = all_of else {
        return Err("`allOf` is not an array".into());
    };
    if map.contains_key("unevaluatedProperties") {
        return Err("`unevaluatedProperties` sees through `allOf`".into());
    }
    let mut out = map.clone();
    out.remove("allOf");
    for (i, branch) in branches.iter().enumerate() {
        match branch {
            Value::Bool(true) => {}
            Value::Bool(false) => return Err(format!("branch {i} is `false`")),
            Value::Object(b) => {
                let b = flatten(b)?;
                out = merge(&out, &b).map_err(|why| format!("branch {i}: {why}"))?;
            }
            _ => return Err(format!("branch {i} is not a schema")),
        }
    }
    Ok(out)
}

/// Two schemas as one (`{"allOf": [a, b]}` without the `allOf`).
pub fn merge_schemas(a: &Value, b: &Value) -> Result<Value, String> {
    match (a, b) {
        (Value::Bool(true), x) | (x, Value::Bool(true)) => Ok(x.clone()),
        (Value::Bool(false), _) | (_, Value::Bool(false)) => Ok(Value::Bool(false)),
        (Value::Object(a), Value::Object(b)) => {
            let a = flatten(a)?;
            let b = flatten(b)?;
            merge(&a, &b).map(Value::Object)
        }
        _ => Err("not a schema".into()),
    }
}

/// Two schemas without `allOf` as one.
fn merge(a: &Map<String, Value>, b: &Map<String, Value>) -> Result<Map<String, Value>, String> {
    if a.contains_key("unevaluatedProperties") || b.contains_key("unevaluatedProperties") {
        return Err("`unevaluatedProperties` sees through `allOf`".into());
    }
    let mut out = a.clone();
    for (k, bv) in b {
        let Some(av) = out.get(k) else {
            out.insert(k.clone(), bv.clone());
            continue;
        };
        if av == bv {
            continue;
        }
        let merged = match k.as_str() {
            "type" => intersect_types(av, bv)?,
            "required" => union(av, bv),
            "enum" => intersect_enums(av, bv)?,
            "properties" => merge_properties(av, bv)?,
            "items" | "additionalProperties" | "propertyNames" => {
                merge_schemas(av, bv).map_err(|why| format!("`{k}`: {why}"))?
            }
            k if LOWER_BOUNDS.contains(&k) => bound(av, bv, true)?,
            k if UPPER_BOUNDS.contains(&k) => bound(av, bv, false)?,
            k if ANNOTATIONS.contains(&k) => av.clone(),
            "const" => return Err("two different `const`s".into()),
            other => return Err(format!("`{other}` differs between branches")),
        };
        out.insert(k.clone(), merged);
    }
    close(&mut out, a, b)?;
    close(&mut out, b, a)?;
    Ok(out)
}

/// Where `closed` forbids properties it does not declare, the merged `out` declares no
/// other: `other`'s extra properties are dropped (the original forbids them too), and
/// a required one makes the merge unsatisfiable.
fn close(
    out: &mut Map<String, Value>,
    closed: &Map<String, Value>,
    other: &Map<String, Value>,
) -> Result<(), String> {
    let declared = |m: &Map<String, Value>, name: &str| {
        m.get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| p.contains_key(name))
    };
    let extra: Vec<String> = other
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().filter(|k| !declared(closed, k)).cloned().collect())
        .unwrap_or_default();
    match closed.get("additionalProperties") {
        None | Some(Value::Bool(true)) => return Ok(()),
        Some(Value::Bool(false)) => {}
        Some(_) if extra.is_empty() => return Ok(()),
        Some(_) => {
            return Err(
                "`additionalProperties` as a schema beside another branch's properties".into(),
            );
        }
    }
    if other.contains_key("patternProperties") {
        return Err("`patternProperties` beside a closed branch".into());
    }
    if extra.is_empty() {
        return Ok(());
    }
    if closed.contains_key("patternProperties") {
        return Err("a closed branch with `patternProperties`".into());
    }
    let required = out
        .get("required")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if let Some(name) = extra.iter().find(|e| required.iter().any(|r| r == *e)) {
        return Err(format!(
            "`{name}` is required by one branch and forbidden by another"
        ));
    }
    if let Some(Value::Object(p)) = out.get_mut("properties") {
        p.retain(|k, _| !extra.contains(k));
    }
    Ok(())
}

fn merge_properties(a: &Value, b: &Value) -> Result<Value, String> {
    let (Value::Object(a), Value::Object(b)) = (a, b) else {
        return Err("`properties` is not an object".into());
    };
    let mut out = a.clone();
    for (k, bv) in b {
        let merged = match out.get(k) {
            Some(av) => merge_schemas(av, bv).map_err(|why| format!("property `{k}`: {why}"))?,
            None => bv.clone(),
        };
        out.insert(k.clone(), merged);
    }
    Ok(Value::Object(out))
}

fn union(a: &Value, b: &Value) -> Value {
    let mut out: Vec<Value> = a.as_array().cloned().unwrap_or_default();
    for v in b.as_array().into_iter().flatten() {
        if !out.contains(v) {
            out.push(v.clone());
        }
    }
    Value::Array(out)
}

fn types(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// The types both admit (`integer` is a `number`).
fn intersect_types(a: &Value, b: &Value) -> Result<Value, String> {
    let (a, b) = (types(a), types(b));
    let mut out: Vec<String> = Vec::new();
    for t in &a {
        let also = b.contains(t) || (t == "integer" && b.iter().any(|u| u == "number"));
        if also && !out.contains(t) {
            out.push(t.clone());
        }
    }
    for t in &b {
        if t == "integer" && a.iter().any(|u| u == "number") && !out.contains(t) {
            out.push(t.clone());
        }
    }
    match out.len() {
        0 => Err(format!("no type is both {a:?} and {b:?}")),
        1 => Ok(Value::String(out.remove(0))),
        _ => Ok(Value::Array(out.into_iter().map(Value::String).collect())),
    }
}

fn intersect_enums(a: &Value, b: &Value) -> Result<Value, String> {
    let (Some(a), Some(b)) = (a.as_array(), b.as_array()) else {
        return Err("`enum` is not an array".into());
    };
    let both: Vec<Value> = a.iter().filter(|v| b.contains(v)).cloned().collect();
    if both.is_empty() {
        return Err("no value is in both `enum`s".into());
    }
    Ok(Value::Array(both))
}

fn bound(a: &Value, b: &Value, lower: bool) -> Result<Value, String> {
    let (Some(x), Some(y)) = (a.as_f64(), b.as_f64()) else {
        return Err("a bound is not a number".into());
    };
    let take_b = if lower { y > x } else { y < x };
    Ok(if take_b { b.clone() } else { a.clone() })
}

/// `map` with what it says beside its `oneOf` (or `anyOf`) merged into each branch:
/// `A ∧ oneOf(B₁…Bₙ)` is `oneOf(A ∧ B₁ … A ∧ Bₙ)` (exactly one `A ∧ Bᵢ` holds just when
/// `A` holds and exactly one `Bᵢ` does), and likewise for `anyOf`. Grammar converters
/// that enforce the branches ignore what is written beside them (llama.cpp's wrote an
/// MCP call without the `id` required beside its `oneOf`). Annotations and `$defs` stay
/// beside. Unchanged when nothing but annotations is beside, or when both `oneOf` and
/// `anyOf` are; `Err` with the reason when a branch's merge is refused.
pub fn distribute(map: &Map<String, Value>) -> Result<Map<String, Value>, String> {
    let key = match (map.contains_key("oneOf"), map.contains_key("anyOf")) {
        (true, false) => "oneOf",
        (false, true) => "anyOf",
        _ => return Ok(map.clone()),
    };
    let stays = |k: &str| k == key || k == "$defs" || ANNOTATIONS.contains(&k);
    let beside: Map<String, Value> = map
        .iter()
        .filter(|(k, _)| !stays(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if beside.is_empty() {
        return Ok(map.clone());
    }
    let Some(Value::Array(branches)) = map.get(key) else {
        return Err(format!("`{key}` is not an array"));
    };
    let beside = Value::Object(beside);
    let merged = branches
        .iter()
        .enumerate()
        .map(|(i, b)| merge_schemas(&beside, b).map_err(|why| format!("`{key}` branch {i}: {why}")))
        .collect::<Result<Vec<_>, _>>()?;
    let mut out: Map<String, Value> = map
        .iter()
        .filter(|(k, _)| stays(k) && k.as_str() != key)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    out.insert(key.to_owned(), Value::Array(merged));
    Ok(out)
}
