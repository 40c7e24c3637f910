//! What the engine's integration tests share: documents written to a directory and
//! loaded, a SQLite store there, durable run options, and the small child FSMs the
//! composition and time-travel tests run.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

use std::path::{Path, PathBuf};
use std::sync::Arc;

use claij_core::store::{Durability, RunStore};
use claij_core::{Fsm, load_file};
use claij_engine::{Engine, RunOptions};

/// Writes `text` to `dir/name`; its path.
pub(crate) fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The document at `path`, loaded and checked against the engine's actions.
pub(crate) fn load(engine: &Engine, path: &Path) -> Arc<Fsm> {
    Arc::new(load_file(path, engine.registry()).unwrap_or_else(|e| panic!("{e}")))
}

/// A SQLite store in `dir` (its `claij.db`).
pub(crate) async fn sqlite(dir: &Path) -> Arc<dyn RunStore> {
    claij_store::open(
        &dir.join("claij.db").display().to_string(),
        Durability::Normal,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Run options with `store`.
pub(crate) fn durable(store: &Arc<dyn RunStore>) -> RunOptions {
    RunOptions {
        store: Some(store.clone()),
        ..RunOptions::default()
    }
}

/// A child that doubles `n` in two steps.
pub(crate) const DOUBLER: &str = r#"
id: doubler
states:
  - id: double
    action: transform
    config: {template: '{"id": ["double", "end"], "n": {{ event.n * 2 }}}'}
  - {id: end, action: end}
xitions:
  - id: [start, double]
    schema: {type: object, required: [n], properties: {n: {type: integer}}}
  - id: [double, end]
"#;

/// A child that waits for a person.
pub(crate) const ASKER: &str = r#"
id: asker
states:
  - id: ask
    action: human
    config: {prompt: "Your view?"}
  - {id: end, action: end}
xitions:
  - id: [start, ask]
  - id: [ask, end]
    schema: {type: object, required: [view], properties: {view: {type: string}}}
"#;
