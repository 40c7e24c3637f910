//! Every expectation kind and the judge, each with a case that passes and one that fails,
//! on FSMs of `transform` and `command` states (no model: fast and deterministic), runs
//! kept in a real SQLite store whose runs are then recounted; `tool_called` against the
//! real MCP filesystem server (installed by scripts/setup/mcp-servers).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use claij_core::{RunStore, load_value};
use claij_engine::{ActionRegistry, CancellationToken, Engine};
use claij_eval::{Eval, FailureKind, ModelUnderTest, Report, parse_cases};
use serde_json::{Value, json};

/// Adds `a` and `b`, names the sum's parity, and ends in `done`.
fn adder() -> Value {
    json!({
        "id": "adder",
        "states": [
            {"id": "add", "action": "transform", "config": {"template":
                r#"{"id": ["add", "done"], "sum": {{ event.a + event.b }}, "half": {{ (event.a + event.b) / 2 }}, "parity": {{ ("even" if (event.a + event.b) % 2 == 0 else "odd") | tojson }}, "text": {{ ("the sum is " ~ (event.a + event.b)) | tojson }}}"#}},
            {"id": "done", "action": "end"}
        ],
        "xitions": [
            {"id": ["start", "add"], "schema": {"type": "object", "required": ["a", "b"]}},
            {"id": ["add", "done"], "schema": {"type": "object", "required": ["sum"]}}
        ]
    })
}

/// Answers something that never validates (twice), then gives up through `on_failure`
/// to `gave_up`; or sleeps past its timeout when asked to.
fn stubborn() -> Value {
    json!({
        "id": "stubborn",
        "states": [
            {"id": "try", "action": "transform",
             "config": {"template": r#"{% if event.slow is defined %}{"id": ["try", "slow"]}{% else %}{"id": ["try", "done"], "wrong": true}{% endif %}"#,
                        "max_attempts": 2, "on_failure": "gave_up"}},
            {"id": "slow", "action": "command", "config": {"argv": ["sleep", "5"], "timeout": "300ms", "max_attempts": 1}},
            {"id": "done", "action": "end"},
            {"id": "gave_up", "action": "end"}
        ],
        "xitions": [
            {"id": ["start", "try"], "schema": {"type": "object"}},
            {"id": ["try", "done"], "schema": {"type": "object", "required": ["answer"]}},
            {"id": ["try", "slow"], "schema": {"type": "object"}},
            {"id": ["slow", "done"], "schema": {"type": "object"}},
            {"id": ["try", "gave_up"], "schema": {"type": "object"}}
        ]
    })
}

/// A judge: passes when the run's sum is 5 (and says so), built from a template.
fn judge() -> Value {
    json!({
        "id": "judge-sum",
        "states": [
            {"id": "decide", "action": "transform", "config": {"template":
                r#"{"id": ["decide", "verdict"], "pass": {{ (event.result.event.sum == 5) | tojson }}, "reason": {{ ("case " ~ event.case.name ~ ": the sum is " ~ event.result.event.sum) | tojson }}}"#}},
            {"id": "verdict", "action": "end"}
        ],
        "xitions": [
            {"id": ["start", "decide"], "schema": {"type": "object", "required": ["case", "result"]}},
            {"id": ["decide", "verdict"], "schema": {"type": "object", "required": ["pass", "reason"],
              "properties": {"pass": {"type": "boolean"}, "reason": {"type": "string"}}}}
        ]
    })
}

/// A judge that ends without a verdict.
fn mute_judge() -> Value {
    json!({
        "id": "mute",
        "states": [
            {"id": "shrug", "action": "transform", "config": {"template": r#"{"id": ["shrug", "end"], "mood": "unsure"}"#}},
            {"id": "end", "action": "end"}
        ],
        "xitions": [
            {"id": ["start", "shrug"], "schema": {"type": "object"}},
            {"id": ["shrug", "end"], "schema": {"type": "object"}}
        ]
    })
}

struct Setup {
    _dir: tempfile::TempDir,
    dir: PathBuf,
    store: Arc<dyn RunStore>,
}

async fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let store = claij_store_open(&path.join("eval.db")).await;
    for (name, doc) in [("judge.json", judge()), ("mute.json", mute_judge())] {
        std::fs::write(path.join(name), doc.to_string()).unwrap();
    }
    Setup {
        _dir: dir,
        dir: path,
        store,
    }
}

async fn claij_store_open(path: &Path) -> Arc<dyn RunStore> {
    claij_store::open(
        &path.display().to_string(),
        claij_core::store::Durability::Normal,
    )
    .await
    .unwrap()
}

async fn eval(
    setup: &Setup,
    registry: ActionRegistry,
    doc: Value,
    cases: &str,
    repeat: u32,
) -> Report {
    let engine = Arc::new(Engine::new(Arc::new(registry)));
    let fsm =
        Arc::new(load_value("fsm.json", doc, engine.registry()).unwrap_or_else(|d| panic!("{d}")));
    let cases = parse_cases("cases.jsonl", cases, &setup.dir).unwrap();
    let judges = claij_eval::load_judges(&cases, engine.registry()).unwrap();
    let report = claij_eval::run(Eval {
        id: format!("eval-{}", fsm.id),
        fsm,
        cases,
        models: vec![ModelUnderTest {
            name: "none/templates".into(),
            provider: "none".into(),
            engine,
        }],
        repeat,
        concurrency: 3,
        provider_limits: HashMap::new(),
        store: Some(Arc::clone(&setup.store)),
        judges,
        judge_engine: None,
        deadline: None,
        progress: None,
        cancel: CancellationToken::new(),
    })
    .await
    .unwrap();
    check_against_store(&report, setup.store.as_ref()).await;
    report
}

/// Every result's run is in the store, with the status and state the report gives.
async fn check_against_store(report: &Report, store: &dyn RunStore) {
    for r in &report.results {
        let Some(status) = &r.status else { continue };
        let record = store.run(&r.run_id).await.unwrap();
        assert_eq!(&record.status.to_string(), status, "{}", r.run_id);
        assert_eq!(Some(&record.state), r.state.as_ref(), "{}", r.run_id);
    }
}

fn outcome(report: &Report, case: &str) -> (bool, Option<FailureKind>, String) {
    let r = report
        .results
        .iter()
        .find(|r| r.case == case)
        .unwrap_or_else(|| panic!("no result for {case}"));
    (r.passed, r.failure, r.detail.clone().unwrap_or_default())
}

#[tokio::test]
async fn each_expectation_passes_when_it_holds_and_fails_when_it_does_not() {
    let setup = setup().await;
    let cases = r#"
{"name": "state ok", "input": {"a": 2, "b": 3}, "expect": {"state": "done"}}
{"name": "state wrong", "input": {"a": 2, "b": 3}, "expect": {"state": "elsewhere"}}
{"name": "status ok", "input": {"a": 2, "b": 3}, "expect": {"status": "completed"}}
{"name": "status wrong", "input": {"a": 2, "b": 3}, "expect": {"status": "failed"}}
{"name": "equals ok", "input": {"a": 2, "b": 3}, "expect": {"values": [{"path": "$.sum", "equals": 5.0}, {"path": "/id/1", "equals": "done"}]}}
{"name": "equals wrong", "input": {"a": 2, "b": 2}, "expect": {"values": [{"path": "$.sum", "equals": 5}]}}
{"name": "one_of ok", "input": {"a": 2, "b": 3}, "expect": {"values": [{"path": "$.parity", "one_of": ["odd", "prime"]}]}}
{"name": "one_of wrong", "input": {"a": 2, "b": 2}, "expect": {"values": [{"path": "$.parity", "one_of": ["odd", "prime"]}]}}
{"name": "pattern ok", "input": {"a": 2, "b": 3}, "expect": {"values": [{"path": "$.text", "pattern": "^the sum is 5$"}]}}
{"name": "pattern wrong", "input": {"a": 2, "b": 4}, "expect": {"values": [{"path": "$.text", "pattern": "^the sum is 5$"}]}}
{"name": "number ok", "input": {"a": 2, "b": 3}, "expect": {"values": [{"path": "$.half", "number": 2.4, "tolerance": 0.15}]}}
{"name": "number wrong", "input": {"a": 2, "b": 3}, "expect": {"values": [{"path": "$.half", "number": 2.4, "tolerance": 0.05}]}}
{"name": "missing value", "input": {"a": 2, "b": 3}, "expect": {"values": [{"path": "$.product", "equals": 6}]}}
{"name": "attempts ok", "input": {"a": 2, "b": 3}, "expect": {"max_attempts": 1}}
{"name": "judge ok", "input": {"a": 1, "b": 4}, "expect": {"judge": "judge.json"}}
{"name": "judge wrong", "input": {"a": 1, "b": 1}, "expect": {"judge": "judge.json"}}
{"name": "judge mute", "input": {"a": 1, "b": 4}, "expect": {"judge": "mute.json"}}
"#;
    let report = eval(&setup, ActionRegistry::durable(), adder(), cases, 1).await;
    for (case, passes, kind, says) in [
        ("state ok", true, None, ""),
        (
            "state wrong",
            false,
            Some(FailureKind::WrongAnswer),
            "state: expected `elsewhere`, got `done`",
        ),
        ("status ok", true, None, ""),
        (
            "status wrong",
            false,
            Some(FailureKind::WrongAnswer),
            "status: expected failed, got completed",
        ),
        ("equals ok", true, None, ""),
        (
            "equals wrong",
            false,
            Some(FailureKind::WrongAnswer),
            "$.sum: expected it equals 5, got 4",
        ),
        ("one_of ok", true, None, ""),
        (
            "one_of wrong",
            false,
            Some(FailureKind::WrongAnswer),
            "$.parity: expected it one of [\"odd\",\"prime\"], got \"even\"",
        ),
        ("pattern ok", true, None, ""),
        (
            "pattern wrong",
            false,
            Some(FailureKind::WrongAnswer),
            "got \"the sum is 6\"",
        ),
        ("number ok", true, None, ""),
        (
            "number wrong",
            false,
            Some(FailureKind::WrongAnswer),
            "$.half: expected it is 2.4 ± 0.05, got 2.5",
        ),
        (
            "missing value",
            false,
            Some(FailureKind::WrongAnswer),
            "$.product: no value there",
        ),
        ("attempts ok", true, None, ""),
        ("judge ok", true, None, ""),
        (
            "judge wrong",
            false,
            Some(FailureKind::WrongAnswer),
            "the judge says: case judge wrong: the sum is 2",
        ),
        (
            "judge mute",
            false,
            Some(FailureKind::Error),
            "not {\"pass\": boolean, \"reason\": string}",
        ),
    ] {
        let (passed, failure, detail) = outcome(&report, case);
        assert_eq!(passed, passes, "{case}: {detail}");
        assert_eq!(failure, kind, "{case}: {detail}");
        assert!(detail.contains(says), "{case}: {detail:?} lacks {says:?}");
    }
    // The judge's verdict and its own run are kept.
    let judged = report
        .results
        .iter()
        .find(|r| r.case == "judge ok")
        .unwrap();
    let verdict = judged.judge.as_ref().unwrap();
    assert!(verdict.pass);
    assert_eq!(verdict.reason, "case judge ok: the sum is 5");
    assert_eq!(verdict.run_id, format!("{}.judge", judged.run_id));
    let record = setup.store.run(&verdict.run_id).await.unwrap();
    assert_eq!(record.fsm_id, "judge-sum");
    // What the judge spent is its run's, kept apart from the case's (a template judge
    // calls no model; its two steps took some time).
    let spent = verdict.spend.expect("the judge's spend");
    assert_eq!(
        spent,
        setup.store.tree_spend(&verdict.run_id).await.unwrap()
    );
    assert_eq!((spent.calls, spent.tokens()), (0, 0));
    // Run ids name the eval, the model, the case and the repeat.
    assert_eq!(judged.run_id, "eval-adder.none-templates.judge-ok.1");
    // The summary: the 8 "ok" cases of 17 passed; no model steps in a template FSM.
    let m = &report.models[0];
    assert_eq!((m.passed, m.runs), (8, 17));
    assert_eq!(m.failures[&FailureKind::WrongAnswer], 8);
    assert_eq!(m.failures[&FailureKind::Error], 1);
    assert_eq!(m.model_steps, 0);
    assert_eq!(m.first_try_validity, None);
}

#[tokio::test]
async fn attempts_invalid_output_and_timeouts_are_told_apart() {
    let setup = setup().await;
    let cases = r#"
{"name": "gives up", "input": {}, "expect": {"state": "done"}}
{"name": "gave up as expected", "input": {}, "expect": {"state": "gave_up"}}
{"name": "too many attempts", "input": {}, "expect": {"max_attempts": 1}}
{"name": "few enough attempts", "input": {}, "expect": {"max_attempts": 2}}
{"name": "too slow", "input": {"slow": true}, "expect": {"state": "done"}}
"#;
    let report = eval(&setup, ActionRegistry::durable(), stubborn(), cases, 2).await;
    for (case, passes, kind, says) in [
        (
            "gives up",
            false,
            Some(FailureKind::InvalidOutput),
            "last failure: validation in `try` (attempt 2)",
        ),
        ("gave up as expected", true, None, ""),
        (
            "too many attempts",
            false,
            Some(FailureKind::InvalidOutput),
            "attempts: expected at most 1, the run made 2",
        ),
        ("few enough attempts", true, None, ""),
        (
            "too slow",
            false,
            Some(FailureKind::Timeout),
            "timeout in `slow`",
        ),
    ] {
        let (passed, failure, detail) = outcome(&report, case);
        assert_eq!(passed, passes, "{case}: {detail}");
        assert_eq!(failure, kind, "{case}: {detail}");
        assert!(detail.contains(says), "{case}: {detail:?} lacks {says:?}");
    }
    // Two repeats of five cases; the matrix cell counts both.
    let m = &report.models[0];
    assert_eq!((m.passed, m.runs), (4, 10));
    let cell = report.cell("too slow", "none/templates").unwrap();
    assert_eq!((cell.passed, cell.runs), (0, 2));
    assert_eq!(cell.failures, vec![FailureKind::Timeout; 2]);
    assert_eq!(cell.run_id, "eval-stubborn.none-templates.too-slow.1");
    // The report's statuses and states are the stored runs' (checked in `eval`); the
    // stored trail of a failed run holds the failures the report counted.
    let trail = setup.store.trail(&cell.run_id, 0).await.unwrap();
    assert!(trail.iter().any(|e| {
        e.failure
            .as_ref()
            .is_some_and(|f| f.kind == claij_core::FailureKind::Timeout)
    }));
}

/// `tool_called`: the run called the filesystem server's `read_text_file` (a transform
/// asks for it, as a model would), or it did not.
#[tokio::test]
async fn tool_called_holds_only_when_the_tool_answered() {
    let setup = setup().await;
    let server = claij_testkit::cache::mcp_server_bin("mcp-server-filesystem");
    let folder = setup.dir.canonicalize().unwrap();
    std::fs::write(folder.join("notes.txt"), "The meeting is on Tuesday.").unwrap();
    let doc = json!({
        "id": "reader",
        "servers": {"files": {"command": server, "args": [folder.display().to_string()], "tools": ["read_text_file"]}},
        "states": [
            {"id": "ask", "action": "transform", "config": {"template":
                r#"{% if event.skip is defined %}{"id": ["ask", "done"], "text": "I did not look"}{% else %}{"id": ["ask", "fetch"], "server": "files", "method": "tools/call", "params": {"name": "read_text_file", "arguments": {"path": {{ event.path | tojson }}}}}{% endif %}"#}},
            {"id": "fetch", "action": "mcp", "config": {"servers": ["files"], "reply_to": "answer"}},
            {"id": "answer", "action": "transform", "config": {"template":
                r#"{% set r = event.results[0] %}{"id": ["answer", "done"], "text": {{ (r.result.content[0].text if r.error is not defined else r.error.message) | tojson }}}"#}},
            {"id": "done", "action": "end"}
        ],
        "xitions": [
            {"id": ["start", "ask"], "schema": {"type": "object"}},
            {"id": ["ask", "fetch"], "schema": "mcp:files:call"},
            {"id": ["ask", "done"], "schema": {"type": "object"}},
            {"id": ["fetch", "answer"], "schema": "mcp:files:response"},
            {"id": ["answer", "done"], "schema": {"type": "object", "required": ["text"]}}
        ]
    });
    let client = claij_mcp::McpClient::new(claij_mcp::ClientHooks::default());
    let mut registry = ActionRegistry::durable();
    claij_mcp::register(&mut registry, &client).unwrap();
    let fsm = load_value("reader.json", doc.clone(), &registry).unwrap_or_else(|d| panic!("{d}"));
    client.connect_fsm(&fsm).await.unwrap();
    let path = folder.join("notes.txt").display().to_string();
    let missing = folder.join("nothing.txt").display().to_string();
    let cases = format!(
        r#"{{"name": "reads", "input": {{"path": "{path}"}}, "expect": {{"tool_called": "read_text_file", "values": [{{"path": "$.text", "pattern": "Tuesday"}}]}}}}
{{"name": "does not read", "input": {{"skip": true}}, "expect": {{"tool_called": "read_text_file"}}}}
{{"name": "reads a missing file", "input": {{"path": "{missing}"}}, "expect": {{"tool_called": ["read_text_file"]}}}}
{{"name": "other tool", "input": {{"path": "{path}"}}, "expect": {{"tool_called": "write_file"}}}}"#
    );
    let report = eval(&setup, registry, doc, &cases, 1).await;
    client.shutdown().await;
    for (case, passes, kind, says) in [
        ("reads", true, None, ""),
        (
            "does not read",
            false,
            Some(FailureKind::RefusedToolUse),
            "tool `read_text_file` was not called (no tool was called)",
        ),
        (
            "reads a missing file",
            false,
            Some(FailureKind::RefusedToolUse),
            "tool `read_text_file` was called but never answered with a result (ENOENT",
        ),
        (
            "other tool",
            false,
            Some(FailureKind::RefusedToolUse),
            "tool `write_file` was not called (called: read_text_file)",
        ),
    ] {
        let (passed, failure, detail) = outcome(&report, case);
        assert_eq!(passed, passes, "{case}: {detail}");
        assert_eq!(failure, kind, "{case}: {detail}");
        assert!(detail.contains(says), "{case}: {detail:?} lacks {says:?}");
    }
}

/// Records the order runs finish in.
#[derive(Default)]
struct Finished(std::sync::Mutex<Vec<(String, String)>>);

impl claij_eval::Progress for Finished {
    fn finished(&self, result: &claij_eval::CaseResult) {
        self.0
            .lock()
            .unwrap()
            .push((result.model.clone(), result.case.clone()));
    }
}

/// One run at a time, runs go model by model, each model's cases in the file's order
/// (docs/EVAL.md, "The plain baseline": each model finds its own previous case's prompt
/// cached), on a scheduler with several threads that could take spawned runs in any order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_at_a_time_runs_go_model_by_model_in_case_order() {
    let setup = setup().await;
    let registry = Arc::new(ActionRegistry::durable());
    let engine = Arc::new(Engine::new(Arc::clone(&registry)));
    let fsm = Arc::new(load_value("fsm.json", adder(), engine.registry()).unwrap());
    let cases: String = (0..6)
        .map(|i| format!("{{\"name\": \"c{i}\", \"input\": {{\"a\": {i}, \"b\": 1}}, \"expect\": {{\"state\": \"done\"}}}}\n"))
        .collect();
    let cases = parse_cases("cases.jsonl", &cases, &setup.dir).unwrap();
    let model = |name: &str| ModelUnderTest {
        name: name.into(),
        provider: "none".into(),
        engine: Arc::clone(&engine),
    };
    let finished = Arc::new(Finished::default());
    let report = claij_eval::run(Eval {
        id: "eval-order".into(),
        fsm,
        cases,
        models: vec![model("first"), model("second")],
        repeat: 1,
        concurrency: 1,
        provider_limits: HashMap::new(),
        store: Some(Arc::clone(&setup.store)),
        judges: HashMap::new(),
        judge_engine: None,
        deadline: None,
        progress: Some(Arc::clone(&finished) as Arc<dyn claij_eval::Progress>),
        cancel: CancellationToken::new(),
    })
    .await
    .unwrap();
    assert!(report.results.iter().all(|r| r.passed));
    let order = finished.0.lock().unwrap().clone();
    let expected: Vec<(String, String)> = ["first", "second"]
        .iter()
        .flat_map(|m| (0..6).map(move |i| (m.to_string(), format!("c{i}"))))
        .collect();
    assert_eq!(order, expected);
}
