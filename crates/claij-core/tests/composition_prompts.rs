//! Snapshots of what a parent's model sees of composed runs: a sub-FSM's result in each
//! trail mode, a fork's batch, and a chain's earlier conversation.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::time::SystemTime;

use claij_core::{
    BuiltinNames, Fsm, Message, PromptOptions, Role, TrailEntry, load_str, trail_to_prompts,
};
use serde_json::{Value, json};

const DOC: &str = r#"
id: chairman
prompts: ["You chair a panel."]
states:
  - {id: chair, action: llm}
  - {id: delegate, action: fsm, config: {fsm: calc.yaml, success_to: chair}}
  - {id: panel, action: fork, config: {fsm: member.yaml, over: /questions, success_to: chair}}
  - {id: done, action: end}
xitions:
  - id: [start, chair]
    schema: {type: object, required: [question]}
  - id: [chair, delegate]
  - id: [chair, panel]
  - id: [delegate, chair]
  - id: [panel, chair]
  - id: [chair, done]
    schema: {type: object, required: [summary]}
"#;

fn fsm() -> Fsm {
    load_str("chairman.yaml", DOC, &BuiltinNames).expect("the document loads")
}

fn entry(seq: u64, fsm: &str, from: &str, to: &str, event: Value) -> TrailEntry {
    TrailEntry {
        seq,
        fsm: fsm.into(),
        version: 1,
        from: from.into(),
        to: Some(to.into()),
        event,
        at: SystemTime::UNIX_EPOCH,
        attempt: 1,
        model: None,
        usage: None,
        enforce: None,
        summary: None,
        votes: None,
        duration_ms: None,
        failure: None,
    }
}

fn roles(messages: &[Message]) -> Vec<Role> {
    messages.iter().map(|m| m.role).collect()
}

fn render(messages: &[Message]) -> String {
    messages
        .iter()
        .skip(1) // the system message is pinned by the other snapshots
        .map(|m| format!("== {} ==\n{}\n", m.role, m.content))
        .collect::<Vec<_>>()
        .join("\n")
}

fn delegated(child: Option<Value>) -> Vec<TrailEntry> {
    let mut result = json!({"id": ["delegate", "chair"], "result": {"answer": 42}});
    if let Some(child) = child {
        result["child"] = child;
    }
    vec![
        entry(
            0,
            "chairman",
            "start",
            "chair",
            json!({"id": ["start", "chair"], "question": "6 x 7?"}),
        ),
        entry(
            1,
            "chairman",
            "chair",
            "delegate",
            json!({"id": ["chair", "delegate"], "expr": "6*7"}),
        ),
        entry(2, "chairman", "delegate", "chair", result),
    ]
}

fn summary_view() -> Value {
    json!({"fsm": "calc", "run": "r-1.2", "status": "completed", "steps": 3,
           "first": {"expr": "6*7"}, "last": {"answer": 42}})
}

#[test]
fn sub_fsm_result_with_trail_omitted() {
    let fsm = fsm();
    let messages = trail_to_prompts(&fsm, &delegated(None), "chair", &PromptOptions::default());
    // The chair's request (showing the input), its answer, the sub-FSM's result (not
    // absorbed: "I asked, I got"), the request now.
    assert_eq!(
        roles(&messages),
        [
            Role::System,
            Role::User,
            Role::Assistant,
            Role::User,
            Role::User
        ]
    );
    assert!(
        messages[1]
            .content
            .contains("Input:\n{\"question\":\"6 x 7?\"}"),
        "{}",
        messages[1].content
    );
    assert!(
        messages[3].content.contains("42") && !messages[3].content.contains("Input:"),
        "{}",
        messages[3].content
    );
    assert!(
        !messages[4].content.contains("Input:"),
        "{}",
        messages[4].content
    );
    insta::assert_snapshot!(render(&messages));
}

#[test]
fn sub_fsm_result_with_a_summary() {
    let fsm = fsm();
    let messages = trail_to_prompts(
        &fsm,
        &delegated(Some(summary_view())),
        "chair",
        &PromptOptions::default(),
    );
    insta::assert_snapshot!(render(&messages));
}

#[test]
fn sub_fsm_result_with_its_full_trail() {
    let fsm = fsm();
    let mut view = summary_view();
    view["trail"] = json!([
        {"seq": 0, "fsm": "calc", "from": "start", "to": "parse", "event": {"id": ["start", "parse"], "expr": "6*7"}},
        {"seq": 1, "fsm": "calc", "from": "parse", "to": "eval", "event": {"id": ["parse", "eval"], "a": 6, "b": 7, "op": "*"}},
        {"seq": 2, "fsm": "calc", "from": "parse", "event": null, "failure": {"kind": "action"}},
        {"seq": 3, "fsm": "calc", "from": "eval", "to": "end", "event": {"id": ["eval", "end"], "answer": 42}}
    ]);
    let messages = trail_to_prompts(
        &fsm,
        &delegated(Some(view)),
        "chair",
        &PromptOptions::default(),
    );
    insta::assert_snapshot!(render(&messages));
}

#[test]
fn fork_results_as_one_batch() {
    let fsm = fsm();
    let trail = vec![
        entry(
            0,
            "chairman",
            "start",
            "chair",
            json!({"id": ["start", "chair"], "question": "Best sort?"}),
        ),
        entry(
            1,
            "chairman",
            "chair",
            "panel",
            json!({"id": ["chair", "panel"], "questions": [{"q": "a"}, {"q": "b"}, {"q": "c"}]}),
        ),
        entry(
            2,
            "chairman",
            "panel",
            "chair",
            json!({"id": ["panel", "chair"], "branches": [
            {"branch": 0, "fsm": "member", "run": "r.2.0", "status": "completed", "result": {"answer": "merge sort"},
             "child": {"fsm": "member", "steps": 2, "first": {"q": "a"}, "last": {"answer": "merge sort"}}},
            {"branch": 1, "fsm": "member", "run": "r.2.1", "status": "timeout", "error": "run r.2.1 timeout in `think`: the run's deadline of 30s passed"},
            {"branch": 2, "fsm": "member", "run": "r.2.2", "status": "cancelled"}
        ], "winner": 0}),
        ),
    ];
    let messages = trail_to_prompts(&fsm, &trail, "chair", &PromptOptions::default());
    insta::assert_snapshot!(render(&messages));
}

#[test]
fn a_chain_shows_the_earlier_conversation_first() {
    let fsm = fsm();
    let mut answer = entry(
        1,
        "drafter",
        "draft",
        "end",
        json!({"id": ["draft", "end"], "question": "6 x 7?"}),
    );
    answer.model = Some("m".into());
    let trail = vec![
        entry(
            0,
            "drafter",
            "start",
            "draft",
            json!({"id": ["start", "draft"], "topic": "arithmetic"}),
        ),
        answer,
        entry(
            2,
            "chairman",
            "start",
            "chair",
            json!({"id": ["start", "chair"], "question": "6 x 7?"}),
        ),
    ];
    let messages = trail_to_prompts(&fsm, &trail, "chair", &PromptOptions::default());
    // The earlier run's input and answer, then the chair's request showing this run's
    // input.
    assert_eq!(
        roles(&messages),
        [Role::System, Role::User, Role::Assistant, Role::User]
    );
    assert!(
        messages[3]
            .content
            .contains("Input:\n{\"question\":\"6 x 7?\"}"),
        "{}",
        messages[3].content
    );
    insta::assert_snapshot!(render(&messages));
}
