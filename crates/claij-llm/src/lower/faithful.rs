//! Is a lowering faithful? Checked on sample instances, with both schemas compiled by
//! `jsonschema` (through [`claij_core::CompiledSchema`]):
//!
//! - what the original admits, the lowered schema admits (in the target's encoding:
//!   [`super::nulls::fill`] for OpenAI's strict mode) — always, since a lowering only
//!   drops constraints or adds ones an answer can always meet;
//! - what the lowered schema admits, the original admits (after
//!   [`super::nulls::strip`]) — where the lowering claims to be exact.
//!
//! [`samples`] builds instances from a schema (one per union branch, every property
//! given) and mutates them (a property left out, set to `null`, to another type, an
//! unknown property, a long string, a `const` changed).

use claij_core::{CompiledSchema, SchemaError};
use serde_json::{Map, Value, json};

use super::{Lowered, Target, nulls};

/// How many instances [`samples`] builds at most.
const MAX_SAMPLES: usize = 400;
/// How deep instances are built.
const MAX_DEPTH: usize = 12;

/// One instance the two schemas disagree on where they should not.
#[derive(Debug, Clone, PartialEq)]
pub struct Disagreement {
    /// The instance (as the target encodes it, for the first kind).
    pub instance: Value,
    /// What went wrong.
    pub why: &'static str,
}

/// What a check found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// Instances checked.
    pub checked: usize,
    /// Of them, admitted by the original.
    pub admitted: usize,
    /// The disagreements.
    pub disagreements: Vec<Disagreement>,
}

/// Checks `lowered` against `original` on `instances`.
pub fn check(
    original: &Value,
    lowered: &Lowered,
    instances: &[Value],
) -> Result<Report, SchemaError> {
    let o = CompiledSchema::compile(original.clone())?;
    let l = CompiledSchema::compile(lowered.schema.clone())?;
    let mut report = Report::default();
    for instance in instances {
        report.checked += 1;
        let encoded = encode(instance, original, lowered.target);
        if o.is_valid(instance) {
            report.admitted += 1;
            if o.is_valid(&encoded) && !l.is_valid(&encoded) {
                report.disagreements.push(Disagreement {
                    instance: encoded.clone(),
                    why: "the original admits it, the lowered schema does not",
                });
            }
        }
        if lowered.exact() {
            for candidate in [instance, &encoded] {
                if l.is_valid(candidate)
                    && !o.is_valid(&decode(candidate, original, lowered.target))
                {
                    report.disagreements.push(Disagreement {
                        instance: candidate.clone(),
                        why: "the lowered schema admits it, the original does not (the lowering claims to be exact)",
                    });
                }
            }
        }
    }
    Ok(report)
}

fn encode(instance: &Value, original: &Value, target: Target) -> Value {
    if target.strict() {
        nulls::fill(instance, original)
    } else {
        instance.clone()
    }
}

fn decode(instance: &Value, original: &Value, target: Target) -> Value {
    if target.strict() {
        nulls::strip(instance, original)
    } else {
        instance.clone()
    }
}

/// Instances built from `schema` (`$ref`s inlined) and their mutations.
pub fn samples(schema: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    for base in build(schema, 0) {
        push(&mut out, base.clone());
        for m in mutations(&base) {
            push(&mut out, m);
        }
    }
    out.truncate(MAX_SAMPLES);
    out
}

fn push(out: &mut Vec<Value>, v: Value) {
    if !out.contains(&v) {
        out.push(v);
    }
}

/// Instances meant to satisfy `schema`: one per union branch (the first of each nested
/// union otherwise), objects with every property and with only the required ones.
fn build(schema: &Value, depth: usize) -> Vec<Value> {
    let Value::Object(s) = schema else {
        return vec![json!({"any": 1})];
    };
    if depth > MAX_DEPTH {
        return vec![Value::Null];
    }
    if let Some(c) = s.get("const") {
        return vec![c.clone()];
    }
    if let Some(Value::Array(values)) = s.get("enum") {
        return values.iter().take(3).cloned().collect();
    }
    for union in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = s.get(union) {
            let mut out = Vec::new();
            for b in branches {
                out.extend(build(b, depth + 1));
            }
            return out;
        }
    }
    let mut props: Map<String, Value> = Map::new();
    let mut required: Vec<Value> = Vec::new();
    gather(s, &mut props, &mut required);
    let ty = match s.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts.first().and_then(Value::as_str).unwrap_or("object"),
        _ if !props.is_empty() => "object",
        _ => "",
    };
    match ty {
        "object" => {
            let first = |p: &Value| {
                build(p, depth + 1)
                    .into_iter()
                    .next()
                    .unwrap_or(Value::Null)
            };
            let mut all: Map<String, Value> =
                props.iter().map(|(k, p)| (k.clone(), first(p))).collect();
            // Required without a schema: any value.
            for name in required.iter().filter_map(Value::as_str) {
                all.entry(name).or_insert_with(|| json!("a"));
            }
            let only_required: Map<String, Value> = all
                .iter()
                .filter(|(k, _)| required.iter().any(|r| r == *k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            vec![Value::Object(all), Value::Object(only_required)]
        }
        "array" => {
            let n = s
                .get("minItems")
                .and_then(Value::as_u64)
                .unwrap_or(1)
                .max(1) as usize;
            let item = s
                .get("items")
                .map(|i| {
                    build(i, depth + 1)
                        .into_iter()
                        .next()
                        .unwrap_or(Value::Null)
                })
                .unwrap_or(json!(1));
            vec![Value::Array(vec![item; n.min(4)])]
        }
        "string" => {
            let min = s
                .get("minLength")
                .and_then(Value::as_u64)
                .unwrap_or(1)
                .max(1) as usize;
            let text = match s.get("format").and_then(Value::as_str) {
                Some("date") => "2024-05-06".to_owned(),
                Some("date-time") => "2024-05-06T07:08:09Z".to_owned(),
                Some("email") => "a@example.com".to_owned(),
                Some("uri") => "https://example.com/".to_owned(),
                _ => "a".repeat(min.min(64)),
            };
            vec![Value::String(text)]
        }
        "integer" => vec![json!(s.get("minimum").and_then(Value::as_i64).unwrap_or(1))],
        "number" => vec![json!(
            s.get("minimum").and_then(Value::as_f64).unwrap_or(1.5)
        )],
        "boolean" => vec![json!(true)],
        "null" => vec![Value::Null],
        _ => vec![json!({"any": 1})],
    }
}

/// The properties and required names of `s` and its `allOf` branches.
fn gather(s: &Map<String, Value>, props: &mut Map<String, Value>, required: &mut Vec<Value>) {
    if let Some(Value::Object(p)) = s.get("properties") {
        for (k, v) in p {
            let known = props.get(k).is_some_and(|old| old != &Value::Bool(true));
            if !known {
                props.insert(k.clone(), v.clone());
            }
        }
    }
    if let Some(Value::Array(r)) = s.get("required") {
        required.extend(r.iter().cloned());
    }
    if let Some(Value::Array(branches)) = s.get("allOf") {
        for b in branches.iter().filter_map(Value::as_object) {
            gather(b, props, required);
        }
    }
}

/// Variants of `base`, one change each, at every depth.
fn mutations(base: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    mutate(base, &mut |changed| out.push(changed), 0);
    out
}

fn mutate(value: &Value, emit: &mut dyn FnMut(Value), depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match value {
        Value::Object(fields) => {
            let mut extra = fields.clone();
            extra.insert("zz_unknown".into(), json!(1));
            emit(Value::Object(extra));
            for (k, v) in fields {
                let with = |nv: Value| {
                    let mut m = fields.clone();
                    m.insert(k.clone(), nv);
                    Value::Object(m)
                };
                let mut without = fields.clone();
                without.remove(k);
                emit(Value::Object(without));
                emit(with(Value::Null));
                let v2 = v.clone();
                mutate(&v2, &mut |nv| emit(with(nv)), depth + 1);
            }
        }
        Value::Array(items) => {
            emit(json!([]));
            if let Some(first) = items.first() {
                let mut more = items.clone();
                more.push(first.clone());
                emit(Value::Array(more));
                let mut reversed = items.clone();
                reversed.reverse();
                emit(Value::Array(reversed));
                mutate(
                    first,
                    &mut |nv| {
                        let mut changed = items.clone();
                        changed[0] = nv;
                        emit(Value::Array(changed));
                    },
                    depth + 1,
                );
            }
        }
        Value::String(s) => {
            emit(Value::String("x".repeat(3000)));
            emit(Value::String(String::new()));
            emit(Value::String(format!("{s}!")));
            emit(json!(7));
        }
        Value::Number(_) => {
            emit(json!(-1000));
            emit(json!(1000));
            emit(json!(2.5));
            emit(json!("1"));
        }
        Value::Bool(b) => {
            emit(json!(!b));
            emit(json!("true"));
        }
        Value::Null => emit(json!(0)),
    }
}
