//! `claij mcp tools` and runs of documents with MCP servers, against the real npm
//! reference servers (installed by scripts/setup/mcp-servers), one of them driven by the
//! real embedded model (fetched by scripts/setup/model).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

#[path = "support/sampler.rs"]
mod support;

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

fn claij(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_claij"))
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .stdin(Stdio::null())
        .env("CLAIJ_STORE", "memory")
        .args(args)
        .output()
        .expect("claij starts")
}

#[test]
fn mcp_tools_lists_tools_resources_and_prompts() {
    let everything = claij_testkit::cache::mcp_server_bin("mcp-server-everything");
    let out = claij(&["mcp", "tools", "--", &everything]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("protocol 2025-11-25"), "{text}");
    assert!(text.contains("get-sum(a*: number, b*: number)"), "{text}");
    assert!(
        text.contains("demo://resource/static/document/architecture.md"),
        "{text}"
    );
    assert!(text.contains("args-prompt(city*, state)"), "{text}");
    assert!(
        text.contains("; their arguments completed by the server):"),
        "server-everything completes arguments: {text}"
    );

    let dir = tempfile::tempdir().unwrap();
    let out = claij(&[
        "mcp",
        "tools",
        "--json",
        "--",
        &claij_testkit::cache::mcp_server_bin("mcp-server-filesystem"),
        &dir.path().display().to_string(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        listed["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "list_directory"),
        "{listed}"
    );

    let out = claij(&["mcp", "tools", "--", "/nonexistent/server"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/server"));
}

#[test]
fn mcp_call_calls_a_tool_and_answers_elicitations_checked_against_their_schema() {
    let everything = claij_testkit::cache::mcp_server_bin("mcp-server-everything");
    let out = claij(&[
        "mcp",
        "call",
        "get-sum",
        r#"{"a": 2, "b": 40}"#,
        "--",
        &everything,
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "The sum of 2 and 40 is 42."
    );

    // The requested schema's defaults fill what the answer leaves out; the server sees
    // the whole answer.
    let out = claij(&[
        "mcp",
        "call",
        "trigger-elicitation-request",
        "--elicit",
        r#"{"name": "Ada"}"#,
        "--json",
        "--",
        &everything,
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let result: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let said = result["content"].to_string();
    assert!(said.contains("Name: Ada"), "{said}");
    assert!(said.contains("Favorite Integer: 42"), "the default: {said}");

    // An answer the requested schema refuses is not sent as an acceptance: the server
    // is told why, at the field.
    let out = claij(&[
        "mcp",
        "call",
        "trigger-elicitation-request",
        "--elicit",
        "{}",
        "--",
        &everything,
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(text.contains(r#""name" is a required property"#), "{text}");

    // Declined.
    let out = claij(&[
        "mcp",
        "call",
        "trigger-elicitation-request",
        "--elicit",
        r#""decline""#,
        "--",
        &everything,
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("decline"),
        "{out:?}"
    );

    // An unknown tool, arguments that are not an object, a server that does not start.
    let out = claij(&["mcp", "call", "no-such-tool", "--", &everything]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let out = claij(&["mcp", "call", "get-sum", "[1]", "--", &everything]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("a JSON object"),
        "{out:?}"
    );
    let out = claij(&["mcp", "call", "get-sum", "--", "/nonexistent/server"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("/nonexistent/server"),
        "{out:?}"
    );
}

#[test]
fn a_run_uses_a_hat_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap().display().to_string();
    std::fs::write(dir.path().join("a.txt"), "alpha").unwrap();
    let template = r#"{% if event.results is defined %}{"id": ["lister", "done"], "listing": {{ event.results[0].result.content[0].text | tojson }}}{% else %}{"id": ["lister", "lister.mcp"], "requests": [{"server": "files", "method": "tools/call", "params": {"name": "list_directory", "arguments": {"path": {{ event.dir | tojson }}}}}]}{% endif %}"#;
    let doc = json!({
        "id": "lister",
        "servers": {"files": {"command": claij_testkit::cache::mcp_server_bin("mcp-server-filesystem"), "args": [root]}},
        "states": [
            {"id": "lister", "action": "transform", "config": {"template": template}, "servers": ["files"]},
            {"id": "done", "action": "end"}
        ],
        "xitions": [
            {"id": ["start", "lister"], "schema": {"type": "object", "required": ["dir"]}},
            {"id": ["lister", "done"], "schema": {"type": "object", "required": ["listing"]}}
        ]
    });
    let file = dir.path().join("lister.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    let input = json!({"dir": root}).to_string();
    let out = claij(&[
        "run",
        "--quiet",
        &file.display().to_string(),
        "--input",
        &input,
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        result["listing"].as_str().unwrap().contains("a.txt"),
        "{result}"
    );
}

/// The binary, runs in memory, with no model configuration from the machine (HOME and
/// XDG_CONFIG_HOME at `home`), so `llm` states use the embedded model, the file `model`.
fn on_the_embedded_model(home: &Path, model: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_claij"));
    command
        .stdin(Stdio::null())
        .env("CLAIJ_STORE", "memory")
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home)
        .env("CLAIJ_EMBEDDED_MODEL", model)
        .env_remove("CLAIJ_CONFIG")
        .env_remove("CLAIJ_MODEL")
        .env_remove("OPENAI_API_KEY");
    command
}

/// A model-driven run with an MCP tool: examples/file-question.yaml on the real default
/// embedded model (no key, no network; the answer matters) and the real filesystem server. The model writes the
/// `tools/call` (which tool, which file), the server reads the file, and the model's
/// answer carries what the file says: a fact that is in no prompt, only in the tool's
/// result.
#[test]
fn a_model_reads_a_file_through_the_filesystem_server_and_answers_from_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("notes.txt"),
        "Team notes: the launch review is on Thursday in room Juniper.",
    )
    .unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/file-question.yaml");
    let mut doc: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(example).unwrap()).unwrap();
    // The installed server rather than npx, in the folder of the question.
    let files = &mut doc["servers"]["files"];
    assert_eq!(files["args"].as_array().unwrap().last().unwrap(), ".");
    files["command"] = json!(claij_testkit::cache::mcp_server_bin(
        "mcp-server-filesystem"
    ));
    files["args"] = json!(["."]);
    files["cwd"] = json!(dir.path());
    let file = dir.path().join("file-question.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    let trail = dir.path().join("trail.jsonl");
    let input = json!({"file": "notes.txt", "question": "Which room is the launch review in?"});
    let home = tempfile::tempdir().unwrap();
    let out = on_the_embedded_model(home.path(), &claij_testkit::cache::default_model())
        .args(["run", "--trail"])
        .arg(&trail)
        .arg(&file)
        .args(["--input", &input.to_string()])
        .output()
        .expect("claij starts");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("embedded model"), "{stderr}");

    let entries: Vec<Value> = std::fs::read_to_string(&trail)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let step = |from: &str| {
        entries
            .iter()
            .find(|e| e["from"] == from && e["failure"].is_null())
            .unwrap_or_else(|| panic!("no step from `{from}`: {entries:#?}"))
    };
    // The model's request (one call: `mcp:files:call`): the one tool it is shown, on
    // the file.
    let read = step("read");
    assert!(
        read["model"]
            .as_str()
            .unwrap_or_default()
            .starts_with("embedded/"),
        "{read}"
    );
    let call = &read["event"];
    assert_eq!(call["method"], "tools/call", "{read}");
    assert_eq!(call["params"]["name"], "read_text_file", "{read}");
    assert_eq!(call["params"]["arguments"]["path"], "notes.txt", "{read}");
    // The server's answer: the file's text.
    let fetched = step("fetch")["event"]["results"][0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(fetched.contains("Juniper"), "{fetched}");
    // The model's answer carries it.
    let answer = step("answer");
    assert!(
        answer["model"]
            .as_str()
            .unwrap_or_default()
            .starts_with("embedded/"),
        "{answer}"
    );
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["id"], json!(["answer", "end"]), "{result}");
    assert!(
        result["answer"]
            .as_str()
            .unwrap_or_default()
            .contains("Juniper"),
        "{result}"
    );
}

/// A server's sampling request during a run is answered by the run's model layer — here
/// the real embedded model — and the server gets the model's text and name back.
#[test]
fn a_servers_sampling_request_is_answered_by_the_runs_model() {
    let dir = tempfile::tempdir().unwrap();
    let file = support::sampler(dir.path());
    let home = tempfile::tempdir().unwrap();
    let out = on_the_embedded_model(home.path(), &claij_testkit::cache::embedded_model())
        .arg("run")
        .arg(&file)
        .output()
        .expect("claij starts");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    let call = &result["results"][0];
    assert!(call.get("error").is_none(), "{result}");
    // The tool reports the CreateMessageResult it got, as JSON after a heading.
    let text = call["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    let json_start = text.find('{').unwrap_or_else(|| panic!("{text}"));
    let sampled: Value = serde_json::from_str(&text[json_start..]).unwrap();
    assert_eq!(sampled["model"], "embedded/smollm2-135m", "{sampled}");
    assert_eq!(sampled["role"], "assistant", "{sampled}");
    assert!(
        !sampled["content"]["text"]
            .as_str()
            .unwrap_or_default()
            .trim()
            .is_empty(),
        "{sampled}"
    );
}

/// `claij` on the store `store` (each call its own process), the reference servers on
/// its PATH.
fn claij_on(store: &Path, args: &[&str]) -> std::process::Output {
    let path = format!(
        "{}:{}",
        claij_testkit::cache::mcp_server_bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new(env!("CARGO_BIN_EXE_claij"))
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .stdin(Stdio::null())
        .env("CLAIJ_STORE", store)
        .env("PATH", path)
        .args(args)
        .output()
        .expect("claij starts")
}

/// `claij ARGS` on `store` with more environment, from the repository's root.
fn claij_with(store: &Path, env: &[(String, String)], args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_claij"));
    command
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .stdin(Stdio::null())
        .env("CLAIJ_STORE", store)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .args(args);
    command
}

/// [`claij_on`] with more environment.
fn claij_on_env(store: &Path, env: &[(String, String)], args: &[&str]) -> std::process::Output {
    claij_with(store, env, args).output().expect("claij starts")
}

fn trail_of(store: &Path, run: &str) -> Value {
    let out = claij_on(store, &["runs", "trail", run, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // One JSON entry a line.
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("a JSON entry"))
        .collect()
}

#[test]
fn a_servers_question_suspends_a_durable_run_until_another_process_answers_it() {
    let dir = tempfile::tempdir().unwrap();
    let doc = "tests/mcp-clients/ask.yaml";
    let store = dir.path().join("runs.db");
    claij_testkit::cache::mcp_server_bin("mcp-server-everything");

    // The server asks during the call: the run stops there, suspended on the question.
    let out = claij_on(&store, &["run", doc, "--input", "{}"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let waiting: Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = waiting["run_id"].as_str().unwrap().to_owned();
    assert_eq!(waiting["question"]["server"], "ev", "{waiting}");
    assert_eq!(waiting["schema"]["required"], json!(["name"]), "{waiting}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("? call: the MCP server `ev` asks"),
        "{stderr}"
    );
    let before = trail_of(&store, &run);
    let last = &before.as_array().unwrap().last().unwrap()["failure"];
    assert_eq!(last["kind"], "question", "{before}");

    // An answer the requested schema refuses changes nothing, and says where.
    let out = claij_on(
        &store,
        &["runs", "resume", &run, "--input", r#"{"integer": "seven"}"#],
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("\"name\" is a required property") && said.contains("/integer"),
        "{said}"
    );
    assert_eq!(
        trail_of(&store, &run),
        before,
        "a refused answer changed the trail"
    );

    // The answer, from another process: the call is made again, the server asks again and
    // is answered from the trail, with the schema's defaults for what was left out.
    let out = claij_on(
        &store,
        &[
            "runs",
            "resume",
            &run,
            "--input",
            r#"{"name": "Ada", "integer": 7}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    let said = result["said"].as_str().unwrap();
    assert!(
        said.contains("Name: Ada") && said.contains("Favorite Integer: 7"),
        "{said}"
    );
    assert!(
        said.contains("It was a dark and stormy night."),
        "a default: {said}"
    );
    let kinds: Vec<Value> = trail_of(&store, &run)
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["failure"]["kind"].clone())
        .filter(|k| !k.is_null())
        .collect();
    assert_eq!(kinds, [json!("question"), json!("answer")]);

    // Declined: the server hears it.
    let out = claij_on(&store, &["run", doc, "--input", "{}"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let waiting: Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = waiting["run_id"].as_str().unwrap();
    let out = claij_on(&store, &["runs", "resume", run, "--input", r#""decline""#]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        result["said"].as_str().unwrap().contains("declined"),
        "{result}"
    );
}

/// The Python of scripts/setup/mcp-clients' venv (the official MCP SDK), and the
/// environment asker.yaml's server needs, logging its calls to `log`.
fn asker_env(log: &Path) -> Vec<(String, String)> {
    let python = claij_testkit::cache::mcp_sdk_python();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    vec![
        ("ASKER_PYTHON".into(), python.display().to_string()),
        (
            "ASKER_SCRIPT".into(),
            repo.join("tests/mcp-clients/asker.py")
                .display()
                .to_string(),
        ),
        ("ASKER_LOG".into(), log.display().to_string()),
    ]
}

/// `claij run asker.yaml` as run `run`, started in the background.
fn start_asker(store: &Path, env: &[(String, String)], run: &str) -> std::process::Child {
    let args = [
        "run",
        "tests/mcp-clients/asker.yaml",
        "--input",
        "{}",
        "--run-id",
        run,
    ];
    claij_with(store, env, &args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("claij starts")
}

/// Waits until `run` is suspended on its question with the request held open; its
/// `claij runs show --json`.
fn held(store: &Path, run: &str) -> Value {
    for _ in 0..300 {
        let out = claij_on(store, &["runs", "show", run, "--json"]);
        if out.status.success() {
            let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
            if shown["status"] == "suspended" && shown["wait"]["held_until"].is_string() {
                return shown;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("run {run} never waited with its request held");
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .count()
}

#[test]
fn an_answer_given_while_the_request_is_held_goes_straight_back_to_the_tool() {
    // asker.py (the official Python SDK's server) asks for a name in its tool `greet`,
    // and logs each call: the request is held open, `claij run` waiting, and the answer
    // given from another process reaches the tool in that same call.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("runs.db");
    let log = dir.path().join("asker.log");
    let env = asker_env(&log);
    let run = "held-question-1";
    let child = start_asker(&store, &env, run);
    let shown = held(&store, run);
    assert_eq!(shown["wait"]["question"]["server"], "asker", "{shown}");
    assert_eq!(
        shown["wait"]["question"]["message"], "Who is there?",
        "{shown}"
    );
    let text = claij_on(&store, &["runs", "show", run]);
    assert!(
        String::from_utf8_lossy(&text.stdout)
            .contains("held      the server's request is held open until"),
        "{text:?}"
    );

    let out = claij_on_env(
        &store,
        &env,
        &["runs", "resume", run, "--input", r#"{"name": "Lin"}"#],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["said"], "Hello, Lin!", "{result}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the answer goes straight back to it"),
        "{out:?}"
    );

    let first = child.wait_with_output().unwrap();
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    let result: Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(result["said"], "Hello, Lin!", "{result}");
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(
        stderr.contains("? the MCP server `asker` waits for an answer"),
        "{stderr}"
    );
    assert_eq!(lines(&log), 1, "the tool ran once");
    let kinds: Vec<Value> = trail_of(&store, run)
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["failure"]["kind"].clone())
        .filter(|k| !k.is_null())
        .collect();
    assert_eq!(kinds, [json!("question"), json!("answer")]);
}

#[test]
fn an_answer_after_the_holding_process_died_makes_the_call_again() {
    // The process holding the request is killed: the run stays suspended on the question,
    // and the answer, once the hold is over, makes the call again (the tool runs twice).
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("runs.db");
    let log = dir.path().join("asker.log");
    let env = asker_env(&log);
    let run = "held-question-2";
    let mut child = start_asker(&store, &env, run);
    held(&store, run);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(lines(&log), 1);

    let out = claij_on_env(
        &store,
        &env,
        &["runs", "resume", run, "--input", r#"{"name": "Bo"}"#],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["said"], "Hello, Bo!", "{result}");
    assert_eq!(lines(&log), 2, "the call was made again");
}

#[test]
fn an_https_server_is_reached_when_its_certificate_is_trusted_and_refused_otherwise() {
    // A server of the official Python SDK over TLS, its certificate signed by a CA made
    // for the test; the system's trust store, extended by SSL_CERT_FILE, decides.
    let dir = tempfile::tempdir().unwrap();
    let mut server = Command::new(claij_testkit::cache::mcp_sdk_python())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp-clients/tls_server.py"))
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut port = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.take().unwrap()),
        &mut port,
    )
    .unwrap();
    let url = format!("https://127.0.0.1:{}/mcp", port.trim());
    let call = |trusted: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_claij"));
        command
            .stdin(Stdio::null())
            .env("CLAIJ_STORE", "memory")
            .env_remove("SSL_CERT_FILE")
            .args(["mcp", "call", "hello", "--url", &url]);
        if trusted {
            command.env("SSL_CERT_FILE", dir.path().join("ca.pem"));
        }
        command.output().unwrap()
    };
    // The server may take a moment to listen after printing its port.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let trusted = loop {
        let out = call(true);
        if out.status.success() || std::time::Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    };
    let untrusted = call(false);
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        trusted.status.success(),
        "{}",
        String::from_utf8_lossy(&trusted.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&trusted.stdout).trim(),
        "hello over TLS"
    );
    assert_eq!(
        untrusted.status.code(),
        Some(2),
        "an untrusted certificate is refused"
    );
    let said = String::from_utf8_lossy(&untrusted.stderr);
    assert!(said.contains(&url), "{said}");
}
