//! Located problems found while loading a document: the file, the JSON path and the reason.

use std::fmt;

/// A location inside a document, kept as a JSON Pointer (`/states/1/id`) and shown as a
/// JSONPath (`$.states[1].id`), the form people read.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct JsonPath(String);

impl JsonPath {
    /// The document root.
    pub fn root() -> Self {
        Self(String::new())
    }

    /// A path from a JSON Pointer such as `/states/0/id`.
    pub fn from_pointer(pointer: &str) -> Self {
        Self(pointer.to_owned())
    }

    /// This path extended by one object key or array index.
    pub fn join(&self, segment: impl fmt::Display) -> Self {
        Self(format!("{}/{}", self.0, escape(&segment.to_string())))
    }

    /// This path extended by a JSON Pointer relative to it (`/properties/a`; empty: this
    /// path itself).
    pub fn join_pointer(&self, pointer: &str) -> Self {
        Self(format!("{}{}", self.0, pointer))
    }

    /// The JSON Pointer form (`/states/0/id`; empty for the root).
    pub fn pointer(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("$")?;
        if self.0.is_empty() {
            return Ok(());
        }
        for raw in self.0[1..].split('/') {
            let segment = unescape(raw);
            if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
                write!(f, "[{segment}]")?;
            } else if !segment.is_empty()
                && segment
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                write!(f, ".{segment}")?;
            } else {
                write!(f, "[{segment:?}]")?;
            }
        }
        Ok(())
    }
}

/// One key or index as a JSON Pointer segment (`~` and `/` escaped).
pub(crate) fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// A JSON Pointer segment back as the key or index it stands for.
pub(crate) fn unescape(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}

/// What kind of problem a diagnostic reports; tests and tools match on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Problem {
    /// The file could not be read.
    Io,
    /// The text is not valid JSON or YAML.
    Syntax,
    /// The document holds nothing.
    Empty,
    /// The document does not match the meta-schema (wrong type, unknown field, …).
    Format,
    /// Two states or two transitions share an id.
    Duplicate,
    /// A transition names a state that does not exist.
    UnknownState,
    /// `start` is used as a state id.
    ReservedState,
    /// No transition leaves `start`.
    NoEntry,
    /// No state is terminal.
    NoTerminal,
    /// A state cannot be reached from `start`.
    Unreachable,
    /// No terminal state can be reached from a state.
    Dead,
    /// A `$ref` does not resolve.
    UnresolvedRef,
    /// A schema does not compile.
    BadSchema,
    /// A dynamic schema name no provider knows.
    UnknownDynamicSchema,
    /// A state names an action nobody registered.
    UnknownAction,
    /// A state's `config` is rejected by its action.
    BadConfig,
    /// A route (`on_failure`, or one an action declares in its `config`) with no
    /// matching transition, or a terminal state with outgoing transitions.
    BadRoute,
    /// A state's example answer that names no transition leaving the state, or does not
    /// satisfy the schema of the one it names.
    BadExample,
}

/// One located problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file (or another name for the source, such as `<stdin>`).
    pub file: String,
    /// Where in the document.
    pub path: JsonPath,
    /// Line and column (1-based), when known (syntax errors).
    pub line_col: Option<(usize, usize)>,
    /// What kind of problem.
    pub problem: Problem,
    /// The reason, in words.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some((line, col)) = self.line_col {
            write!(f, ":{line}:{col}")?;
        }
        write!(f, ": {}: {}", self.path, self.message)
    }
}

/// Every problem found in a document, all at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} problem(s) in {}:\n{}", .0.len(), .0.first().map(|d| d.file.as_str()).unwrap_or("?"), render(.0))]
pub struct Diagnostics(pub Vec<Diagnostic>);

fn render(all: &[Diagnostic]) -> String {
    all.iter()
        .map(|d| format!("  {d}"))
        .collect::<Vec<_>>()
        .join("\n")
}

impl Diagnostics {
    /// The problems, in the order found.
    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter()
    }

    /// Whether any problem is of this kind.
    pub fn has(&self, problem: Problem) -> bool {
        self.0.iter().any(|d| d.problem == problem)
    }
}

/// Collects diagnostics for one file.
#[derive(Debug)]
pub(crate) struct Collector {
    file: String,
    found: Vec<Diagnostic>,
}

impl Collector {
    pub(crate) fn new(file: &str) -> Self {
        Self {
            file: file.to_owned(),
            found: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, problem: Problem, path: JsonPath, message: impl Into<String>) {
        self.found.push(Diagnostic {
            file: self.file.clone(),
            path,
            line_col: None,
            problem,
            message: message.into(),
        });
    }

    pub(crate) fn push_at(
        &mut self,
        problem: Problem,
        line_col: (usize, usize),
        message: impl Into<String>,
    ) {
        self.found.push(Diagnostic {
            file: self.file.clone(),
            path: JsonPath::root(),
            line_col: Some(line_col),
            problem,
            message: message.into(),
        });
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.found.is_empty()
    }

    /// Whether a problem of this kind is already reported at `path`.
    pub(crate) fn has_at(&self, problem: Problem, path: &JsonPath) -> bool {
        self.found
            .iter()
            .any(|d| d.problem == problem && d.path == *path)
    }

    pub(crate) fn finish(self) -> Result<(), Diagnostics> {
        if self.found.is_empty() {
            Ok(())
        } else {
            Err(Diagnostics(self.found))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_read_as_jsonpath() {
        let p = JsonPath::root().join("states").join(2).join("config");
        assert_eq!(p.to_string(), "$.states[2].config");
        assert_eq!(p.pointer(), "/states/2/config");
        assert_eq!(JsonPath::root().to_string(), "$");
        assert_eq!(
            JsonPath::root().join("schemas").join("a b").to_string(),
            "$.schemas[\"a b\"]"
        );
    }
}
