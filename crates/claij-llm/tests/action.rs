//! The `llm` action end to end through the engine, against a local HTTP server that
//! answers in the OpenAI chat completions wire format (remote model APIs are out of reach
//! from here; the real OpenAI-compatible server is in `llama_server.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

mod common;

use claij_core::FailureKind;
use claij_engine::{RunOptions, RunStatus};
use claij_llm::LlmLayer;
use common::{Canned, StubServer, ask_fsm, engine, layer_for, openai_answer};
use serde_json::{Value, json};

fn input() -> Value {
    json!({"question": "why?"})
}

#[tokio::test]
async fn a_429_then_success_costs_no_validation_attempt() {
    let server = StubServer::start(vec![
        Canned::json(429, json!({"error": {"message": "rate limited"}})).header("retry-after", "0"),
        Canned::json(503, json!({"error": {"message": "overloaded"}})),
        Canned::json(
            200,
            openai_answer(r#"{"id": ["ask", "done"], "answer": "because"}"#),
        ),
    ])
    .await;
    let engine = engine(layer_for(&server.url, ""));
    let fsm = ask_fsm(&engine, "{}");
    let out = engine
        .run(fsm, input(), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Completed);
    assert_eq!(out.result.as_ref().unwrap()["answer"], "because");
    assert!(
        out.trail.iter().all(|e| e.failure.is_none()),
        "{:#?}",
        out.trail
    );
    let took = &out.trail[1];
    assert_eq!(took.attempt, 1);
    assert_eq!(took.model.as_deref(), Some("m"));
    let usage = took.usage.as_ref().unwrap();
    assert_eq!(usage.http_retries, Some(2));
    assert_eq!((usage.input_tokens, usage.output_tokens), (100, 10));
    assert_eq!(usage.cached_tokens, Some(40));
    // 60 fresh input at $1/M, 40 cached at $0.5/M, 10 output at $2/M.
    let cost = usage.cost_usd.unwrap();
    assert!((cost - (60.0 + 20.0 + 20.0) / 1e6).abs() < 1e-12, "{cost}");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn garbage_every_time_ends_through_on_failure_after_bounded_attempts() {
    let server = StubServer::start(vec![Canned::json(
        200,
        openai_answer("I'd rather not say."),
    )])
    .await;
    let engine = engine(layer_for(&server.url, ""));
    let fsm = ask_fsm(&engine, "{max_attempts: 3, on_failure: failed}");
    let out = engine
        .run(fsm, input(), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.state, "failed");
    let failures: Vec<_> = out.trail.iter().filter(|e| e.failure.is_some()).collect();
    assert_eq!(failures.len(), 3);
    for f in &failures {
        assert_eq!(f.failure.as_ref().unwrap().kind, FailureKind::Parse);
        assert_eq!(f.model.as_deref(), Some("m"), "failures record their model");
        assert!(f.usage.is_some(), "failures record their usage");
        assert_eq!(f.event, json!("I'd rather not say."));
    }
    // Each later attempt saw the earlier failures as feedback.
    let last = server.requests().pop().unwrap();
    let prompt = last.body["messages"].to_string();
    assert!(prompt.contains("FAILURE (parse, attempt 2)"), "{prompt}");

    // Without `on_failure` the run fails.
    let fsm = ask_fsm(&engine, "{max_attempts: 2}");
    let out = engine
        .run(fsm, input(), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Failed);
}

#[tokio::test]
async fn keys_never_reach_the_trail_or_errors() {
    // A server that echoes the key it was sent in its error body.
    let server = StubServer::start(vec![Canned::json(
        401,
        json!({"error": {"message": "Incorrect API key provided: sk-test-SECRET-42"}}),
    )])
    .await;
    let layer = layer_for(&server.url, "");
    assert!(!format!("{layer:?}").contains("SECRET"));
    let engine = engine(layer);
    let fsm = ask_fsm(&engine, "{}");
    let out = engine
        .run(fsm, input(), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Failed);
    let req = &server.requests()[0];
    assert!(
        req.headers
            .iter()
            .any(|(k, v)| k == "authorization" && v == "Bearer sk-test-SECRET-42"),
        "the key is sent"
    );
    let trail = serde_json::to_string(&out.trail).unwrap();
    assert!(trail.contains("401"), "{trail}");
    assert!(!trail.contains("SECRET"), "{trail}");
    assert!(trail.contains("<redacted>"), "{trail}");
    // A permanent failure is not retried: one request.
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn with_nothing_configured_an_llm_state_says_how_to_configure_one() {
    let engine = engine(LlmLayer::default());
    let fsm = ask_fsm(&engine, "{}");
    let out = engine
        .run(fsm, input(), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Failed);
    let f = out.trail.last().unwrap().failure.as_ref().unwrap();
    assert!(
        f.message.contains("claij.toml") && f.message.contains("--model"),
        "{}",
        f.message
    );
    assert_eq!(out.trail.len(), 2, "not retried: {:#?}", out.trail);
}

#[tokio::test]
async fn the_event_picks_the_model_when_it_is_configured() {
    let server = StubServer::start(vec![Canned::json(
        200,
        openai_answer(r#"{"id": ["ask", "done"], "answer": "ok"}"#),
    )])
    .await;
    let engine = engine(layer_for(&server.url, ""));
    let fsm = ask_fsm(&engine, "{}");
    let out = engine
        .run(
            fsm.clone(),
            json!({"question": "q", "llm": "m2"}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.trail[1].model.as_deref(), Some("m2"));
    assert_eq!(server.requests()[0].body["model"], "stub-model-2");

    let out = engine
        .run(
            fsm,
            json!({"question": "q", "llm": "nope"}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Failed);
    let f = out.trail.last().unwrap().failure.as_ref().unwrap();
    assert!(
        f.message.contains("`nope`") && f.message.contains("m2"),
        "{}",
        f.message
    );
}

#[tokio::test]
async fn repeated_validation_failures_escalate_to_the_fallback_model() {
    let server = StubServer::start(vec![Canned::json(
        200,
        openai_answer(r#"{"id": ["ask", "done"], "answer": 5}"#),
    )])
    .await;
    let engine = engine(layer_for(&server.url, ""));
    let fsm = ask_fsm(
        &engine,
        "{max_attempts: 4, fallback: [m2], escalate_after: 2}",
    );
    let out = engine
        .run(fsm, input(), RunOptions::default())
        .await
        .unwrap();
    let models: Vec<_> = out
        .trail
        .iter()
        .filter(|e| e.failure.is_some())
        .map(|e| e.model.clone().unwrap())
        .collect();
    assert_eq!(models, ["m", "m", "m2", "m2"]);
    let sent: Vec<_> = server
        .requests()
        .iter()
        .map(|r| r.body["model"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        sent,
        ["stub-model", "stub-model", "stub-model-2", "stub-model-2"]
    );
}

#[tokio::test]
async fn json_schema_mode_sends_the_wrapped_union_and_unwraps_the_answer() {
    let server = StubServer::start(vec![Canned::json(
        200,
        openai_answer(r#"{"event": {"id": ["ask", "done"], "answer": "wrapped"}}"#),
    )])
    .await;
    let engine = engine(layer_for(&server.url, ""));
    let fsm = ask_fsm(&engine, "{enforce: json_schema, temperature: 0.2, seed: 7}");
    let out = engine
        .run(fsm, input(), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.result.unwrap()["answer"], "wrapped");
    let body = &server.requests()[0].body;
    assert_eq!(body["response_format"]["type"], "json_schema");
    let schema = &body["response_format"]["json_schema"]["schema"];
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["required"], json!(["event"]));
    assert!(schema["properties"]["event"]["anyOf"].is_array());
    assert_eq!(body["seed"], 7);
}

#[tokio::test]
async fn tools_mode_turns_the_tool_call_into_the_event() {
    let answer = json!({
        "id": "c", "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {
                "name": "to_done", "arguments": "{\"answer\": \"by tool\"}"}}]}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
    });
    let server = StubServer::start(vec![Canned::json(200, answer)]).await;
    let engine = engine(layer_for(&server.url, ""));
    let fsm = ask_fsm(&engine, "{enforce: tools}");
    let out = engine
        .run(fsm, input(), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(
        out.result.unwrap(),
        json!({"answer": "by tool", "id": ["ask", "done"]})
    );
    let body = &server.requests()[0].body;
    assert_eq!(body["tool_choice"], "required");
    assert_eq!(
        body["tools"].as_array().unwrap().len(),
        1,
        "omitted transitions are not offered"
    );
}

#[tokio::test]
async fn record_then_replay_with_no_network_and_unknown_requests_fail_loudly() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.json");
    let server = StubServer::start(vec![Canned::json(
        200,
        openai_answer(r#"{"id": ["ask", "done"], "answer": "recorded"}"#),
    )])
    .await;
    let mut layer = layer_for(&server.url, "");
    layer.set_tape(claij_llm::Tape::record(&file));
    let engine1 = engine(layer);
    let fsm = ask_fsm(&engine1, "{}");
    let out = engine1
        .run(fsm, input(), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Completed);

    // Replay against a server that is not there.
    let mut layer = layer_for("http://127.0.0.1:9/v1", "");
    layer.set_tape(claij_llm::Tape::replay(&file).unwrap());
    let engine2 = engine(layer);
    let fsm = ask_fsm(&engine2, "{}");
    let out = engine2
        .run(fsm.clone(), input(), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.result.unwrap()["answer"], "recorded");
    assert_eq!(out.trail[1].usage.as_ref().unwrap().input_tokens, 100);

    let out = engine2
        .run(
            fsm,
            json!({"question": "something else"}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Failed);
    let f = out.trail.last().unwrap().failure.as_ref().unwrap();
    assert!(
        f.message.contains("digest") && f.message.contains("state `ask`"),
        "{}",
        f.message
    );
    assert_eq!(out.trail.len(), 2, "not retried");
    assert_eq!(server.requests().len(), 1, "replay made no request");
}

#[tokio::test]
async fn connection_errors_are_retried_then_fail_the_attempt() {
    // A port that was free a moment ago: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let engine = engine(layer_for(&format!("http://127.0.0.1:{port}/v1"), ""));
    let fsm = ask_fsm(&engine, "{max_attempts: 2}");
    let out = engine
        .run(fsm, input(), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Failed);
    let failures: Vec<_> = out
        .trail
        .iter()
        .filter_map(|e| e.failure.as_ref())
        .collect();
    assert_eq!(
        failures.len(),
        2,
        "each attempt retried inside, then failed"
    );
    for f in failures {
        assert_eq!(f.kind, FailureKind::Action);
        assert!(
            f.message.contains("could not connect") && f.message.contains("retries exhausted"),
            "{}",
            f.message
        );
    }
}

#[tokio::test]
async fn a_mode_the_provider_lacks_gives_way_to_the_strongest_it_has_and_the_trail_says_so() {
    let server = StubServer::start(vec![Canned::json(
        200,
        openai_answer(r#"{"id": ["ask", "done"], "answer": "because"}"#),
    )])
    .await;
    // A provider without structured output (json_flavour = "none") but with tools.
    let plain = format!(
        "[providers.plain]\nkind = \"openai\"\nbase_url = \"{}\"\napi_key_env = \"STUB_KEY\"\n\
         json_flavour = \"none\"\n[models.p]\nprovider = \"plain\"\nname = \"plain-model\"\n",
        server.url
    );
    let engine = engine(layer_for(&server.url, &plain));
    let fsm = ask_fsm(&engine, "{model: p, enforce: json_schema}");
    let out = engine
        .run(fsm, input(), RunOptions::default())
        .await
        .unwrap();
    // The stub answers text, not a tool call: the attempt fails, in `tools` mode, and the
    // next one is asked the same way (no stronger mode to go to).
    let modes: Vec<_> = out.trail[1..]
        .iter()
        .map(|e| e.enforce.clone().unwrap())
        .collect();
    assert!(modes.iter().all(|m| m == "tools"), "{modes:?}");
    let requests = server.requests();
    assert!(!requests.is_empty());
    for r in &requests {
        assert!(r.body.get("response_format").is_none(), "{}", r.body);
        assert!(r.body["tools"].is_array(), "{}", r.body);
    }
}

#[tokio::test]
async fn repeated_invalid_output_in_a_weak_mode_escalates_to_a_stronger_mode_then_the_fallback() {
    let server = StubServer::start(vec![Canned::json(
        200,
        openai_answer(r#"{"id": ["ask", "done"], "answer": 5}"#),
    )])
    .await;
    let engine = engine(layer_for(&server.url, ""));
    let fsm = ask_fsm(
        &engine,
        "{max_attempts: 6, enforce: prompt, fallback: [m2], escalate_after: 2}",
    );
    let out = engine
        .run(fsm, input(), RunOptions::default())
        .await
        .unwrap();
    let steps: Vec<_> = out
        .trail
        .iter()
        .filter(|e| e.failure.is_some())
        .map(|e| (e.model.clone().unwrap(), e.enforce.clone().unwrap()))
        .collect();
    let expected: Vec<(String, String)> = [
        ("m", "prompt"),
        ("m", "prompt"),
        ("m", "tools"),
        ("m", "tools"),
        ("m", "json_schema"),
        ("m", "json_schema"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(steps, expected);
    // What was sent matches what the trail says.
    let sent: Vec<_> = server
        .requests()
        .iter()
        .map(|r| {
            (
                r.body.get("response_format").is_some(),
                r.body.get("tools").is_some(),
            )
        })
        .collect();
    assert_eq!(
        sent,
        [
            (false, false),
            (false, false),
            (false, true),
            (false, true),
            (true, false),
            (true, false)
        ]
    );

    // With the model's escalation off, the fallback model comes next.
    let server = StubServer::start(vec![Canned::json(
        200,
        openai_answer(r#"{"id": ["ask", "done"], "answer": 5}"#),
    )])
    .await;
    let keep = "[models.k]\nprovider = \"stub\"\nname = \"kept\"\nenforce = \"prompt\"\nescalate_enforce = false\n";
    let kept = common::engine(layer_for(&server.url, keep));
    let fsm = ask_fsm(
        &kept,
        "{model: k, max_attempts: 4, fallback: [m2], escalate_after: 2}",
    );
    let out = kept.run(fsm, input(), RunOptions::default()).await.unwrap();
    let steps: Vec<_> = out
        .trail
        .iter()
        .filter(|e| e.failure.is_some())
        .map(|e| {
            format!(
                "{} {}",
                e.model.as_deref().unwrap(),
                e.enforce.as_deref().unwrap()
            )
        })
        .collect();
    assert_eq!(
        steps,
        ["k prompt", "k prompt", "m2 json_schema", "m2 json_schema"]
    );
}

/// An observer tracing runs as a tracer would: a `traceparent` per call, naming the run,
/// state, attempt and call it was asked about.
struct Tracing;

impl claij_engine::Observer for Tracing {
    fn call_context(&self, call: &claij_engine::CallSite<'_>) -> Option<String> {
        let span = match call.call {
            claij_engine::Call::Model => 0xa0,
            claij_engine::Call::Request(n) => n,
            claij_engine::Call::Attempt => 0xf0,
        } + call.attempt as usize;
        Some(format!(
            "00-{:032x}-{span:016x}-01",
            call.run_id.len() * 1000 + call.state.len()
        ))
    }
}

#[tokio::test]
async fn a_traced_runs_model_calls_carry_the_tracers_traceparent_retries_included() {
    let server = StubServer::start(vec![
        Canned::json(503, json!({"error": {"message": "overloaded"}})),
        Canned::json(200, openai_answer(r#"{"id": ["ask", "oops"]}"#)),
        Canned::json(
            200,
            openai_answer(r#"{"id": ["ask", "done"], "answer": "because"}"#),
        ),
    ])
    .await;
    let traced = engine(layer_for(&server.url, "")).observed_by(std::sync::Arc::new(Tracing));
    let fsm = ask_fsm(&traced, "{}");
    let out = traced
        .run(fsm.clone(), input(), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Completed, "{:#?}", out.trail);
    let sent: Vec<Option<String>> = server
        .requests()
        .iter()
        .map(|r| {
            r.headers
                .iter()
                .find(|(k, _)| k == "traceparent")
                .map(|(_, v)| v.clone())
        })
        .collect();
    let expected = |attempt: usize| {
        Some(format!(
            "00-{:032x}-{:016x}-01",
            out.run_id.len() * 1000 + 3,
            0xa0 + attempt
        ))
    };
    // Attempt 1: a retried 503 and an invalid answer, both with its context; attempt 2 its own.
    assert_eq!(sent, vec![expected(1), expected(1), expected(2)]);

    // Untraced, no header is sent.
    let server = StubServer::start(vec![Canned::json(
        200,
        openai_answer(r#"{"id": ["ask", "done"], "answer": "because"}"#),
    )])
    .await;
    let plain = engine(layer_for(&server.url, ""));
    let out = plain
        .run(ask_fsm(&plain, "{}"), input(), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Completed);
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert!(
        requests[0].headers.iter().all(|(k, _)| k != "traceparent"),
        "{:?}",
        requests[0].headers
    );
}
