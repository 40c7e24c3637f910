//! The cases file: JSON lines (one case per line; blank lines and lines starting with
//! `#` or `//` are skipped) or YAML (a list of cases), chosen by extension (`.jsonl`,
//! `.json`, `.yaml`, `.yml`). Every problem names the file, the line (JSON lines) or the
//! case's position (YAML), the case's name and the field.
//!
//! ```yaml
//! - name: refund                       # unique; part of the runs' ids
//!   input: {text: "I was charged twice"}   # the input event
//!   expect:
//!     state: done                      # the final state
//!     status: completed                # the run's status
//!     values:                          # at paths of the final event
//!       - {path: $.id[0], equals: billing}
//!       - {path: /priority, one_of: [1, 2]}
//!       - {path: $.summary, pattern: "(?i)refund|charge"}
//!       - {path: $.total, number: 42.5, tolerance: 0.01}
//!     tool_called: read_text_file      # or a list: tools the run must have called
//!     max_attempts: 4                  # at most this many attempts in the run
//!     judge: grade.yaml                # an FSM that decides (relative to this file)
//! ```

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

use claij_core::RunStatus;
use regex::Regex;
use serde_json::{Map, Value};

use crate::path::ValuePath;

/// One case: an input event and what must hold of its run.
#[derive(Debug, Clone)]
pub struct Case {
    /// Its name (unique in the file).
    pub name: String,
    /// The input event.
    pub input: Value,
    /// What must hold.
    pub expect: Expect,
    /// Where it is written (`line 3`, `case 2`), for messages.
    pub place: String,
}

/// The expectations of a case; every one given must hold.
#[derive(Debug, Clone, Default)]
pub struct Expect {
    /// The state the run ends in.
    pub state: Option<String>,
    /// The run's final status.
    pub status: Option<RunStatus>,
    /// Checks of values of the final event.
    pub values: Vec<ValueCheck>,
    /// Tools (MCP `tools/call` names) the run must have called successfully.
    pub tool_called: Vec<String>,
    /// At most this many attempts in the whole run.
    pub max_attempts: Option<u32>,
    /// An FSM that receives the case and the run's result and ends with
    /// `{pass, reason}` (resolved against the cases file's folder).
    pub judge: Option<PathBuf>,
}

/// One check of a value of the final event.
#[derive(Debug, Clone)]
pub struct ValueCheck {
    /// Where the value is.
    pub path: ValuePath,
    /// What it must be.
    pub test: ValueTest,
}

/// What a value must be.
#[derive(Debug, Clone)]
pub enum ValueTest {
    /// Equal to this JSON value.
    Equals(Value),
    /// Equal to one of these.
    OneOf(Vec<Value>),
    /// A string matching this regular expression (anywhere in it; anchor with `^…$`).
    Pattern(Regex),
    /// A number within `tolerance` of `number`.
    Number {
        /// The expected number.
        number: f64,
        /// How far off it may be.
        tolerance: f64,
    },
}

/// A problem in the cases file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: {place}{}: {message}", field.as_ref().map(|f| format!(": {f}")).unwrap_or_default())]
pub struct CasesError {
    /// The file.
    pub file: String,
    /// Where: `line 3 (case \`refund\`)`, `case 2`, or the file as a whole.
    pub place: String,
    /// The field, e.g. `expect.values[1].pattern`.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ValueTest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueTest::Equals(v) => write!(f, "equals {v}"),
            ValueTest::OneOf(vs) => write!(f, "one of {}", Value::Array(vs.clone())),
            ValueTest::Pattern(r) => write!(f, "matches /{}/", r.as_str()),
            ValueTest::Number { number, tolerance } => write!(f, "is {number} ± {tolerance}"),
        }
    }
}

/// Reads the cases of `path`.
pub fn load_cases(path: &Path) -> Result<Vec<Case>, CasesError> {
    let text = std::fs::read_to_string(path).map_err(|e| CasesError {
        file: path.display().to_string(),
        place: "the file".into(),
        field: None,
        message: format!("cannot be read: {e}"),
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    parse_cases(&path.display().to_string(), &text, base)
}

/// Parses cases from `text` (JSON lines, or YAML when `file` ends in `.yaml`/`.yml`);
/// judges are resolved against `base`.
pub fn parse_cases(file: &str, text: &str, base: &Path) -> Result<Vec<Case>, CasesError> {
    let error = |place: String, field: Option<String>, message: String| CasesError {
        file: file.to_owned(),
        place,
        field,
        message,
    };
    let yaml = file.ends_with(".yaml") || file.ends_with(".yml");
    let mut raw: Vec<(String, Value)> = Vec::new();
    if yaml {
        let doc: Value = serde_yaml_ng::from_str(text).map_err(|e| {
            error(
                e.location()
                    .map(|l| format!("line {}", l.line()))
                    .unwrap_or_else(|| "the file".into()),
                None,
                format!("not YAML: {e}"),
            )
        })?;
        let Value::Array(items) = doc else {
            return Err(error(
                "the file".into(),
                None,
                "a YAML cases file is a list of cases".into(),
            ));
        };
        for (i, item) in items.into_iter().enumerate() {
            raw.push((format!("case {}", i + 1), item));
        }
    } else {
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with("//") {
                continue;
            }
            let value: Value = serde_json::from_str(line).map_err(|e| {
                error(
                    format!("line {}", i + 1),
                    None,
                    format!("not JSON (column {}): {e}", e.column()),
                )
            })?;
            raw.push((format!("line {}", i + 1), value));
        }
    }
    if raw.is_empty() {
        return Err(error("the file".into(), None, "holds no cases".into()));
    }
    let mut names = HashSet::new();
    let mut cases = Vec::with_capacity(raw.len());
    for (place, value) in raw {
        let case = parse_case(&place, value, base)
            .map_err(|(place, field, message)| error(place, field, message))?;
        if !names.insert(case.name.clone()) {
            return Err(error(
                case.place.clone(),
                Some("name".into()),
                format!(
                    "another case is named `{}`: names must be unique",
                    case.name
                ),
            ));
        }
        cases.push(case);
    }
    Ok(cases)
}

type Problem = (String, Option<String>, String);

fn parse_case(place: &str, value: Value, base: &Path) -> Result<Case, Problem> {
    let Value::Object(mut map) = value else {
        return Err((
            place.to_owned(),
            None,
            "a case is an object with `name`, `input` and `expect`".into(),
        ));
    };
    let named = map
        .get("name")
        .and_then(Value::as_str)
        .map(|n| format!("{place} (case `{n}`)"))
        .unwrap_or_else(|| place.to_owned());
    let at = |field: &str, message: String| (named.clone(), Some(field.to_owned()), message);
    unknown_fields(&map, &["name", "input", "expect"], "").map_err(|(f, m)| at(&f, m))?;
    let name = match map.remove("name") {
        Some(Value::String(s)) if !s.trim().is_empty() => s,
        Some(_) => return Err(at("name", "must be a non-empty string".into())),
        None => return Err(at("name", "is missing: every case has a name".into())),
    };
    let input = map
        .remove("input")
        .ok_or_else(|| at("input", "is missing: the input event of the run".into()))?;
    if !input.is_object() {
        return Err(at("input", "must be an object (the input event)".into()));
    }
    let expect = match map.remove("expect") {
        Some(Value::Object(e)) => parse_expect(e, base).map_err(|(f, m)| at(&f, m))?,
        Some(_) => return Err(at("expect", "must be an object".into())),
        None => {
            return Err(at(
                "expect",
                "is missing: say what must hold (state, status, values, tool_called, max_attempts, judge)".into(),
            ));
        }
    };
    Ok(Case {
        name,
        input,
        expect,
        place: named,
    })
}

fn unknown_fields(
    map: &Map<String, Value>,
    known: &[&str],
    prefix: &str,
) -> Result<(), (String, String)> {
    match map.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err((
            format!("{prefix}{k}"),
            format!("is not a known field (known: {})", known.join(", ")),
        )),
        None => Ok(()),
    }
}

fn parse_expect(mut map: Map<String, Value>, base: &Path) -> Result<Expect, (String, String)> {
    const KNOWN: [&str; 6] = [
        "state",
        "status",
        "values",
        "tool_called",
        "max_attempts",
        "judge",
    ];
    unknown_fields(&map, &KNOWN, "expect.")?;
    if map.is_empty() {
        return Err((
            "expect".into(),
            format!("is empty: give at least one of {}", KNOWN.join(", ")),
        ));
    }
    let bad = |field: &str, message: &str| (format!("expect.{field}"), message.to_owned());
    let mut expect = Expect::default();
    if let Some(v) = map.remove("state") {
        expect.state = Some(
            v.as_str()
                .ok_or_else(|| bad("state", "must be a state's id (a string)"))?
                .to_owned(),
        );
    }
    if let Some(v) = map.remove("status") {
        let text = v.as_str().unwrap_or_default();
        expect.status = Some(text.parse().map_err(|_| {
            bad(
                "status",
                "must be one of completed, failed, suspended, interrupted, running",
            )
        })?);
    }
    if let Some(v) = map.remove("max_attempts") {
        expect.max_attempts = Some(
            v.as_u64()
                .filter(|n| *n >= 1)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| bad("max_attempts", "must be a whole number ≥ 1"))?,
        );
    }
    if let Some(v) = map.remove("tool_called") {
        expect.tool_called = match v {
            Value::String(s) if !s.is_empty() => vec![s],
            Value::Array(items) if !items.is_empty() => items
                .into_iter()
                .map(|i| match i {
                    Value::String(s) if !s.is_empty() => Ok(s),
                    _ => Err(bad("tool_called", "must list tool names (strings)")),
                })
                .collect::<Result<_, _>>()?,
            _ => {
                return Err(bad(
                    "tool_called",
                    "must be a tool's name or a list of them",
                ));
            }
        };
    }
    if let Some(v) = map.remove("judge") {
        let p = v
            .as_str()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| bad("judge", "must be the path of an FSM document"))?;
        expect.judge = Some(base.join(p));
    }
    if let Some(v) = map.remove("values") {
        let Value::Array(items) = v else {
            return Err(bad(
                "values",
                "must be a list of {path, equals | one_of | pattern | number}",
            ));
        };
        for (i, item) in items.into_iter().enumerate() {
            expect
                .values
                .push(parse_check(item).map_err(|(f, m)| (format!("expect.values[{i}]{f}"), m))?);
        }
    }
    Ok(expect)
}

fn parse_check(item: Value) -> Result<ValueCheck, (String, String)> {
    let Value::Object(mut map) = item else {
        return Err((
            String::new(),
            "must be an object {path, equals | one_of | pattern | number}".into(),
        ));
    };
    unknown_fields(
        &map,
        &["path", "equals", "one_of", "pattern", "number", "tolerance"],
        ".",
    )?;
    let path = match map.remove("path") {
        Some(Value::String(p)) => ValuePath::parse(&p).map_err(|e| (".path".to_owned(), e))?,
        Some(_) => return Err((".path".into(), "must be a string".into())),
        None => return Err((".path".into(), "is missing: `$.a.b[0]` or `/a/b/0`".into())),
    };
    let given: Vec<&str> = ["equals", "one_of", "pattern", "number"]
        .into_iter()
        .filter(|k| map.contains_key(*k))
        .collect();
    if given.len() != 1 {
        return Err((
            String::new(),
            format!(
                "needs exactly one of equals, one_of, pattern, number (has {})",
                if given.is_empty() {
                    "none".to_owned()
                } else {
                    given.join(", ")
                }
            ),
        ));
    }
    if map.contains_key("tolerance") && given[0] != "number" {
        return Err((".tolerance".into(), "goes with `number` only".into()));
    }
    let test = match given[0] {
        "equals" => ValueTest::Equals(map.remove("equals").unwrap_or(Value::Null)),
        "one_of" => match map.remove("one_of") {
            Some(Value::Array(vs)) if !vs.is_empty() => ValueTest::OneOf(vs),
            _ => return Err((".one_of".into(), "must be a non-empty list".into())),
        },
        "pattern" => {
            let text = map
                .remove("pattern")
                .and_then(|p| p.as_str().map(str::to_owned))
                .ok_or_else(|| (".pattern".to_owned(), "must be a string".to_owned()))?;
            ValueTest::Pattern(Regex::new(&text).map_err(|e| {
                (
                    ".pattern".to_owned(),
                    format!("not a regular expression: {e}"),
                )
            })?)
        }
        _ => {
            let number = map
                .get("number")
                .and_then(Value::as_f64)
                .ok_or_else(|| (".number".to_owned(), "must be a number".to_owned()))?;
            let tolerance = match map.get("tolerance") {
                None => 0.0,
                Some(t) => t
                    .as_f64()
                    .filter(|t| *t >= 0.0)
                    .ok_or_else(|| (".tolerance".to_owned(), "must be a number ≥ 0".to_owned()))?,
            };
            ValueTest::Number { number, tolerance }
        }
    };
    Ok(ValueCheck { path, test })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{ValueTest, parse_cases};

    #[test]
    fn json_lines_and_yaml_read_the_same_cases() {
        let jsonl = r#"
# a comment
{"name": "refund", "input": {"text": "charged twice"}, "expect": {"state": "done", "status": "completed", "values": [{"path": "$.id[0]", "equals": "billing"}, {"path": "/priority", "one_of": [1, 2]}, {"path": "$.summary", "pattern": "(?i)charge"}, {"path": "$.total", "number": 3, "tolerance": 0.5}], "tool_called": "read_text_file", "max_attempts": 3, "judge": "grade.yaml"}}
"#;
        let yaml = r#"
- name: refund
  input: {text: charged twice}
  expect:
    state: done
    status: completed
    values:
      - {path: "$.id[0]", equals: billing}
      - {path: /priority, one_of: [1, 2]}
      - {path: $.summary, pattern: "(?i)charge"}
      - {path: $.total, number: 3, tolerance: 0.5}
    tool_called: [read_text_file]
    max_attempts: 3
    judge: grade.yaml
"#;
        for (file, text) in [("c.jsonl", jsonl), ("c.yaml", yaml)] {
            let cases = parse_cases(file, text, Path::new("evals")).unwrap();
            assert_eq!(cases.len(), 1, "{file}");
            let e = &cases[0].expect;
            assert_eq!(cases[0].name, "refund");
            assert_eq!(e.state.as_deref(), Some("done"));
            assert_eq!(e.status, Some(claij_core::RunStatus::Completed));
            assert_eq!(e.tool_called, vec!["read_text_file".to_owned()]);
            assert_eq!(e.max_attempts, Some(3));
            assert_eq!(e.judge.as_deref(), Some(Path::new("evals/grade.yaml")));
            assert_eq!(e.values.len(), 4);
            assert!(matches!(
                e.values[3].test,
                ValueTest::Number { number, tolerance } if number == 3.0 && tolerance == 0.5
            ));
        }
    }

    #[test]
    fn problems_name_the_line_the_case_and_the_field() {
        for (file, text, says) in [
            (
                "c.jsonl",
                "{\"name\": \"a\", \"input\": {}, \"expect\": {\"state\": \"x\"}}\n{\"name\": \"b\", \"input\": {}, \"expect\": {\"values\": [{\"path\": \"$.a\", \"pattern\": \"(\"}]}}",
                "c.jsonl: line 2 (case `b`): expect.values[0].pattern: not a regular expression",
            ),
            (
                "c.jsonl",
                "{\"name\": \"a\", \"input\": {}, \"expect\": {\"stat\": \"done\"}}",
                "c.jsonl: line 1 (case `a`): expect.stat: is not a known field",
            ),
            (
                "c.jsonl",
                "{\"name\": \"a\", \"input\": {}}",
                "line 1 (case `a`): expect: is missing",
            ),
            (
                "c.jsonl",
                "{\"input\": {}, \"expect\": {\"state\": \"x\"}}",
                "line 1: name: is missing",
            ),
            (
                "c.jsonl",
                "{\"name\": \"a\", \"input\": {}, \"expect\": {\"values\": [{\"path\": \"$.a\", \"equals\": 1, \"one_of\": [1]}]}}",
                "expect.values[0]: needs exactly one of equals, one_of, pattern, number (has equals, one_of)",
            ),
            (
                "c.jsonl",
                "{\"name\": \"a\", \"input\": {}, \"expect\": {\"status\": \"done\"}}",
                "expect.status: must be one of",
            ),
            (
                "c.jsonl",
                "{\"name\": \"a\", \"input\": {}, \"expect\": {\"max_attempts\": 0}}",
                "expect.max_attempts: must be a whole number",
            ),
            (
                "c.jsonl",
                "{\"name\": \"a\", \"input\": {}, \"expect\": {}}",
                "expect: is empty",
            ),
            (
                "c.jsonl",
                "{\"name\": \"a\", \"input\": 3, \"expect\": {\"state\": \"x\"}}",
                "input: must be an object",
            ),
            (
                "c.jsonl",
                "{\"name\": \"a\", \"input\": {}, \"expect\": {\"state\": \"x\"}}\n{\"name\": \"a\", \"input\": {}, \"expect\": {\"state\": \"x\"}}",
                "line 2 (case `a`): name: another case is named `a`",
            ),
            ("c.jsonl", "{\"name\": \"a\",", "c.jsonl: line 1: not JSON"),
            ("c.jsonl", "\n\n", "c.jsonl: the file: holds no cases"),
            (
                "c.yaml",
                "- name: a\n  input: {}\n  expect: {values: [{path: nope, equals: 1}]}\n",
                "c.yaml: case 1 (case `a`): expect.values[0].path: `nope` is not a path",
            ),
            (
                "c.yaml",
                "name: a\n",
                "a YAML cases file is a list of cases",
            ),
            (
                "c.yaml",
                "- name: a\n  input: {}\n  expect: {values: [{path: $.a, pattern: x, tolerance: 1}]}\n",
                "expect.values[0].tolerance: goes with `number` only",
            ),
        ] {
            let e = parse_cases(file, text, Path::new("."))
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{text}\n  got: {e}\n  want: {says}");
        }
    }
}
