//! An MCP server's sampling request during a run goes to the run's model layer: the model
//! `--config`/`--model` configure, recorded with `--record`, replayed with `--replay` (no
//! live call); under `claij serve`, the model a request names for its run. The server is the real npm reference server (its `trigger-sampling-request`
//! tool asks the client for a completion during the tool call); the model is an
//! OpenAI-compatible server the test runs on loopback, counting the calls it answers.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

#[path = "served/mod.rs"]
mod served;
#[path = "support/sampler.rs"]
mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// What the loopback model says to every request.
const ANSWER: &str = "Teal, from the configured model.";

/// An OpenAI-compatible chat completions server on loopback: every request is kept
/// (its JSON body) and answered with [`ANSWER`].
struct FakeModel {
    port: u16,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl FakeModel {
    fn start() -> FakeModel {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let kept = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let kept = kept.clone();
                std::thread::spawn(move || answer(stream, &kept));
            }
        });
        FakeModel { port, requests }
    }

    /// The request bodies answered so far.
    fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }
}

/// Reads one HTTP request from `stream`, keeps its body, answers with [`ANSWER`].
fn answer(stream: std::net::TcpStream, kept: &Mutex<Vec<Value>>) {
    let mut reader = BufReader::new(stream);
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    kept.lock()
        .unwrap()
        .push(serde_json::from_slice(&body).unwrap_or(Value::Null));
    let reply = json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "fake-1",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": ANSWER},
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
    })
    .to_string();
    let mut stream = reader.into_inner();
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
        reply.len()
    );
    let _ = stream.flush();
}

/// A model configuration: `fake` answers at `port`; `gone` (the default when `default`
/// says so) at a port nobody listens on.
fn config(dir: &Path, port: u16, default: &str) -> std::path::PathBuf {
    let closed = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let path = dir.join(format!("claij-{default}.toml"));
    std::fs::write(
        &path,
        format!(
            r#"default_model = "{default}"

[providers.loopback]
kind = "openai"
base_url = "http://127.0.0.1:{port}/v1"
stream = false
max_retries = 0

[providers.gone]
kind = "openai"
base_url = "http://127.0.0.1:{closed}/v1"
stream = false
max_retries = 0

[models.fake]
provider = "loopback"
name = "fake-1"

[models.gone]
provider = "gone"
name = "gone-1"
"#
        ),
    )
    .unwrap();
    path
}

/// `claij ARGS` from `dir`, runs in memory, no model configuration from the machine
/// (HOME and XDG_CONFIG_HOME at `dir`), the embedded default a file that is not there:
/// a sampling request answered by the default model layer fails.
fn claij(dir: &Path, env: &[(&str, &Path)], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_claij"))
        .current_dir(dir)
        .stdin(Stdio::null())
        .env("CLAIJ_STORE", "memory")
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir)
        .env("CLAIJ_EMBEDDED_MODEL", dir.join("absent.gguf"))
        .env_remove("CLAIJ_CONFIG")
        .env_remove("CLAIJ_MODEL")
        .env_remove("OPENAI_API_KEY")
        .envs(env.iter().copied())
        .args(args)
        .output()
        .expect("claij starts")
}

/// The CreateMessageResult the server got back, as its tool reports it (JSON after a
/// heading), from a completed run's output.
fn sampled(out: &Output) -> Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    let call = &result["results"][0];
    assert!(call.get("error").is_none(), "{result}\n{stderr}");
    let text = call["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    let json_start = text
        .find('{')
        .unwrap_or_else(|| panic!("{result}\n{stderr}"));
    serde_json::from_str(&text[json_start..]).unwrap()
}

/// `--record` keeps the sampling exchange on the cassette; `--replay` answers it from
/// there, with no call to the model.
#[test]
fn a_sampling_request_is_recorded_and_replayed_with_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let model = FakeModel::start();
    let config = config(dir.path(), model.port, "fake");
    let file = support::sampler(dir.path());
    let tape = dir.path().join("tape.json");
    let (config_arg, file_arg, tape_arg) = (
        config.to_str().unwrap(),
        file.to_str().unwrap(),
        tape.to_str().unwrap(),
    );

    let out = claij(
        dir.path(),
        &[],
        &[
            "run", file_arg, "--config", config_arg, "--record", tape_arg,
        ],
    );
    let first = sampled(&out);
    assert_eq!(first["model"], "fake", "{first}");
    assert_eq!(first["content"]["text"], ANSWER, "{first}");
    let asked = model.requests();
    assert_eq!(asked.len(), 1, "{asked:#?}");
    assert!(
        asked[0].to_string().contains("Name a colour."),
        "{asked:#?}"
    );
    let cassette = std::fs::read_to_string(&tape).unwrap();
    assert!(cassette.contains("Name a colour."), "{cassette}");
    assert!(cassette.contains(ANSWER), "{cassette}");

    let out = claij(
        dir.path(),
        &[],
        &[
            "run", file_arg, "--config", config_arg, "--replay", tape_arg,
        ],
    );
    let again = sampled(&out);
    assert_eq!(again, first);
    assert_eq!(model.requests().len(), 1, "no live call under --replay");
}

/// `--model` picks the model that answers a server's sampling request, over the
/// configuration's default; `--config` names the configuration it comes from.
#[test]
fn a_sampling_request_is_answered_by_the_model_the_command_names() {
    let dir = tempfile::tempdir().unwrap();
    let model = FakeModel::start();
    let config = config(dir.path(), model.port, "gone");
    let file = support::sampler(dir.path());
    let file_arg = file.to_str().unwrap();

    // The configuration from the environment, its default unreachable, --model the one
    // that answers.
    let out = claij(
        dir.path(),
        &[("CLAIJ_CONFIG", &config)],
        &["run", file_arg, "--model", "fake"],
    );
    let answer = sampled(&out);
    assert_eq!(answer["model"], "fake", "{answer}");
    assert_eq!(answer["content"]["text"], ANSWER, "{answer}");
    assert_eq!(model.requests().len(), 1);

    // The configuration named by --config (none in the environment).
    let out = claij(
        dir.path(),
        &[],
        &[
            "run",
            file_arg,
            "--config",
            config.to_str().unwrap(),
            "--model",
            "fake",
        ],
    );
    assert_eq!(sampled(&out)["model"], "fake");
    assert_eq!(model.requests().len(), 2);
}

/// Under `claij serve`, a request's `model` is its run's: the run's sampling request is
/// answered by it, while a run that names none, on the same server, gets the
/// configuration's default (here unreachable, so its tool call fails).
#[tokio::test]
async fn a_served_run_samples_with_the_model_its_request_names() {
    let dir = tempfile::tempdir().unwrap();
    let model = FakeModel::start();
    let config = config(dir.path(), model.port, "gone");
    let file = support::sampler(dir.path());
    let absent = dir.path().join("absent.gguf");
    let home = dir.path().to_str().unwrap();
    let server = served::Served::start_env(
        &dir.path().join("claij.db"),
        &[file.to_str().unwrap()],
        &[
            ("CLAIJ_CONFIG", config.to_str().unwrap()),
            ("CLAIJ_EMBEDDED_MODEL", absent.to_str().unwrap()),
            ("HOME", home),
            ("XDG_CONFIG_HOME", home),
        ],
    );
    let http = served::client();
    let url = server.url("/runs?wait=60");

    let named = served::post(
        &http,
        url.clone(),
        &json!({"fsm": "sampler", "input": {}, "model": "fake"}),
    )
    .await;
    assert_eq!(named.status, 201, "{}\n{}", named.body, server.said());
    assert_eq!(named.body["status"], "completed", "{}", named.body);
    let call = &named.body["result"]["results"][0];
    let text = call["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains(ANSWER), "{call}");
    assert!(
        text.contains(r#""model": "fake""#) || text.contains(r#""model":"fake""#),
        "{text}"
    );
    assert_eq!(model.requests().len(), 1);

    let unnamed = served::post(&http, url, &json!({"fsm": "sampler", "input": {}})).await;
    assert_eq!(unnamed.status, 201, "{}", unnamed.body);
    let call = &unnamed.body["result"]["results"][0];
    assert!(
        call.get("error").is_some() || !call.to_string().contains(ANSWER),
        "the default model is unreachable: {call}"
    );
    assert_eq!(model.requests().len(), 1, "no call to the named model");
}
