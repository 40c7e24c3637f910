//! Turning text into a JSON value: JSON or YAML, with located syntax errors.

use serde_json::Value;

use crate::diagnostic::{Collector, Diagnostics, Problem};

/// The syntax a document is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// JSON.
    Json,
    /// YAML (1.2; JSON is a subset, but JSON files get JSON's error messages).
    Yaml,
}

impl Syntax {
    /// The syntax implied by a file name (`.json`, `.yaml`, `.yml`), or a guess from the text.
    pub fn detect(name: &str, text: &str) -> Syntax {
        let lower = name.to_ascii_lowercase();
        if lower.ends_with(".json") {
            Syntax::Json
        } else if lower.ends_with(".yaml") || lower.ends_with(".yml") {
            Syntax::Yaml
        } else if text.trim_start().starts_with('{') {
            Syntax::Json
        } else {
            Syntax::Yaml
        }
    }
}

/// Parses `text` (from the source called `name`) into a JSON value.
///
/// Syntax errors carry line and column; an empty document (nothing, only comments or
/// `null`) is an error too.
pub fn parse_text(name: &str, text: &str) -> Result<Value, Diagnostics> {
    let mut found = Collector::new(name);
    let syntax = Syntax::detect(name, text);
    let parsed = match syntax {
        Syntax::Json => serde_json::from_str::<Value>(text).map_err(|e| {
            if e.is_eof() && text.trim().is_empty() {
                None
            } else {
                Some(((e.line(), e.column()), format!("invalid JSON: {e}")))
            }
        }),
        Syntax::Yaml => serde_yaml_ng::from_str::<Value>(text).map_err(|e| {
            let at = e.location().map(|l| (l.line(), l.column())).unwrap_or((1, 1));
            Some((at, format!("invalid YAML: {e}")))
        }),
    };
    match parsed {
        Ok(Value::Null) | Err(None) => {
            found.push(
                Problem::Empty,
                crate::JsonPath::root(),
                "the document is empty: expected an FSM with at least `id` and `states`",
            );
        }
        Ok(value) => return Ok(value),
        Err(Some((at, message))) => found.push_at(Problem::Syntax, at, message),
    }
    Err(found.finish().err().unwrap_or_else(|| Diagnostics(Vec::new())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_syntax_errors_have_line_and_column() {
        let err = parse_text("a.json", "{\n  \"id\": \"x\",\n  oops\n}").unwrap_err();
        assert_eq!(err.0[0].problem, Problem::Syntax);
        assert_eq!(err.0[0].line_col, Some((3, 3)));
    }

    #[test]
    fn yaml_syntax_errors_have_line_and_column() {
        let err = parse_text("a.yaml", "id: x\nstates:\n  - id: [a\n").unwrap_err();
        assert_eq!(err.0[0].problem, Problem::Syntax);
        assert!(err.0[0].line_col.is_some_and(|(line, _)| line >= 3));
    }

    #[test]
    fn empty_documents_are_rejected() {
        for (name, text) in [("a.yaml", ""), ("a.yaml", "# nothing\n"), ("a.json", "  \n")] {
            let err = parse_text(name, text).unwrap_err();
            assert_eq!(err.0[0].problem, Problem::Empty, "{name}: {text:?}");
        }
    }
}
