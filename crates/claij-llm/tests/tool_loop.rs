//! The `llm` action in a tool-use loop, against a local HTTP server in the OpenAI chat
//! completions wire format (remote model APIs are out of reach from here; the real
//! OpenAI-compatible server runs the notes-survey loop in claij/tests/models.rs, from its
//! recording): `max_tool_rounds` ends a loop, and `max_prompt_tokens` shrinks what the
//! model reads.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

mod common;

use std::sync::Arc;

use claij_core::{FailureKind, Fsm};
use claij_engine::{
    Action, ActionError, ActionInput, ActionOutput, ActionRegistry, BoxFuture, Engine, Outcome,
    RunOptions, RunOutcome, RunStatus,
};
use common::{Canned, StubServer, layer_for, openai_answer};
use serde_json::{Value, json};

/// A stand-in `mcp` action (the loop is about the `llm` action, not about a server): it
/// answers each call with a long text naming the path asked for.
struct Echo;

impl Action for Echo {
    fn touches(&self) -> &'static [claij_engine::Field] {
        &[]
    }

    fn run<'a>(&'a self, input: ActionInput<'a>) -> BoxFuture<'a, Result<Outcome, ActionError>> {
        Box::pin(async move {
            let path = input.event["path"].as_str().unwrap_or_default();
            let text = format!("CONTENT-OF-{path} {}", "lorem ipsum ".repeat(40));
            Ok(Outcome::Emit(ActionOutput::event(
                json!({"id": ["tools", "ask"], "results": [{"result": {"content": [{"type": "text", "text": text}]}}]}),
            )))
        })
    }
}

fn engine(url: &str) -> Engine {
    let mut registry = ActionRegistry::with_builtins();
    claij_llm::register(&mut registry, Arc::new(layer_for(url, "")));
    registry.register("mcp", Arc::new(Echo)).unwrap();
    Engine::new(Arc::new(registry))
}

fn loop_fsm(engine: &Engine, ask_config: &str) -> Arc<Fsm> {
    let doc = format!(
        r#"
id: reader
states:
  - id: ask
    action: llm
    prompts: ["READ-THE-FILES"]
    config: {ask_config}
  - id: tools
    action: mcp
  - id: done
    action: end
xitions:
  - id: [start, ask]
    schema: {{type: object, required: [question], properties: {{question: {{type: string}}}}}}
  - id: [ask, tools]
    description: Read a file.
    schema: {{type: object, required: [path], properties: {{path: {{type: string}}}}}}
  - id: [tools, ask]
    schema: {{type: object, required: [results]}}
  - id: [ask, done]
    description: The answer.
    schema: {{type: object, required: [answer], properties: {{answer: {{type: string}}}}}}
"#
    );
    Arc::new(claij_core::load_str("reader.yaml", &doc, engine.registry()).unwrap())
}

fn answer(event: Value) -> Canned {
    Canned::json(200, openai_answer(&event.to_string()))
}

/// Runs the loop FSM with `ask_config` against a model server that gives `answers` in
/// turn; the server (what it was sent) and the run's outcome.
async fn run_loop(ask_config: &str, answers: Vec<Canned>) -> (StubServer, RunOutcome) {
    let server = StubServer::start(answers).await;
    let runner = engine(&server.url);
    let fsm = loop_fsm(&runner, ask_config);
    let out = runner
        .run(fsm, json!({"question": "what?"}), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Completed, "{:#?}", out.trail);
    (server, out)
}

/// The answer's schema each request sent (`json_schema` mode) when the loop, run with
/// `ask_config`, makes one call and then answers.
async fn schemas_of_a_call_then_an_answer(ask_config: &str) -> Vec<String> {
    let (server, _) = run_loop(
        ask_config,
        vec![
            answer(json!({"event": {"id": ["ask", "tools"], "path": "a"}})),
            answer(json!({"event": {"id": ["ask", "done"], "answer": "read a"}})),
        ],
    )
    .await;
    server
        .requests()
        .iter()
        .map(|r| r.body["response_format"]["json_schema"]["schema"].to_string())
        .collect()
}

/// The text of every message a request sent.
fn sent(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn a_loop_whose_rounds_are_used_up_must_answer() {
    let call = |p: &str| answer(json!({"id": ["ask", "tools"], "path": p}));
    let (server, out) = run_loop(
        "{enforce: prompt, max_tool_rounds: 2}",
        vec![
            call("a"),
            call("b"),
            // One round too many: refused, and the model answers.
            call("c"),
            answer(json!({"id": ["ask", "done"], "answer": "read a and b"})),
        ],
    )
    .await;
    assert_eq!(out.result.unwrap()["answer"], "read a and b");
    let refused: Vec<_> = out
        .trail
        .iter()
        .filter_map(|e| e.failure.as_ref())
        .collect();
    assert_eq!(refused.len(), 1, "{:#?}", out.trail);
    assert_eq!(refused[0].kind, FailureKind::UnknownTransition);
    assert!(
        refused[0].message.contains("max_tool_rounds"),
        "{}",
        refused[0].message
    );
    // No third call reached the tools.
    assert_eq!(
        out.trail
            .iter()
            .filter(|e| e.from.as_ref() == "tools")
            .count(),
        2
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    // The request is said once however many rounds follow; the second result says to
    // answer now.
    let third = sent(&requests[2].body);
    assert_eq!(
        third
            .iter()
            .filter(|m| m.contains("READ-THE-FILES"))
            .count(),
        1
    );
    let last = third.last().unwrap();
    assert!(
        last.contains("CONTENT-OF-b") && last.contains("That was the last call"),
        "{last}"
    );
    assert!(
        sent(&requests[1].body)
            .last()
            .unwrap()
            .contains("Go on with the request above")
    );
}

#[tokio::test]
async fn a_used_up_loop_leaves_the_answer_s_schema() {
    let schemas =
        schemas_of_a_call_then_an_answer("{enforce: json_schema, max_tool_rounds: 1}").await;
    let schema = |i: usize| schemas[i].as_str();
    assert!(schema(0).contains(r#"["ask","tools"]"#), "{}", schema(0));
    assert!(!schema(1).contains(r#"["ask","tools"]"#), "{}", schema(1));
    assert!(schema(1).contains(r#"["ask","done"]"#));
}

/// `tool_choice: first`: until the loop has made a round, its route is the only one the
/// constraint offers, and an answer that skips it is refused; after it, the model chooses.
#[tokio::test]
async fn tool_choice_first_makes_the_first_answer_of_a_visit_call_the_tools() {
    let schemas =
        schemas_of_a_call_then_an_answer("{enforce: json_schema, tool_choice: first}").await;
    let schema = |i: usize| schemas[i].as_str();
    assert!(schema(0).contains(r#"["ask","tools"]"#), "{}", schema(0));
    assert!(!schema(0).contains(r#"["ask","done"]"#), "{}", schema(0));
    assert!(schema(1).contains(r#"["ask","done"]"#), "{}", schema(1));
    assert!(schema(1).contains(r#"["ask","tools"]"#), "{}", schema(1));

    // Without a constraint (`prompt` mode) an answer that skips the tools is refused,
    // says why, and the model is asked again.
    let (server, out) = run_loop(
        "{enforce: prompt, tool_choice: first}",
        vec![
            answer(json!({"id": ["ask", "done"], "answer": "a guess"})),
            answer(json!({"id": ["ask", "tools"], "path": "b"})),
            answer(json!({"id": ["ask", "done"], "answer": "read b"})),
        ],
    )
    .await;
    assert_eq!(out.result.unwrap()["answer"], "read b");
    let refused: Vec<_> = out
        .trail
        .iter()
        .filter_map(|e| e.failure.as_ref())
        .collect();
    assert_eq!(refused.len(), 1, "{:#?}", out.trail);
    assert!(
        refused[0].message.contains("tool_choice: first"),
        "{}",
        refused[0].message
    );
    assert!(
        sent(&server.requests()[1].body)
            .last()
            .unwrap()
            .contains("tool_choice: first")
    );

    // `auto` (the default) lets the first answer leave at once.
    let (server, _) = run_loop(
        "{enforce: json_schema, tool_choice: auto}",
        vec![answer(
            json!({"event": {"id": ["ask", "done"], "answer": "a guess"}}),
        )],
    )
    .await;
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_prompt_budget_collapses_the_oldest_results_first() {
    let call = |p: &str| answer(json!({"id": ["ask", "tools"], "path": p}));
    let (server, out) = run_loop(
        "{enforce: prompt, max_prompt_tokens: 500}",
        vec![
            call("a"),
            call("b"),
            call("c"),
            answer(json!({"id": ["ask", "done"], "answer": "done"})),
        ],
    )
    .await;
    // The trail keeps every result; the last request holds the latest in full and the
    // oldest no more.
    assert_eq!(
        out.trail
            .iter()
            .filter(|e| e.from.as_ref() == "tools")
            .count(),
        3
    );
    let last = sent(&server.requests()[3].body).join("\n");
    assert!(last.contains("CONTENT-OF-c"), "{last}");
    assert!(!last.contains("CONTENT-OF-a"), "{last}");
    assert!(last.contains("are no longer shown"), "{last}");
    assert!(last.contains(r#""path":"a""#), "the call stays: {last}");
    assert!(last.contains("READ-THE-FILES") && last.contains("what?"));
    let counted = claij_llm::tokens::count_tokens(
        &serde_json::from_value::<Vec<claij_core::prompts::Message>>(
            server.requests()[3].body["messages"].clone(),
        )
        .unwrap(),
    )
    .unwrap();
    assert!(claij_llm::tokens::total(&counted) <= 500, "{counted:?}");
}

#[tokio::test]
async fn the_model_writes_the_summary_later_steps_read_as_it_leaves_the_state() {
    let server = StubServer::start(vec![
        answer(json!({"id": ["ask", "tools"], "path": "a"})),
        answer(json!({"id": ["ask", "write"], "notes": "a says hello"})),
        // The summary, asked right after the answer that leaves `ask`.
        Canned::json(200, openai_answer("I read file a; it says hello.")),
        answer(json!({"id": ["write", "done"], "answer": "hello"})),
    ])
    .await;
    let engine = engine(&server.url);
    let doc = r#"
id: reader
states:
  - id: ask
    action: llm
    prompts: ["READ-THE-FILES"]
    config: {enforce: prompt}
    keep: {summary: "SAY-WHAT-YOU-READ"}
  - id: tools
    action: mcp
  - id: write
    action: llm
    config: {enforce: prompt}
  - id: done
    action: end
xitions:
  - id: [start, ask]
    schema: {type: object, required: [question], properties: {question: {type: string}}}
  - id: [ask, tools]
    schema: {type: object, required: [path], properties: {path: {type: string}}}
  - id: [tools, ask]
    schema: {type: object, required: [results]}
  - id: [ask, write]
    schema: {type: object, required: [notes], properties: {notes: {type: string}}}
  - id: [write, done]
    schema: {type: object, required: [answer], properties: {answer: {type: string}}}
"#;
    let fsm = Arc::new(claij_core::load_str("reader.yaml", doc, engine.registry()).unwrap());
    let out = engine
        .run(fsm, json!({"question": "what?"}), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Completed, "{:#?}", out.trail);
    // No summary for the call that stays in the loop; one for the answer that leaves.
    let call = out
        .trail
        .iter()
        .find(|e| e.to.as_deref() == Some("tools"))
        .unwrap();
    assert_eq!(call.summary, None);
    let left = out
        .trail
        .iter()
        .find(|e| e.to.as_deref() == Some("write"))
        .unwrap();
    assert_eq!(
        left.summary.as_deref(),
        Some("I read file a; it says hello.")
    );
    // The entry's usage counts both calls (100 prompt and 10 answer tokens each).
    let usage = left.usage.as_ref().unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (200, 20));

    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    let asked = sent(&requests[2].body);
    assert!(
        asked.last().unwrap().contains("SAY-WHAT-YOU-READ"),
        "{asked:?}"
    );
    assert!(
        asked[asked.len() - 2].contains("a says hello"),
        "the answer precedes it"
    );
    // `write` reads the summary, not the visit: no request of `ask`, no tool result.
    let write = sent(&requests[3].body).join("\n");
    assert!(
        write.contains("SUMMARY of `ask`: I read file a; it says hello."),
        "{write}"
    );
    assert!(
        !write.contains("READ-THE-FILES") && !write.contains("CONTENT-OF-a"),
        "{write}"
    );
    assert!(write.contains("a says hello"), "the result stays: {write}");
}
