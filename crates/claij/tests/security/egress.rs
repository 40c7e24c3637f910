//! Finding 8: where the server connects for API clients — completion callbacks and the
//! MCP servers of documents registered over the API — went to any address (loopback,
//! link-local, the cloud's metadata service, the server itself, in decimal and hex
//! spellings), with the target's answer readable at `/runs/{id}/deliveries`: a port
//! scanner with an oracle. Now one egress policy decides, the name is resolved once and
//! the connection pinned to the addresses checked, no redirect is followed, and a
//! delivery's record says only whether the receiver took it.
//!
//! All traffic stays on loopback: the addresses of other ranges are refused before any
//! packet is sent (each is refused at `POST /runs`, and nothing starts), and they are
//! tried only once the loopback forms were refused.

use serde_json::{Value, json};

use crate::served::{
    Served, Webhooks, approval, client, eventually, get, local_callbacks, places, post,
    secret_file, send,
};
use crate::tap::{Tap, closed_port};

fn approval_input() -> Value {
    json!({"id": ["start", "summarise"], "service": "billing", "version": "2.4.1", "changes": 14})
}

/// An FSM that ends at once (its end is called back).
fn echo_flow(dir: &std::path::Path) -> String {
    let flow = dir.join("echo.yaml");
    std::fs::write(
        &flow,
        "id: echo\nstates:\n  - id: done\n    action: end\nxitions:\n  - id: [start, done]\n",
    )
    .unwrap();
    flow.display().to_string()
}

/// Starts a run of human-approval calling back `url`; the reply.
async fn start_with(http: &reqwest::Client, server: &Served, url: &str) -> crate::served::Reply {
    post(
        http,
        server.url("/runs"),
        &json!({"fsm": "human-approval", "input": approval_input(), "webhook": url}),
    )
    .await
}

#[tokio::test]
async fn callbacks_to_internal_addresses_are_refused_before_anything_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let secret = secret_file(dir.path());
    let tap = Tap::start("127.0.0.1", b"HTTP/1.1 204 No Content\r\n\r\n");
    let server = Served::start(
        &dir.path().join("claij.db"),
        &[&approval(), "--webhook-secret-file", &secret],
    );
    let http = client();
    let p = tap.port();
    // Loopback first, in every spelling, and the server itself: an old server took these
    // (and posted to the tap). Each is refused where it is written, so nothing starts.
    let loopback = [
        format!("http://127.0.0.1:{p}/hook"),
        format!("http://2130706433:{p}/hook"),
        format!("http://0x7f.1:{p}/hook"),
        format!("http://0177.0.0.1:{p}/hook"),
        format!("http://127.1:{p}/hook"),
        format!("http://localhost:{p}/hook"),
        format!("http://[::1]:{p}/hook"),
        format!("http://[::ffff:127.0.0.1]:{p}/hook"),
        format!("http://[::ffff:7f00:1]:{p}/hook"),
        format!("http://0.0.0.0:{p}/hook"),
        format!("http://0:{p}/hook"),
        format!("https://127.0.0.1:{p}/hook"),
        server.url("/definitions"),
    ];
    for url in &loopback {
        let refused = start_with(&http, &server, url).await;
        assert_eq!(refused.status, 422, "{url}: {}", refused.body);
        assert_eq!(places(&refused.body), ["$.webhook"], "{url}");
    }
    // Private, link-local (the metadata service), shared, multicast, broadcast, reserved,
    // unique-local and IPv6 forms embedding such an address: refused before connecting.
    let elsewhere = [
        "http://10.0.0.1/hook",
        "http://172.16.0.1/hook",
        "http://192.168.1.1/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://2852039166/latest/meta-data/",
        "http://0xa9fea9fe/latest/meta-data/",
        "http://100.64.0.1/hook",
        "http://100.100.100.200/latest/meta-data/",
        "http://224.0.0.1/hook",
        "http://255.255.255.255/hook",
        "http://240.0.0.1/hook",
        "http://198.18.0.1/hook",
        "http://[fd00::1]/hook",
        "http://[fd00:ec2::254]/latest/meta-data/",
        "http://[fe80::1]/hook",
        "http://[ff02::1]/hook",
        "http://[::]/hook",
        "http://[::ffff:10.0.0.1]/hook",
        "http://[::ffff:169.254.169.254]/latest/meta-data/",
        "http://[64:ff9b::a9fe:a9fe]/latest/meta-data/",
        "http://[2002:a9fe:a9fe::1]/latest/meta-data/",
    ];
    for url in elsewhere {
        let refused = start_with(&http, &server, url).await;
        assert_eq!(refused.status, 422, "{url}: {}", refused.body);
        assert_eq!(places(&refused.body), ["$.webhook"], "{url}");
        assert!(
            refused.body["detail"]
                .as_str()
                .is_some_and(|d| d.contains("--allow-connect")),
            "the refusal says how to allow it: {}",
            refused.body
        );
    }
    let runs = get(&http, server.url("/runs")).await.body;
    assert_eq!(runs["runs"], json!([]), "nothing started");
    assert_eq!(tap.connections(), 0, "nothing was sent");
}

#[tokio::test]
async fn a_callback_goes_only_where_allow_connect_names_and_never_with_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let secret = secret_file(dir.path());
    let receiver = Webhooks::start(dir.path(), "r", &[]);
    let allowed = receiver
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/hook");
    let tap = Tap::start("127.0.0.1", b"HTTP/1.1 204 No Content\r\n\r\n");
    let server = Served::start(
        &dir.path().join("claij.db"),
        &[
            &approval(),
            "--webhook-secret-file",
            &secret,
            "--allow-connect",
            allowed,
        ],
    );
    let http = client();
    let port = allowed.rsplit(':').next().unwrap();
    for url in [
        // Another port of an allowed address.
        format!("http://127.0.0.1:{}/hook", tap.port()),
        // A name that was not allowed, though it resolves to the allowed address.
        format!("http://localhost:{port}/hook"),
        // Credentials in the URL, to the allowed address and port.
        format!("http://user:secret@127.0.0.1:{port}/hook"),
        format!("http://user@127.0.0.1:{port}/hook"),
    ] {
        let refused = start_with(&http, &server, &url).await;
        assert_eq!(refused.status, 422, "{url}: {}", refused.body);
        assert_eq!(places(&refused.body), ["$.webhook"], "{url}");
        assert!(!refused.text.contains("secret@"), "{}", refused.text);
    }
    let runs = get(&http, server.url("/runs")).await.body;
    assert_eq!(runs["runs"], json!([]), "nothing started");
    // What is named is called back.
    let taken = start_with(&http, &server, &receiver.url).await;
    assert!(matches!(taken.status, 201 | 202), "{}", taken.body);
    let got = receiver.wait_for(1).await;
    assert_eq!(got[0]["verified"], true);
    assert_eq!(tap.connections(), 0);
}

#[tokio::test]
async fn a_callback_the_policy_no_longer_allows_is_refused_at_delivery_and_not_sent() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("claij.db");
    let secret = secret_file(dir.path());
    let receiver = Webhooks::start(dir.path(), "r", &[]);
    let server = Served::start(&store, &local_callbacks(&approval(), &secret));
    let http = client();
    let started = post(
        &http,
        server.url("/runs?wait=30"),
        &json!({"fsm": "human-approval", "input": approval_input(), "webhook": receiver.url}),
    )
    .await;
    assert_eq!(started.body["status"], "suspended", "{}", started.body);
    let id = started.body["id"].as_str().unwrap().to_owned();
    receiver.wait_for(1).await;
    server.kill();

    // Restarted without the allowance: the run's end is not posted.
    let server = Served::start(&store, &[&approval(), "--webhook-secret-file", &secret]);
    let answered = post(
        &http,
        server.url(&format!("/runs/{id}/resume?wait=30")),
        &json!({"input": {"id": ["approve", "deploy"], "approver": "ada"}}),
    )
    .await;
    assert_eq!(answered.body["status"], "completed", "{}", answered.body);
    let url = server.url(&format!("/runs/{id}/deliveries"));
    let deliveries = eventually(30, "the run's end was not dealt with", || async {
        let found = get(&http, url.clone()).await.body;
        (found.as_array().is_some_and(|d| d.len() == 2) && found[1]["status"] != "pending")
            .then_some(found)
    })
    .await;
    let end = &deliveries[1];
    assert_eq!(end["kind"], "run.completed", "{deliveries}");
    assert_eq!(end["status"], "failed", "refused, not tried again: {end}");
    assert!(
        end["last_error"]
            .as_str()
            .is_some_and(|e| e.starts_with("refused")),
        "{end}"
    );
    assert_eq!(receiver.received().len(), 1, "nothing more was sent");
}

#[tokio::test]
async fn deliveries_say_whether_a_receiver_took_them_and_nothing_of_its_answer() {
    let dir = tempfile::tempdir().unwrap();
    let secret = secret_file(dir.path());
    let flow = echo_flow(dir.path());
    let teapot = Tap::start(
        "127.0.0.1",
        b"HTTP/1.1 418 I'm a teapot\r\nContent-Length: 20\r\nConnection: close\r\n\r\nSECRET-BANNER v1.2.3",
    );
    let silent = Tap::start("127.0.0.1", b"");
    let server = Served::start(
        &dir.path().join("claij.db"),
        &local_callbacks(&flow, &secret),
    );
    let http = client();
    let targets = [
        format!("http://127.0.0.1:{}/hook", teapot.port()),
        format!("http://127.0.0.1:{}/hook", silent.port()),
        format!("http://127.0.0.1:{}/hook", closed_port()),
    ];
    let mut records = Vec::new();
    for target in &targets {
        let done = post(
            &http,
            server.url("/runs?wait=30"),
            &json!({"fsm": "echo", "input": {"x": 1}, "webhook": target}),
        )
        .await;
        assert_eq!(done.body["status"], "completed", "{}", done.body);
        let id = done.body["id"].as_str().unwrap().to_owned();
        let url = server.url(&format!("/runs/{id}/deliveries"));
        let found = eventually(30, "no attempt made", || async {
            let found = get(&http, url.clone()).await;
            (found.body[0]["attempts"].as_u64() >= Some(1)).then_some(found)
        })
        .await;
        // Nothing the target gave: not its words anywhere, not its status nor its error.
        for leak in ["teapot", "SECRET", "BANNER"] {
            assert!(!found.text.contains(leak), "`{leak}` in {}", found.text);
        }
        let said = found.body[0]["last_error"].as_str().unwrap_or_default();
        for leak in ["418", "refused", "reset", "os error", "closed", "connect"] {
            assert!(!said.contains(leak), "`{leak}` in {said}");
        }
        let record = &found.body[0];
        records.push((
            record["status"].clone(),
            record["last_status"].clone(),
            record["last_error"].clone(),
        ));
    }
    assert!(teapot.connections() >= 1 && silent.connections() >= 1);
    assert_eq!(records[0], records[1], "{records:?}");
    assert_eq!(records[1], records[2], "{records:?}");
    assert_eq!(
        records[0].1,
        Value::Null,
        "no status of the target: {records:?}"
    );
    // The operator's log keeps what the receiver answered.
    let said = server.said();
    assert!(said.contains("418"), "{said}");
}

/// An MCP server of an API client's document is reached at the address named, over a
/// connection that follows no redirect and carries no credentials of the URL's.
#[tokio::test]
async fn a_client_documents_mcp_server_is_reached_as_named_without_credentials_or_redirects() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = Tap::start(
        "127.0.0.2",
        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
    );
    let redirect: &'static [u8] = Box::leak(
        format!(
            "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.2:{}/mcp\r\nContent-Length: 0\r\n\r\n",
            elsewhere.port()
        )
        .into_bytes()
        .into_boxed_slice(),
    );
    let redirecting = Tap::start("127.0.0.1", redirect);
    let server = Served::start(
        &dir.path().join("claij.db"),
        &["--allow-connect", "127.0.0.1"],
    );
    let http = client();
    let document = |id: &str, url: &str| {
        json!({
            "id": id,
            "servers": {"x": {"url": url}},
            "states": [
                {"id": "ask", "action": "transform", "config": {"template": "{\"id\": [\"ask\", \"tools\"], \"requests\": [{\"server\": \"x\", \"method\": \"tools/list\"}]}"}},
                {"id": "tools", "action": "mcp", "config": {"reply_to": "done"}},
                {"id": "done", "action": "end"}
            ],
            "xitions": [{"id": ["start", "ask"]}, {"id": ["ask", "tools"]}, {"id": ["tools", "done"]}]
        })
    };
    let p = redirecting.port();
    let redirected = post(
        &http,
        server.url("/definitions"),
        &document("redirected", &format!("http://127.0.0.1:{p}/mcp")),
    )
    .await;
    assert_eq!(redirected.status, 201, "{}", redirected.body);
    let run = send(
        http.post(server.url("/runs?wait=30"))
            .json(&json!({"fsm": "redirected", "input": {}})),
    )
    .await;
    assert_ne!(run.body["status"], "completed", "{}", run.body);
    assert!(redirecting.connections() >= 1, "the server named was tried");
    assert_eq!(elsewhere.connections(), 0, "the redirect was not followed");
    let with_credentials = post(
        &http,
        server.url("/definitions"),
        &document("creds", &format!("http://user:secret@127.0.0.1:{p}/mcp")),
    )
    .await;
    assert_eq!(with_credentials.status, 403, "{}", with_credentials.body);
    assert_eq!(places(&with_credentials.body), ["$.servers.x.url"]);
    assert!(
        !with_credentials.text.contains("secret@"),
        "{}",
        with_credentials.text
    );
}
