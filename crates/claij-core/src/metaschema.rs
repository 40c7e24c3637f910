//! The meta-schema: the JSON Schema of the FSM format itself, shipped in the code.

use std::sync::OnceLock;

use serde_json::Value;

use crate::diagnostic::{Collector, JsonPath, Problem};
use crate::schema::CompiledSchema;

/// The meta-schema's text, as printed by `claij schema`.
pub const META_SCHEMA: &str = include_str!("metaschema.json");

/// The meta-schema as a JSON value.
pub fn meta_schema() -> &'static Value {
    static VALUE: OnceLock<Value> = OnceLock::new();
    VALUE.get_or_init(|| match serde_json::from_str(META_SCHEMA) {
        Ok(v) => v,
        // The meta-schema is a constant of this crate, checked by a unit test.
        Err(e) => panic!("the shipped meta-schema is not JSON: {e}"),
    })
}

fn compiled() -> &'static CompiledSchema {
    static COMPILED: OnceLock<CompiledSchema> = OnceLock::new();
    COMPILED.get_or_init(|| match CompiledSchema::compile(meta_schema().clone()) {
        Ok(c) => c,
        Err(e) => panic!("the shipped meta-schema does not compile: {e}"),
    })
}

/// Checks `document` against the meta-schema, adding one diagnostic per problem.
pub(crate) fn check(document: &Value, found: &mut Collector) {
    let validator = compiled();
    if validator.is_valid(document) {
        return;
    }
    for issue in validator.issues(document) {
        let at = JsonPath::from_pointer(&issue.instance_path);
        if let Some(fields) = unexpected_fields(&issue.message) {
            for field in fields {
                found.push(
                    Problem::Format,
                    at.join(&field),
                    format!(
                        "unknown field `{field}` (a typo? fields starting with `x-` are free){}",
                        known_fields_hint(&issue.schema_path)
                    ),
                );
            }
        } else {
            found.push(Problem::Format, at, issue.message);
        }
    }
}

/// The names in jsonschema's "Additional properties are not allowed ('a', 'b' were
/// unexpected)" message.
fn unexpected_fields(message: &str) -> Option<Vec<String>> {
    if !message.starts_with("Additional properties are not allowed") {
        return None;
    }
    let start = message.find('(')?;
    let inner = &message[start + 1..];
    let names: Vec<String> = inner
        .split('\'')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s.to_owned())
        .collect();
    (!names.is_empty()).then_some(names)
}

fn known_fields_hint(schema_path: &str) -> String {
    let which = if schema_path.contains("/$defs/state/") {
        "id, action, description, prompts, config"
    } else if schema_path.contains("/$defs/xition/") {
        "id, schema, description, prompts, label, omit"
    } else if schema_path.contains("/$defs/fsmConfig/") {
        "max_attempts, timeout, deadline"
    } else if schema_path.starts_with("/additionalProperties") {
        "id, version, description, prompts, schemas, config, states, xitions (or transitions)"
    } else {
        return String::new();
    };
    format!("; known fields: {which}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_meta_schema_compiles() {
        let _ = compiled();
        assert_eq!(meta_schema()["title"], "claij FSM document");
    }

    #[test]
    fn unexpected_field_names_are_extracted() {
        assert_eq!(
            unexpected_fields("Additional properties are not allowed ('foo', 'bar' were unexpected)"),
            Some(vec!["foo".to_owned(), "bar".to_owned()])
        );
        assert_eq!(unexpected_fields("something else"), None);
    }
}
