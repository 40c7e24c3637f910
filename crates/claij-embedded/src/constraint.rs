//! JSON Schema → token-level constraint (llguidance).
//!
//! A [`Constraint`] is compiled from a schema once, tokenizer-independently, which is
//! where unsupported schema features are found (at load time, not at run time). A model
//! turns it into a llguidance `Matcher` for its own vocabulary the first time it is used
//! and keeps that matcher by the schema's digest, so every later generation with the
//! same schema starts from a clone.

use std::collections::HashMap;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{ApproximateTokEnv, TokEnv};
use llguidance::{Matcher, ParserFactory};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// How JSON is laid out under a constraint: compact (no free whitespace, which a small
/// model could otherwise fill forever), `oneOf` treated as `anyOf` (the output is
/// validated against the real schema anyway), unsupported keywords ignored and reported.
fn guidance_options() -> Value {
    json!({
        "whitespace_flexible": false,
        "item_separator": ",",
        "key_separator": ":",
        "coerce_one_of": true,
        "lenient": true,
    })
}

/// A schema could not be turned into a constraint.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the schema cannot be enforced by constrained decoding: {reason}")]
pub struct ConstraintError {
    /// What the compiler said.
    pub reason: String,
}

/// A JSON Schema compiled into a grammar that constrained decoding can enforce.
#[derive(Clone)]
pub struct Constraint {
    grammar: TopLevelGrammar,
    digest: String,
    unsupported: Vec<String>,
}

impl std::fmt::Debug for Constraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Constraint")
            .field("digest", &self.digest)
            .field("unsupported", &self.unsupported)
            .finish()
    }
}

fn check_env() -> &'static TokEnv {
    static ENV: std::sync::OnceLock<TokEnv> = std::sync::OnceLock::new();
    ENV.get_or_init(ApproximateTokEnv::single_byte_env)
}

impl Constraint {
    /// Compiles `schema` (draft 2020-12 with local `$ref`s into `$defs`, `oneOf`/`anyOf`,
    /// `enum`, `const`, …). Keywords the grammar cannot express are listed by
    /// [`Constraint::unsupported`]; the output must still be validated against them.
    pub fn from_schema(schema: &Value) -> Result<Self, ConstraintError> {
        let mut schema = match schema {
            Value::Bool(true) => json!({}),
            Value::Object(_) => schema.clone(),
            other => {
                return Err(ConstraintError {
                    reason: format!("a schema must be an object or `true`, not {other}"),
                });
            }
        };
        let digest = hex(&Sha256::digest(schema.to_string().as_bytes()));
        if let Value::Object(map) = &mut schema {
            one_of_by_id_to_any_of(map);
            map.insert("x-guidance".into(), guidance_options());
        }
        let grammar = TopLevelGrammar::from_json_schema(schema);
        // Compile it once against a byte vocabulary: grammar errors and warnings do not
        // depend on the tokenizer.
        let factory = quiet_factory(check_env()).map_err(|reason| ConstraintError { reason })?;
        let mut matcher = Matcher::new(factory.create_parser(grammar.clone()));
        if let Some(reason) = matcher.get_error() {
            return Err(ConstraintError { reason });
        }
        let unsupported = matcher.grammar_warnings();
        Ok(Self {
            grammar,
            digest,
            unsupported,
        })
    }

    /// The SHA-256 of the schema, which keys the compiled matchers.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// What the grammar does not enforce (llguidance's warnings, e.g. `Unimplemented
    /// keys: ["uniqueItems"]`). Empty when the constraint is exact.
    pub fn unsupported(&self) -> &[String] {
        &self.unsupported
    }
}

/// A state's output schema is a `oneOf` whose branches each require a different `id`
/// const (one per transition): at most one branch can match, so `anyOf` means the same,
/// and the grammar enforces `anyOf` exactly (its `oneOf` is only approximated).
fn one_of_by_id_to_any_of(map: &mut serde_json::Map<String, Value>) {
    let Some(Value::Array(branches)) = map.get("oneOf") else {
        return;
    };
    if map.contains_key("anyOf") {
        return;
    }
    let mut ids = Vec::with_capacity(branches.len());
    for b in branches {
        let requires_id = b
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(|r| r.iter().any(|v| v == "id"));
        match b.pointer("/properties/id/const") {
            Some(id) if requires_id && !ids.contains(&id) => ids.push(id),
            _ => return,
        }
    }
    if let Some(branches) = map.remove("oneOf") {
        map.insert("anyOf".into(), branches);
    }
}

/// What constrained decoding cannot express in `schema`: the features it would ignore,
/// or why it cannot compile it at all. Empty when the schema is fully enforceable. For
/// loaders to report at load time.
pub fn unsupported_features(schema: &Value) -> Vec<String> {
    match Constraint::from_schema(schema) {
        Ok(c) => c.unsupported,
        Err(e) => vec![e.reason],
    }
}

pub(crate) fn quiet_factory(env: &TokEnv) -> Result<ParserFactory, String> {
    let mut factory = ParserFactory::new_simple(env).map_err(|e| e.to_string())?;
    factory.quiet();
    Ok(factory)
}

/// The matchers a model compiled, by schema digest.
#[cfg_attr(not(feature = "llama-cpp"), allow(dead_code))]
pub(crate) struct MatcherCache {
    factory: ParserFactory,
    compiled: HashMap<String, Matcher>,
}

#[cfg_attr(not(feature = "llama-cpp"), allow(dead_code))]
impl MatcherCache {
    pub(crate) fn new(env: TokEnv) -> Result<Self, String> {
        Ok(Self {
            factory: quiet_factory(&env)?,
            compiled: HashMap::new(),
        })
    }

    /// A fresh matcher for `constraint`, compiled on first use and cloned after.
    pub(crate) fn matcher(&mut self, constraint: &Constraint) -> Result<Matcher, String> {
        if let Some(m) = self.compiled.get(&constraint.digest) {
            return Ok(m.deep_clone());
        }
        let m = Matcher::new(self.factory.create_parser(constraint.grammar.clone()));
        if let Some(e) = m.get_error() {
            return Err(e);
        }
        let fresh = m.deep_clone();
        self.compiled.insert(constraint.digest.clone(), m);
        Ok(fresh)
    }

    /// How many schemas have been compiled for this model.
    pub(crate) fn len(&self) -> usize {
        self.compiled.len()
    }
}

/// Lower-case hex of bytes.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_one_of_enum_and_const_compile_without_warnings() {
        let schema = json!({
            "oneOf": [
                {"type": "object", "properties": {"id": {"const": ["a", "b"]}, "x": {"$ref": "#/$defs/label"}}, "required": ["id", "x"]},
                {"type": "object", "properties": {"id": {"const": ["a", "c"]}, "n": {"type": "integer"}}, "required": ["id"]}
            ],
            "$defs": {"label": {"enum": ["red", "green"]}}
        });
        let c = Constraint::from_schema(&schema);
        let c = match c {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        assert!(c.unsupported().is_empty(), "{:?}", c.unsupported());
        assert_eq!(c.digest().len(), 64);
        assert!(unsupported_features(&schema).is_empty());
        // A oneOf whose branches are not told apart by `id` is approximated, and said so.
        let loose = json!({"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 3}]});
        assert!(!unsupported_features(&loose).is_empty());
    }

    #[test]
    fn unsupported_keywords_are_reported_and_bad_schemas_refused() {
        let schema = json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true});
        let found = unsupported_features(&schema);
        assert!(found.iter().any(|w| w.contains("uniqueItems")), "{found:?}");
        assert!(Constraint::from_schema(&json!(false)).is_err());
        assert!(Constraint::from_schema(&json!({"$ref": "#/$defs/missing"})).is_err());
    }
}
