//! Turning text into a JSON value: JSON or YAML, with located syntax errors.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

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
/// Syntax errors carry line and column; a key given twice in one mapping is a syntax
/// error too (not "the last one wins"), and so is a second YAML document. An empty
/// document (nothing, only comments or `null`) is an error as well.
pub fn parse_text(name: &str, text: &str) -> Result<Value, Diagnostics> {
    let mut found = Collector::new(name);
    let parsed = match Syntax::detect(name, text) {
        Syntax::Json => parse_json(text),
        Syntax::Yaml => parse_yaml(text),
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
    Err(found
        .finish()
        .err()
        .unwrap_or_else(|| Diagnostics(Vec::new())))
}

/// A syntax error: where (line, column) and why; `None` for an empty document.
type SyntaxError = Option<((usize, usize), String)>;

fn parse_json(text: &str) -> Result<Value, SyntaxError> {
    serde_json::from_str::<UniqueKeys>(text)
        .map(|v| v.0)
        .map_err(|e| {
            if e.is_eof() && text.trim().is_empty() {
                None
            } else {
                Some(((e.line(), e.column()), format!("invalid JSON: {e}")))
            }
        })
}

fn parse_yaml(text: &str) -> Result<Value, SyntaxError> {
    serde_yaml_ng::from_str::<UniqueKeys>(text)
        .map(|v| v.0)
        .map_err(|e| {
            if let Some(l) = e.location() {
                return Some(((l.line(), l.column()), format!("invalid YAML: {e}")));
            }
            // serde_yaml_ng does not locate a second document: find where it starts.
            match second_document_line(text) {
                Some(line) if e.to_string().contains("more than one document") => Some((
                    (line, 1),
                    "invalid YAML: more than one document (a second one starts here); \
                     a file holds one FSM"
                        .to_owned(),
                )),
                _ => Some(((1, 1), format!("invalid YAML: {e}"))),
            }
        })
}

/// The line (1-based) where a second YAML document starts in `text`, if there is one:
/// its `---` marker, or its first line after a `...` end marker.
fn second_document_line(text: &str) -> Option<usize> {
    let marker = |line: &str, m: &str| {
        line.strip_prefix(m)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(char::is_whitespace))
    };
    let mut documents = 0;
    let mut in_document = false;
    for (i, line) in text.lines().enumerate() {
        let starts = if marker(line, "---") {
            true
        } else if marker(line, "...") {
            in_document = false;
            false
        } else {
            let content = line.trim_start();
            !in_document && !content.is_empty() && !content.starts_with(['#', '%'])
        };
        if starts {
            documents += 1;
            in_document = true;
            if documents == 2 {
                return Some(i + 1);
            }
        }
    }
    None
}

/// A JSON value deserialized from JSON or YAML text, rejecting any object with a key
/// given twice. The error is raised while the repeated key is read, so both parsers
/// locate it at that key.
struct UniqueKeys(Value);

impl<'de> Deserialize<'de> for UniqueKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ValueVisitor).map(UniqueKeys)
    }
}

/// Builds a [`Value`] like serde_json's own visitor, with [`UniqueKeys`] for nested
/// values and [`NewKey`] for object keys.
struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Value, E> {
        Value::deserialize(de::value::I128Deserializer::<E>::new(v))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Value, E> {
        Value::deserialize(de::value::U128Deserializer::<E>::new(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        UniqueKeys::deserialize(deserializer).map(|v| v.0)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(UniqueKeys(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key_seed(NewKey(&object))? {
            let UniqueKeys(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// Reads an object key, failing when `.0` (the keys read so far) already holds it.
struct NewKey<'a>(&'a Map<String, Value>);

impl<'de> DeserializeSeed<'de> for NewKey<'_> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for NewKey<'_> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<String, E> {
        if self.0.contains_key(key) {
            Err(E::custom(format_args!(
                "duplicate key `{key}` (a key may be given only once in a mapping)"
            )))
        } else {
            Ok(key.to_owned())
        }
    }
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
    fn duplicate_keys_are_syntax_errors_at_the_repeated_key() {
        let json = "{\n  \"a\": 1,\n  \"b\": {\"c\": 1,\n  \"c\": 2}\n}";
        let err = parse_text("a.json", json).unwrap_err();
        assert_eq!(err.0[0].problem, Problem::Syntax);
        assert_eq!(err.0[0].line_col.map(|(l, _)| l), Some(4), "{err}");
        assert!(err.0[0].message.contains("duplicate key `c`"), "{err}");
        let yaml = "a: 1\nb:\n  c: 1\n  c: 2\n";
        let err = parse_text("a.yaml", yaml).unwrap_err();
        assert_eq!(err.0[0].line_col.map(|(l, _)| l), Some(4), "{err}");
        assert!(err.0[0].message.contains("duplicate key `c`"), "{err}");
    }

    #[test]
    fn values_are_parsed_like_serde_json_does() {
        let yaml = "a: [1, -2, 1.5, 18446744073709551615, true, ~, x]\nb: {}\n";
        let value = parse_text("a.yaml", yaml).unwrap();
        let expected = serde_json::json!({
            "a": [1, -2, 1.5, 18446744073709551615u64, true, null, "x"],
            "b": {}
        });
        assert_eq!(value, expected);
    }

    #[test]
    fn a_second_yaml_document_is_located_at_its_start() {
        for (text, line) in [
            ("a: 1\n---\nb: 2\n", 2),
            ("# c\n---\na: 1\n--- # two\nb: 2\n", 4),
            ("a: 1\n...\n\nb: 2\n", 4),
        ] {
            assert_eq!(second_document_line(text), Some(line), "{text:?}");
            let err = parse_text("a.yaml", text).unwrap_err();
            assert_eq!(err.0[0].line_col, Some((line, 1)), "{text:?}: {err}");
        }
        assert_eq!(second_document_line("---\na: 1\n...\n"), None);
    }

    #[test]
    fn empty_documents_are_rejected() {
        for (name, text) in [
            ("a.yaml", ""),
            ("a.yaml", "# nothing\n"),
            ("a.json", "  \n"),
        ] {
            let err = parse_text(name, text).unwrap_err();
            assert_eq!(err.0[0].problem, Problem::Empty, "{name}: {text:?}");
        }
    }
}
