//! Attempt timeouts through the `claij` binary: the operator's `[timeouts]` ending a
//! blocking program in a document that sets none, `timeout: none` warned of by
//! `claij validate`, and `claij validate --explain`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use claij_testkit::process::alive;
use serde_json::Value;

/// The binary, run in `dir` (so no claij.toml of the repository's is found), keeping
/// runs in memory.
fn claij(dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_claij"));
    cmd.current_dir(dir)
        .stdin(Stdio::null())
        .env("CLAIJ_STORE", "memory")
        .env_remove("CLAIJ_CONFIG")
        .env("XDG_CONFIG_HOME", dir);
    cmd
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path
}

/// Waits for `child`, killing it and failing when it is still running after a minute
/// (a guard against hanging, not a timing assertion).
fn finish(mut child: std::process::Child, what: &str) -> Output {
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!("{what} never ended: {}", text(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn the_operators_default_ends_a_blocking_command_and_its_on_failure_route_is_taken() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pids");
    let doc = write(
        dir.path(),
        "blocks.yaml",
        &format!(
            "id: blocks\nstates:\n  - {{id: a, action: command, config: {{max_attempts: 1, on_failure: gave-up, argv: [sh, -c, 'sleep 1000 & echo $$ $! > {}; wait']}}}}\n  - {{id: z, action: end}}\n  - {{id: gave-up, action: end}}\nxitions:\n  - id: [start, a]\n  - id: [a, z]\n  - id: [a, gave-up]\n",
            pidfile.display()
        ),
    );
    let config = write(dir.path(), "ops.toml", "[timeouts]\ncommand = \"1s\"\n");
    let trail = dir.path().join("t.jsonl");
    let child = claij(dir.path())
        .args(["run", doc.to_str().unwrap(), "--config"])
        .arg(&config)
        .arg("--trail")
        .arg(&trail)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = finish(child, "a run whose command blocks");
    let lines: Vec<Value> = std::fs::read_to_string(&trail)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let failure = &lines[1]["failure"];
    assert_eq!(failure["kind"], "timeout", "{lines:?}");
    assert!(
        failure["message"].as_str().unwrap().contains("1s"),
        "{failure}"
    );
    let last = lines.last().unwrap();
    assert_eq!(last["to"], "gave-up", "{lines:?}\n{}", text(&out.stderr));
    // The program and the sleep it started are gone.
    let pids: Vec<i32> = std::fs::read_to_string(&pidfile)
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2);
    let started = Instant::now();
    while pids.iter().any(|&p| alive(p)) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{pids:?} outlived the timeout"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn an_operator_timeout_for_no_action_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let doc = write(
        dir.path(),
        "d.yaml",
        "id: d\nstates:\n  - {id: z, action: end}\nxitions:\n  - id: [start, z]\n",
    );
    let config = write(dir.path(), "ops.toml", "[timeouts]\ncommnd = \"1s\"\n");
    let out = claij(dir.path())
        .args(["validate", "--explain", doc.to_str().unwrap(), "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("ops.toml") && err.contains("`commnd`"),
        "{err}"
    );
}

#[test]
fn timeout_none_loads_and_validate_warns_naming_the_state() {
    let dir = tempfile::tempdir().unwrap();
    let by_state = write(
        dir.path(),
        "s.yaml",
        "id: s\nstates:\n  - {id: z, action: end}\n  - {id: a, action: command, config: {timeout: none, argv: ['true']}}\nxitions:\n  - id: [start, a]\n  - id: [a, z]\n",
    );
    let out = claij(dir.path())
        .args(["validate", by_state.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("warn"), "{err}");
    assert!(
        err.contains("$.states[1].config.timeout") && err.contains("state `a`"),
        "{err}"
    );

    let by_document = write(
        dir.path(),
        "d.yaml",
        "id: d\nconfig: {timeout: none}\nstates:\n  - {id: a, action: command, config: {argv: ['true']}}\n  - {id: b, action: command, config: {timeout: 5s, argv: ['true']}}\n  - {id: z, action: end}\nxitions:\n  - id: [start, a]\n  - id: [a, b]\n  - id: [b, z]\n",
    );
    let out = claij(dir.path())
        .args(["validate", "--json", by_document.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let warnings = report["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{report}");
    assert!(
        warnings[0]["message"]
            .as_str()
            .unwrap()
            .contains("state `a`"),
        "{report}"
    );
    assert_eq!(warnings[0]["path"], "$.config.timeout");
}

#[test]
fn explain_shows_each_states_limit_and_where_it_comes_from() {
    let dir = tempfile::tempdir().unwrap();
    let doc = write(
        dir.path(),
        "e.yaml",
        "id: e\nstates:\n  - {id: own, action: command, config: {timeout: 5s, argv: ['true']}}\n  - {id: ops, action: command, config: {argv: ['true']}}\n  - {id: shape, action: transform, config: {template: '{\"id\": [\"shape\", \"ask\"]}'}}\n  - {id: ask, action: human}\n  - {id: z, action: end}\nxitions:\n  - id: [start, own]\n  - id: [own, ops]\n  - id: [ops, shape]\n  - id: [shape, ask]\n  - id: [ask, z]\n",
    );
    let config = write(dir.path(), "ops.toml", "[timeouts]\ncommand = \"2s\"\n");
    let out = claij(dir.path())
        .args(["validate", "--explain", "--json", doc.to_str().unwrap()])
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let limits: Vec<(String, String, String)> = report["limits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let s = |k: &str| l[k].as_str().unwrap().to_owned();
            (s("state"), s("timeout"), s("source"))
        })
        .collect();
    let expected = [
        ("own", "5s", "state"),
        ("ops", "2s", "operator"),
        ("shape", "10m", "built-in"),
        ("ask", "none", "built-in"),
    ]
    .map(|(a, b, c)| (a.to_owned(), b.to_owned(), c.to_owned()));
    assert_eq!(limits, expected);

    // The document's own timeout comes before the operator's; the text says where.
    let documented = write(
        dir.path(),
        "f.yaml",
        &std::fs::read_to_string(&doc)
            .unwrap()
            .replace("id: e\n", "id: f\nconfig: {timeout: 7s}\n"),
    );
    let out = claij(dir.path())
        .args(["validate", "--explain", documented.to_str().unwrap()])
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("ops (command): 7s  from the document's config.timeout"),
        "{stdout}"
    );
    assert!(
        stdout.contains("own (command): 5s  from the state's config.timeout"),
        "{stdout}"
    );
}
