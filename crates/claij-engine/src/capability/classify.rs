//! The check that no config field is added without saying what it touches: the places a
//! config schema describes, and those no [`Field`] covers.

use serde_json::Value;

use super::Field;

/// The positions of `schema` (a config's JSON Schema) that no field of `fields` covers.
pub fn unclassified_in(schema: &Value, fields: &[Field]) -> Vec<String> {
    let mut positions = Vec::new();
    schema_positions(schema, String::new(), &mut positions);
    positions
        .into_iter()
        .filter(|position| !fields.iter().any(|f| covers(f.pointer, position)))
        .collect()
}

/// Whether the field at `pointer` covers the schema position `position`: its segments
/// are a prefix of the position's (a field's `*` matching any segment; a position's `*`,
/// any member or item, only a field's `*`).
fn covers(pointer: &str, position: &str) -> bool {
    let field: Vec<&str> = pointer.split('/').skip(1).collect();
    let at: Vec<&str> = position.split('/').skip(1).collect();
    field.len() <= at.len() && field.iter().zip(&at).all(|(f, a)| f == a || *f == "*")
}

/// Every named place a config schema describes: its properties (recursively, through
/// items, additional and pattern properties, and the branches of `anyOf`/`oneOf`/
/// `allOf`/`if`/`then`/`else`).
fn schema_positions(schema: &Value, at: String, out: &mut Vec<String>) {
    let Value::Object(schema) = schema else {
        return;
    };
    if let Some(Value::Object(properties)) = schema.get("properties") {
        for (name, sub) in properties {
            let here = format!("{at}/{name}");
            out.push(here.clone());
            schema_positions(sub, here, out);
        }
    }
    for key in ["additionalProperties", "items"] {
        if let Some(sub @ Value::Object(_)) = schema.get(key) {
            schema_positions(sub, format!("{at}/*"), out);
        }
    }
    if let Some(Value::Object(patterns)) = schema.get("patternProperties") {
        // `x-…` members are the author's notes: claij never reads them.
        for (pattern, sub) in patterns.iter().filter(|(p, _)| !p.starts_with("^x-")) {
            let here = format!("{at}/{pattern}");
            out.push(here.clone());
            schema_positions(sub, here, out);
        }
    }
    if let Some(Value::Array(items)) = schema.get("prefixItems") {
        for (i, sub) in items.iter().enumerate() {
            schema_positions(sub, format!("{at}/{i}"), out);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = schema.get(key) {
            for sub in branches {
                schema_positions(sub, at.clone(), out);
            }
        }
    }
    for key in ["if", "then", "else"] {
        if let Some(sub) = schema.get(key) {
            schema_positions(sub, at.clone(), out);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::capability::Touch;

    #[test]
    fn fields_cover_what_lies_under_them() {
        assert!(covers("/argv", "/argv/0"));
        assert!(covers("/env/*", "/env/*"));
        assert!(covers("/servers/*/url", "/servers/*/url"));
        assert!(!covers("/argv/0", "/argv"));
        assert!(!covers("/argv/0", "/argv/*"));
        assert!(!covers("/cwd", "/env"));
    }

    #[test]
    fn an_unclassified_field_is_found_at_any_depth() {
        let schema = json!({
            "type": "object",
            "properties": {
                "argv": {"type": "array", "prefixItems": [{"type": "string"}]},
                "keep": {"type": "object", "properties": {"summary": {"type": "string"}, "path": {"type": "string"}}},
                "env": {"type": "object", "additionalProperties": {"type": "string"}}
            }
        });
        let fields = [
            Field::new("/argv/0", Touch::Program),
            Field::inert("/argv"),
            Field::inert("/keep/summary"),
            Field::new("/env", Touch::Environment),
        ];
        assert_eq!(unclassified_in(&schema, &fields), ["/keep", "/keep/path"]);
    }
}
