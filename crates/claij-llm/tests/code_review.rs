//! The code-review example end to end from a recorded exchange file
//! (`tests/llm/code-review.exchanges.json`, recorded with `claij run --record` against
//! SmolLM2 served by llama-cpp-python; see docs/MODELS.md): no network, no model.

mod common;

use std::path::PathBuf;

use claij_engine::{RunOptions, RunStatus};
use claij_llm::{LlmLayer, Tape};
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[tokio::test]
async fn the_code_review_example_runs_from_its_recorded_exchanges() {
    let dir = root().join("tests/llm");
    let mut layer = LlmLayer::discover(Some(&dir.join("claij.toml"))).unwrap();
    layer.set_tape(Tape::replay(&dir.join("code-review.exchanges.json")).unwrap());
    let engine = common::engine(layer);
    let fsm = claij_core::load_file(&root().join("examples/code-review.yaml"), engine.registry())
        .unwrap();
    let input: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("code-review.input.json")).unwrap())
            .unwrap();
    let out = engine
        .run(std::sync::Arc::new(fsm), input, RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Completed, "{:#?}", out.trail);
    let model_entries: Vec<_> = out
        .trail
        .iter()
        .filter(|e| e.from.as_ref() != "start" && e.usage.is_some())
        .collect();
    assert!(!model_entries.is_empty());
    for e in &model_entries {
        assert_eq!(
            e.model.as_deref(),
            Some("smol"),
            "every model entry names its model"
        );
        assert!(e.usage.as_ref().unwrap().cost_usd.is_some(), "priced");
    }
    // The run ended in one of the example's terminal states with a schema-valid event
    // (the engine validated it).
    assert!(out.state == "end" || out.state == "failed", "{}", out.state);
}
