//! Who may call a server without a token: DNS rebinding (a forged `Host`), cross-origin
//! browser requests (`Origin`), and cross-site forms (CSRF). Every request goes to
//! 127.0.0.1; the forged names are only headers.

use serde_json::json;

use crate::door_support::{
    approval_input, assert_problem, authority, initialize_body, run_count, status_of, suspended_run,
};
use crate::served::{Served, approval, client, send};

/// Finding 3 (issue 35), DNS rebinding: the tokenless loopback server answered any `Host`
/// on its API (only `/mcp` checked it), so a web page whose name was rebound to 127.0.0.1
/// could read every run and start workflows. Now every route refuses a `Host` that is not
/// a loopback name or the bound address (403), and answers those.
#[tokio::test]
async fn a_forged_host_is_refused_on_every_route() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(&dir.path().join("claij.db"), &[&approval()]);
    let http = client();
    let port = authority(&server.base)
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    let start = json!({"fsm": "human-approval", "input": approval_input()}).to_string();
    let requests: Vec<(&str, &str, Option<String>)> = vec![
        ("GET", "/health", None),
        ("GET", "/", None),
        ("GET", "/ui/app.js", None),
        ("GET", "/openapi.json", None),
        ("GET", "/definitions", None),
        ("GET", "/runs", None),
        ("GET", "/v1/models", None),
        ("GET", "/hooks/0123456789abcdef", None),
        ("POST", "/runs", Some(start.clone())),
        ("POST", "/mcp", Some(initialize_body())),
    ];
    let request = |method: &str, path: &str, body: &Option<String>, host: &str| {
        let mut r = http
            .request(method.parse().unwrap(), server.url(path))
            .header("host", host)
            .header("accept", "application/json, text/event-stream");
        if let Some(body) = body {
            r = r
                .header("content-type", "application/json")
                .body(body.clone());
        }
        r
    };
    for host in [
        format!("rebound.attacker.example:{port}"),
        "rebound.attacker.example".to_owned(),
        format!("127.0.0.1.attacker.example:{port}"),
    ] {
        for (method, path, body) in &requests {
            let reply = send(request(method, path, body, &host)).await;
            assert_problem(&reply, 403);
            assert!(
                reply.text.contains("Host"),
                "{method} {path}: {}",
                reply.text
            );
        }
    }
    assert_eq!(run_count(&http, &server).await, 0, "nothing started");
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ] {
        for (method, path) in [("GET", "/runs"), ("GET", "/health")] {
            let reply = send(request(method, path, &None, &host)).await;
            assert_eq!(reply.status, 200, "{host} {path}: {}", reply.text);
        }
    }
    let started = send(request("POST", "/runs", &Some(start), "localhost")).await;
    assert!(started.status < 300, "{}", started.text);
}

/// Finding 3 (issue 35): the names a server is reached by besides loopback are the ones
/// its operator gives — `--allow-host` and `--public-url`'s host — and no others.
#[tokio::test]
async fn the_operators_names_are_answered_and_no_others() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(
        &dir.path().join("claij.db"),
        &[
            &approval(),
            "--allow-host",
            "claij.internal",
            "--public-url",
            "https://claij.public.example",
        ],
    );
    let http = client();
    let get = |host: &str| {
        http.get(server.url("/runs"))
            .header("host", host.to_owned())
    };
    for host in [
        "claij.internal",
        "claij.internal:8443",
        "claij.public.example",
    ] {
        let reply = send(get(host)).await;
        assert_eq!(reply.status, 200, "{host}: {}", reply.text);
    }
    for host in ["claij.other.example", "internal", "public.example"] {
        assert_problem(&send(get(host)).await, 403);
    }
}

/// Finding 3 (issue 35), cross-origin requests: a page on another origin could call the
/// tokenless API (a simple request needs no preflight). Now a request whose `Origin` is
/// not the server's own is refused (403) before it does anything; the server's own page
/// (same origin) — and so its resume-link form — keeps working.
#[tokio::test]
async fn a_cross_origin_request_is_refused_and_the_servers_own_page_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(&dir.path().join("claij.db"), &[&approval()]);
    let http = client();
    let start = json!({"fsm": "human-approval", "input": approval_input()}).to_string();
    let post_from = |origin: &str, path: &str, body: &str| {
        http.post(server.url(path))
            .header("origin", origin.to_owned())
            .header("content-type", "application/json")
            .body(body.to_owned())
    };
    for origin in ["http://attacker.example", "null", "http://localhost:1"] {
        assert_problem(&send(post_from(origin, "/runs", &start)).await, 403);
        let read = send(
            http.get(server.url("/runs"))
                .header("origin", origin.to_owned()),
        )
        .await;
        assert_problem(&read, 403);
    }
    assert_eq!(run_count(&http, &server).await, 0, "nothing started");

    let own = server.base.clone();
    let started = send(post_from(&own, "/runs?wait=30", &start)).await;
    assert_eq!(started.status, 201, "{}", started.text);
    let id = started.body["id"].as_str().unwrap().to_owned();
    let link = send(post_from(&own, &format!("/runs/{id}/hooks"), "{}")).await;
    assert_eq!(link.status, 201, "{}", link.text);
    let link = link.body["url"].as_str().unwrap().to_owned();
    let stranger = r#"{"id": ["approve", "deploy"], "approver": "mallory"}"#;
    assert_problem(
        &send(post_from("http://attacker.example", &link, stranger)).await,
        403,
    );
    let answer = r#"{"id": ["approve", "deploy"], "approver": "ada"}"#;
    let answered = send(post_from(&own, &format!("{link}?wait=30"), answer)).await;
    assert_eq!(answered.status, 200, "{}", answered.text);
    assert_eq!(answered.body["status"], "completed", "{}", answered.text);
}

/// Finding 3 (issue 35), the Low finding CSRF: a bodiless cross-site `POST
/// /runs/{id}/interrupt` (what a form on any site can send, even from a browser that
/// leaves `Origin` out) stopped a run on the tokenless server. Now a state-changing
/// request on a server without a token must say it sends JSON (or YAML, for a document):
/// a form's content types, or none, are refused (415) and change nothing.
#[tokio::test]
async fn a_cross_site_form_cannot_change_anything() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(&dir.path().join("claij.db"), &[&approval()]);
    let http = client();
    let id = suspended_run(&http, &server).await;
    for path in [format!("/runs/{id}/interrupt"), format!("/runs/{id}/hooks")] {
        for content_type in [
            None,
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
            Some("text/plain"),
        ] {
            let mut request = http.post(server.url(&path));
            if let Some(content_type) = content_type {
                request = request.header("content-type", content_type).body("a=b");
            }
            let reply = send(request).await;
            assert_problem(&reply, 415);
            assert_eq!(status_of(&http, &server, &id).await, "suspended");
        }
    }
    let stopped = send(
        http.post(server.url(&format!("/runs/{id}/interrupt")))
            .header("content-type", "application/json"),
    )
    .await;
    assert_eq!(stopped.status, 202, "{}", stopped.text);
    assert_eq!(status_of(&http, &server, &id).await, "interrupted");
}
