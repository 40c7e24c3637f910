//! OpenTelemetry through the real binary. A sub-FSM's run hangs under the attempt of the
//! state that started it. examples/society.yaml (a chairman, a fork of
//! three members, a summary) on its recorded exchanges — the remote models cannot be
//! reached from here, so their answers are replayed — with trace export pointed at a real
//! OTLP/HTTP receiver that decodes claij's exports with the official protobuf messages
//! (tests/otel/receiver.py, opentelemetry-proto). The run tree is one trace: the branches'
//! runs under the fork's attempt, each model call a `chat {model}` span under its state's
//! attempt with the tokens its trail entry records, and the metrics — tokens by type,
//! transitions, runs ended — as the trails count them. A run suspended for a person and
//! resumed by another process stays in its trace, under its first stretch and linked to
//! it; an MCP tool call (server-everything's `echo`, the npm reference server) is an
//! `execute_tool` span under its `mcp` attempt, and a server of the official Python SDK
//! gets that span's context in the request's `_meta.traceparent`. `claij serve`'s
//! callback deliveries are spans of the run's trace (each attempt's context given to the
//! receiver, Standard Webhooks' reference library verifying it) beside the run's `commit`
//! spans; a worker reports its queue's depth. Without an endpoint, nothing is sent.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

mod served;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The OTLP receiver, killed when dropped; its spans are in `spans`, its metrics' data
/// points in `metrics`.
struct Receiver {
    child: Child,
    port: String,
    spans: PathBuf,
    metrics: PathBuf,
}

impl Receiver {
    fn start(dir: &Path) -> Self {
        Self::start_with(dir, &[])
    }

    /// The receiver with its options (`--grpc`).
    fn start_with(dir: &Path, options: &[&str]) -> Self {
        let spans = dir.join("spans.jsonl");
        let metrics = dir.join("metrics.jsonl");
        let mut child = Command::new(claij_testkit::cache::http_clients_python())
            .arg(repo().join("tests/otel/receiver.py"))
            .arg(&spans)
            .arg(&metrics)
            .args(options)
            .stdout(Stdio::piped())
            .spawn()
            .expect("the receiver starts");
        let mut port = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut port)
            .unwrap();
        Receiver {
            child,
            port: port.trim().to_owned(),
            spans,
            metrics,
        }
    }

    fn spans(&self) -> Vec<Value> {
        lines(&self.spans)
    }

    /// The data points of `metric`.
    fn metric(&self, metric: &str) -> Vec<Value> {
        lines(&self.metrics)
            .into_iter()
            .filter(|p| p["metric"] == metric)
            .collect()
    }
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn claij(dir: &Path) -> Command {
    let repo = repo();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_claij"));
    cmd.current_dir(&repo)
        .stdin(Stdio::null())
        .env("CLAIJ_STORE", dir.join("claij.db"))
        .env("CLAIJ_CONFIG", repo.join("tests/llm/society.toml"))
        .env("XDG_DATA_HOME", dir.join("xdg"))
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_SDK_DISABLED")
        .env_remove("OTEL_TRACES_EXPORTER");
    cmd
}

/// The command running examples/society.yaml as `run`, on its recorded exchanges
/// (`claij OPTIONS run …`).
fn society_command(dir: &Path, options: &[&str], run: &str) -> Command {
    let mut cmd = claij(dir);
    cmd.args(options)
        .args(["run", "examples/society.yaml", "--run-id", run, "--replay"])
        .arg(repo().join("tests/llm/society.exchanges.json"))
        .args(["--input", "@tests/llm/society.input.json", "--quiet"]);
    cmd
}

/// Runs `cmd`, asserts it succeeded, and returns its stdout and stderr.
#[track_caller]
fn succeeded(cmd: &mut Command) -> (String, String) {
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
}

/// examples/society.yaml as `run`, on its recorded exchanges.
fn society(dir: &Path, run: &str, endpoint: Option<&str>) {
    let mut cmd = society_command(dir, &[], run);
    if let Some(endpoint) = endpoint {
        cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
            .env("OTEL_SERVICE_NAME", "claij-tests");
    }
    succeeded(&mut cmd);
}

/// Every run of the store with its trail, by id.
fn trails(dir: &Path) -> HashMap<String, (Value, Vec<Value>)> {
    let out = claij(dir)
        .args(["runs", "list", "--json"])
        .output()
        .unwrap();
    let mut all = HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        let id = record["id"].as_str().unwrap().to_owned();
        let trail = claij(dir)
            .args(["runs", "trail", &id, "--json"])
            .output()
            .unwrap();
        let trail = String::from_utf8_lossy(&trail.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        all.insert(id, (record, trail));
    }
    all
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

/// The span `span` hangs under.
#[track_caller]
fn parent_of<'a>(spans: &'a [Value], span: &Value) -> &'a Value {
    spans
        .iter()
        .find(|s| s["span_id"] == span["parent_span_id"])
        .unwrap_or_else(|| panic!("the parent of {span} is not exported"))
}

/// `claij ARGS` exporting to `receiver`; asserts it succeeded.
fn traced(dir: &Path, receiver: &Receiver, args: &[&str]) -> String {
    let mut cmd = claij(dir);
    cmd.env(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        format!("http://127.0.0.1:{}", receiver.port),
    )
    .args(args);
    succeeded(&mut cmd).0
}

#[test]
fn a_run_tree_is_one_trace_with_its_model_calls_and_their_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(dir.path());

    // Without an endpoint nothing is sent.
    society(dir.path(), "quiet", None);
    assert!(receiver.spans().is_empty(), "{:?}", receiver.spans());
    assert!(lines(&receiver.metrics).is_empty());

    let endpoint = format!("http://127.0.0.1:{}", receiver.port);
    society(dir.path(), "soc", Some(&endpoint));
    let spans = receiver.spans();
    assert!(!spans.is_empty(), "spans are exported");
    let trace = &spans[0]["trace_id"];
    assert!(spans.iter().all(|s| &s["trace_id"] == trace), "one trace");
    assert!(spans.iter().all(|s| s["service"] == "claij-tests"));
    let by_id: HashMap<&str, &Value> = spans
        .iter()
        .map(|s| (s["span_id"].as_str().unwrap(), s))
        .collect();
    let parent = |s: &Value| by_id.get(s["parent_span_id"].as_str().unwrap()).copied();
    let run_span = |run: &str| {
        let found: Vec<&Value> = spans
            .iter()
            .filter(|s| attr(s, "claij.run.id") == run)
            .collect();
        assert_eq!(found.len(), 1, "one span for run {run}: {found:#?}");
        found[0]
    };

    let all = trails(dir.path());
    let root = run_span("soc");
    assert_eq!(root["name"], "invoke_workflow society");
    assert_eq!(
        root["parent_span_id"], "",
        "the root run's span is the trace's root"
    );
    assert_eq!(attr(root, "gen_ai.operation.name"), "invoke_workflow");
    assert_eq!(attr(root, "claij.status"), "completed");

    // The branches: each run's span under the fork state's attempt, under the root.
    let children: Vec<&String> = all.keys().filter(|id| id.starts_with("soc.")).collect();
    assert_eq!(children.len(), 3, "{:?}", all.keys());
    for child in &children {
        let span = run_span(child);
        let fork = parent(span).expect("the branch's parent span is exported");
        assert_eq!(
            (&fork["name"], attr(fork, "claij.action")),
            (&"panel".into(), &"fork".into())
        );
        assert_eq!(parent(fork).map(|p| &p["span_id"]), Some(&root["span_id"]));
    }

    // Every model call of the tree, with the tokens its entry records.
    let mut calls = 0;
    for (run, (_, trail)) in all.iter().filter(|(id, _)| id.starts_with("soc")) {
        for entry in trail.iter().filter(|e| e["model"].is_string()) {
            calls += 1;
            let model = entry["model"].as_str().unwrap();
            let found: Vec<&Value> = spans
                .iter()
                .filter(|s| {
                    s["name"] == format!("chat {model}")
                        && attr(s, "gen_ai.usage.input_tokens") == &entry["usage"]["input_tokens"]
                        && attr(s, "gen_ai.usage.output_tokens") == &entry["usage"]["output_tokens"]
                        && attr(s, "claij.state") == &entry["from"]
                })
                .collect();
            assert!(!found.is_empty(), "no span for {run} entry {entry}");
            let span = found[0];
            assert_eq!(attr(span, "gen_ai.operation.name"), "chat");
            assert_eq!(attr(span, "gen_ai.request.model"), model);
            let attempt = parent(span).expect("the call's attempt span");
            assert_eq!(attr(attempt, "claij.state"), &entry["from"]);
            let run_of = parent(attempt).expect("the attempt's run span");
            assert_eq!(attr(run_of, "claij.run.id"), run.as_str());
        }
    }
    let chat_spans = spans
        .iter()
        .filter(|s| s["name"].as_str().is_some_and(|n| n.starts_with("chat ")))
        .count();
    assert!(
        calls >= 5,
        "the chairman, three members and the summary: {calls}"
    );
    assert_eq!(chat_spans, calls, "one span per model call");
    // What the models were sent and answered stays out unless the user opts in.
    for key in [
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
    ] {
        assert!(
            spans.iter().all(|s| attr(s, key).is_null()),
            "{key} recorded without opting in"
        );
    }

    // The metrics: the tree's tokens by type, its transitions, its runs' ends.
    let tree: Vec<&Value> = all
        .iter()
        .filter(|(id, _)| id.starts_with("soc"))
        .flat_map(|(_, (_, trail))| trail)
        .collect();
    let used = |kind: &str| -> (u64, f64) {
        receiver
            .metric("gen_ai.client.token.usage")
            .iter()
            .filter(|p| attr(p, "gen_ai.token.type") == kind)
            .fold((0, 0.0), |(n, sum), p| {
                (
                    n + p["count"].as_u64().unwrap(),
                    sum + p["sum"].as_f64().unwrap(),
                )
            })
    };
    for kind in ["input", "output"] {
        let recorded: u64 = tree
            .iter()
            .filter(|e| e["model"].is_string())
            .map(|e| e["usage"][format!("{kind}_tokens")].as_u64().unwrap())
            .sum();
        assert_eq!(used(kind), (calls as u64, recorded as f64), "{kind} tokens");
    }
    let total = |metric: &str| -> u64 {
        receiver
            .metric(metric)
            .iter()
            .map(|p| p["value"].as_u64().unwrap())
            .sum()
    };
    let transitions = tree.iter().filter(|e| e["to"].is_string()).count() as u64;
    assert_eq!(total("claij.transitions"), transitions);
    assert_eq!(total("claij.runs.ended"), 4, "the root and three branches");
    assert!(
        !receiver
            .metric("gen_ai.client.operation.duration")
            .is_empty()
    );
    // One checkpoint timed per `commit` span, none failed.
    let commits = spans.iter().filter(|s| s["name"] == "commit").count() as u64;
    let timed: u64 = receiver
        .metric("claij.store.commit.duration")
        .iter()
        .inspect(|p| assert_eq!(attr(p, "claij.outcome"), "ok"))
        .map(|p| p["count"].as_u64().unwrap())
        .sum();
    assert!(commits > 0);
    assert_eq!(timed, commits);
}

#[test]
fn prompts_and_answers_are_on_the_chat_spans_only_when_the_user_opts_in() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(dir.path());
    let mut cmd = society_command(dir.path(), &[], "told");
    cmd.env(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        format!("http://127.0.0.1:{}", receiver.port),
    )
    .env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true");
    succeeded(&mut cmd);

    // The recorded exchanges hold what each call was sent and answered.
    let recorded: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("tests/llm/society.exchanges.json")).unwrap(),
    )
    .unwrap();
    let exchanges = recorded["exchanges"].as_array().unwrap();
    let json_attr = |span: &Value, key: &str| -> Value {
        let text = attr(span, key)
            .as_str()
            .unwrap_or_else(|| panic!("{key} missing on {span}"));
        serde_json::from_str(text).unwrap()
    };
    let text_part = |content: &Value| json!({"type": "text", "content": content});
    let spans = receiver.spans();
    let chats: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"].as_str().is_some_and(|n| n.starts_with("chat ")))
        .collect();
    assert_eq!(chats.len(), exchanges.len(), "one span per recorded call");
    for chat in chats {
        let exchange = exchanges
            .iter()
            .find(|e| {
                e["state"] == *attr(chat, "claij.state")
                    && e["model"] == *attr(chat, "gen_ai.request.model")
            })
            .unwrap_or_else(|| panic!("no recorded call for {chat}"));
        let messages = exchange["request"]["messages"].as_array().unwrap();
        let system: Vec<Value> = messages
            .iter()
            .take_while(|m| m["role"] == "system")
            .map(|m| text_part(&m["content"]))
            .collect();
        let input: Vec<Value> = messages[system.len()..]
            .iter()
            .map(|m| json!({"role": m["role"], "parts": [text_part(&m["content"])]}))
            .collect();
        assert!(!system.is_empty() && !input.is_empty());
        assert_eq!(
            json_attr(chat, "gen_ai.system_instructions"),
            Value::Array(system)
        );
        assert_eq!(
            json_attr(chat, "gen_ai.input.messages"),
            Value::Array(input)
        );
        assert_eq!(
            json_attr(chat, "gen_ai.output.messages"),
            json!([{
                "role": "assistant",
                "parts": [text_part(&exchange["response"]["text"])],
                "finish_reason": "stop"
            }])
        );
    }
}

#[test]
fn a_run_resumed_by_another_process_continues_its_trace() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(dir.path());
    let endpoint = format!("http://127.0.0.1:{}", receiver.port);
    let request = r#"{"id": ["start", "summarise"], "service": "billing", "version": "2.4.1", "changes": 14}"#;
    let out = claij(dir.path())
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .args([
            "run",
            "examples/human-approval.yaml",
            "--run-id",
            "ask",
            "-q",
            "--input",
            request,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "suspended");
    let first = receiver.spans();
    let stretch = |spans: &[Value], resumed: bool| -> Value {
        spans
            .iter()
            .find(|s| attr(s, "claij.run.id") == "ask" && attr(s, "claij.resumed") == resumed)
            .cloned()
            .unwrap_or_else(|| panic!("no stretch (resumed: {resumed}) in {spans:#?}"))
    };
    let started = stretch(&first, false);
    assert_eq!(attr(&started, "claij.status"), "suspended");
    traced(
        dir.path(),
        &receiver,
        &[
            "runs",
            "resume",
            "ask",
            "-q",
            "--input",
            r#"{"id": ["approve", "deploy"], "approver": "ada"}"#,
        ],
    );
    let all = receiver.spans();
    let resumed = stretch(&all, true);
    assert_eq!(resumed["trace_id"], started["trace_id"], "one trace");
    assert_eq!(
        resumed["parent_span_id"], started["span_id"],
        "under its first stretch"
    );
    assert_eq!(
        resumed["links"],
        json!([{"trace_id": started["trace_id"], "span_id": started["span_id"]}]),
        "linked to where it was left"
    );
    assert!(
        started["links"].as_array().is_some_and(Vec::is_empty),
        "a first stretch follows from nothing: {started}"
    );
    assert_eq!(attr(&resumed, "claij.status"), "completed");
    let approve = all
        .iter()
        .find(|s| s["name"] == "approve" && s["parent_span_id"] == resumed["span_id"])
        .unwrap_or_else(|| panic!("the resumed attempt: {all:#?}"));
    assert_eq!(attr(approve, "claij.to"), "deploy");
}

#[test]
fn an_mcp_tool_call_is_an_execute_tool_span_under_its_attempt_and_the_server_joins_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(dir.path());
    let everything = claij_testkit::cache::mcp_server_bin("mcp-server-everything");
    let python = claij_testkit::cache::mcp_sdk_python();
    let traced_server = repo().join("tests/otel/traced_server.py");
    let doc = dir.path().join("tooling.yaml");
    std::fs::write(
        &doc,
        format!(
            r#"id: tooling
servers:
  ev: {{command: {everything:?}}}
  py: {{command: {python:?}, args: [{traced_server:?}]}}
states:
  - id: caller
    action: transform
    config:
      template: >-
        {{% if event.results is defined %}}{{"id": ["caller", "done"], "said": {{{{ event.results[0].result.content[0].text | tojson }}}},
        "context": {{{{ event.results[1].result.content[0].text | tojson }}}}}}
        {{% else %}}{{"id": ["caller", "call"], "requests": [{{"server": "ev", "method": "tools/call",
        "params": {{"name": "echo", "arguments": {{"message": "traced"}}}}}},
        {{"server": "py", "method": "tools/call", "params": {{"name": "trace_context", "arguments": {{}}}}}}]}}{{% endif %}}
  - id: call
    action: mcp
  - id: done
    action: end
xitions:
  - id: [start, caller]
  - id: [caller, call]
    schema: {{type: object, required: [requests]}}
  - id: [call, caller]
    schema: {{type: object, required: [results]}}
  - id: [caller, done]
    schema: {{type: object, required: [said, context]}}
"#
        ),
    )
    .unwrap();
    let stdout = traced(
        dir.path(),
        &receiver,
        &[
            "run",
            doc.to_str().unwrap(),
            "--run-id",
            "tool",
            "-q",
            "--input",
            "{}",
        ],
    );
    let result: Value = serde_json::from_str(&stdout).unwrap();
    assert!(
        result["said"].as_str().unwrap().contains("traced"),
        "{result}"
    );
    let spans = receiver.spans();
    let tool = spans
        .iter()
        .find(|s| s["name"] == "execute_tool echo")
        .unwrap_or_else(|| panic!("no tool span in {spans:#?}"));
    assert_eq!(attr(tool, "gen_ai.operation.name"), "execute_tool");
    assert_eq!(attr(tool, "gen_ai.tool.name"), "echo");
    assert_eq!(attr(tool, "claij.mcp.server"), "ev");
    assert_eq!(tool["status"], 0, "not an error");
    let attempt = parent_of(&spans, tool);
    assert_eq!(
        (&attempt["name"], attr(attempt, "claij.action")),
        (&"call".into(), &"mcp".into())
    );
    // The second request's `_meta.traceparent`, as the official SDK's server received it,
    // names the run's trace and the span claij made of that request.
    let asked = spans
        .iter()
        .find(|s| s["name"] == "execute_tool trace_context")
        .unwrap_or_else(|| panic!("no span of the second request in {spans:#?}"));
    assert_eq!(parent_of(&spans, asked)["span_id"], attempt["span_id"]);
    let context = result["context"].as_str().unwrap();
    assert_eq!(
        context,
        format!(
            "00-{}-{}-01",
            asked["trace_id"].as_str().unwrap(),
            asked["span_id"].as_str().unwrap()
        ),
        "the server got the request's span as its parent"
    );
}

#[test]
fn a_sub_fsm_run_hangs_under_the_attempt_that_started_it() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(dir.path());
    std::fs::write(
        dir.path().join("child.yaml"),
        "id: child\nstates:\n  - id: work\n    action: transform\n    config: {template: '{\"id\": [\"work\", \"end\"], \"done\": true}'}\n  - {id: end, action: end}\nxitions:\n  - id: [start, work]\n  - id: [work, end]\n",
    )
    .unwrap();
    let parent = dir.path().join("parent.yaml");
    std::fs::write(
        &parent,
        "id: parent\nstates:\n  - id: delegate\n    action: fsm\n    config: {fsm: child.yaml, success_to: end}\n  - {id: end, action: end}\nxitions:\n  - id: [start, delegate]\n  - id: [delegate, end]\n",
    )
    .unwrap();
    traced(
        dir.path(),
        &receiver,
        &[
            "run",
            parent.to_str().unwrap(),
            "--run-id",
            "p",
            "-q",
            "--input",
            "{}",
        ],
    );
    let spans = receiver.spans();
    let find = |run: &str| {
        spans
            .iter()
            .find(|s| attr(s, "claij.run.id") == run)
            .unwrap_or_else(|| panic!("no span of run {run}: {spans:#?}"))
    };
    let (parent_run, child_run) = (find("p"), find("p.1"));
    assert_eq!(child_run["name"], "invoke_workflow child");
    assert_eq!(attr(child_run, "claij.parent.run.id"), "p");
    let delegate = parent_of(&spans, child_run);
    assert_eq!(
        (&delegate["name"], attr(delegate, "claij.action")),
        (&"delegate".into(), &"fsm".into())
    );
    assert_eq!(delegate["parent_span_id"], parent_run["span_id"]);
    assert!(
        spans
            .iter()
            .all(|s| s["trace_id"] == parent_run["trace_id"])
    );
    assert!(
        spans
            .iter()
            .any(|s| s["name"] == "work" && s["parent_span_id"] == child_run["span_id"])
    );
}

#[tokio::test]
async fn a_callback_delivery_and_the_commits_are_spans_of_the_runs_trace() {
    let dir = tempfile::tempdir().unwrap();
    let otlp = Receiver::start(dir.path());
    // The first delivery is refused: two attempts, each a span, each given its context.
    let hooks = served::Webhooks::start(dir.path(), "hooks", &["--plan", "500"]);
    let secret = served::secret_file(dir.path());
    let endpoint = format!("http://127.0.0.1:{}", otlp.port);
    let server = served::Served::start_env(
        &dir.path().join("claij.db"),
        &[
            &served::approval(),
            "--webhook-secret-file",
            &secret,
            "--allow-connect",
            "127.0.0.1",
        ],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    );
    let http = served::client();
    let input = json!({"id": ["start", "summarise"], "service": "billing",
        "version": "2.4.1", "changes": 14});
    let started = served::post(
        &http,
        server.url("/runs?wait=30"),
        &json!({"fsm": "human-approval", "input": input, "webhook": hooks.url}),
    )
    .await;
    assert_eq!(started.body["status"], "suspended", "{}", started.body);
    let run = started.body["id"].as_str().unwrap().to_owned();
    let got = hooks.wait_for(2).await;
    let spans = served::eventually(60, "two delivery spans exported", || async {
        let spans = otlp.spans();
        let deliveries = spans
            .iter()
            .filter(|s| s["name"] == "deliver run.suspended")
            .count();
        (deliveries == 2).then_some(spans)
    })
    .await;
    let workflow = spans
        .iter()
        .find(|s| {
            s["name"] == "invoke_workflow human-approval" && attr(s, "claij.run.id") == run.as_str()
        })
        .unwrap_or_else(|| panic!("no span of the run in {spans:#?}"));
    let mut deliveries: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"] == "deliver run.suspended")
        .collect();
    deliveries.sort_by_key(|s| attr(s, "claij.webhook.attempt").as_i64());
    for (attempt, (span, request)) in deliveries.iter().zip(&got).enumerate() {
        assert_eq!(span["trace_id"], workflow["trace_id"], "in the run's trace");
        assert_eq!(span["parent_span_id"], workflow["span_id"], "under the run");
        assert_eq!(attr(span, "claij.webhook.attempt"), attempt as i64 + 1);
        assert_eq!(
            attr(span, "http.response.status_code"),
            &request["answered"]
        );
        assert_eq!(attr(span, "claij.webhook.id"), &request["id"]);
        assert_eq!(
            request["traceparent"],
            format!(
                "00-{}-{}-01",
                span["trace_id"].as_str().unwrap(),
                span["span_id"].as_str().unwrap()
            ),
            "the receiver was given the attempt's span"
        );
    }
    assert_eq!(deliveries[0]["status"], 2, "a refused attempt is an error");
    assert_eq!(deliveries[1]["status"], 0);
    // Each checkpoint of the run is a `commit` span under it, the entries they wrote adding
    // up to the trail the store holds (its first entry is written as the run is created).
    let commits: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"] == "commit" && s["parent_span_id"] == workflow["span_id"])
        .collect();
    assert!(!commits.is_empty(), "no commit spans in {spans:#?}");
    let written: i64 = commits
        .iter()
        .map(|s| attr(s, "claij.commit.entries").as_i64().unwrap())
        .sum();
    let steps = served::get(&http, server.url(&format!("/runs/{run}")))
        .await
        .body;
    let trail_len = steps["trail_len"]
        .as_i64()
        .unwrap_or_else(|| panic!("{steps}"));
    assert!(
        written == trail_len || written + 1 == trail_len,
        "commits wrote {written} entries, the trail holds {trail_len}"
    );
    assert_eq!(attr(commits.last().unwrap(), "claij.status"), "suspended");
}

#[tokio::test]
async fn a_worker_reports_the_depth_of_its_queue() {
    let dir = tempfile::tempdir().unwrap();
    let otlp = Receiver::start(dir.path());
    // Two starts scheduled an hour from now: in the queue, not due.
    for run in ["later-1", "later-2"] {
        succeeded(
            claij(dir.path())
                .args(["run", "examples/human-approval.yaml", "--submit", "--after", "1h"])
                .args(["--run-id", run, "--quiet", "--input"])
                .arg(r#"{"id": ["start", "summarise"], "service": "billing", "version": "2.4.1", "changes": 14}"#),
        );
    }
    let mut worker = claij(dir.path())
        .arg("worker")
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{}", otlp.port),
        )
        .env("OTEL_METRIC_EXPORT_INTERVAL", "200")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let scheduled = served::eventually(60, "the queue's depth exported", || async {
        otlp.metric("claij.queue.runs")
            .into_iter()
            .find(|p| attr(p, "claij.queue.state") == "scheduled")
    })
    .await;
    let _ = worker.kill();
    let _ = worker.wait();
    assert_eq!(scheduled["value"], 2, "{scheduled}");
    let queued = otlp
        .metric("claij.queue.runs")
        .into_iter()
        .find(|p| attr(p, "claij.queue.state") == "queued")
        .unwrap();
    assert_eq!(queued["value"], 0, "none due now");
}

#[test]
fn json_log_lines_name_the_attempt_span_they_were_written_in() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(dir.path());
    let (_, stderr) = succeeded(
        society_command(dir.path(), &["--log-format", "json"], "logged")
            .env("RUST_LOG", "debug")
            .env(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://127.0.0.1:{}", receiver.port),
            ),
    );
    let lines: Vec<Value> = stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for line in &lines {
        for key in ["timestamp", "level", "target"] {
            assert!(line[key].is_string(), "{key} missing from {line}");
        }
    }
    let in_attempts: Vec<&Value> = lines.iter().filter(|l| l["span_id"].is_string()).collect();
    assert!(
        !in_attempts.is_empty(),
        "no line written in an attempt: {stderr}"
    );
    let spans = receiver.spans();
    for line in in_attempts {
        let span = spans
            .iter()
            .find(|s| s["span_id"] == line["span_id"])
            .unwrap_or_else(|| panic!("no span {} for {line}", line["span_id"]));
        assert_eq!(span["trace_id"], line["trace_id"], "{line}");
        assert_eq!(span["name"], line["state"], "the attempt's span: {line}");
        assert_eq!(attr(span, "claij.attempt"), &line["attempt"], "{line}");
        assert!(
            line["run"].as_str().unwrap().starts_with("logged"),
            "{line}"
        );
    }
}

#[test]
fn traces_and_metrics_go_over_grpc_when_the_protocol_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start_with(dir.path(), &["--grpc"]);
    let endpoint = format!("http://127.0.0.1:{}", receiver.port);
    succeeded(
        society_command(dir.path(), &[], "grpc")
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
    );
    let spans = receiver.spans();
    let root = spans
        .iter()
        .find(|s| s["name"] == "invoke_workflow society" && attr(s, "claij.run.id") == "grpc")
        .unwrap_or_else(|| panic!("no run span over gRPC in {spans:#?}"));
    let chats: Vec<&Value> = spans
        .iter()
        .filter(|s| s["trace_id"] == root["trace_id"] && attr(s, "gen_ai.operation.name") == "chat")
        .collect();
    let tree = trails(dir.path());
    let calls = tree
        .iter()
        .filter(|(id, _)| id.starts_with("grpc"))
        .flat_map(|(_, (_, trail))| trail)
        .filter(|e| e["model"].is_string())
        .count();
    assert_eq!(chats.len(), calls, "one chat span per model call");
    assert!(!receiver.metric("gen_ai.client.token.usage").is_empty());
    // An unknown protocol is refused up front, naming it.
    let out = claij(dir.path())
        .args(["validate", "examples/society.yaml"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("`carrier-pigeon` is not supported"), "{said}");
}
