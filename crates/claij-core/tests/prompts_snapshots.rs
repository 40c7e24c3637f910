//! Snapshots of the prompts projected from a synthetic trail of the code-review example.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::path::Path;
use std::time::SystemTime;

use claij_core::{
    BuiltinNames, Failure, FailureKind, Fsm, Message, PromptOptions, TrailEntry, load_file,
    trail_to_prompts,
};
use serde_json::{Value, json};

fn code_review() -> Fsm {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/code-review.yaml"
    );
    load_file(Path::new(path), &BuiltinNames).expect("the example loads")
}

fn entry(seq: u64, from: &str, to: Option<&str>, event: Value, attempt: u32) -> TrailEntry {
    TrailEntry {
        seq,
        fsm: "code-review".into(),
        version: 1,
        from: from.into(),
        to: to.map(Into::into),
        event,
        at: SystemTime::UNIX_EPOCH,
        attempt,
        model: None,
        usage: None,
        enforce: None,
        summary: None,
        votes: None,
        duration_ms: None,
        failure: None,
    }
}

/// start → chairman, chairman → reviewer, a validation failure in reviewer (its errors
/// computed by the transition's own compiled schema), reviewer → chairman.
fn trail(fsm: &Fsm) -> Vec<TrailEntry> {
    let code = json!({"language": "rust", "text": "fn add(a: i32, b: i32) -> i32 { a - b }"});
    let bad = json!({
        "id": ["reviewer", "chairman"],
        "code": code,
        "concerns": [{"line": 0, "text": "`add` subtracts."}],
    });
    let errors = fsm
        .transition("reviewer", "chairman")
        .and_then(|t| t.compiled.as_ref())
        .expect("compiled")
        .issues(&bad);
    assert!(!errors.is_empty(), "the bad answer must be invalid");
    vec![
        entry(
            0,
            "start",
            Some("chairman"),
            json!({"id": ["start", "chairman"], "code": code, "goal": "Add two numbers."}),
            1,
        ),
        entry(
            1,
            "chairman",
            Some("reviewer"),
            json!({"id": ["chairman", "reviewer"], "code": code, "notes": "Check the arithmetic."}),
            1,
        ),
        TrailEntry {
            failure: Some(Box::new(Failure {
                kind: FailureKind::Validation,
                message: "the event does not satisfy the schema of [\"reviewer\", \"chairman\"]"
                    .into(),
                errors,
                attempt: 1,
            })),
            ..entry(2, "reviewer", None, bad, 1)
        },
        entry(
            3,
            "reviewer",
            Some("chairman"),
            json!({
                "id": ["reviewer", "chairman"],
                "code": code,
                "concerns": [{"line": 1, "text": "`add` subtracts: use `a + b`."}],
            }),
            2,
        ),
    ]
}

/// The run's input shows inside the chairman's first request, without its routing `id`,
/// and no message carries the old layout's labels.
fn assert_plain(messages: &[Message]) {
    let request = &messages[1].content;
    assert!(
        request.contains("\n\nInput:\n{\"code\":{")
            && request.contains("\"goal\":\"Add two numbers.\"}"),
        "{request}"
    );
    for old in [
        "INPUT-SCHEMA",
        "OUTPUT-SCHEMA",
        "DOCUMENT",
        "\"id\":[\"start\"",
    ] {
        assert!(
            messages.iter().all(|m| !m.content.contains(old)),
            "{old} shown"
        );
    }
}

fn render(messages: &[Message]) -> String {
    messages
        .iter()
        .map(|m| format!("== {} ==\n{}\n", m.role, m.content))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn chairman_after_a_review_round() {
    let fsm = code_review();
    let trail = trail(&fsm);
    let messages = trail_to_prompts(&fsm, &trail, "chairman", &PromptOptions::default());
    assert_eq!(
        messages.len(),
        7,
        "system, then each answer after its request (the chairman's first request showing \
         the run's input, the reviewer's answer after its failure too), and last what the \
         chairman is asked now"
    );
    assert_plain(&messages);
    insta::assert_snapshot!(render(&messages));
}

#[test]
fn reviewer_asked_for_comments() {
    let fsm = code_review();
    let trail = trail(&fsm);
    let messages = trail_to_prompts(&fsm, &trail[..2], "reviewer", &PromptOptions::default());
    assert_eq!(
        messages.len(),
        4,
        "system, the chairman's request (showing the run's input) and answer, and last what \
         the reviewer is asked now"
    );
    assert_plain(&messages);
    insta::assert_snapshot!(render(&messages));
}
