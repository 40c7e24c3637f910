//! The code-review example end to end from a recorded exchange file
//! (`tests/llm/code-review.exchanges.json`, recorded with `claij run --record` against
//! SmolLM2 served by llama-cpp-python; see docs/MODELS.md): no network, no model.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

mod common;

use std::path::PathBuf;

use claij_core::FailureKind;
use claij_engine::{RunOptions, RunOutcome, RunStatus};
use claij_llm::{LlmLayer, Tape};
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The recordings, the model configuration and the input, under `tests/llm`.
fn dir() -> PathBuf {
    root().join("tests/llm")
}

/// Runs examples/code-review.yaml on `layer`, every model call answered from the
/// recording `exchanges` (a file in `tests/llm`).
async fn replay_code_review(mut layer: LlmLayer, exchanges: &str) -> RunOutcome {
    layer.set_tape(Tape::replay(&dir().join(exchanges)).unwrap());
    let engine = common::engine(layer);
    let fsm = claij_core::load_file(&root().join("examples/code-review.yaml"), engine.registry())
        .unwrap();
    let input: Value = serde_json::from_str(
        &std::fs::read_to_string(dir().join("code-review.input.json")).unwrap(),
    )
    .unwrap();
    engine
        .run(std::sync::Arc::new(fsm), input, RunOptions::default())
        .await
        .unwrap()
}

#[tokio::test]
async fn the_code_review_example_runs_from_its_recorded_exchanges() {
    let layer = LlmLayer::discover(Some(&dir().join("claij.toml"))).unwrap();
    let out = replay_code_review(layer, "code-review.exchanges.json").await;
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

/// The same example from `tests/llm/code-review.embedded.exchanges.json`, recorded with
/// `claij run examples/code-review.yaml --record …` on the embedded model (SmolLM2 in
/// process, `grammar` enforcement: the default when nothing is configured). Constrained
/// decoding makes the first answer valid, so the review completes with no failure. The
/// model file is not needed: replay answers every request.
#[tokio::test]
async fn the_code_review_example_completes_from_its_embedded_model_recording() {
    let mut layer = LlmLayer::default();
    let named = layer.default_to_embedded(dir().join("no-model-file-is-read-on-replay.gguf"));
    assert_eq!(named.as_deref(), Some("embedded/smollm2-135m"));
    let out = replay_code_review(layer, "code-review.embedded.exchanges.json").await;
    assert_eq!(out.status, RunStatus::Completed, "{:#?}", out.trail);
    assert_eq!(out.state, "end", "{:#?}", out.trail);
    assert!(
        out.trail.iter().all(|e| e.failure.is_none()),
        "{:#?}",
        out.trail
    );
    let model_entries: Vec<_> = out.trail.iter().filter(|e| e.model.is_some()).collect();
    assert!(!model_entries.is_empty());
    for e in model_entries {
        assert_eq!(e.model.as_deref(), Some("embedded/smollm2-135m"));
        let usage = e.usage.as_ref().unwrap();
        assert!(
            usage.input_tokens > 0 && usage.output_tokens > 0,
            "{usage:?}"
        );
    }
    let last = out.result.unwrap();
    assert_eq!(last["id"], serde_json::json!(["chairman", "end"]));
    assert!(last["verdict"].is_string(), "{last}");
}
