//! The corpus of malformed documents: every file in `tests/malformed/` must be rejected
//! by the loader with the located diagnostics `tests/malformed/MANIFEST.yaml` lists for
//! it (problem kind, JSON path or line/column, a fragment of the message), and every file
//! in `tests/valid/` and `examples/` must load. The documents are checked against the
//! engine's action registry, so action configs are checked too.
//!
//! `CLAIJ_DUMP_DIAGNOSTICS=1 cargo test -p claij-engine --test malformed -- --nocapture`
//! prints what the loader reports for every corpus file, in the manifest's form.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use claij_core::{Diagnostic, Diagnostics, Problem, load_file};
use serde::Deserialize;

const MANIFEST: &str = "MANIFEST.yaml";

/// The known actions documents are loaded against: the engine's registry of built-in
/// actions.
fn registry() -> claij_engine::ActionRegistry {
    claij_engine::ActionRegistry::with_builtins()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    files: BTreeMap<String, Entry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    /// What the file tests, for people.
    #[allow(dead_code)]
    tests: String,
    /// When true (the default), the loader may report nothing beyond `expect`.
    #[serde(default = "yes")]
    exact: bool,
    /// The diagnostics that must be reported.
    expect: Vec<Expect>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    /// The `Problem` variant's name.
    problem: String,
    /// The JSON path as displayed (`$.xitions[2].id[1]`).
    path: Option<String>,
    /// Line and column (syntax errors).
    line_col: Option<(usize, usize)>,
    /// The line alone, when the column is not worth pinning.
    line: Option<usize>,
    /// A fragment of the message.
    message: String,
}

impl Expect {
    fn matches(&self, d: &Diagnostic) -> bool {
        format!("{:?}", d.problem) == self.problem
            && self.path.as_ref().is_none_or(|p| *p == d.path.to_string())
            && self.line_col.is_none_or(|lc| d.line_col == Some(lc))
            && self
                .line
                .is_none_or(|l| d.line_col.is_some_and(|(line, _)| line == l))
            && d.message.contains(&self.message)
    }
}

impl std::fmt::Display for Expect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.problem)?;
        if let Some(p) = &self.path {
            write!(f, " at {p}")?;
        }
        if let Some((l, c)) = self.line_col {
            write!(f, " at line {l}, column {c}")?;
        }
        if let Some(l) = self.line {
            write!(f, " at line {l}")?;
        }
        write!(f, " with a message containing {:?}", self.message)
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root exists")
}

fn malformed_dir() -> PathBuf {
    repo_root().join("tests/malformed")
}

fn manifest() -> Manifest {
    let path = malformed_dir().join(MANIFEST);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The regular files directly in `dir` whose names pass `keep`, sorted.
fn files_in(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|p| p.is_file())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(&keep))
        .collect();
    out.sort();
    out
}

fn corpus() -> Vec<PathBuf> {
    files_in(&malformed_dir(), |name| name != MANIFEST)
}

fn file_name(path: &Path) -> &str {
    path.file_name()
        .and_then(|n| n.to_str())
        .expect("a UTF-8 file name")
}

/// Loads `path`, turning a panic of the loader into an error message.
fn load(path: &Path) -> Result<Result<claij_core::Fsm, Diagnostics>, String> {
    let registry = registry();
    catch_unwind(AssertUnwindSafe(|| load_file(path, &registry))).map_err(|panic| {
        let why = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "(no message)".to_owned());
        format!("the loader panicked: {why}")
    })
}

fn describe(d: &Diagnostic) -> String {
    let mut out = format!("{:?} at {}", d.problem, d.path);
    if let Some((l, c)) = d.line_col {
        let _ = write!(out, " (line {l}, column {c})");
    }
    let _ = write!(out, ": {}", d.message);
    out
}

/// What is wrong with the loader's answer for one corpus file (empty: all is well).
fn check_rejection(path: &Path, entry: &Entry) -> Vec<String> {
    let name = file_name(path);
    let err = match load(path) {
        Err(panic) => return vec![panic],
        Ok(Ok(_)) => return vec!["the document was accepted; it must be rejected".to_owned()],
        Ok(Err(err)) => err,
    };
    let mut problems = Vec::new();
    if err.0.is_empty() {
        problems.push("rejected with an empty list of diagnostics".to_owned());
    }
    let shown = err.to_string();
    if !shown.contains(name) {
        problems.push(format!(
            "the error's Display does not name the file `{name}`:\n{shown}"
        ));
    }
    for d in &err.0 {
        if !d.to_string().contains(name) {
            problems.push(format!(
                "a diagnostic's Display does not name the file: {d}"
            ));
        }
        if d.problem == Problem::Syntax && d.line_col.is_none() {
            problems.push(format!("a syntax error without line and column: {d}"));
        }
    }
    let mut used = vec![false; err.0.len()];
    for expect in &entry.expect {
        let hit = err
            .0
            .iter()
            .enumerate()
            .find(|(i, d)| !used[*i] && expect.matches(d));
        match hit {
            Some((i, _)) => used[i] = true,
            None => problems.push(format!("missing: {expect}")),
        }
    }
    if entry.exact {
        for (d, _) in err.0.iter().zip(&used).filter(|(_, used)| !**used) {
            problems.push(format!("unexpected: {}", describe(d)));
        }
    }
    if !problems.is_empty() {
        let mut actual = String::from("the loader reported:");
        for d in &err.0 {
            let _ = write!(actual, "\n      - {}", describe(d));
        }
        problems.push(actual);
    }
    problems
}

#[test]
fn the_manifest_covers_exactly_the_corpus() {
    let manifest = manifest();
    let on_disk: BTreeSet<String> = corpus().iter().map(|p| file_name(p).to_owned()).collect();
    let listed: BTreeSet<String> = manifest.files.keys().cloned().collect();
    let unlisted: Vec<&String> = on_disk.difference(&listed).collect();
    let missing: Vec<&String> = listed.difference(&on_disk).collect();
    assert!(
        unlisted.is_empty() && missing.is_empty(),
        "tests/malformed and its manifest disagree:\n  files not in {MANIFEST}: {unlisted:?}\n  \
         entries with no file: {missing:?}"
    );
    for (name, entry) in &manifest.files {
        assert!(!entry.expect.is_empty(), "{name}: no expectation");
        for e in &entry.expect {
            assert!(
                e.path.is_some() || e.line_col.is_some() || e.line.is_some(),
                "{name}: expectation {e} gives neither a path nor a line"
            );
        }
    }
}

#[test]
fn the_corpus_covers_every_kind_of_problem() {
    let manifest = manifest();
    let covered: BTreeSet<&str> = manifest
        .files
        .values()
        .flat_map(|e| e.expect.iter().map(|x| x.problem.as_str()))
        .collect();
    let kinds = [
        Problem::Syntax,
        Problem::Empty,
        Problem::Format,
        Problem::Duplicate,
        Problem::UnknownState,
        Problem::ReservedState,
        Problem::NoEntry,
        Problem::NoTerminal,
        Problem::Unreachable,
        Problem::Dead,
        Problem::UnresolvedRef,
        Problem::BadSchema,
        Problem::UnknownDynamicSchema,
        Problem::UnknownAction,
        Problem::BadConfig,
        Problem::BadRoute,
        Problem::BadExample,
    ];
    let uncovered: Vec<String> = kinds
        .iter()
        .map(|k| format!("{k:?}"))
        .filter(|k| !covered.contains(k.as_str()))
        .collect();
    assert!(uncovered.is_empty(), "no corpus file expects {uncovered:?}");
}

#[test]
fn every_malformed_document_is_rejected_with_located_diagnostics() {
    let manifest = manifest();
    let dump = std::env::var_os("CLAIJ_DUMP_DIAGNOSTICS").is_some();
    let mut report = String::new();
    let mut failed = 0;
    for path in corpus() {
        let name = file_name(&path);
        if dump {
            println!("{name}:");
            match load(&path) {
                Err(panic) => println!("  PANIC {panic}"),
                Ok(Ok(_)) => println!("  ACCEPTED"),
                Ok(Err(err)) => {
                    for d in &err.0 {
                        println!("  - {}", describe(d));
                    }
                }
            }
        }
        let Some(entry) = manifest.files.get(name) else {
            continue; // reported by the_manifest_covers_exactly_the_corpus
        };
        let problems = check_rejection(&path, entry);
        if !problems.is_empty() {
            failed += 1;
            let _ = writeln!(report, "\n{name}:");
            for p in problems {
                let _ = writeln!(report, "  {p}");
            }
        }
    }
    assert!(
        failed == 0,
        "{failed} corpus file(s) not rejected as {MANIFEST} expects:\n{report}"
    );
}

#[test]
fn valid_documents_and_examples_load() {
    let root = repo_root();
    let mut files = files_in(&root.join("tests/valid"), |_| true);
    assert!(!files.is_empty(), "tests/valid holds no document");
    let examples = files_in(&root.join("examples"), |name| {
        name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json")
    });
    assert!(!examples.is_empty(), "examples/ holds no document");
    files.extend(examples);
    let mut report = String::new();
    for path in &files {
        match load(path) {
            Ok(Ok(_)) => {}
            Ok(Err(err)) => {
                let _ = writeln!(report, "\n{err}");
            }
            Err(panic) => {
                let _ = writeln!(report, "\n{}: {panic}", path.display());
            }
        }
    }
    assert!(report.is_empty(), "valid documents were rejected:{report}");
}

#[test]
fn a_missing_file_is_an_io_error_naming_it() {
    let path = malformed_dir().join("no-such-file.yaml");
    let err = load_file(&path, &registry()).expect_err("a missing file cannot load");
    assert_eq!(err.0.len(), 1, "{err}");
    assert_eq!(err.0[0].problem, Problem::Io, "{err}");
    assert!(err.to_string().contains("no-such-file.yaml"), "{err}");
}
