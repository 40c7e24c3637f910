//! Whole-run cassettes: `claij run --record` keeps what the run's programs printed and
//! what its MCP server answered (its listing too), and `--replay` reproduces the run from
//! the file alone — with the server's folder gone and nothing on `PATH`, so no server can
//! start and no program can run — while a run that asks something else fails naming the
//! state. Against the real npm reference filesystem server and a real shell.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

/// `claij run DOC --run-id whole --trail TRAIL --input INPUT` with `tape` (`--record` or
/// `--replay`), `PATH` as given.
fn run(doc: &Path, trail: &Path, input: &Value, tape: [&str; 2], path: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_claij"))
        .stdin(Stdio::null())
        .env("CLAIJ_STORE", "memory")
        .env("PATH", path)
        .args(["run", doc.to_str().unwrap(), "--run-id", "whole", "-q"])
        .args(["--trail", trail.to_str().unwrap()])
        .args(["--input", &input.to_string()])
        .args(tape)
        .output()
        .expect("claij starts")
}

/// The trail's steps without when they were taken: where each went and with what event.
fn steps(trail: &Path) -> Vec<Value> {
    std::fs::read_to_string(trail)
        .unwrap()
        .lines()
        .map(|line| {
            let entry: Value = serde_json::from_str(line).unwrap();
            json!([
                entry["from"],
                entry["to"],
                entry["event"],
                entry.get("failure")
            ])
        })
        .collect()
}

#[test]
fn a_recorded_run_with_a_server_and_a_program_replays_with_neither() {
    let dir = tempfile::tempdir().unwrap();
    let served = dir.path().join("served");
    std::fs::create_dir(&served).unwrap();
    let note = served.join("note.txt");
    std::fs::write(&note, "the cassette holds this").unwrap();
    let fs = claij_testkit::cache::mcp_server_bin("mcp-server-filesystem");
    let doc = dir.path().join("whole.yaml");
    std::fs::write(
        &doc,
        format!(
            r#"id: whole
servers:
  fs: {{command: {fs:?}, args: [{served:?}]}}
states:
  - id: ask
    action: transform
    config:
      template: >-
        {{% if event.results is defined %}}{{"id": ["ask", "stamp"], "text": {{{{ event.results[0].result.content[0].text | tojson }}}}}}
        {{% else %}}{{"id": ["ask", "read"], "requests": [{{"server": "fs", "method": "tools/call",
        "params": {{"name": "read_text_file", "arguments": {{"path": {{{{ event.path | tojson }}}}}}}}}}]}}{{% endif %}}
  - id: read
    action: mcp
  - id: stamp
    action: command
    config:
      argv: [sh, -c, 'cat; echo; date +%N']
      env: {{STAMPED: "yes"}}
      output: capture
      routes: {{"0": done}}
  - id: done
    action: end
xitions:
  - id: [start, ask]
  - id: [ask, read]
    schema: "mcp:fs:request"
  - id: [read, ask]
    schema: "mcp:fs:response"
  - id: [ask, stamp]
    schema: {{type: object, required: [text]}}
  - id: [stamp, done]
    schema: {{type: object, required: [stdout]}}
"#,
            served = served.display().to_string(),
        ),
    )
    .unwrap();
    let tape = dir.path().join("tape.json");
    let tape = tape.to_str().unwrap();
    let input = json!({"path": note.display().to_string()});
    let path = std::env::var("PATH").unwrap();

    let recorded_trail = dir.path().join("recorded.jsonl");
    let recorded = run(&doc, &recorded_trail, &input, ["--record", tape], &path);
    let stderr = String::from_utf8_lossy(&recorded.stderr);
    assert_eq!(recorded.status.code(), Some(0), "{stderr}");
    let result: Value = serde_json::from_slice(&recorded.stdout).unwrap();
    let printed = result["stdout"].as_str().unwrap();
    assert!(
        printed.contains("the cassette holds this"),
        "the program read the server's answer: {result}"
    );

    // Nothing to serve, nothing to run: the run is the cassette's.
    std::fs::remove_dir_all(&served).unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let nothing = empty.to_str().unwrap();
    let replayed_trail = dir.path().join("replayed.jsonl");
    let replayed = run(&doc, &replayed_trail, &input, ["--replay", tape], nothing);
    let stderr = String::from_utf8_lossy(&replayed.stderr);
    assert_eq!(replayed.status.code(), Some(0), "{stderr}");
    assert_eq!(
        replayed.stdout, recorded.stdout,
        "the same result, bit for bit (the program's clock included)"
    );
    assert_eq!(steps(&replayed_trail), steps(&recorded_trail));

    // Asked for another file, the run meets a request the cassette does not hold.
    let other = json!({"path": served.join("other.txt").display().to_string()});
    let missed_trail = dir.path().join("missed.jsonl");
    let missed = run(&doc, &missed_trail, &other, ["--replay", tape], nothing);
    let stderr = String::from_utf8_lossy(&missed.stderr);
    assert_ne!(missed.status.code(), Some(0), "{stderr}");
    let failures: Vec<String> = std::fs::read_to_string(&missed_trail)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let entry: Value = serde_json::from_str(l).unwrap();
            entry.get("failure").map(Value::to_string)
        })
        .collect();
    let said = format!("{stderr}\n{failures:?}");
    assert!(
        said.contains("state `read`") && said.contains("`tools/call` on the MCP server `fs`"),
        "{said}"
    );
    assert!(said.contains("other.txt"), "what was asked: {said}");
}
