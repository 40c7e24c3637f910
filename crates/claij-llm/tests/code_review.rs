//! The code-review example end to end from recorded exchange files
//! (`tests/llm/code-review.exchanges.json`, recorded with `claij run --record` against
//! SmolLM2 served by llama-cpp-python, and `code-review.embedded.exchanges.json`, on the
//! embedded model; see docs/MODELS.md): no network, no model.

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

/// examples/code-review.yaml, loaded.
fn code_review_fsm() -> claij_core::Fsm {
    let engine = common::engine(LlmLayer::default());
    claij_core::load_file(&root().join("examples/code-review.yaml"), engine.registry()).unwrap()
}

/// Runs examples/code-review.yaml on `layer`, every model call answered from the
/// recording `exchanges` (a file in `tests/llm`).
async fn replay_code_review(mut layer: LlmLayer, exchanges: &str) -> RunOutcome {
    layer.set_tape(Tape::replay(&dir().join(exchanges)).unwrap());
    let engine = common::engine(layer);
    let fsm = code_review_fsm();
    let input: Value = serde_json::from_str(
        &std::fs::read_to_string(dir().join("code-review.input.json")).unwrap(),
    )
    .unwrap();
    engine
        .run(std::sync::Arc::new(fsm), input, RunOptions::default())
        .await
        .unwrap()
}

/// The exchanges of a recording in `tests/llm`: (state, answer text, input tokens,
/// output tokens), in recorded order.
fn recorded(exchanges: &str) -> Vec<(String, String, u64, u64)> {
    read_tape(exchanges)["exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            let r = &x["response"];
            (
                x["state"].as_str().unwrap().to_owned(),
                r["text"].as_str().unwrap_or_default().to_owned(),
                r["tokens"]["input"].as_u64().unwrap(),
                r["tokens"]["output"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Replays `tests/llm/code-review.exchanges.json` (recorded as tests/llm/claij.toml says)
/// and checks the run against what the recording holds: one model attempt per recorded
/// exchange, in the same states and order (none missing: a request the file lacks
/// would fail naming its digest); each attempt's usage and cost from its exchange's
/// tokens and the configured price; an answer holding no JSON object is a `parse`
/// failure fed back; and when the last state's attempts all failed, the run ends
/// through that state's `on_failure` route.
#[tokio::test]
async fn the_code_review_example_replays_what_its_recording_holds() {
    let exchanges = recorded("code-review.exchanges.json");
    assert!(!exchanges.is_empty());
    let layer = LlmLayer::discover(Some(&dir().join("claij.toml"))).unwrap();
    let model = layer.for_run(None).unwrap();
    let price = model.price.unwrap();
    let out = replay_code_review(layer, "code-review.exchanges.json").await;
    assert_eq!(out.status, RunStatus::Completed, "{:#?}", out.trail);

    let attempts: Vec<_> = out.trail.iter().filter(|e| e.model.is_some()).collect();
    let states: Vec<&str> = attempts.iter().map(|e| &*e.from).collect();
    let recorded_states: Vec<&str> = exchanges.iter().map(|x| x.0.as_str()).collect();
    assert_eq!(states, recorded_states, "{:#?}", out.trail);
    for (e, (state, text, input, output)) in attempts.iter().zip(&exchanges) {
        assert_eq!(e.model.as_deref(), Some(model.name.as_str()));
        let usage = e.usage.as_ref().unwrap();
        assert_eq!(
            (usage.input_tokens, usage.output_tokens),
            (*input, *output),
            "{state} attempt {}",
            e.attempt
        );
        assert_eq!(usage.cost_usd, Some(price.cost(*input, *output, 0)));
        let kind = e.failure.as_ref().map(|f| f.kind);
        if claij_llm::extract::extract_object(text).is_err() {
            assert_eq!(kind, Some(FailureKind::Parse), "{text:?}");
            assert_eq!(e.event, Value::String(text.clone()), "the answer is kept");
        } else {
            assert_ne!(kind, Some(FailureKind::Parse), "{text:?}");
        }
    }
    let (input, output) = exchanges
        .iter()
        .fold((0, 0), |(i, o), x| (i + x.2, o + x.3));
    let used = attempts.iter().fold((0, 0), |(i, o), e| {
        let u = e.usage.as_ref().unwrap();
        (i + u.input_tokens, o + u.output_tokens)
    });
    assert_eq!(used, (input, output), "usage summed over the run");

    // Where the run ended follows from the last attempt.
    let fsm = code_review_fsm();
    let last = attempts.last().unwrap();
    let last_state = fsm.state(&last.from).unwrap();
    let result = out.result.unwrap();
    if last.failure.is_some() {
        assert_eq!(
            attempts.iter().filter(|e| e.from == last.from).count() as u32,
            fsm.max_attempts(last_state),
            "attempts run out before the failure route"
        );
        let on_failure = last_state.settings.on_failure.as_deref().unwrap();
        assert_eq!(out.state, on_failure);
        assert_eq!(result["id"], serde_json::json!([&*last.from, on_failure]));
    } else {
        assert_eq!(Some(out.state.as_str()), last.to.as_deref());
    }
}

/// The same example from `tests/llm/code-review.embedded.exchanges.json`, recorded with
/// `claij run examples/code-review.yaml --record …` on the embedded model (SmolLM2 in
/// process by llama.cpp, greedy, `grammar` enforcement: the default when nothing is
/// configured but the model file, `CLAIJ_EMBEDDED_MODEL`). Constrained decoding makes
/// every answer valid, so no attempt fails on its shape. SmolLM2 is too small for the
/// review, and the recording ends in one of two ways, both handled here: the embedded
/// provider refuses a request (an answer that does not close within `max_tokens`, or a
/// conversation that outgrows the context) and the tape holds the refusal; or, as now,
/// the two models go round without end — the chairman never closes the review — and
/// the recording was stopped after seven rounds (made from a copy of the example with
/// its state timeouts raised to 900 s, which no request carries: on this 2-core machine
/// the later rounds outlast the example's 60-s timeout, and a timeout is not recorded).
/// Replay then refuses the request the tape does not hold, naming it. Either way the
/// run ends where the refusal happened: through the refused state's `on_failure` when
/// it has one (the chairman), failed when it has none (the reviewer). The model file is
/// not needed: replay answers every request.
#[tokio::test]
async fn the_code_review_example_replays_its_embedded_model_recording() {
    let tape = read_tape("code-review.embedded.exchanges.json");
    let mut layer = LlmLayer::default();
    // The file is never read on replay; its name names the model.
    let named = layer.default_to_embedded(dir().join("SmolLM2-135M-Instruct.Q4_1.gguf"));
    assert_eq!(named.as_deref(), Some("embedded/smollm2-135m"));
    let out = replay_code_review(layer, "code-review.embedded.exchanges.json").await;
    assert!(
        out.trail.iter().all(|e| e
            .failure
            .as_ref()
            .is_none_or(|f| !matches!(f.kind, FailureKind::Parse | FailureKind::Validation))),
        "no answer failed on its shape: {:#?}",
        out.trail
    );
    let answered: Vec<_> = out
        .trail
        .iter()
        .filter(|e| e.model.is_some() && e.failure.is_none())
        .collect();
    for e in &answered {
        assert_eq!(e.model.as_deref(), Some("embedded/smollm2-135m"));
        let usage = e.usage.as_ref().unwrap();
        assert!(usage.input_tokens > 0, "{usage:?}");
    }
    // Every recorded answer was used, in order, then a refusal ended the run: the one
    // the tape holds, or replay's own for the request it does not hold.
    let exchanges = tape["exchanges"].as_array().unwrap();
    let (answers, refused_in, refusal) = match exchanges.split_last().unwrap() {
        (last, answers) if last.get("error").is_some() => {
            let refusal = last["error"]["message"].as_str().unwrap().to_owned();
            assert!(
                refusal.contains("ran out before the output satisfied the schema")
                    || refusal.contains("exceeds the context"),
                "an embedded provider's refusal: {refusal}"
            );
            assert_eq!(last["error"]["transient"], false, "{last}");
            (answers, last["state"].as_str().unwrap().to_owned(), refusal)
        }
        _ => {
            // Stopped while the models went round: the next request goes where the
            // last recorded answer went.
            let last = answers_of(exchanges).last().unwrap().clone();
            let next = last["id"][1].as_str().unwrap().to_owned();
            (&exchanges[..], next, "holds no answer".to_owned())
        }
    };
    assert_eq!(answered.len(), answers.len(), "{:#?}", out.trail);
    for (e, x) in answered.iter().zip(answers) {
        assert_eq!(x["state"], *e.from);
        let text = x["response"]["text"].as_str().unwrap();
        let recorded: Value = serde_json::from_str(text).unwrap();
        assert_eq!(
            recorded, e.event,
            "the event is the answer as the model wrote it"
        );
    }
    let refused_in = refused_in.as_str();
    let fsm = code_review_fsm();
    let failed = out
        .trail
        .iter()
        .rev()
        .find(|e| e.failure.is_some())
        .unwrap();
    assert_eq!(&*failed.from, refused_in);
    match fsm
        .state(refused_in)
        .unwrap()
        .settings
        .on_failure
        .as_deref()
    {
        Some(route) => {
            assert_eq!(out.status, RunStatus::Completed, "{:#?}", out.trail);
            assert_eq!(out.state, route);
        }
        None => {
            assert_eq!(out.status, RunStatus::Failed, "{:#?}", out.trail);
            assert_eq!(out.state, refused_in);
        }
    }
    let failure = failed.failure.as_ref().unwrap();
    assert_eq!(failure.kind, FailureKind::Action);
    assert!(failure.message.contains(&refusal), "{}", failure.message);
    // The chairman answered first, sending the patch to the reviewer.
    let first = answered.first().unwrap();
    assert_eq!(
        (&*first.from, first.to.as_deref()),
        ("chairman", Some("reviewer"))
    );
    assert_eq!(first.event["code"]["language"], "rust", "{}", first.event);
}

/// The answers (as JSON) of a tape's answered exchanges, in recorded order.
fn answers_of(exchanges: &[Value]) -> Vec<Value> {
    exchanges
        .iter()
        .filter_map(|x| x["response"]["text"].as_str())
        .map(|text| serde_json::from_str(text).unwrap())
        .collect()
}

/// A tape in `tests/llm`, as JSON.
fn read_tape(name: &str) -> Value {
    let text = std::fs::read_to_string(dir().join(name)).unwrap();
    serde_json::from_str(&text).unwrap()
}
