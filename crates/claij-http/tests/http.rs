//! The `http` action against a real HTTP server on loopback (claij-testkit's scripted
//! stub): the answer as the next event, a refusal routed or failing, 5xx and 429 asked
//! again with the same `Idempotency-Key`, timeouts, answers that are not JSON or break
//! the transition's schema (located failures), and where an API client's document may
//! call.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

use std::sync::Arc;
use std::time::Duration;

use claij_core::{FailureKind, Fsm, Owner};
use claij_engine::{ActionRegistry, Engine, Policy, RunOptions, RunOutcome, RunStatus};
use claij_testkit::stub::{Reply, Stub};
use serde_json::{Value, json};

/// The built-ins with this crate's `http` registered, as the binary registers it.
fn registry() -> ActionRegistry {
    let mut registry = ActionRegistry::with_builtins();
    claij_http::register(&mut registry);
    registry
}

fn engine(policy: Policy) -> Engine {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Engine::new(Arc::new(registry())).governed_by(Arc::new(policy))
}

/// A document whose state `call` runs `http` with `config`, then `done` (whose transition
/// has `schema`), or `missing` when routed there.
fn flow(owner: Owner, config: Value, schema: Value) -> Arc<Fsm> {
    let document = json!({
        "id": "caller",
        "states": [
            {"id": "call", "action": "http", "config": config},
            {"id": "done", "action": "end"},
            {"id": "missing", "action": "end"}
        ],
        "xitions": [
            {"id": ["start", "call"]},
            {"id": ["call", "done"], "schema": schema},
            {"id": ["call", "missing"]}
        ]
    });
    let mut fsm = claij_core::load_value("caller.json", document, &registry())
        .unwrap_or_else(|d| panic!("{d}"));
    fsm.owner = owner;
    Arc::new(fsm)
}

fn operator(config: Value) -> Arc<Fsm> {
    flow(Owner::Operator, config, json!({"type": "object"}))
}

async fn run(engine: &Engine, fsm: Arc<Fsm>, input: Value) -> RunOutcome {
    engine
        .run(fsm, input, RunOptions::default())
        .await
        .expect("the run runs")
}

/// The message of the run's last failure.
fn failure(outcome: &RunOutcome) -> String {
    outcome
        .trail
        .iter()
        .rev()
        .find_map(|e| e.failure.as_ref().map(|f| f.message.clone()))
        .unwrap_or_default()
}

#[tokio::test]
async fn the_answer_is_the_next_event_and_the_request_is_rendered_from_the_event() {
    let stub = Stub::start(vec![
        Reply::json(201, r#"{"order": 7}"#).header("X-Trace", "t1"),
    ]);
    let config = json!({
        "method": "POST",
        "url": format!("{}/orders/{{{{ event.sku }}}}", stub.url("")),
        "headers": {"X-Sku": "{{ event.sku | upper }}"},
        "next": "done",
        "response_headers": ["X-Trace"]
    });
    let out = run(
        &engine(Policy::nothing()),
        operator(config),
        json!({"id": ["start", "call"], "sku": "a1", "qty": 2}),
    )
    .await;
    assert_eq!(out.status, RunStatus::Completed, "{}", failure(&out));
    assert_eq!(
        out.result.unwrap(),
        json!({"id": ["call", "done"], "status": 201, "headers": {"x-trace": "t1"}, "body": {"order": 7}})
    );
    let seen = stub.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, "POST");
    assert_eq!(seen[0].target, "/orders/a1");
    assert_eq!(seen[0].header("x-sku"), Some("A1"));
    let body: Value = serde_json::from_str(&seen[0].body).unwrap();
    assert_eq!(
        body,
        json!({"sku": "a1", "qty": 2}),
        "the event without its id"
    );
    let key = seen[0].header("idempotency-key").unwrap_or_default();
    assert!(key.starts_with(&format!("{}:", out.run_id)), "{key}");
}

#[tokio::test]
async fn a_refusal_is_routed_by_status_or_fails_naming_the_call_without_its_query() {
    let stub = Stub::start(vec![Reply::json(404, r#"{"error": "no such order"}"#)]);
    let url = stub.url("/orders/9?token=abc");
    let routed = operator(json!({"url": url, "next": "done", "on_status": {"4xx": "missing"}}));
    let out = run(
        &engine(Policy::nothing()),
        routed,
        json!({"id": ["start", "call"]}),
    )
    .await;
    assert_eq!(out.status, RunStatus::Completed, "{}", failure(&out));
    let result = out.result.unwrap();
    assert_eq!(result["id"], json!(["call", "missing"]));
    assert_eq!(result["status"], 404);
    assert_eq!(result["body"]["error"], "no such order");

    let failing = operator(json!({"url": url, "next": "done"}));
    let out = run(
        &engine(Policy::nothing()),
        failing,
        json!({"id": ["start", "call"]}),
    )
    .await;
    assert_eq!(out.status, RunStatus::Failed);
    let message = failure(&out);
    assert!(
        message.contains("state `call`")
            && message.contains(&stub.url("/orders/9"))
            && message.contains("answered 404"),
        "{message}"
    );
    assert!(!message.contains("token=abc"), "{message}");
    // A refusal is not asked again: one request routed, one failing.
    assert_eq!(stub.seen().len(), 2);
}

#[tokio::test]
async fn a_failing_or_overloaded_service_is_asked_again_with_the_same_key() {
    let stub = Stub::start(vec![
        Reply::text(503, "down"),
        Reply::text(500, "still down"),
        Reply::json(200, r#"{"ok": true}"#),
    ]);
    let config = json!({"method": "PUT", "url": stub.url("/items/1"), "next": "done"});
    let out = run(
        &engine(Policy::nothing()),
        operator(config),
        json!({"id": ["start", "call"], "n": 1}),
    )
    .await;
    assert_eq!(out.status, RunStatus::Completed, "{}", failure(&out));
    assert_eq!(out.result.unwrap()["body"], json!({"ok": true}));
    let keys: Vec<String> = stub
        .seen()
        .iter()
        .map(|s| s.header("idempotency-key").unwrap_or_default().to_owned())
        .collect();
    assert_eq!(keys.len(), 3, "{keys:?}");
    assert!(
        !keys[0].is_empty() && keys.iter().all(|k| *k == keys[0]),
        "{keys:?}"
    );

    let limited = Stub::start(vec![
        Reply::json(429, r#"{"slow": "down"}"#).header("Retry-After", "1"),
        Reply::json(200, r#"{"ok": 2}"#),
    ]);
    let config = json!({"method": "DELETE", "url": limited.url("/items/1"), "next": "done"});
    let out = run(
        &engine(Policy::nothing()),
        operator(config),
        json!({"id": ["start", "call"]}),
    )
    .await;
    assert_eq!(out.status, RunStatus::Completed, "{}", failure(&out));
    assert_eq!(out.result.unwrap()["body"], json!({"ok": 2}));
    let seen = limited.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[0].header("idempotency-key"),
        seen[1].header("idempotency-key")
    );
    assert!(seen[0].header("idempotency-key").is_some());
}

#[tokio::test]
async fn a_call_that_does_not_answer_in_time_fails() {
    let stub = Stub::start(vec![Reply::json(200, "{}").after(Duration::from_secs(30))]);
    let config = json!({"url": stub.url("/slow"), "next": "done", "request_timeout": "1s", "retries": 0, "max_attempts": 1});
    let out = run(
        &engine(Policy::nothing()),
        operator(config),
        json!({"id": ["start", "call"]}),
    )
    .await;
    assert_eq!(out.status, RunStatus::Failed);
    let message = failure(&out);
    assert!(
        message.contains("no answer within 1s") && message.contains(&stub.url("/slow")),
        "{message}"
    );

    // The state's own timeout bounds the whole call.
    let config =
        json!({"url": stub.url("/slow"), "next": "done", "timeout": "1s", "max_attempts": 1});
    let out = run(
        &engine(Policy::nothing()),
        operator(config),
        json!({"id": ["start", "call"]}),
    )
    .await;
    assert_eq!(out.status, RunStatus::Failed);
    let kinds: Vec<FailureKind> = out
        .trail
        .iter()
        .filter_map(|e| e.failure.as_ref().map(|f| f.kind))
        .collect();
    assert_eq!(kinds, [FailureKind::Timeout]);
}

#[tokio::test]
async fn an_answer_that_is_not_json_or_breaks_the_schema_is_a_located_failure() {
    let stub = Stub::start(vec![Reply::text(200, "<html>oops</html>")]);
    let config = json!({"url": stub.url("/page?q=1"), "next": "done", "max_attempts": 1});
    let out = run(
        &engine(Policy::nothing()),
        operator(config),
        json!({"id": ["start", "call"]}),
    )
    .await;
    assert_eq!(out.status, RunStatus::Failed);
    let message = failure(&out);
    assert!(
        message.contains("state `call`")
            && message.contains(&stub.url("/page"))
            && message.contains("answered 200")
            && message.contains("not JSON"),
        "{message}"
    );

    let wrong = Stub::start(vec![Reply::json(200, r#"{"order": "seven"}"#)]);
    let schema = json!({
        "type": "object",
        "required": ["body"],
        "properties": {"body": {"type": "object", "required": ["order"], "properties": {"order": {"type": "integer"}}}}
    });
    let config = json!({"url": wrong.url("/orders"), "next": "done", "max_attempts": 1});
    let out = run(
        &engine(Policy::nothing()),
        flow(Owner::Operator, config, schema),
        json!({"id": ["start", "call"]}),
    )
    .await;
    assert_eq!(out.status, RunStatus::Failed);
    let message = failure(&out);
    assert!(
        message.contains("state `call`")
            && message.contains(&wrong.url("/orders"))
            && message.contains("(200)")
            && message.contains("/body/order"),
        "{message}"
    );
}

#[tokio::test]
async fn a_clients_document_calls_only_the_hosts_the_operator_allows() {
    let stub = Stub::start(vec![Reply::json(200, r#"{"ok": true}"#)]);
    // The host is a template: registration could not check it, the call does.
    let config = json!({"url": "http://{{ event.host }}/x", "next": "done"});
    let input = json!({"id": ["start", "call"], "host": format!("127.0.0.1:{}", stub.port())});
    let client = || flow(Owner::Client, config.clone(), json!({"type": "object"}));
    let out = run(&engine(Policy::nothing()), client(), input.clone()).await;
    assert_eq!(out.status, RunStatus::Failed);
    let message = failure(&out);
    assert!(message.contains("is not allowed"), "{message}");
    assert!(stub.seen().is_empty(), "nothing was sent");

    let allowed = Policy::nothing().allow_host(&format!("127.0.0.1:{}", stub.port()));
    let out = run(&engine(allowed), client(), input).await;
    assert_eq!(out.status, RunStatus::Completed, "{}", failure(&out));
    assert_eq!(stub.seen().len(), 1);
}
