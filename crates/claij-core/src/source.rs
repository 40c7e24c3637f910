//! Turning text into a JSON value: JSON or YAML, with located syntax errors.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::diagnostic::{Collector, Diagnostics, JsonPath, Problem};

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
        Syntax::Json => parse_json_text(text),
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

fn parse_json_text(text: &str) -> Result<Value, SyntaxError> {
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

/// What [`parse_json`] refused, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct JsonError {
    /// What kind of refusal.
    pub kind: JsonErrorKind,
    /// Where in the value (`$.input.approver`); the root `$` for a syntax error.
    pub place: JsonPath,
    /// The line (1-based) of the text where it was found; 0 when unknown.
    pub line: usize,
    /// The column (1-based) on that line; 0 when unknown.
    pub column: usize,
    /// What is wrong (a syntax error's message carries its line and column).
    pub message: String,
}

/// The kinds of [`JsonError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonErrorKind {
    /// Not JSON (or more than one value).
    Syntax,
    /// An object gives a key twice.
    DuplicateKey,
    /// Arrays and objects nest deeper than [`MAX_NESTING`].
    TooDeep,
}

/// How deep arrays and objects may nest in any JSON or YAML claij reads (the root object
/// or array is level 1). Everything read is held to it, so that what is stored can always
/// be read back (serde_json's own limit, 128 levels, is met by no stored record that
/// wraps a value of 64).
pub const MAX_NESTING: usize = 64;

/// Parses `bytes` as one JSON value, the way claij takes JSON from outside: a key given
/// twice in one object is refused (not "the last one wins"), and so is nesting deeper than
/// [`MAX_NESTING`]; each refusal says where.
pub fn parse_json(bytes: &[u8]) -> Result<Value, JsonError> {
    let found = Found::default();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = Strict::root(&found)
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v));
    value.map_err(|e| {
        let (line, column) = (e.line(), e.column());
        match found.take() {
            Some((kind, place, message)) => JsonError {
                kind,
                place,
                line,
                column,
                message,
            },
            None => JsonError {
                kind: JsonErrorKind::Syntax,
                place: JsonPath::root(),
                line,
                column,
                message: e.to_string(),
            },
        }
    })
}

/// The refusal a [`Strict`] visitor made (a parser's error holds only its text).
type Found = std::cell::RefCell<Option<(JsonErrorKind, JsonPath, String)>>;

/// The JSON value of JSON or YAML text, strictly: any object with a key given twice and
/// any nesting deeper than [`MAX_NESTING`] refused. The error is raised where the repeated
/// key or the level too deep is read, so both parsers locate it there.
struct UniqueKeys(Value);

impl<'de> Deserialize<'de> for UniqueKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let found = Found::default();
        Strict::root(&found)
            .deserialize(deserializer)
            .map(UniqueKeys)
    }
}

/// Where a value being read is: the root, or a key or index below its parent's place
/// (kept on the stack, turned into a [`JsonPath`] only for a refusal).
struct At<'a> {
    parent: Option<&'a At<'a>>,
    segment: Segment<'a>,
}

enum Segment<'a> {
    Root,
    Key(&'a str),
    Index(usize),
}

impl At<'_> {
    fn path(&self) -> JsonPath {
        let mut segments = Vec::new();
        let mut at = Some(self);
        while let Some(here) = at {
            match here.segment {
                Segment::Root => {}
                Segment::Key(key) => segments.push(key.to_owned()),
                Segment::Index(i) => segments.push(i.to_string()),
            }
            at = here.parent;
        }
        segments
            .iter()
            .rev()
            .fold(JsonPath::root(), |path, s| path.join(s))
    }
}

/// Reads one value at `at`, `depth` levels down, refusing repeated keys and nesting
/// deeper than [`MAX_NESTING`] (and telling `found` which and where).
struct Strict<'a> {
    found: &'a Found,
    at: &'a At<'a>,
    depth: usize,
}

const ROOT: At<'static> = At {
    parent: None,
    segment: Segment::Root,
};

impl<'a> Strict<'a> {
    fn root(found: &'a Found) -> Self {
        Strict {
            found,
            at: &ROOT,
            depth: 0,
        }
    }

    fn refuse<E: de::Error>(&self, kind: JsonErrorKind, at: &At<'_>, message: String) -> E {
        let error = E::custom(&message);
        *self.found.borrow_mut() = Some((kind, at.path(), message));
        error
    }

    /// One more level down, or the refusal of it.
    fn enter<E: de::Error>(&self) -> Result<usize, E> {
        let depth = self.depth + 1;
        if depth > MAX_NESTING {
            return Err(self.refuse(
                JsonErrorKind::TooDeep,
                self.at,
                format!("arrays and objects nest deeper than {MAX_NESTING} levels here"),
            ));
        }
        Ok(depth)
    }
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// Builds a [`Value`] like serde_json's own visitor does.
impl<'de> Visitor<'de> for Strict<'_> {
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
        self.deserialize(deserializer)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let depth = self.enter()?;
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        loop {
            let at = At {
                parent: Some(self.at),
                segment: Segment::Index(items.len()),
            };
            let seed = Strict {
                found: self.found,
                at: &at,
                depth,
            };
            match seq.next_element_seed(seed)? {
                Some(item) => items.push(item),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let depth = self.enter()?;
        let mut object = Map::new();
        while let Some(key) = map.next_key_seed(NewKey {
            strict: &self,
            seen: &object,
        })? {
            let at = At {
                parent: Some(self.at),
                segment: Segment::Key(&key),
            };
            let value = map.next_value_seed(Strict {
                found: self.found,
                at: &at,
                depth,
            })?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// Reads an object key, refusing one the object already has: the error is raised while
/// the repeated key is read, so both parsers locate it at that key.
struct NewKey<'s, 'a> {
    strict: &'s Strict<'a>,
    seen: &'s Map<String, Value>,
}

impl<'de> DeserializeSeed<'de> for NewKey<'_, '_> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for NewKey<'_, '_> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<String, E> {
        if self.seen.contains_key(key) {
            let at = At {
                parent: Some(self.strict.at),
                segment: Segment::Key(key),
            };
            Err(self.strict.refuse(
                JsonErrorKind::DuplicateKey,
                &at,
                format!("duplicate key `{key}` (a key may be given only once in a mapping)"),
            ))
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
    fn json_from_outside_refuses_repeated_keys_naming_the_key_and_place() {
        let err = parse_json(br#"{"input": {"a": [1, {"b": 1, "b": 2}]}}"#).unwrap_err();
        assert_eq!(err.kind, JsonErrorKind::DuplicateKey);
        assert_eq!(err.place.to_string(), "$.input.a[1].b");
        assert!(err.message.contains("duplicate key `b`"), "{err}");
        assert_eq!(err.line, 1);
    }

    #[test]
    fn json_from_outside_nests_at_most_max_nesting_levels() {
        let nested = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        assert!(parse_json(nested(MAX_NESTING).as_bytes()).is_ok());
        let err = parse_json(nested(MAX_NESTING + 1).as_bytes()).unwrap_err();
        assert_eq!(err.kind, JsonErrorKind::TooDeep);
        assert_eq!(err.place.pointer(), "/0".repeat(MAX_NESTING).as_str());
        // Far deeper than serde_json's own limit: refused the same way, not by it.
        let err = parse_json(nested(100_000).as_bytes()).unwrap_err();
        assert_eq!(err.kind, JsonErrorKind::TooDeep);
        let yaml = format!("a: {}\n", nested(MAX_NESTING));
        assert!(
            parse_text("a.yaml", &yaml).is_err(),
            "documents are held to it too"
        );
    }

    #[test]
    fn json_from_outside_is_one_value() {
        let err = parse_json(b"{} {}").unwrap_err();
        assert_eq!(err.kind, JsonErrorKind::Syntax);
        assert_eq!((err.line, err.column), (1, 4));
        assert_eq!(
            parse_json(b" {\"a\": 1} ").ok(),
            Some(serde_json::json!({"a": 1}))
        );
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
