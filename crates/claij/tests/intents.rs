//! Side effects after a crash, through the real binary on a real SQLite store: a run
//! killed (SIGKILL) while an MCP tool call or a `command` program is in flight is resumed
//! with `claij runs resume`; the call is made again under the same idempotency key, and
//! the trail records the lost attempt as an intent that may have happened, with its key.
//!
//! The tool calls go to a server of the tests' own written with the official Python MCP
//! SDK (tests/durability/recording_server.py), which records each call's `_meta`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use claij_testkit::process::alive;
use serde_json::{Value, json};

/// The `_meta` key a tool call carries its idempotency key under.
const META_KEY: &str = "dev.claij/idempotency-key";

fn claij(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_claij"));
    cmd.args(args)
        .current_dir(dir)
        .env_remove("CLAIJ_STORE")
        .env_remove("CLAIJ_DURABILITY")
        .stdin(Stdio::null());
    cmd
}

fn ok(out: Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Waits (a bound only against hanging, not a timing asserted) until `done`.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(60), "never: {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

fn lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The run's stored trail.
fn trail(dir: &Path, store: &str, run: &str) -> Vec<Value> {
    ok(
        claij(dir, &["runs", "trail", run, "--json", "--store", store])
            .output()
            .unwrap(),
    )
    .lines()
    .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
    .collect()
}

fn status(dir: &Path, store: &str, run: &str) -> Value {
    let out = ok(
        claij(dir, &["runs", "show", run, "--json", "--store", store])
            .output()
            .unwrap(),
    );
    serde_json::from_str::<Value>(&out).unwrap()["status"].clone()
}

/// Starts `claij run DOC --run-id RUN --store STORE` with `input`, waits until `log` has
/// a line (the side effect is under way), SIGKILLs it, and checks the run was cut off.
fn start_and_kill_mid_call(
    dir: &Path,
    doc: &Path,
    run: &str,
    store: &str,
    input: &Value,
    log: &Path,
) {
    let mut child = claij(
        dir,
        &[
            "run",
            doc.to_str().unwrap(),
            "--run-id",
            run,
            "--store",
            store,
            "--quiet",
            "--input",
            &input.to_string(),
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    wait_for("the side effect under way", || {
        assert!(
            child.try_wait().unwrap().is_none(),
            "claij ended before its side effect was under way"
        );
        !lines(log).is_empty()
    });
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert_eq!(status(dir, store, run), "running", "the run was cut off");
}

/// The trail's lost attempt: the `interrupted` entry of `state`, with its message.
fn lost_entry<'a>(trail: &'a [Value], state: &str) -> &'a Value {
    let lost: Vec<&Value> = trail
        .iter()
        .filter(|e| e["failure"]["kind"] == "interrupted" && e["from"] == state)
        .collect();
    assert_eq!(lost.len(), 1, "one lost attempt of `{state}`: {trail:#?}");
    lost[0]
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn an_mcp_tool_call_cut_off_by_a_crash_is_made_again_under_the_same_key() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let python = claij_testkit::cache::mcp_sdk_python();
    let server = repo().join("tests/durability/recording_server.py");
    let (log, gate) = (dir.join("calls.jsonl"), dir.join("go"));
    let doc = dir.join("charging.yaml");
    fs::write(
        &doc,
        format!(
            r#"id: charging
servers:
  rec: {{command: {python:?}, args: [{server:?}, {log:?}, {gate:?}]}}
states:
  - id: charge
    action: mcp
    config: {{reply_to: done}}
  - {{id: done, action: end}}
xitions:
  - id: [start, charge]
    schema: {{type: object, required: [requests]}}
  - id: [charge, done]
    schema: {{type: object, required: [results]}}
"#
        ),
    )
    .unwrap();
    let store = dir.join("runs.db").display().to_string();
    // Two tool calls in one attempt: each has a key of its own.
    let input = json!({"requests": [
        {"server": "rec", "method": "tools/call", "params": {"name": "charge", "arguments": {"amount": 5}}},
        {"server": "rec", "method": "tools/call", "params": {"name": "charge", "arguments": {"amount": 7}}},
    ]});
    start_and_kill_mid_call(dir, &doc, "pay", &store, &input, &log);
    let first: Value = serde_json::from_str(&lines(&log)[0]).unwrap();
    let pid = i32::try_from(first["pid"].as_i64().unwrap()).unwrap();
    fs::write(&gate, "").unwrap();
    wait_for("the first server gone", || !alive(pid));

    let out = ok(claij(
        dir,
        &["runs", "resume", "pay", "--quiet", "--store", &store],
    )
    .output()
    .unwrap());
    assert!(
        out.contains("charged 5") && out.contains("charged 7"),
        "{out}"
    );

    let calls: Vec<Value> = lines(&log)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let keys: Vec<&str> = calls
        .iter()
        .map(|c| {
            c["meta"][META_KEY]
                .as_str()
                .unwrap_or_else(|| panic!("no key: {c}"))
        })
        .collect();
    let amounts: Vec<&Value> = calls.iter().map(|c| &c["arguments"]["amount"]).collect();
    assert_eq!(amounts, [&json!(5), &json!(5), &json!(7)], "{calls:#?}");
    assert_eq!(keys[0], keys[1], "the call made again carries the same key");
    assert_ne!(keys[1], keys[2], "each call of the attempt has its own key");
    assert_eq!(
        keys[0].strip_suffix(":0"),
        keys[2].strip_suffix(":1"),
        "{keys:?}"
    );
    assert!(keys[0].starts_with("pay:"), "{keys:?}");

    let trail = trail(dir, &store, "pay");
    let lost = lost_entry(&trail, "charge");
    let message = lost["failure"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "a call to tool `charge` of MCP server `rec` (key `{}`) was in flight when the process stopped; it may have happened",
            keys[0]
        )),
        "{message}"
    );
    let last = trail.last().unwrap();
    assert_eq!(
        (&last["from"], &last["to"]),
        (&json!("charge"), &json!("done"))
    );
    assert_eq!(
        last["attempt"], lost["attempt"],
        "the lost attempt is made again"
    );
    assert_eq!(status(dir, &store, "pay"), "completed");
}

#[test]
fn a_program_cut_off_by_a_crash_runs_again_under_the_same_key() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let doc = dir.join("ticking.yaml");
    fs::write(
        &doc,
        r#"id: ticking
states:
  - id: tick
    action: command
    config:
      argv:
        - sh
        - -c
        - |
          cat > /dev/null
          if [ -s ran ]; then first=no; else first=yes; fi
          echo "$CLAIJ_IDEMPOTENCY_KEY" >> ran
          echo $$ > pid
          if [ "$first" = yes ]; then while [ ! -e go ]; do sleep 0.02; done; fi
          printf '{"id":["tick","done"],"key":"%s"}' "$CLAIJ_IDEMPOTENCY_KEY"
  - {id: done, action: end}
xitions:
  - id: [start, tick]
  - id: [tick, done]
"#,
    )
    .unwrap();
    let store = dir.join("runs.db").display().to_string();
    let ran = dir.join("ran");
    start_and_kill_mid_call(dir, &doc, "tock", &store, &json!({}), &ran);
    wait_for("the program's pid", || dir.join("pid").exists());
    let pid: i32 = fs::read_to_string(dir.join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    fs::write(dir.join("go"), "").unwrap();
    wait_for("the first program gone", || !alive(pid));

    let out = ok(claij(
        dir,
        &["runs", "resume", "tock", "--quiet", "--store", &store],
    )
    .output()
    .unwrap());
    let keys = lines(&ran);
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert_eq!(
        keys[0], keys[1],
        "the program runs again under the same key"
    );
    assert!(out.contains(&keys[0]), "{out}");

    let trail = trail(dir, &store, "tock");
    let lost = lost_entry(&trail, "tick");
    let message = lost["failure"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "a run of program `sh` (key `{}`) was in flight when the process stopped; it may have happened",
            keys[0]
        )),
        "{message}"
    );
    let last = trail.last().unwrap();
    assert_eq!(last["event"]["key"], keys[0].as_str());
    assert_eq!(
        last["attempt"], lost["attempt"],
        "the lost attempt is made again"
    );
    assert_eq!(status(dir, &store, "tock"), "completed");
}

#[test]
fn an_http_request_cut_off_by_a_crash_is_sent_again_under_the_same_key() {
    use claij_testkit::stub::{Reply, Stub};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // The first request is answered only after the test is long over: claij is killed
    // while it waits; the second is answered at once.
    let stub = Stub::start(vec![
        Reply::json(200, r#"{"charged": 1}"#).after(Duration::from_secs(600)),
        Reply::json(200, r#"{"charged": 2}"#),
    ]);
    let doc = dir.join("paying.yaml");
    fs::write(
        &doc,
        format!(
            r#"id: paying
states:
  - id: pay
    action: http
    config: {{method: POST, url: "{}"}}
  - {{id: done, action: end}}
xitions:
  - id: [start, pay]
  - id: [pay, done]
"#,
            stub.url("/charges?session=s3cret")
        ),
    )
    .unwrap();
    let store = dir.join("runs.db").display().to_string();
    let mut child = claij(
        dir,
        &[
            "run",
            doc.to_str().unwrap(),
            "--run-id",
            "pay-1",
            "--store",
            &store,
            "--quiet",
            "--input",
            r#"{"amount": 5}"#,
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    wait_for("the request under way", || {
        assert!(child.try_wait().unwrap().is_none(), "claij ended first");
        !stub.seen().is_empty()
    });
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert_eq!(
        status(dir, &store, "pay-1"),
        "running",
        "the run was cut off"
    );

    let out = ok(claij(
        dir,
        &["runs", "resume", "pay-1", "--quiet", "--store", &store],
    )
    .output()
    .unwrap());
    let seen = stub.seen();
    assert_eq!(seen.len(), 2, "sent twice");
    let keys: Vec<&str> = seen
        .iter()
        .map(|s| s.header("idempotency-key").expect("a key"))
        .collect();
    assert_eq!(
        keys[0], keys[1],
        "the request is sent again under the same key"
    );
    assert!(
        out.contains(r#""charged":2"#) || out.contains(r#""charged": 2"#),
        "{out}"
    );

    let trail = trail(dir, &store, "pay-1");
    let lost = lost_entry(&trail, "pay");
    let message = lost["failure"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "the HTTP request `POST {}` (key `{}`) was in flight",
            stub.url("/charges"),
            keys[0]
        )),
        "{message}"
    );
    assert!(
        !message.contains("s3cret"),
        "the query stays out: {message}"
    );
}
