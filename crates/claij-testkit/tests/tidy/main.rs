//! Tidy: what the workspace's layout promises, checked by reading its files (in the
//! manner of rust-analyzer's `xtask/src/tidy.rs`), no compiler plugin.
//!
//! - No crate has an import circle between its top-level modules (`modules`).
//! - docs/ARCHITECTURE.md names repository paths that exist, crates that are workspace
//!   members, and its `**Architecture Invariant:**` lines of the form
//!   `` `A` never depends on `B` `` hold in `cargo metadata`'s dependency graph
//!   (`architecture`).
//! - No dependency declares a `rust-version` newer than the workspace's.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

mod architecture;
mod lexer;
mod metadata;
mod modules;

use std::path::{Path, PathBuf};

use metadata::Metadata;

/// Top-level modules whose children are modules of their own in the circle check, per
/// crate: no two commands of the binary, and no two route modules of the server, name
/// each other's modules in a circle.
const SPLIT: &[(&str, &[&str])] = &[("claij", &["commands"]), ("claij-server", &["routes"])];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

#[test]
fn no_crate_has_an_import_circle() {
    let root = workspace_root();
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("src").is_dir())
        .collect();
    crates.sort();
    assert!(crates.len() > 5, "no crates found under {}", root.display());
    let mut failures = Vec::new();
    for dir in crates {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let split = SPLIT
            .iter()
            .find(|(c, _)| *c == name)
            .map_or(&[][..], |(_, s)| s);
        let graph = modules::read_crate(&dir.join("src"), split).unwrap();
        for circle in modules::circles(&graph) {
            failures.push(format!("  {name}: {circle}"));
        }
    }
    assert!(
        failures.is_empty(),
        "import circles between top-level modules (a module names another's `crate::` path \
         and is named back; move what both need to one side or to a new module):\n{}",
        failures.join("\n")
    );
}

#[test]
fn architecture_doc_holds() {
    let root = workspace_root();
    let doc = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    let metadata = Metadata::read(&root);
    let problems = architecture::check(&doc, &root, &metadata);
    assert!(
        problems.is_empty(),
        "docs/ARCHITECTURE.md does not hold:\n  {}",
        problems.join("\n  ")
    );
}

/// The checks on a document that has every kind of line, true and false, against the real
/// workspace.
#[test]
fn architecture_checks_on_a_fixture() {
    let root = workspace_root();
    let metadata = Metadata::read(&root);
    let holds = "\
# Layers
`crates/claij-core/src/` and `docs/ARCHITECTURE.md` exist; `claij-core` and `claij` are
crates, `claij serve` a command, `claij://runs/{id}` a resource, `drive/steps.rs` a file
of a crate.

- **Architecture Invariant:** `claij-core` never depends on `tokio`, `axum`, `sqlx` or
  `claij-engine`.
- **Architecture Invariant:** `claij-door` never depends on `claij-engine` or `claij-store`.
- **Architecture Invariant:** `claij-embedded` never depends on `claij-core`.
- **Architecture Invariant:** runs are never lost.

```
`crates/inside/a/fence` is not prose
```
";
    assert_eq!(
        architecture::check(holds, &root, &metadata),
        Vec::<String>::new()
    );
    let fails = "\
`crates/claij-nothing/` and `claij-nothing`.
**Architecture Invariant:** `claij-door` never depends on `axum`.
**Architecture Invariant:** `claij-nothing` never depends on `tokio`.
";
    assert_eq!(
        architecture::check(fails, &root, &metadata),
        [
            "line 1: `crates/claij-nothing/` does not exist",
            "line 1: `claij-nothing` is no workspace member",
            "line 2: `claij-door` depends on `axum`: claij-door → axum",
            "line 3: `claij-nothing` is no workspace member",
            "line 3: `claij-nothing`, which the invariant is about, is no workspace member",
        ]
    );
}

#[test]
fn no_dependency_needs_a_newer_rust() {
    let root = workspace_root();
    let metadata = Metadata::read(&root);
    let workspace = metadata.workspace_rust_version();
    let newer: Vec<String> = metadata
        .rust_versions()
        .filter(|(_, v)| metadata::version_key(v) > metadata::version_key(&workspace))
        .map(|(name, v)| format!("{name} (rust-version {v})"))
        .collect();
    assert!(
        newer.is_empty(),
        "dependencies that need a newer Rust than the workspace's rust-version {workspace}: {}",
        newer.join(", ")
    );
}
