//! The meta-schema: the JSON Schema of the FSM format itself, shipped in the code.

use std::sync::OnceLock;

use serde_json::Value;

use crate::diagnostic::{Collector, JsonPath, Problem};
use crate::schema::{CompiledSchema, ValidationIssue, unknown_field_message};

/// The meta-schema's text, as printed by `claij schema`.
pub const META_SCHEMA: &str = include_str!("metaschema.json");

/// The meta-schema as a JSON value.
pub(crate) fn meta_schema() -> &'static Value {
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

/// What follows an unknown field's name in messages: the way to add free fields.
const UNKNOWN_FIELD_NOTE: &str = " (a typo? fields starting with `x-` are free)";

/// Readable messages for the meta-schema's `anyOf`s, whose own message only says that
/// none of the alternatives matched; keyed on the `anyOf`'s schema path.
const ANY_OF_MESSAGES: [(&str, &str); 6] = [
    (
        "/$defs/count/anyOf",
        "a count is a whole number, or a string such as `5000`, `200k`, `1.5m`",
    ),
    (
        "/$defs/duration/anyOf",
        "a duration is a positive number of seconds or a string such as `500ms`, `30s`, `2m`",
    ),
    (
        "/$defs/timeout/anyOf",
        "a timeout is a duration (a positive number of seconds or a string such as `500ms`, \
         `30s`, `2m`) or `none` for no limit",
    ),
    (
        "/$defs/state/properties/keep/anyOf",
        "`keep` is `full`, `result`, `summary`, or `{summary: PROMPT}` (the state's model \
         writes the summary when it leaves the state)",
    ),
    (
        "/$defs/prompts/anyOf",
        "prompts are a string or a list of strings",
    ),
    (
        "/$defs/xition/properties/schema/anyOf",
        "a transition schema is a JSON Schema object, `true`, or a dynamic schema name of \
         the form `provider:name`",
    ),
];

/// Checks `document` against the meta-schema, adding one diagnostic per problem.
pub(crate) fn check(document: &Value, found: &mut Collector) {
    let validator = compiled();
    if validator.is_valid(document) {
        return;
    }
    for issue in validator.issues(document) {
        let at = JsonPath::from_pointer(&issue.instance_path);
        found.push(Problem::Format, at, message(validator, issue));
    }
}

/// The message for one meta-schema issue: unknown fields with the known ones listed,
/// `anyOf`s explained, anything else as jsonschema says it.
fn message(validator: &CompiledSchema, issue: ValidationIssue) -> String {
    if let Some(field) = issue.unknown_field() {
        let known = validator.known_fields(&issue.schema_path);
        return unknown_field_message(&field, UNKNOWN_FIELD_NOTE, &known);
    }
    ANY_OF_MESSAGES
        .iter()
        .find(|(schema_path, _)| *schema_path == issue.schema_path)
        .map_or(issue.message, |(_, message)| (*message).to_owned())
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
    fn any_of_messages_name_any_ofs_of_the_meta_schema() {
        for (schema_path, _) in ANY_OF_MESSAGES {
            let any_of = meta_schema().pointer(schema_path);
            assert!(any_of.is_some_and(Value::is_array), "{schema_path}");
        }
    }

    #[test]
    fn unknown_fields_are_located_and_listed_with_the_known_ones() {
        let document = serde_json::json!({
            "id": "x",
            "states": [{"id": "a", "action": "end", "descripton": "?", "x-note": 1}],
            "config": {"retries": 3}
        });
        let mut found = Collector::new("t");
        check(&document, &mut found);
        let found = found.finish().unwrap_err().0;
        let shown: Vec<(String, &str)> = found
            .iter()
            .map(|d| (d.path.to_string(), d.message.as_str()))
            .collect();
        assert_eq!(
            shown,
            vec![
                (
                    "$.states[0].descripton".to_owned(),
                    "unknown field `descripton` (a typo? fields starting with `x-` are free); \
                     known fields: id, action, description, prompts, examples, keep, config, servers"
                ),
                (
                    "$.config.retries".to_owned(),
                    "unknown field `retries` (a typo? fields starting with `x-` are free); \
                     known fields: max_attempts, timeout, deadline, max_steps, budget, on_new_version, mcp_tool"
                ),
            ]
        );
    }
}
