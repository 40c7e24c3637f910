//! What the `claij serve` tests share (tests/serve.rs, tests/serve_page.rs): the server as
//! a real process on a loopback port, an HTTP client, replies, waiting until something
//! holds.

// Each test binary uses part of this.
#![allow(dead_code)]

use std::future::Future;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

pub(crate) const CLAIJ: &str = env!("CARGO_BIN_EXE_claij");

pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// examples/human-approval.yaml: a run that waits for a person.
pub(crate) fn approval() -> String {
    repo()
        .join("examples/human-approval.yaml")
        .display()
        .to_string()
}

/// The `claij` binary as the server tests start it: no token or store from the test's
/// environment, `env` set, stdin and stdout empty, stderr piped for the caller to read.
pub(crate) fn claij(env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(CLAIJ);
    command
        .env_remove("CLAIJ_API_TOKEN")
        .env_remove("CLAIJ_STORE")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        command.env(k, v);
    }
    command
}

/// A `claij serve` process; killed (SIGKILL) when dropped.
pub(crate) struct Served {
    child: Child,
    pub(crate) base: String,
    stderr: mpsc::Receiver<String>,
}

impl Served {
    /// Starts `claij serve ARGS --bind 127.0.0.1:0 --store STORE` and waits until it
    /// says where it listens.
    pub(crate) fn start(store: &Path, args: &[&str]) -> Self {
        Self::start_env(store, args, &[])
    }

    /// [`start`](Self::start) on the small embedded model of the tests' cache, one
    /// llama.cpp thread.
    pub(crate) fn start_on_embedded_model(store: &Path, args: &[&str]) -> Self {
        let model = claij_testkit::cache::embedded_model();
        let model = model.to_str().expect("a UTF-8 path");
        Self::start_env(
            store,
            args,
            &[("CLAIJ_EMBEDDED_MODEL", model), ("CLAIJ_THREADS", "1")],
        )
    }

    /// [`start`](Self::start) with environment variables.
    pub(crate) fn start_env(store: &Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::start_at(store, args, env, "127.0.0.1:0")
    }

    /// [`start_env`](Self::start_env) on the address `bind`.
    // The child is waited for by `Drop` (or `kill`) once it is inside `Served`; a panic
    // before that ends the test process, which reaps it.
    #[allow(clippy::zombie_processes)]
    pub(crate) fn start_at(store: &Path, args: &[&str], env: &[(&str, &str)], bind: &str) -> Self {
        let mut command = claij(env);
        command
            .arg("serve")
            .args(args)
            .args(["--bind", bind, "--store"])
            .arg(store);
        let mut child = command.spawn().expect("claij serve starts");
        let (tx, rx) = mpsc::channel();
        let stderr = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx
                .recv_timeout(left)
                .expect("claij serve says where it listens");
            if let Some(rest) = line.split("at http://").nth(1) {
                let addr = rest.split_whitespace().next().expect("an address");
                return Served {
                    child,
                    base: format!("http://{addr}"),
                    stderr: rx,
                };
            }
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The process's id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// What it printed on stderr so far.
    pub(crate) fn said(&self) -> String {
        self.stderr.try_iter().collect::<Vec<_>>().join("\n")
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where a problem's errors are placed (`$.states[0].config.argv[0]`, `header.host`).
pub(crate) fn places(problem: &Value) -> Vec<String> {
    problem["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| e["place"].as_str().unwrap_or("").to_owned())
        .collect()
}

pub(crate) fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().build().expect("an HTTP client")
}

/// A response: status, headers, the body as text, and as JSON (or the text as a string).
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) content_type: String,
    pub(crate) headers: reqwest::header::HeaderMap,
    pub(crate) text: String,
    pub(crate) body: Value,
}

impl Reply {
    /// A header's value ("" when absent).
    pub(crate) fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// The body as JSON; a panic when it is not.
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }
}

pub(crate) async fn send(request: reqwest::RequestBuilder) -> Reply {
    let response = request.send().await.expect("the request is answered");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.expect("a body");
    let body = serde_json::from_str(&text).unwrap_or_else(|_| Value::String(text.clone()));
    Reply {
        status,
        content_type: headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned(),
        headers,
        text,
        body,
    }
}

pub(crate) async fn get(http: &reqwest::Client, url: String) -> Reply {
    send(http.get(url)).await
}

pub(crate) async fn post(http: &reqwest::Client, url: String, body: &Value) -> Reply {
    send(
        http.post(url)
            .header("content-type", "application/json")
            .body(body.to_string()),
    )
    .await
}

/// Asks `probe` every 50 ms until it gives something, for up to `seconds`; a panic
/// saying `what` did not happen otherwise.
pub(crate) async fn eventually<T, F, Fut>(seconds: u64, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(seconds);
    loop {
        if let Some(found) = probe().await {
            return found;
        }
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `claij serve` options for runs whose callbacks go to receivers on this machine:
/// `document`, the webhook secret's file, and loopback allowed as a callback's target (the
/// operator's word: callbacks go to no internal address without it).
pub(crate) fn local_callbacks<'a>(document: &'a str, secret: &'a str) -> [&'a str; 5] {
    [
        document,
        "--webhook-secret-file",
        secret,
        "--allow-connect",
        "127.0.0.1",
    ]
}

/// The signing secret of the callback tests (Standard Webhooks form).
pub(crate) const WEBHOOK_SECRET: &str =
    "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwc2VjcmV0IGZvciB0ZXN0cw==";

/// The webhook receiver of tests/http-clients/receiver.py (Standard Webhooks' reference
/// library verifies every request); killed when dropped.
pub(crate) struct Webhooks {
    child: Child,
    pub(crate) url: String,
    log: PathBuf,
}

impl Webhooks {
    // Waited for by `Drop`.
    #[allow(clippy::zombie_processes)]
    pub(crate) fn start(dir: &Path, name: &str, args: &[&str]) -> Self {
        let port_file = dir.join(format!("{name}.port"));
        let log = dir.join(format!("{name}.jsonl"));
        let child = Command::new(claij_testkit::cache::http_clients_python())
            .arg(repo().join("tests/http-clients/receiver.py"))
            .arg(&port_file)
            .arg(&log)
            .arg(WEBHOOK_SECRET)
            .args(args)
            .stdin(Stdio::null())
            .spawn()
            .expect("the receiver starts");
        let deadline = Instant::now() + Duration::from_secs(30);
        let port = loop {
            if let Ok(port) = std::fs::read_to_string(&port_file) {
                break port;
            }
            assert!(Instant::now() < deadline, "the receiver did not start");
            std::thread::sleep(Duration::from_millis(50));
        };
        Webhooks {
            child,
            url: format!("http://127.0.0.1:{}/hook", port.trim()),
            log,
        }
    }

    /// The requests received so far.
    pub(crate) fn received(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }

    /// Waits (up to 60 s) until `n` requests were received.
    pub(crate) async fn wait_for(&self, n: usize) -> Vec<Value> {
        let what = format!("{n} requests expected, got {:?}", self.received());
        eventually(60, &what, || async {
            let got = self.received();
            (got.len() >= n).then_some(got)
        })
        .await
    }
}

impl Drop for Webhooks {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn secret_file(dir: &Path) -> String {
    let file = dir.join("webhook-secret");
    std::fs::write(&file, format!("{WEBHOOK_SECRET}\n")).unwrap();
    file.display().to_string()
}
