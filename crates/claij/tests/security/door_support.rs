//! What the door tests share: a suspended run, FSM files written for a test, `claij mcp
//! serve --http` as a real process, MCP requests over plain HTTP, and raw TCP sockets (for
//! what an HTTP client library will not do: stay idle, send headers slowly).

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Child;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::served::{Reply, Served, claij, post, send};

/// An API token for the tests (at least 32 characters).
pub(crate) const TOKEN: &str = "0123456789abcdef0123456789abcdef-door-token";

/// An FSM whose run ends at once with its input as its result; its entry takes anything.
pub(crate) const ECHO: &str = "\
id: echo
description: Gives back its input.
states:
  - id: done
    action: end
xitions:
  - id: [start, done]
";

/// Writes `text` to `dir/name` and gives its path.
pub(crate) fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// An object `levels` deep in all (itself level 1) that the echo FSM's entry takes:
/// `{"id": ["start", "done"], "a": {"a": … 1}}`.
pub(crate) fn deep_echo_input(levels: usize) -> String {
    let inner = levels - 1;
    format!(
        r#"{{"id": ["start", "done"], "a": {}1{}}}"#,
        r#"{"a": "#.repeat(inner),
        "}".repeat(inner)
    )
}

/// A raw deployment request for examples/human-approval.yaml.
pub(crate) fn approval_input() -> Value {
    json!({"id": ["start", "summarise"], "service": "billing", "version": "2.4.1", "changes": 14})
}

/// Starts a run of examples/human-approval.yaml and gives its id once it waits.
pub(crate) async fn suspended_run(http: &reqwest::Client, server: &Served) -> String {
    let reply = post(
        http,
        server.url("/runs?wait=30"),
        &json!({"fsm": "human-approval", "input": approval_input()}),
    )
    .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(reply.body["status"], "suspended", "{}", reply.body);
    reply.body["id"].as_str().expect("an id").to_owned()
}

/// A run's status through the API.
pub(crate) async fn status_of(http: &reqwest::Client, server: &Served, id: &str) -> String {
    let reply = send(http.get(server.url(&format!("/runs/{id}")))).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.body["status"].as_str().unwrap_or("").to_owned()
}

/// The number of runs the server lists.
pub(crate) async fn run_count(http: &reqwest::Client, server: &Served) -> usize {
    let reply = send(http.get(server.url("/runs"))).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.body["runs"].as_array().map_or(0, Vec::len)
}

/// Asserts `reply` is a problem (`application/problem+json`) with `status`.
pub(crate) fn assert_problem(reply: &Reply, status: u16) {
    assert_eq!(reply.status, status, "{}", reply.text);
    assert_eq!(
        reply.content_type, "application/problem+json",
        "{}",
        reply.text
    );
    assert_eq!(reply.body["status"], status, "{}", reply.text);
}

/// The place of a problem's first error.
pub(crate) fn first_place(reply: &Reply) -> String {
    reply.body["errors"][0]["place"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

/// `host:port` of a base URL (`http://127.0.0.1:PORT`).
pub(crate) fn authority(base: &str) -> String {
    base.trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or("")
        .to_owned()
}

/// A `claij mcp serve … --http 127.0.0.1:0` process; killed when dropped.
pub(crate) struct McpServed {
    child: Child,
    /// `http://127.0.0.1:PORT/mcp`.
    pub(crate) url: String,
}

impl McpServed {
    /// Starts `claij mcp serve FILES --store STORE --http ADDR ARGS` with `env`.
    // Waited for by `Drop`; a panic before that ends the test process, which reaps it.
    #[allow(clippy::zombie_processes)]
    pub(crate) fn start(store: &Path, files: &[&str], args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut command = claij(env);
        command
            .args(["mcp", "serve"])
            .args(files)
            .arg("--store")
            .arg(store)
            .args(["--http", "127.0.0.1:0"])
            .args(args);
        let mut child = command.spawn().expect("claij mcp serve starts");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[mcp serve] {line}");
                if let Some(at) = line.find("http://") {
                    let url = line[at..].split(';').next().unwrap_or("").to_owned();
                    if tx.send(url).is_err() {
                        break;
                    }
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("claij mcp serve says where it listens");
        McpServed { child, url }
    }

    /// `127.0.0.1:PORT`.
    pub(crate) fn authority(&self) -> String {
        authority(&self.url)
    }
}

impl Drop for McpServed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `claij ARGS` to its end (at most 30 s: a server that keeps running is killed) and
/// gives its exit code (`None`: killed) and stderr.
pub(crate) fn run_to_end(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut child = claij(env).args(args).spawn().expect("claij starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    let code = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = pipe.read_to_string(&mut stderr);
    }
    (code, stderr)
}

/// An MCP request posted over plain HTTP: the reply, and the JSON-RPC message in its body
/// (JSON, or the first `data:` of a server-sent event stream; null when there is none).
pub(crate) async fn mcp_post(
    http: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: String,
    token: Option<&str>,
) -> (Reply, Value) {
    let mut request = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body);
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-06-18");
    }
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let reply = send(request).await;
    let message = if reply.content_type.starts_with("text/event-stream") {
        reply
            .text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .find(|d| !d.is_empty())
            .and_then(|d| serde_json::from_str(d).ok())
            .unwrap_or(Value::Null)
    } else {
        serde_json::from_str(&reply.text).unwrap_or(Value::Null)
    };
    (reply, message)
}

/// An `initialize` request's body.
pub(crate) fn initialize_body() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "door-tests", "version": "1"}}})
    .to_string()
}

/// Opens an MCP session (`initialize`, then `notifications/initialized`) and gives its id.
pub(crate) async fn mcp_session(http: &reqwest::Client, url: &str, token: Option<&str>) -> String {
    let (reply, message) = mcp_post(http, url, None, initialize_body(), token).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert!(
        message["result"]["protocolVersion"].is_string(),
        "{message}"
    );
    let session = reply.header("mcp-session-id").to_owned();
    assert!(!session.is_empty(), "a session id");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let (done, _) = mcp_post(http, url, Some(&session), initialized, token).await;
    assert!(done.status < 300, "{}", done.text);
    session
}

/// A `tools/call` request's body.
pub(crate) fn tool_call(name: &str, arguments: &str) -> String {
    format!(
        r#"{{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {{"name": "{name}", "arguments": {arguments}}}}}"#
    )
}

/// What becomes of a raw connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Still open: nothing read, no end.
    Open,
    /// Closed by the server, having sent nothing.
    ClosedSilently,
    /// Answered (these bytes) and closed.
    Answered(String),
}

/// Connects to `addr` and sends nothing.
pub(crate) fn idle(addr: &str) -> TcpStream {
    let stream = TcpStream::connect(addr).expect("connects");
    stream.set_nonblocking(true).expect("non-blocking");
    stream
}

/// What the server did with `stream` so far: everything it sent, and whether it closed.
pub(crate) fn fate(stream: &mut TcpStream, seen: &mut Vec<u8>) -> Fate {
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Fate::Open,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            // Reset: closed.
            Err(_) => break,
        }
    }
    if seen.is_empty() {
        Fate::ClosedSilently
    } else {
        Fate::Answered(String::from_utf8_lossy(seen).into_owned())
    }
}

/// Watches `streams` until none is open or `seconds` pass; gives each one's fate.
pub(crate) fn fates(streams: &mut [TcpStream], seconds: u64) -> Vec<Fate> {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut seen = vec![Vec::new(); streams.len()];
    loop {
        let now: Vec<Fate> = streams
            .iter_mut()
            .zip(seen.iter_mut())
            .map(|(s, seen)| fate(s, seen))
            .collect();
        if !now.contains(&Fate::Open) || Instant::now() > deadline {
            return now;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One request over a fresh connection (`Connection: close`): the whole answer, or why
/// there is none.
pub(crate) fn exchange(addr: &str, request: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    stream.write_all(request.as_bytes())?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

/// `GET PATH` over a fresh connection, as `exchange` gives it.
pub(crate) fn raw_get(addr: &str, path: &str) -> std::io::Result<String> {
    exchange(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"),
    )
}
