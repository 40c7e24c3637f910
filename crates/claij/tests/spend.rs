//! What runs spend, through the real binary: a process killed (SIGKILL) during a model
//! call leaves the call recorded as in flight, and the run taken over counts it.
//!
//! The model is a local HTTP server in the OpenAI chat-completions wire format (a few
//! lines of Python written here): remote model APIs are out of reach from here, and the
//! point is a call that is still in flight when the process dies — the server holds its
//! first answer back for a minute and answers the next ones at once.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The stand-in model server: prints its port, writes `requests` (one line a request)
/// and answers `{"id": ["ask", "done"], "answer": "ok"}` with 11 prompt and 7 completion
/// tokens — the first request after a minute.
const STUB: &str = r#"
import http.server, json, sys, time, threading
log = sys.argv[1]
lock = threading.Lock()
seen = [0]
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
        with lock:
            seen[0] += 1
            first = seen[0] == 1
            with open(log, 'a') as f:
                f.write(json.dumps(body) + '\n')
        if first:
            time.sleep(60)
        content = json.dumps({"id": ["ask", "done"], "answer": "ok"})
        usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
        if body.get('stream'):
            chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "stub",
                     "choices": [{"index": 0, "delta": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}
            last = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "stub", "choices": [], "usage": usage}
            out = ('data: ' + json.dumps(chunk) + '\n\ndata: ' + json.dumps(last) + '\n\ndata: [DONE]\n\n').encode()
            ctype = 'text/event-stream'
        else:
            out = json.dumps({"id": "c", "object": "chat.completion", "created": 1, "model": "stub",
                              "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
                              "usage": usage}).encode()
            ctype = 'application/json'
        self.send_response(200)
        self.send_header('Content-Type', ctype)
        self.send_header('Content-Length', str(len(out)))
        self.end_headers()
        self.wfile.write(out)
s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;

const DOCUMENT: &str = r#"
id: one-call
states:
  - id: ask
    action: llm
    prompts: [Answer with ok.]
  - {id: done, action: end}
xitions:
  - id: [start, ask]
  - id: [ask, done]
    schema: {type: object, required: [answer], properties: {answer: {type: string}}}
"#;

/// Fails the test with the command's stderr unless it exited 0.
fn succeeded(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The stub server, and its port.
fn stub(dir: &Path) -> (Killed, u16) {
    let script = dir.join("stub.py");
    std::fs::write(&script, STUB).unwrap();
    let mut child = Command::new("python3")
        .arg(&script)
        .arg(dir.join("requests"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line.trim().parse().expect("the stub prints its port");
    (Killed(child), port)
}

fn claij(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_claij"));
    command
        .current_dir(dir)
        .stdin(Stdio::null())
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir)
        .env("CLAIJ_CONFIG", dir.join("claij.toml"))
        .env("CLAIJ_STORE", dir.join("runs.db"))
        .env_remove("CLAIJ_MODEL")
        .env_remove("OPENAI_API_KEY");
    command
}

fn show(dir: &Path, run: &str) -> Value {
    let out = claij(dir)
        .args(["runs", "show", run, "--json"])
        .output()
        .unwrap();
    succeeded(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

fn trail(dir: &Path, run: &str) -> Vec<Value> {
    let out = claij(dir)
        .args(["runs", "trail", run, "--json"])
        .output()
        .unwrap();
    succeeded(&out);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_call_in_flight_when_the_process_is_killed_is_counted_after_the_resume() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = stub(dir.path());
    std::fs::write(
        dir.path().join("claij.toml"),
        format!(
            r#"default_model = "stub"
[providers.local]
kind = "openai"
base_url = "http://127.0.0.1:{port}/v1"
[models.stub]
provider = "local"
name = "stub-model"
enforce = "prompt"
max_tokens = 50
price = {{ input = 1000.0, output = 2000.0 }}
"#
        ),
    )
    .unwrap();
    std::fs::write(dir.path().join("one-call.yaml"), DOCUMENT).unwrap();

    let mut run = claij(dir.path())
        .args(["run", "one-call.yaml", "--run-id", "r1", "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The call reaches the server only after it was recorded as in flight.
    let requests = dir.path().join("requests");
    let until = Instant::now() + Duration::from_secs(60);
    while !requests.exists() {
        assert!(Instant::now() < until, "the model was never called");
        std::thread::sleep(Duration::from_millis(20));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(run.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    run.wait().unwrap();
    let before = show(dir.path(), "r1");
    assert_eq!(before["status"], "running", "{before}");
    assert_eq!(
        before["spend"]["calls"], 0,
        "nothing was committed: {before}"
    );

    let out = claij(dir.path())
        .args(["runs", "resume", "r1", "--quiet"])
        .output()
        .unwrap();
    succeeded(&out);

    let entries = trail(dir.path(), "r1");
    let lost = entries
        .iter()
        .find(|e| e["failure"]["kind"] == "interrupted")
        .unwrap_or_else(|| panic!("no entry for the lost call: {entries:?}"));
    let lost_usage = &lost["usage"];
    let prompt = lost_usage["input_tokens"].as_u64().unwrap();
    assert!(prompt > 0, "the prompt is counted: {lost}");
    assert_eq!(
        lost_usage["output_tokens"], 50,
        "max_tokens, at most: {lost}"
    );
    let lost_cost = lost_usage["cost_usd"].as_f64().unwrap();
    let expected = (prompt as f64 * 1000.0 + 50.0 * 2000.0) / 1e6;
    assert!(
        (lost_cost - expected).abs() < 1e-9,
        "{lost_cost} vs {expected}"
    );
    let answered = entries
        .iter()
        .find(|e| e["from"] == "ask" && e["to"] == "done")
        .expect("the call made again answered");
    assert_eq!(answered["attempt"], 1, "the lost call was not an attempt");
    assert_eq!(answered["usage"]["input_tokens"], 11);

    let after = show(dir.path(), "r1");
    assert_eq!(after["status"], "completed", "{after}");
    let spend = &after["spend"];
    assert_eq!(
        spend["calls"], 2,
        "the lost call and the one made again: {after}"
    );
    assert_eq!(spend["input_tokens"].as_u64().unwrap(), prompt + 11);
    assert_eq!(spend["output_tokens"], 57);
    let cost = spend["cost_usd"].as_f64().unwrap();
    let answered_cost = (11.0 * 1000.0 + 7.0 * 2000.0) / 1e6;
    assert!((cost - (lost_cost + answered_cost)).abs() < 1e-9, "{after}");
}

/// The binary on the embedded SmolLM2 (a model whose answers do not matter here), with
/// runs kept in `dir`'s SQLite file and no model configuration from the machine.
fn on_the_embedded_model(dir: &Path) -> Command {
    let mut command = claij(dir);
    command.env_remove("CLAIJ_CONFIG").env(
        "CLAIJ_EMBEDDED_MODEL",
        claij_testkit::cache::embedded_model(),
    );
    command
}

/// A budget gone past by a sampling call an MCP server makes during a tool call stops the
/// run there, like a state's own call: the reference `everything` server's
/// `trigger-sampling-request` tool asks the run's model (the real embedded model) for a
/// message, twice in two visits; a budget of one call stops the run in the second, and a
/// raised budget lets it go on.
#[test]
fn a_sampling_call_that_would_go_past_the_budget_stops_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let request = |to: &str| {
        format!(
            r#"{{"id": ["{to}", "call"], "requests": [{{"server": "ev", "method": "tools/call", "params": {{"name": "trigger-sampling-request", "arguments": {{"prompt": "Name a colour.", "maxTokens": 8}}}}}}]}}"#
        )
    };
    // first → call → first → second → call → second → done: one sampling call a visit.
    let step = |me: &str, then: &str| {
        format!(
            r#"{{% if event.results is defined %}}{{"id": ["{me}", "{then}"], "{me}": {{{{ event.results | tojson }}}}}}{{% else %}}{}{{% endif %}}"#,
            request(me)
        )
    };
    let doc = serde_json::json!({
        "id": "sampler",
        "servers": {"ev": {"command": claij_testkit::cache::mcp_server_bin("mcp-server-everything")}},
        "states": [
            {"id": "first", "action": "transform", "config": {"template": step("first", "second")}},
            {"id": "second", "action": "transform", "config": {"template": step("second", "done")}},
            {"id": "call", "action": "mcp"},
            {"id": "done", "action": "end"}
        ],
        "xitions": [
            {"id": ["start", "first"]},
            {"id": ["first", "call"], "schema": "mcp:ev:request"},
            {"id": ["call", "first"], "schema": "mcp:ev:response"},
            {"id": ["first", "second"]},
            {"id": ["second", "call"], "schema": "mcp:ev:request"},
            {"id": ["call", "second"], "schema": "mcp:ev:response"},
            {"id": ["second", "done"]}
        ]
    });
    std::fs::write(dir.path().join("sampler.json"), doc.to_string()).unwrap();
    let out = on_the_embedded_model(dir.path())
        .args([
            "run",
            "sampler.json",
            "--run-id",
            "s1",
            "--budget",
            "calls=1",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "suspended: {stderr}");
    let record = show(dir.path(), "s1");
    assert_eq!(record["status"], "suspended", "{record}");
    assert_eq!(record["state"], "call", "{record}");
    let pause = &record["wait"]["budget"];
    assert_eq!(pause["limit"], "calls", "{record}");
    assert_eq!(pause["spent"]["calls"], 1, "{record}");
    assert_eq!(pause["asked"]["calls"], 1, "{record}");
    assert_eq!(
        record["spend"]["calls"], 1,
        "the first sampling call: {record}"
    );

    let out = on_the_embedded_model(dir.path())
        .args(["runs", "resume", "s1", "--budget", "calls=2", "--quiet"])
        .output()
        .unwrap();
    succeeded(&out);
    let record = show(dir.path(), "s1");
    assert_eq!(record["status"], "completed", "{record}");
    assert_eq!(record["spend"]["calls"], 2, "{record}");
    let entries = trail(dir.path(), "s1");
    let sampled: Vec<&Value> = entries
        .iter()
        .filter(|e| e["from"] == "call" && e["to"].is_string())
        .collect();
    assert_eq!(sampled.len(), 2, "{entries:?}");
    for e in &sampled {
        assert!(e["usage"]["output_tokens"].as_u64().unwrap() > 0, "{e}");
        assert!(e["event"]["results"][0]["error"].is_null(), "{e}");
    }
    assert!(
        entries.iter().any(|e| e["failure"]["kind"] == "budget"),
        "the pause is in the trail"
    );
}

fn repo() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The price table of tests/llm/society.toml, US dollars per million tokens (in, out).
const SOCIETY_PRICES: [(&str, f64, f64); 4] = [
    ("chairman", 2.5, 10.0),
    ("openai/gpt-4o-mini", 0.15, 0.6),
    ("anthropic/claude-haiku-4-5", 1.0, 5.0),
    ("gemini/gemini-2.5-flash", 0.3, 2.5),
];

/// examples/society.yaml on its recorded exchanges (tests/llm/society.toml says how they
/// were recorded: the three remote members, out of reach from here, stood in for by the
/// embedded model at their own prices), run with a store.
fn society(dir: &Path, run: &str, extra: &[&str]) -> std::process::Output {
    let repo = repo();
    claij(dir)
        .current_dir(&repo)
        .env("CLAIJ_CONFIG", repo.join("tests/llm/society.toml"))
        .args(["run", "examples/society.yaml", "--run-id", run, "--replay"])
        .arg(repo.join("tests/llm/society.exchanges.json"))
        .args(["--input", "@tests/llm/society.input.json", "--quiet"])
        .args(extra)
        .output()
        .unwrap()
}

/// Every run of the tree under `root` with its trail, by id.
fn tree_trails(dir: &Path, root: &str) -> Vec<(String, Vec<Value>)> {
    let out = claij(dir)
        .args(["runs", "list", "--json"])
        .output()
        .unwrap();
    succeeded(&out);
    let mut ids: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .filter(|id| id == root || id.starts_with(&format!("{root}.")))
        .collect();
    ids.sort();
    ids.into_iter()
        .map(|id| {
            let t = trail(dir, &id);
            (id, t)
        })
        .collect()
}

#[test]
fn the_society_s_totals_are_the_sum_of_its_four_models_calls() {
    let dir = tempfile::tempdir().unwrap();
    let out = society(dir.path(), "soc", &[]);
    succeeded(&out);
    let mut calls = 0;
    let mut by_model: std::collections::BTreeMap<String, (u64, u64, f64)> = Default::default();
    for (_, entries) in tree_trails(dir.path(), "soc") {
        for e in entries.iter().filter(|e| e["usage"].is_object()) {
            let model = e["model"].as_str().unwrap_or("?").to_owned();
            let u = &e["usage"];
            let (input, output) = (
                u["input_tokens"].as_u64().unwrap(),
                u["output_tokens"].as_u64().unwrap(),
            );
            let cost = u["cost_usd"].as_f64().unwrap();
            let &(_, pin, pout) = SOCIETY_PRICES
                .iter()
                .find(|(name, _, _)| *name == model)
                .unwrap_or_else(|| panic!("a model of the society: {model}"));
            assert!(
                (cost - (input as f64 * pin + output as f64 * pout) / 1e6).abs() < 1e-12,
                "{e}"
            );
            calls += u["calls"].as_u64().unwrap_or(1);
            let sum = by_model.entry(model).or_default();
            sum.0 += input;
            sum.1 += output;
            sum.2 += cost;
        }
    }
    assert!(
        by_model.len() >= 3,
        "the chairman and the members who answered: {by_model:?}"
    );
    assert!(by_model.contains_key("chairman"));
    let shown = show(dir.path(), "soc");
    let tree = &shown["tree_spend"];
    let (input, output, cost) = by_model
        .values()
        .fold((0, 0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2));
    assert_eq!(tree["calls"], calls, "{shown}");
    assert_eq!(tree["input_tokens"], input, "{shown}");
    assert_eq!(tree["output_tokens"], output, "{shown}");
    assert!(
        (tree["cost_usd"].as_f64().unwrap() - cost).abs() < 1e-9,
        "{shown}"
    );
    // The top run's own spend is the chairman's alone.
    assert_eq!(shown["spend"]["calls"], 2, "{shown}");
}

#[test]
fn a_society_stopped_by_its_budget_in_the_panel_goes_on_to_the_uncapped_trails() {
    let dir = tempfile::tempdir().unwrap();
    let out = society(dir.path(), "free", &[]);
    succeeded(&out);
    // Two calls: the chairman's and one member's; the second member's crosses.
    let out = society(dir.path(), "capped", &["--budget", "calls=2"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let top = show(dir.path(), "capped");
    assert_eq!(top["state"], "panel", "{top}");
    assert!(
        top["tree_spend"]["calls"].as_u64().unwrap() <= 2,
        "never past: {top}"
    );
    let children = top["wait"]["children"].as_array().unwrap().clone();
    assert!(!children.is_empty(), "{top}");
    for child in &children {
        let child = show(dir.path(), child.as_str().unwrap());
        assert_eq!(child["wait"]["budget"]["limit"], "calls", "{child}");
        assert_eq!(
            child["wait"]["budget"]["run"], "capped",
            "the tree's budget: {child}"
        );
    }
    let out = claij(dir.path())
        .current_dir(repo())
        .env("CLAIJ_CONFIG", repo().join("tests/llm/society.toml"))
        .args([
            "runs", "resume", "capped", "--budget", "calls=20", "--quiet", "--replay",
        ])
        .arg(repo().join("tests/llm/society.exchanges.json"))
        .output()
        .unwrap();
    succeeded(&out);
    assert_eq!(show(dir.path(), "capped")["status"], "completed");
    let said = |root: &str| -> Vec<(String, Vec<String>)> {
        tree_trails(dir.path(), root)
            .into_iter()
            .map(|(id, entries)| {
                let entries = entries
                    .iter()
                    .filter(|e| e["failure"]["kind"] != "budget")
                    .map(|e| {
                        serde_json::json!([
                            e["from"],
                            e["to"],
                            e["event"],
                            e["attempt"],
                            e["model"],
                            e["usage"]
                        ])
                        .to_string()
                        .replace(&format!("\"{root}."), "\"ROOT.")
                    })
                    .collect();
                (id[root.len()..].to_owned(), entries)
            })
            .collect()
    };
    assert_eq!(said("free"), said("capped"));
}

/// `time` counts a run's time running, not its time waiting: a run that waited for a
/// person longer than its whole budget still makes its next model call (the embedded
/// SmolLM2); the time its work takes then uses the budget up, and it stops before its
/// next step, to go on when the budget is raised.
#[test]
fn a_time_budget_leaves_waiting_out_and_stops_the_run_when_running_uses_it_up() {
    let dir = tempfile::tempdir().unwrap();
    let doc = r#"
id: slow-review
states:
  - {id: ask, action: human, config: {prompt: "Go on?"}}
  - {id: first, action: llm, prompts: [Say anything.]}
  - id: work
    action: command
    config: {argv: [python3, -c, "import json, time; time.sleep(10.5); print(json.dumps({'id': ['work', 'second']}))"]}
  - {id: second, action: llm, prompts: [Say anything.]}
  - {id: done, action: end}
xitions:
  - id: [start, ask]
  - id: [ask, first]
  - id: [first, work]
    schema: {type: object, required: [note], properties: {note: {type: string, maxLength: 40}}}
  - id: [work, second]
  - id: [second, done]
    schema: {type: object, required: [note], properties: {note: {type: string, maxLength: 40}}}
"#;
    std::fs::write(dir.path().join("slow.yaml"), doc).unwrap();
    let out = on_the_embedded_model(dir.path())
        .args([
            "run",
            "slow.yaml",
            "--run-id",
            "t1",
            "--budget",
            "time=10s",
            "--quiet",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        show(dir.path(), "t1")["wait"]["budget"].is_null(),
        "waits for the person"
    );
    // Longer than the whole budget, waiting. (The budget has room for loading the
    // embedded model, which is running time, on a loaded machine.)
    std::thread::sleep(Duration::from_millis(11_000));
    let out = on_the_embedded_model(dir.path())
        .args([
            "runs",
            "resume",
            "t1",
            "--input",
            r#"{"id": ["ask", "first"]}"#,
            "--quiet",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let record = show(dir.path(), "t1");
    assert_eq!(
        record["state"], "second",
        "the model step after the wait ran: {record}"
    );
    let pause = &record["wait"]["budget"];
    assert_eq!(pause["limit"], "time", "{record}");
    assert!(
        pause["spent"]["time_ms"].as_u64().unwrap() >= 10_000,
        "{record}"
    );
    assert!(
        record["spend"]["waiting_ms"].as_u64().unwrap() >= 11_000,
        "{record}"
    );
    assert_eq!(record["spend"]["calls"], 1, "{record}");
    let entries = trail(dir.path(), "t1");
    assert!(
        entries
            .iter()
            .any(|e| e["from"] == "first" && e["to"] == "work" && e["usage"].is_object()),
        "{entries:?}"
    );

    let out = on_the_embedded_model(dir.path())
        .args(["runs", "resume", "t1", "--budget", "time=5m", "--quiet"])
        .output()
        .unwrap();
    succeeded(&out);
    let record = show(dir.path(), "t1");
    assert_eq!(record["status"], "completed", "{record}");
    assert_eq!(record["spend"]["calls"], 2, "{record}");
}
