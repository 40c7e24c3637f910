//! The MCP client against the real `@modelcontextprotocol/server-everything` (npm,
//! installed by scripts/setup/mcp-servers): handshake, listing, tools, resources,
//! prompts, `list_changed`, progress, sampling, elicitation, roots, and the faults.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use claij_engine::BoxFuture;
use claij_engine::actions::HumanIo;
use claij_mcp::process::{Ending, ServerProcess};
use claij_mcp::{
    ClientHooks, Connection, HumanElicitation, McpError, Reply, SamplingHandler, ServerSpec,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Whether a process is still in the process table (running or a zombie).
fn in_process_table(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

async fn connect(spec: &ServerSpec, hooks: ClientHooks) -> Connection {
    match Connection::connect("everything", spec, hooks).await {
        Ok(c) => c,
        Err(e) => panic!("connecting: {e}"),
    }
}

async fn call(c: &Connection, tool: &str, arguments: Value) -> Reply {
    let params = json!({"name": tool, "arguments": arguments});
    c.request("tools/call", params, &CancellationToken::new())
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
        .reply
}

fn text_of(reply: &Reply) -> String {
    match reply {
        Reply::Result(r) => r["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        other => panic!("expected a result, got {other:?}"),
    }
}

async fn close(c: Connection) {
    let pid = c.pid().expect("a stdio server has a pid");
    c.shutdown_with_grace(Duration::from_millis(500)).await;
    assert!(
        !in_process_table(pid),
        "server {pid} left behind (running or zombie)"
    );
}

#[tokio::test]
async fn lists_calls_reads_and_gets() {
    let c = connect(&common::everything(), ClientHooks::default()).await;
    assert_eq!(c.protocol_version(), "2025-11-25");
    assert_eq!(
        c.server_info()["serverInfo"]["name"],
        "mcp-servers/everything"
    );
    let catalog = c.catalog();
    let sum = catalog.tool("get-sum").expect("get-sum is listed");
    assert_eq!(sum["inputSchema"]["properties"]["a"]["type"], "number");
    assert!(
        catalog.tool("trigger-sampling-request").is_none(),
        "no sampling advertised"
    );
    assert!(
        catalog
            .resources
            .iter()
            .any(|r| r["uri"] == "demo://resource/static/document/architecture.md")
    );
    assert!(catalog.prompts.iter().any(|p| p["name"] == "args-prompt"));

    let reply = call(&c, "get-sum", json!({"a": 2, "b": 40})).await;
    assert!(text_of(&reply).contains("42"), "{reply:?}");

    let read = c
        .request(
            "resources/read",
            json!({"uri": "demo://resource/static/document/architecture.md"}),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    let Reply::Result(read) = read.reply else {
        panic!("{:?}", read.reply)
    };
    assert!(
        read["contents"][0]["text"]
            .as_str()
            .is_some_and(|t| !t.is_empty()),
        "{read}"
    );

    let prompt = c
        .request(
            "prompts/get",
            json!({"name": "args-prompt", "arguments": {"city": "Lisbon"}}),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    let Reply::Result(prompt) = prompt.reply else {
        panic!("{:?}", prompt.reply)
    };
    assert!(
        prompt["messages"].to_string().contains("Lisbon"),
        "{prompt}"
    );

    // An unknown tool is a result with isError; an unknown prompt a JSON-RPC error.
    let Reply::Result(unknown) = call(&c, "no-such-tool", json!({})).await else {
        panic!()
    };
    assert_eq!(unknown["isError"], true);
    let bad = c
        .request(
            "prompts/get",
            json!({"name": "no-such-prompt"}),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(
        matches!(&bad.reply, Reply::Error { message, .. } if !message.is_empty()),
        "{bad:?}"
    );
    close(c).await;
}

#[tokio::test]
async fn a_tools_list_naming_a_tool_the_server_lacks_is_refused_at_connect() {
    let spec = common::everything().with_tools(&["get-sum", "get-summ"]);
    let error = match Connection::connect("everything", &spec, ClientHooks::default()).await {
        Ok(c) => panic!("connected with a tool it lacks: {:?}", c.catalog().tools),
        Err(e) => e,
    };
    let message = error.to_string();
    assert!(matches!(error, McpError::Spec { .. }), "{error:?}");
    assert!(message.contains("`everything`"), "{message}");
    assert!(message.contains("`get-summ`"), "{message}");
    assert!(!message.contains("names `get-sum`,"), "{message}");
    assert!(
        message.contains("it offers: ") && message.contains("`echo`"),
        "{message}"
    );
}

#[tokio::test]
async fn the_cache_follows_list_changed() {
    let c = connect(&common::everything(), ClientHooks::default()).await;
    let before = c.catalog().resources.len();
    let seen = c.generation();
    // Compressing a file makes a session resource and announces resources/list_changed.
    let reply = call(
        &c,
        "gzip-file-as-resource",
        json!({"name": "hello.txt.gz", "data": "data:text/plain;base64,aGVsbG8gd29ybGQ=", "outputType": "resourceLink"}),
    )
    .await;
    assert!(
        matches!(&reply, Reply::Result(r) if r["isError"] != true),
        "{reply:?}"
    );
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let seen_now = c.generation();
            if c.catalog().resources.len() > before {
                break;
            }
            c.changed_since(seen_now).await;
        }
    })
    .await
    .expect("the new resource was never listed");
    assert!(c.generation() > seen);
    assert!(c.catalog().resources.iter().any(|r| {
        r["uri"]
            .as_str()
            .is_some_and(|u| u.contains("hello.txt.gz"))
    }));
    close(c).await;
}

#[tokio::test]
async fn progress_notifications_come_with_the_result() {
    let c = connect(&common::everything(), ClientHooks::default()).await;
    let exchange = c
        .request(
            "tools/call",
            json!({"name": "trigger-long-running-operation", "arguments": {"duration": 1, "steps": 4}}),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(matches!(exchange.reply, Reply::Result(_)), "{exchange:?}");
    let progress: Vec<&Value> = exchange
        .notifications
        .iter()
        .filter(|n| n["kind"] == "progress")
        .collect();
    assert_eq!(progress.len(), 4, "{:?}", exchange.notifications);
    assert_eq!(progress[3]["progress"], 4.0);
    assert_eq!(progress[3]["total"], 4.0);
    close(c).await;
}

/// A model stand-in for the plumbing test (the model layer brings the real one).
struct Canned(Mutex<Vec<Value>>);

impl SamplingHandler for Canned {
    fn create_message<'a>(
        &'a self,
        server: &'a str,
        caller: Option<&'a claij_mcp::Caller>,
        request: Value,
    ) -> BoxFuture<'a, Result<Value, String>> {
        let caller = caller.map(|c| c.info.clone());
        Box::pin(async move {
            assert_eq!(server, "everything");
            assert_eq!(caller, Some(json!({"state": "asker"})));
            self.0.lock().unwrap().push(request);
            Ok(
                json!({"role": "assistant", "content": {"type": "text", "text": "Paris, of course"}, "model": "canned", "stopReason": "endTurn"}),
            )
        })
    }
}

/// A person at a scripted terminal.
struct Scripted {
    answers: Mutex<Vec<String>>,
    shown: Mutex<String>,
}

impl HumanIo for Scripted {
    fn is_interactive(&self) -> bool {
        true
    }
    fn show(&self, text: &str) -> std::io::Result<()> {
        self.shown.lock().unwrap().push_str(text);
        Ok(())
    }
    fn read_json(&self) -> std::io::Result<Option<String>> {
        Ok(self.answers.lock().unwrap().pop())
    }
}

#[tokio::test]
async fn sampling_elicitation_and_roots_are_answered() {
    let sampling = Arc::new(Canned(Mutex::new(Vec::new())));
    let person = Arc::new(Scripted {
        // Read from the end: first an answer the requested schema refuses (asked again),
        // then one it takes (its defaults fill the rest).
        answers: Mutex::new(vec![
            r#"{"name": "Ada", "integer": 7}"#.to_owned(),
            r#"{"name": "Ada", "integer": "seven"}"#.to_owned(),
        ]),
        shown: Mutex::new(String::new()),
    });
    let hooks = ClientHooks {
        sampling: Some(sampling.clone()),
        elicitation: Some(Arc::new(HumanElicitation::new(person.clone()))),
    };
    let spec = common::everything().with_roots(&["/srv/claij-root"]);
    let c = connect(&spec, hooks).await;
    // The capability-dependent tools are added after the handshake (list_changed).
    tokio::time::timeout(Duration::from_secs(20), async {
        while c.catalog().tool("trigger-sampling-request").is_none() {
            c.changed_since(c.generation()).await;
        }
    })
    .await
    .expect("trigger-sampling-request never listed");

    let reply = c
        .request_for(
            "tools/call",
            json!({"name": "trigger-sampling-request", "arguments": {"prompt": "Capital of France?", "maxTokens": 20}}),
            &CancellationToken::new(),
            Some(claij_mcp::Caller {
                info: json!({"state": "asker"}),
                meter: claij_engine::Meter::unmetered(),
                questions: claij_engine::Questions::none(),
                deadline: None,
                traceparent: None,
                idempotency_key: None,
            }),
        )
        .await
        .unwrap()
        .reply;
    assert!(text_of(&reply).contains("Paris, of course"), "{reply:?}");
    let asked = sampling.0.lock().unwrap().clone();
    assert!(
        asked[0]["messages"]
            .to_string()
            .contains("Capital of France?"),
        "{asked:?}"
    );

    let reply = call(&c, "trigger-elicitation-request", json!({})).await;
    let text = text_of(&reply);
    assert!(text.contains("Name: Ada"), "{text}");
    assert!(text.contains("Favorite Integer: 7"), "{text}");
    assert!(text.contains("hero-1"), "a default filled in: {text}");
    let shown = person.shown.lock().unwrap().clone();
    assert!(shown.contains("asks"), "the person was shown the request");
    assert!(
        shown.contains("does not fit") && shown.contains("/integer"),
        "the refused answer was asked again, naming the field: {shown}"
    );

    let reply = call(&c, "get-roots-list", json!({})).await;
    assert!(
        text_of(&reply).contains("file:///srv/claij-root"),
        "{reply:?}"
    );
    close(c).await;
}

#[tokio::test]
async fn a_crash_mid_call_is_an_error_with_the_stderr_tail() {
    let bin = common::server_bin("mcp-server-everything");
    let spec = ServerSpec::command(
        "sh",
        [
            "-c".into(),
            "echo 'fatal: the disk is on fire' >&2; exec \"$0\"".into(),
            bin,
        ],
    );
    let c = Arc::new(connect(&spec, ClientHooks::default()).await);
    let pid = c.pid().unwrap();
    let caller = c.clone();
    let call = tokio::spawn(async move {
        caller
            .request(
                "tools/call",
                json!({"name": "trigger-long-running-operation", "arguments": {"duration": 30, "steps": 30}}),
                &CancellationToken::new(),
            )
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let outcome = call.await.unwrap();
    let Err(e @ McpError::Gone { .. }) = outcome else {
        panic!("{outcome:?}")
    };
    assert!(e.to_string().contains("the disk is on fire"), "{e}");
    assert!(c.is_closed());
    c.shutdown().await;
    assert!(!in_process_table(pid), "the crashed server was not reaped");
}

#[tokio::test]
async fn a_hung_call_times_out_and_is_cancelled() {
    let spec = common::everything().with_timeout(Duration::from_millis(800));
    let c = connect(&spec, ClientHooks::default()).await;
    let reply = call(
        &c,
        "trigger-long-running-operation",
        json!({"duration": 30, "steps": 3}),
    )
    .await;
    assert!(matches!(reply, Reply::Timeout(_)), "{reply:?}");
    // The connection is still good.
    let reply = call(&c, "get-sum", json!({"a": 1, "b": 1})).await;
    assert!(text_of(&reply).contains('2'), "{reply:?}");
    close(c).await;
}

#[tokio::test]
async fn an_interrupt_cancels_the_call() {
    let c = connect(&common::everything(), ClientHooks::default()).await;
    let cancel = CancellationToken::new();
    let trip = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        trip.cancel();
    });
    let outcome = c
        .request(
            "tools/call",
            json!({"name": "trigger-long-running-operation", "arguments": {"duration": 30, "steps": 3}}),
            &cancel,
        )
        .await;
    assert!(
        matches!(&outcome, Err(e) if e.to_string().contains("interrupted")),
        "{outcome:?}"
    );
    close(c).await;
}

#[tokio::test]
async fn a_server_ignoring_end_of_input_is_terminated() {
    let c = connect(&common::everything(), ClientHooks::default()).await;
    let pid = c.pid().unwrap();
    // Its subscription timer keeps it alive after stdin closes (with nothing subscribed
    // it writes nothing, so it does not die of a broken pipe either).
    let reply = call(&c, "toggle-subscriber-updates", json!({})).await;
    assert!(matches!(reply, Reply::Result(_)));
    let ending = c.shutdown_with_grace(Duration::from_millis(700)).await;
    assert!(
        matches!(ending, Some(Ending::Terminated | Ending::Killed)),
        "{ending:?}"
    );
    assert!(!in_process_table(pid));
}

#[tokio::test]
async fn a_process_ignoring_sigterm_is_killed_and_reaped() {
    let spec = ServerSpec::command(
        "sh",
        [
            "-c".into(),
            "trap '' TERM; while :; do sleep 1; done".into(),
        ],
    );
    let (mut process, stdout, stdin) = ServerProcess::spawn(&spec.transport).unwrap();
    drop((stdout, stdin));
    let pid = process.pid();
    assert_eq!(
        process.shutdown(Duration::from_millis(300)).await,
        Ending::Killed
    );
    assert!(!in_process_table(pid));
}

#[tokio::test]
async fn garbage_on_stdout_is_skipped() {
    let bin = common::server_bin("mcp-server-everything");
    let spec = ServerSpec::command(
        "sh",
        [
            "-c".into(),
            "echo 'hello, I am not JSON'; echo '{\"half\": '; echo '[1,2'; exec \"$0\"".into(),
            bin,
        ],
    );
    let c = connect(&spec, ClientHooks::default()).await;
    let reply = call(&c, "get-sum", json!({"a": 20, "b": 3})).await;
    assert!(text_of(&reply).contains("23"), "{reply:?}");
    close(c).await;
}

#[tokio::test]
async fn a_server_that_is_not_there_or_dies_at_once_is_a_clear_error() {
    let e = Connection::connect(
        "nope",
        &ServerSpec::command("/nonexistent/mcp-server", []),
        ClientHooks::default(),
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("/nonexistent/mcp-server"), "{e}");
    let spec = ServerSpec::command(
        "sh",
        ["-c".into(), "echo 'no config file' >&2; exit 3".into()],
    );
    let e = Connection::connect("dies", &spec, ClientHooks::default())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("no config file"), "{e}");
}

#[tokio::test]
async fn streamable_http() {
    // What a binary using this crate does first: ring as the process's TLS provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let bin = common::server_bin("mcp-server-everything");
    let mut server = tokio::process::Command::new(bin)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/mcp");
    // Under load the server may accept connections before it answers MCP: retry the
    // handshake (for up to 30 s), keeping the last error for the message.
    let mut connected = None;
    for _ in 0..300 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            match Connection::connect("web", &ServerSpec::http(&url), ClientHooks::default()).await
            {
                Ok(c) => {
                    connected = Some(Ok(c));
                    break;
                }
                Err(e) => connected = Some(Err(e)),
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let c = connected.expect("the HTTP server never listened").unwrap();
    assert_eq!(c.protocol_version(), "2025-11-25");
    assert!(c.catalog().tool("get-sum").is_some());
    let reply = call(&c, "get-sum", json!({"a": 5, "b": 6})).await;
    assert!(text_of(&reply).contains("11"), "{reply:?}");
    c.shutdown().await;
    server.kill().await.unwrap();
}

#[tokio::test]
async fn a_log_level_keeps_the_servers_less_severe_messages_away() {
    let spec = common::everything().with_log_level("emergency");
    let c = connect(&spec, ClientHooks::default()).await;
    let started = c
        .request(
            "tools/call",
            json!({"name": "toggle-simulated-logging", "arguments": {}}),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    // The server sends a message of a random level at once, then one every 5 s: three or
    // four in 16 s, each below `emergency` 7 times in 8 unless the level holds them back.
    tokio::time::sleep(Duration::from_secs(16)).await;
    let later = c
        .request(
            "tools/call",
            json!({"name": "get-sum", "arguments": {"a": 1, "b": 2}}),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    let levels: Vec<Value> = started
        .notifications
        .iter()
        .chain(&later.notifications)
        .filter(|n| n["kind"] == "log")
        .map(|n| n["level"].clone())
        .collect();
    assert!(levels.iter().all(|l| l == "emergency"), "{levels:?}");
    close(c).await;
}

#[tokio::test]
async fn a_log_level_the_server_cannot_take_stops_the_connection_saying_so() {
    let spec = ServerSpec::command(common::server_bin("mcp-server-memory"), Vec::new())
        .with_log_level("info");
    match Connection::connect("memory", &spec, ClientHooks::default()).await {
        Err(McpError::Spec { message, .. }) => {
            assert!(message.contains("log_level `info`"), "{message}")
        }
        Err(other) => panic!("another error: {other}"),
        Ok(c) => {
            close(c).await;
            panic!("server-memory does not offer logging, yet log_level was taken");
        }
    }
}
