//! The `mcp` action in runs, against the real `server-everything`: a batch (tool calls, a
//! prompt, a resource) answered in order with progress notifications in the trail; a
//! timed-out call as a result or, with `on_error: fail`, a failure; a server that crashed
//! and cannot restart failing the attempt with its stderr.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

mod common;

use std::sync::Arc;

use claij_core::{FailureKind, load_value};
use claij_engine::{ActionRegistry, Engine, RunOptions, RunStatus};
use claij_mcp::{ClientHooks, McpClient};
use serde_json::{Value, json};

/// `caller` sends its input's `requests` to `call` (an `mcp` state), then ends with the
/// results.
fn document(server: Value, on_error: Option<&str>) -> Value {
    let mut config = json!({"servers": ["ev"]});
    if let Some(mode) = on_error {
        config["on_error"] = json!(mode);
        config["max_attempts"] = json!(2);
    }
    json!({
        "id": "batch",
        "servers": {"ev": server},
        "states": [
            {"id": "caller", "action": "transform", "config": {"template":
                r#"{% if event.results is defined %}{"id": ["caller", "done"], "results": {{ event.results | tojson }}}{% else %}{"id": ["caller", "call"], "requests": {{ event.requests | tojson }}}{% endif %}"#}},
            {"id": "call", "action": "mcp", "config": config},
            {"id": "done", "action": "end"}
        ],
        "xitions": [
            {"id": ["start", "caller"], "schema": {"type": "object", "required": ["requests"]}},
            {"id": ["caller", "call"], "schema": "mcp:ev:request"},
            {"id": ["call", "caller"], "schema": "mcp:ev:response"},
            {"id": ["caller", "done"]}
        ]
    })
}

async fn run(doc: Value, requests: Value) -> (claij_engine::RunOutcome, Arc<McpClient>) {
    let client = McpClient::new(ClientHooks::default());
    let mut registry = ActionRegistry::with_builtins();
    claij_mcp::register(&mut registry, &client).unwrap();
    let fsm = Arc::new(load_value("batch.json", doc, &registry).unwrap_or_else(|d| panic!("{d}")));
    client
        .connect_fsm(&fsm)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let engine = Engine::new(Arc::new(registry));
    let outcome = engine
        .run(fsm, json!({"requests": requests}), RunOptions::default())
        .await
        .unwrap();
    (outcome, client)
}

fn everything() -> Value {
    json!({"command": common::server_bin("mcp-server-everything")})
}

#[tokio::test]
async fn a_batch_comes_back_in_order_with_errors_and_progress_in_the_trail() {
    let requests = json!([
        {"server": "ev", "method": "tools/call", "params": {"name": "get-sum", "arguments": {"a": 19, "b": 23}}},
        {"server": "ev", "method": "tools/call", "params": {"name": "trigger-long-running-operation", "arguments": {"duration": 1, "steps": 2}}},
        {"server": "ev", "method": "prompts/get", "params": {"name": "args-prompt", "arguments": {"city": "Oslo"}}},
        {"server": "ev", "method": "resources/read", "params": {"uri": "demo://resource/static/document/features.md"}}
    ]);
    let (outcome, client) = run(document(everything(), None), requests).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:#?}", outcome.trail);
    let results = outcome.result.unwrap()["results"].clone();
    assert_eq!(results.as_array().unwrap().len(), 4);
    assert!(
        results[0]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("42")
    );
    assert!(results[0].get("error").is_none());
    // Progress notifications are recorded with the result, in the trail.
    let from_mcp = outcome.trail.iter().find(|e| &*e.from == "call").unwrap();
    let progress = from_mcp.event["results"][1]["notifications"]
        .as_array()
        .unwrap();
    assert_eq!(
        progress.iter().filter(|n| n["kind"] == "progress").count(),
        2,
        "{progress:?}"
    );
    assert!(
        results[2]["result"]["messages"]
            .to_string()
            .contains("Oslo")
    );
    assert!(results[3]["result"]["contents"][0]["text"].is_string());
    client.shutdown().await;
}

#[tokio::test]
async fn a_run_completes_a_prompts_argument_through_the_server() {
    // server-everything completes `completable-prompt`'s arguments: the request schema
    // offers `completion/complete` for its prompts, and the server's suggestions come back.
    let requests = json!([
        {"server": "ev", "method": "completion/complete", "params": {
            "ref": {"type": "ref/prompt", "name": "completable-prompt"},
            "argument": {"name": "department", "value": "E"}}},
        {"server": "ev", "method": "completion/complete", "params": {
            "ref": {"type": "ref/prompt", "name": "completable-prompt"},
            "argument": {"name": "name", "value": ""},
            "context": {"arguments": {"department": "Engineering"}}}}
    ]);
    let (outcome, client) = run(document(everything(), None), requests).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:#?}", outcome.trail);
    let results = outcome.result.unwrap()["results"].clone();
    assert_eq!(
        results[0]["result"]["completion"]["values"],
        json!(["Engineering"]),
        "{results}"
    );
    let names = results[1]["result"]["completion"]["values"].clone();
    assert!(
        names.as_array().is_some_and(|n| !n.is_empty()),
        "the names of the department chosen: {results}"
    );

    // An argument the prompt does not have is refused by the schema, before any call.
    let bad = json!([{"server": "ev", "method": "completion/complete", "params": {
        "ref": {"type": "ref/prompt", "name": "completable-prompt"},
        "argument": {"name": "floor", "value": ""}}}]);
    let (outcome, _client) = run(document(everything(), None), bad).await;
    assert_eq!(outcome.status, RunStatus::Failed, "{:#?}", outcome.trail);
    client.shutdown().await;
}

#[tokio::test]
async fn server_errors_are_results_or_failures_as_configured() {
    // Requests the schema refuses never reach the server (see hat.rs); a timeout is an
    // error the server causes: a result by default, a failed attempt with `on_error: fail`.
    let server =
        json!({"command": common::server_bin("mcp-server-everything"), "timeout": "500ms"});
    let slow = json!([
        {"server": "ev", "method": "tools/call", "params": {"name": "trigger-long-running-operation", "arguments": {"duration": 20, "steps": 2}}},
        {"server": "ev", "method": "tools/call", "params": {"name": "get-sum", "arguments": {"a": 1, "b": 2}}}
    ]);
    let (outcome, client) = run(document(server.clone(), None), slow.clone()).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:#?}", outcome.trail);
    let results = outcome.result.unwrap()["results"].clone();
    assert!(
        results[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cancelled"),
        "{results}"
    );
    assert!(
        results[1]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains('3')
    );
    client.shutdown().await;

    let (outcome, client) = run(document(server, Some("fail")), slow).await;
    assert_eq!(outcome.status, RunStatus::Failed, "{:#?}", outcome.trail);
    let failures: Vec<_> = outcome
        .trail
        .iter()
        .filter_map(|e| e.failure.as_ref())
        .collect();
    assert_eq!(failures.len(), 2, "two attempts: {failures:?}");
    assert_eq!(failures[0].kind, FailureKind::Action);
    assert!(
        failures[0]
            .message
            .contains("trigger-long-running-operation")
            || failures[0].message.contains("cancelled"),
        "{failures:?}"
    );
    client.shutdown().await;
}

#[tokio::test]
async fn only_the_tools_a_server_entry_lists_are_offered_and_callable() {
    let server =
        json!({"command": common::server_bin("mcp-server-everything"), "tools": ["get-sum"]});
    // Without a schema on [caller, call], the request reaches the action, which refuses
    // the tool itself; with `mcp:ev:request` the schema offers `get-sum` alone.
    let mut doc = document(server, None);
    doc["xitions"][1] = json!({"id": ["caller", "call"]});
    let requests = json!([
        {"server": "ev", "method": "tools/call", "params": {"name": "get-sum", "arguments": {"a": 40, "b": 2}}},
        {"server": "ev", "method": "tools/call", "params": {"name": "echo", "arguments": {"message": "hi"}}}
    ]);
    let (outcome, client) = run(doc, requests).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:#?}", outcome.trail);
    let results = outcome.result.unwrap()["results"].clone();
    assert!(results[0]["result"].to_string().contains("42"), "{results}");
    let refused = results[1]["error"]["message"].as_str().unwrap_or_default();
    assert!(
        refused.contains("`echo`") && refused.contains("get-sum"),
        "{results}"
    );
    assert!(results[1].get("result").is_none(), "{results}");

    let schema = client.connection("ev").unwrap().catalog();
    let names: Vec<&str> = schema
        .tools
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["get-sum"]);
    client.shutdown().await;
}

#[tokio::test]
async fn a_server_that_crashes_fails_the_attempt_with_its_stderr() {
    let bin = common::server_bin("mcp-server-everything");
    // Dies on its second start: the first connection (at load) works, the kill below
    // ends it, and the `mcp` state's reconnection finds a server that cannot start.
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("started");
    let script = format!(
        "if [ -e '{0}' ]; then echo 'fatal: license expired' >&2; exit 7; fi; touch '{0}'; exec \"$0\"",
        flag.display()
    );
    let server = json!({"command": "sh", "args": ["-c", script, bin]});
    let client = McpClient::new(ClientHooks::default());
    let mut registry = ActionRegistry::with_builtins();
    claij_mcp::register(&mut registry, &client).unwrap();
    let requests = json!([{"server": "ev", "method": "tools/call", "params": {"name": "get-sum", "arguments": {"a": 1, "b": 2}}}]);
    let fsm = Arc::new(load_value("batch.json", document(server, None), &registry).unwrap());
    client.connect_fsm(&fsm).await.unwrap();
    let pid = client.connection("ev").unwrap().pid().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let engine = Engine::new(Arc::new(registry));
    let outcome = engine
        .run(fsm, json!({"requests": requests}), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(outcome.status, RunStatus::Failed, "{:#?}", outcome.trail);
    let failure = outcome
        .trail
        .iter()
        .rev()
        .find_map(|e| e.failure.as_ref())
        .unwrap();
    assert!(failure.message.contains("license expired"), "{failure:?}");
    client.shutdown().await;
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
}

/// Answers sampling requests, remembering on whose behalf they came.
struct Recorder(std::sync::Mutex<Vec<Option<Value>>>);

impl claij_mcp::SamplingHandler for Recorder {
    fn create_message<'a>(
        &'a self,
        _server: &'a str,
        caller: Option<&'a claij_mcp::Caller>,
        _request: Value,
    ) -> claij_engine::BoxFuture<'a, Result<Value, String>> {
        self.0.lock().unwrap().push(caller.map(|c| c.info.clone()));
        Box::pin(async {
            Ok(
                json!({"role": "assistant", "content": {"type": "text", "text": "sampled"}, "model": "m"}),
            )
        })
    }
}

#[tokio::test]
async fn a_sampling_request_during_a_run_names_the_calling_state() {
    let recorder = Arc::new(Recorder(std::sync::Mutex::new(Vec::new())));
    let client = McpClient::new(ClientHooks {
        sampling: Some(recorder.clone()),
        elicitation: None,
    });
    let mut registry = ActionRegistry::with_builtins();
    claij_mcp::register(&mut registry, &client).unwrap();
    let fsm = Arc::new(load_value("batch.json", document(everything(), None), &registry).unwrap());
    client.connect_fsm(&fsm).await.unwrap();
    let ev = client.connection("ev").unwrap();
    // Advertising sampling makes the server add its tool after the handshake.
    tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while ev.catalog().tool("trigger-sampling-request").is_none() {
            ev.changed_since(ev.generation()).await;
        }
    })
    .await
    .expect("trigger-sampling-request never listed");
    let requests = json!([{"server": "ev", "method": "tools/call", "params": {"name": "trigger-sampling-request", "arguments": {"prompt": "hi"}}}]);
    let engine = Engine::new(Arc::new(registry));
    let outcome = engine
        .run(fsm, json!({"requests": requests}), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(outcome.status, RunStatus::Completed, "{:#?}", outcome.trail);
    let result = outcome.result.unwrap();
    assert!(
        result["results"][0]["result"]
            .to_string()
            .contains("sampled"),
        "{result}"
    );
    let callers = recorder.0.lock().unwrap().clone();
    assert_eq!(callers.len(), 1);
    let caller = callers[0].clone().unwrap();
    assert_eq!(caller["state"], "caller");
    assert_eq!(caller["run_id"], outcome.run_id.as_str());
    assert!(caller["config"]["template"].is_string(), "{caller}");
    // The exchange is recorded with the result.
    assert!(
        result["results"][0]["notifications"]
            .to_string()
            .contains("\"kind\":\"sampling\""),
        "{result}"
    );
    client.shutdown().await;
}
