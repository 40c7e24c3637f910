//! docs/ARCHITECTURE.md against the repository: every backticked repository path exists,
//! every backticked crate name (`claij`, `claij-…`) is a workspace member, and every
//! `**Architecture Invariant:**` line saying `` `A` never depends on `B` `` (or
//! `` `B`, `C` and `D` ``, `or`) holds in the resolved graph of normal dependencies.

use std::collections::BTreeSet;
use std::path::Path;

use crate::metadata::Metadata;

/// The marker an invariant line carries.
const MARKER: &str = "**Architecture Invariant:**";
/// The sentence tidy checks on such a line.
const NEVER_DEPENDS_ON: &str = "never depends on";

/// `` `A` never depends on `B`, `C` ``: `A` never reaches a package named `B` or `C`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Invariant {
    /// The workspace crate that must not depend.
    pub(crate) crate_name: String,
    /// The package names it must never reach.
    pub(crate) forbidden: Vec<String>,
}

/// Every problem with `doc`, one line each; empty when it holds.
pub(crate) fn check(doc: &str, root: &Path, metadata: &Metadata) -> Vec<String> {
    let members = metadata.member_names();
    let top_level = top_level_entries(root);
    let mut problems = Vec::new();
    for (number, line) in prose_lines(doc) {
        for span in code_spans(line) {
            if let Some(path) = repository_path(span, &top_level) {
                let full = root.join(path);
                let exists = if path.ends_with('/') {
                    full.is_dir()
                } else {
                    full.exists()
                };
                if !exists {
                    problems.push(format!("line {number}: `{span}` does not exist"));
                }
            } else if is_crate_name(span) && !members.contains(span) {
                problems.push(format!("line {number}: `{span}` is no workspace member"));
            }
        }
        for invariant in invariants(line) {
            match invariant {
                Err(why) => problems.push(format!("line {number}: {why}")),
                Ok(Invariant {
                    crate_name,
                    forbidden,
                }) => {
                    for name in forbidden {
                        match metadata.dependency_chain(&crate_name, &name) {
                            Err(why) => problems.push(format!("line {number}: {why}")),
                            Ok(None) => {}
                            Ok(Some(chain)) => problems.push(format!(
                                "line {number}: `{crate_name}` depends on `{name}`: {}",
                                chain.join(" → ")
                            )),
                        }
                    }
                }
            }
        }
    }
    problems
}

/// The lines outside fenced code blocks, numbered from 1.
fn prose_lines(doc: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut fenced = false;
    doc.lines().enumerate().filter_map(move |(i, line)| {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            return None;
        }
        (!fenced).then_some((i + 1, line))
    })
}

/// The text of each single-backtick code span on a line.
pub(crate) fn code_spans(line: &str) -> impl Iterator<Item = &str> {
    line.split('`').skip(1).step_by(2)
}

/// The repository's top-level entries (`crates`, `docs`, `.ci`), but not `target`.
fn top_level_entries(root: &Path) -> BTreeSet<String> {
    std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name != "target" && name != ".git")
        .collect()
}

/// `span` when it reads as a path in the repository: it has a `/`, no spaces or
/// placeholders (`*`, `{id}`, `<cache>`, `…`), and starts with a top-level entry.
pub(crate) fn repository_path<'a>(span: &'a str, top_level: &BTreeSet<String>) -> Option<&'a str> {
    let placeholder = |c: char| c.is_whitespace() || "*{}<>[]$…:?=#@|".contains(c);
    if !span.contains('/') || span.contains(placeholder) {
        return None;
    }
    let first = span.split('/').next()?;
    top_level.contains(first).then_some(span)
}

/// `claij` or `claij-` and lowercase words.
pub(crate) fn is_crate_name(span: &str) -> bool {
    span.strip_prefix("claij").is_some_and(|rest| {
        rest.is_empty()
            || rest.strip_prefix('-').is_some_and(|r| {
                !r.is_empty() && r.chars().all(|c| c.is_ascii_lowercase() || c == '-')
            })
    })
}

/// The `never depends on` sentences of an invariant line; nothing for other lines.
pub(crate) fn invariants(line: &str) -> Vec<Result<Invariant, String>> {
    let Some(at) = line.find(MARKER) else {
        return Vec::new();
    };
    let text = &line[at + MARKER.len()..];
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(offset) = text[from..].find(NEVER_DEPENDS_ON) {
        let phrase = from + offset;
        found.push(sentence(
            &text[..phrase],
            &text[phrase + NEVER_DEPENDS_ON.len()..],
        ));
        from = phrase + NEVER_DEPENDS_ON.len();
    }
    found
}

/// One sentence: the code span just before the phrase, the list of spans after it.
fn sentence(before: &str, after: &str) -> Result<Invariant, String> {
    let crate_name = before
        .trim_end()
        .strip_suffix('`')
        .and_then(|b| b.rsplit_once('`'))
        .map(|(_, name)| name.to_owned())
        .ok_or_else(|| format!("`{NEVER_DEPENDS_ON}` without a `crate` just before it"))?;
    let mut forbidden = Vec::new();
    let mut rest = after;
    while let Some((name, tail)) = rest
        .trim_start()
        .strip_prefix('`')
        .and_then(|r| r.split_once('`'))
    {
        forbidden.push(name.to_owned());
        rest = tail;
        let separator = [", and ", ", or ", ", ", " and ", " or "]
            .iter()
            .find(|s| rest.starts_with(**s));
        match separator {
            Some(s) => rest = &rest[s.len()..],
            None => break,
        }
    }
    if forbidden.is_empty() {
        return Err(format!(
            "`{crate_name}` {NEVER_DEPENDS_ON} what? (no `package` after it)"
        ));
    }
    Ok(Invariant {
        crate_name,
        forbidden,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(line: &str) -> Vec<Invariant> {
        invariants(line).into_iter().map(Result::unwrap).collect()
    }

    fn invariant(crate_name: &str, forbidden: &[&str]) -> Invariant {
        Invariant {
            crate_name: crate_name.into(),
            forbidden: forbidden.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn one_forbidden_crate() {
        assert_eq!(
            ok("**Architecture Invariant:** `claij-core` never depends on `tokio`."),
            [invariant("claij-core", &["tokio"])]
        );
    }

    #[test]
    fn a_list_with_and_or_and_commas() {
        assert_eq!(
            ok(
                "- **Architecture Invariant:** `claij-core` never depends on `tokio`, `sqlx` \
                and `axum`: it is pure."
            ),
            [invariant("claij-core", &["tokio", "sqlx", "axum"])]
        );
        assert_eq!(
            ok(
                "**Architecture Invariant:** `claij-door` never depends on `claij-engine`, \
                `claij-store`, or `claij-llm`; it knows HTTP only."
            ),
            [invariant(
                "claij-door",
                &["claij-engine", "claij-store", "claij-llm"]
            )]
        );
    }

    #[test]
    fn the_list_ends_at_prose() {
        assert_eq!(
            ok("**Architecture Invariant:** `a` never depends on `b` or on anything like `c`."),
            [invariant("a", &["b"])]
        );
    }

    #[test]
    fn two_sentences_on_one_line() {
        assert_eq!(
            ok("**Architecture Invariant:** `a` never depends on `b`; `c` never depends on `d`."),
            [invariant("a", &["b"]), invariant("c", &["d"])]
        );
    }

    #[test]
    fn other_lines_and_other_invariants_say_nothing() {
        assert!(invariants("`a` never depends on `b`, but this is no invariant line").is_empty());
        assert!(invariants("**Architecture Invariant:** runs are never lost.").is_empty());
    }

    #[test]
    fn a_sentence_it_cannot_read_is_an_error() {
        let found = invariants("**Architecture Invariant:** the core never depends on `tokio`.");
        assert!(matches!(found.as_slice(), [Err(_)]), "{found:?}");
        let found = invariants("**Architecture Invariant:** `a` never depends on anything.");
        assert!(matches!(found.as_slice(), [Err(_)]), "{found:?}");
    }

    #[test]
    fn repository_paths_and_crate_names() {
        let top: BTreeSet<String> = ["crates", "bench", "docs"].map(String::from).into();
        for path in [
            "crates/claij-engine/src/drive/",
            "bench/",
            "docs/SECURITY.md",
        ] {
            assert_eq!(repository_path(path, &top), Some(path));
        }
        for not_one in [
            "/health",
            "claij://runs/{run_id}",
            "drive/steps.rs",
            "crates/*/src",
            "claij run a/b",
            "docs",
        ] {
            assert_eq!(repository_path(not_one, &top), None, "{not_one}");
        }
        assert!(is_crate_name("claij"));
        assert!(is_crate_name("claij-mcp-server"));
        assert!(!is_crate_name("claij serve"));
        assert!(!is_crate_name("claij_core::Fsm"));
        assert!(!is_crate_name("claij.toml"));
        assert!(!is_crate_name("claij-"));
    }

    #[test]
    fn code_spans_are_between_backticks() {
        let spans: Vec<&str> = code_spans("a `b` c `d e` f").collect();
        assert_eq!(spans, ["b", "d e"]);
    }
}
