//! The code-review example end to end from a recorded exchange file
//! (`tests/llm/code-review.exchanges.json`, recorded with `claij run --record` against
//! SmolLM2 served by llama-cpp-python; see docs/MODELS.md): no network, no model.

mod common;

use std::path::PathBuf;

use claij_core::FailureKind;
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
    // What the recording holds (SmolLM2, 135M parameters, unconstrained: see
    // tests/llm/claij.toml): two answers that are not JSON, each a `parse` failure fed
    // back; the third request timed out while recording (the example's 60-s state
    // timeout on a loaded 2-core machine), so the file does not hold it and replay fails
    // it loudly, naming its digest. Attempts are then spent and the chairman's
    // `on_failure` route ends the review in `failed`.
    assert_eq!(out.status, RunStatus::Completed, "{:#?}", out.trail);
    assert_eq!(out.state, "failed");
    let failures: Vec<_> = out
        .trail
        .iter()
        .filter_map(|e| e.failure.as_ref().map(|f| (e, f)))
        .collect();
    assert_eq!(failures.len(), 3, "{:#?}", out.trail);
    for (e, f) in &failures[..2] {
        assert_eq!(f.kind, FailureKind::Parse);
        assert_eq!(
            e.model.as_deref(),
            Some("smol"),
            "every model entry names its model"
        );
        let usage = e.usage.as_ref().unwrap();
        assert!(usage.input_tokens > 0 && usage.cost_usd.is_some(), "priced");
    }
    let (e, f) = &failures[2];
    assert!(
        f.message.contains("digest") && f.message.contains("state `chairman`"),
        "{}",
        f.message
    );
    assert_eq!(e.model.as_deref(), Some("smol"));
    let last = out.result.unwrap();
    assert_eq!(last["id"], serde_json::json!(["chairman", "failed"]));
}
