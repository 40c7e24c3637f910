//! Finding 7: a document registered over the API that named an HTTP MCP server got the
//! operator's stored OAuth token sent to it (credentials were looked up by URL, whoever
//! wrote the document), and the MCP client's servers were one namespace, so a client's
//! document could use the connection an operator's document opened, or take its
//! server's name first. Now an API client's document connects on its own, without the
//! operator's tokens unless `--allow-credentials` names the server.
//!
//! The server is the official Python SDK's behind a bearer-token guard
//! (tests/mcp-clients/bearer_server.py), logging the `Authorization` of every request.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

use crate::served::{Served, client, post, repo, send};

/// The operator's token for the server (a test value).
const TOKEN: &str = "tok-of-the-operator-5f1c9a";

/// The bearer-token MCP server; killed when dropped.
struct Bearer {
    child: Child,
    url: String,
    log: PathBuf,
}

impl Bearer {
    #[allow(clippy::zombie_processes)] // waited for by `Drop`
    fn start(dir: &Path) -> Self {
        let port_file = dir.join("bearer.port");
        let log = dir.join("bearer.jsonl");
        let child = Command::new(claij_testkit::cache::mcp_sdk_python())
            .arg(repo().join("tests/mcp-clients/bearer_server.py"))
            .arg(&port_file)
            .arg(&log)
            .arg(TOKEN)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let port = loop {
            if let Ok(port) = std::fs::read_to_string(&port_file)
                && !port.is_empty()
            {
                break port;
            }
            assert!(Instant::now() < deadline, "the MCP server did not start");
            std::thread::sleep(Duration::from_millis(50));
        };
        Bearer {
            child,
            url: format!("http://127.0.0.1:{}/mcp", port.trim()),
            log,
        }
    }

    /// The requests to `/mcp` so far: (with the operator's token, without it).
    fn calls(&self) -> (usize, usize) {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let mut counts = (0, 0);
        for line in text.lines() {
            let request: Value = serde_json::from_str(line).unwrap();
            if request["path"]
                .as_str()
                .is_some_and(|p| p.starts_with("/mcp"))
            {
                if request["authorization"] == format!("Bearer {TOKEN}") {
                    counts.0 += 1;
                } else {
                    counts.1 += 1;
                }
            }
        }
        counts
    }
}

impl Drop for Bearer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The operator's stored credentials for `url`, as `claij mcp login` keeps them.
fn credentials(dir: &Path, url: &str) -> PathBuf {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let file = dir.join("mcp-credentials.json");
    let entry = json!({url: {
        "client_id": "claij-test",
        "token_response": {"access_token": TOKEN, "token_type": "bearer", "expires_in": 3600},
        "granted_scopes": [],
        "token_received_at": now,
    }});
    std::fs::write(&file, entry.to_string()).unwrap();
    file
}

/// A document calling the tool `whoami` of its server `secure` at `url` (`extra`: more
/// settings of the server's entry).
fn caller(id: &str, url: &str, extra: Value) -> Value {
    let mut server = json!({"url": url});
    if let (Some(entry), Value::Object(more)) = (server.as_object_mut(), extra) {
        entry.extend(more);
    }
    json!({
        "id": id,
        "servers": {"secure": server},
        "states": [
            {"id": "ask", "action": "transform", "config": {"template": "{\"id\": [\"ask\", \"tools\"], \"requests\": [{\"server\": \"secure\", \"method\": \"tools/call\", \"params\": {\"name\": \"whoami\", \"arguments\": {}}}]}"}},
            {"id": "tools", "action": "mcp", "config": {"reply_to": "done", "on_error": "fail"}},
            {"id": "done", "action": "end"}
        ],
        "xitions": [{"id": ["start", "ask"]}, {"id": ["ask", "tools"]}, {"id": ["tools", "done"]}]
    })
}

/// The operator's document, as a file for the command line.
fn operator_file(dir: &Path, url: &str) -> String {
    let file = dir.join("operator.json");
    std::fs::write(&file, caller("operator", url, json!({})).to_string()).unwrap();
    file.display().to_string()
}

/// Runs `fsm` to its end (or the problem that stopped it): the reply's body.
async fn run(http: &reqwest::Client, server: &Served, fsm: &str) -> Value {
    send(
        http.post(server.url("/runs?wait=60"))
            .json(&json!({"fsm": fsm, "input": {}})),
    )
    .await
    .body
}

fn answered_by_the_tool(run: &Value) -> bool {
    run["status"] == "completed" && run.to_string().contains("token holder")
}

#[tokio::test]
async fn a_client_document_never_gets_the_operators_token_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("claij.db");
    let mcp = Bearer::start(dir.path());
    let creds = credentials(dir.path(), &mcp.url);
    let operator = operator_file(dir.path(), &mcp.url);
    let env = [("CLAIJ_MCP_CREDENTIALS", creds.to_str().unwrap())];
    let server = Served::start_env(&store, &[&operator, "--allow-connect", "127.0.0.1"], &env);
    let http = client();

    // The operator's document gets its token: the connection is open, with it.
    let mine = run(&http, &server, "operator").await;
    assert!(answered_by_the_tool(&mine), "{mine}");
    let (with_token, _) = mcp.calls();
    assert!(with_token > 0);

    // An API client's document naming the same server (same name, same settings) gets
    // neither that connection nor the token: its own connection goes without.
    let registered = post(
        &http,
        server.url("/definitions"),
        &caller("theirs", &mcp.url, json!({})),
    )
    .await;
    assert_eq!(registered.status, 201, "{}", registered.body);
    let theirs = run(&http, &server, "theirs").await;
    assert!(!answered_by_the_tool(&theirs), "{theirs}");
    let (after, without) = mcp.calls();
    assert_eq!(after, with_token, "no request of theirs carried the token");
    assert!(without > 0, "their connection was tried, without the token");

    // A client's document that does not declare the server cannot call it.
    let mut undeclared = caller("undeclared", &mcp.url, json!({}));
    undeclared.as_object_mut().unwrap().remove("servers");
    undeclared["states"][1]["config"]["servers"] = json!(["secure"]);
    let registered = post(&http, server.url("/definitions"), &undeclared).await;
    if registered.status == 201 {
        let reached = run(&http, &server, "undeclared").await;
        assert!(!answered_by_the_tool(&reached), "{reached}");
    }
    assert_eq!(mcp.calls().0, with_token);
    drop(server);

    // `--allow-credentials` names the server: their document gets the token too.
    let server = Served::start_env(
        &store,
        &[
            &operator,
            "--allow-connect",
            "127.0.0.1",
            "--allow-credentials",
            &mcp.url,
        ],
        &env,
    );
    let theirs = run(&http, &server, "theirs").await;
    assert!(answered_by_the_tool(&theirs), "{theirs}");
}

#[tokio::test]
async fn a_client_document_cannot_take_the_name_of_the_operators_server_first() {
    let dir = tempfile::tempdir().unwrap();
    let mcp = Bearer::start(dir.path());
    let creds = credentials(dir.path(), &mcp.url);
    let operator = operator_file(dir.path(), &mcp.url);
    let env = [("CLAIJ_MCP_CREDENTIALS", creds.to_str().unwrap())];
    let server = Served::start_env(
        &dir.path().join("claij.db"),
        &[&operator, "--allow-connect", "127.0.0.1"],
        &env,
    );
    let http = client();
    // First: a client's document declaring `secure` with other settings, and running.
    let registered = post(
        &http,
        server.url("/definitions"),
        &caller("squatter", &mcp.url, json!({"timeout": "7s"})),
    )
    .await;
    assert_eq!(registered.status, 201, "{}", registered.body);
    let squatted = run(&http, &server, "squatter").await;
    assert!(!answered_by_the_tool(&squatted), "{squatted}");
    assert_eq!(
        mcp.calls().0,
        0,
        "no token went to the squatter's connection"
    );
    // Then the operator's document: its server, its token.
    let mine = run(&http, &server, "operator").await;
    assert!(answered_by_the_tool(&mine), "{mine}");
    // And the squatter still does not ride on it.
    let again = run(&http, &server, "squatter").await;
    assert!(!answered_by_the_tool(&again), "{again}");
}

/// The same kind, over stdio: an API client's document's MCP server (a program the
/// operator allows) started with the server's whole environment — its API token, webhook
/// secret and providers' keys. Now it gets only what a program needs to run.
#[tokio::test]
async fn a_client_documents_stdio_server_gets_none_of_the_servers_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("env.txt");
    let sh = std::fs::canonicalize("/bin/sh").unwrap();
    let server = Served::start_env(
        &dir.path().join("claij.db"),
        &["--allow-program", sh.to_str().unwrap()],
        &[("SECRET_OF_THE_SERVER", "s3cr3t-of-the-operator")],
    );
    let http = client();
    let mut document = caller("stdio", "unused", json!({}));
    document["servers"]["secure"] = json!({
        "command": "sh",
        "args": ["-c", format!("env > {}", seen.display())],
    });
    let registered = post(&http, server.url("/definitions"), &document).await;
    assert_eq!(registered.status, 201, "{}", registered.body);
    let started = run(&http, &server, "stdio").await;
    assert!(!answered_by_the_tool(&started), "{started}");
    let env = std::fs::read_to_string(&seen).expect("the program ran");
    assert!(env.contains("PATH="), "{env}");
    assert!(!env.contains("s3cr3t"), "{env}");
}
