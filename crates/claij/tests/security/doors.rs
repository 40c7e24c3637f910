//! The Low findings on `claij serve`'s doors: `/mcp` and the body limit, headers on every
//! answer, the token's scheme, `Last-Event-ID` at the top of its range, Graphviz runs,
//! event streams.

use serde_json::json;

use crate::door_support::{TOKEN, assert_problem, initialize_body, suspended_run, write};
use crate::served::{Served, approval, client, eventually, get, send};

/// Finding 5 (issue 35), "`/mcp` ignores `--body-limit`": the MCP endpoint of `claij
/// serve` took rmcp's 4 MiB whatever the server's limit. Now every route, `/mcp`
/// included, refuses a body over `--body-limit` with 413.
#[tokio::test]
async fn the_mcp_endpoint_keeps_the_servers_body_limit() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(
        &dir.path().join("claij.db"),
        &[&approval(), "--body-limit", "4096"],
    );
    let http = client();
    let padded = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "x".repeat(8192), "version": "1"}}});
    let reply = send(
        http.post(server.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(padded.to_string()),
    )
    .await;
    assert_problem(&reply, 413);
    let small = send(
        http.post(server.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(initialize_body()),
    )
    .await;
    assert_eq!(small.status, 200, "{}", small.text);
}

/// Finding 5 (issue 35): JSON answers had no `X-Content-Type-Options: nosniff` (only the
/// page's had it). Now every answer carries it: JSON, problems, event streams, MCP.
#[tokio::test]
async fn every_answer_says_nosniff() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(&dir.path().join("claij.db"), &[&approval()]);
    let http = client();
    let id = suspended_run(&http, &server).await;
    let mut replies = Vec::new();
    for path in [
        "/health".to_owned(),
        "/runs".to_owned(),
        "/openapi.json".to_owned(),
        "/v1/models".to_owned(),
        "/no/such/route".to_owned(),
        format!("/runs/{id}"),
    ] {
        replies.push((path.clone(), get(&http, server.url(&path)).await));
    }
    let bad = send(
        http.post(server.url("/runs"))
            .header("content-type", "application/json")
            .body("{"),
    )
    .await;
    replies.push(("POST /runs (bad)".to_owned(), bad));
    let mcp = send(
        http.post(server.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(initialize_body()),
    )
    .await;
    replies.push(("POST /mcp".to_owned(), mcp));
    for (what, reply) in &replies {
        assert_eq!(
            reply.header("x-content-type-options"),
            "nosniff",
            "{what}: {}",
            reply.status
        );
    }
    let events = http
        .get(server.url(&format!("/runs/{id}/events")))
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 200);
    assert_eq!(
        events
            .headers()
            .get("x-content-type-options")
            .and_then(|v| v.to_str().ok()),
        Some("nosniff")
    );
}

/// Finding 5 (issue 35): `Authorization: BEARER TOKEN` was refused — but an
/// authentication scheme's name is case-insensitive (RFC 9110 §11.1). Now any case is
/// taken; another scheme, or a wrong token, still is not.
#[tokio::test]
async fn the_bearer_scheme_is_read_in_any_case() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = write(dir.path(), "token", &format!("{TOKEN}\n"));
    let server = Served::start(
        &dir.path().join("claij.db"),
        &[&approval(), "--token-file", &token_file],
    );
    let http = client();
    let with = |value: String| send(http.get(server.url("/runs")).header("authorization", value));
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let reply = with(format!("{scheme} {TOKEN}")).await;
        assert_eq!(reply.status, 200, "{scheme}: {}", reply.text);
    }
    assert_problem(&with(format!("Basic {TOKEN}")).await, 401);
    assert_problem(&with(format!("BEARER {TOKEN}x")).await, 401);
    assert_problem(&with(format!("Bearer{TOKEN}")).await, 401);
}

/// Finding 5 (issue 35), "no cap on SSE streams": each `GET /runs/{id}/events` held a
/// connection and a task following the store, without bound. Now at most `--max-streams`
/// are open at once; one more is a 503 problem saying so (with `Retry-After`), and a
/// stream closed makes room again.
#[tokio::test]
async fn event_streams_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(
        &dir.path().join("claij.db"),
        &[&approval(), "--max-streams", "2"],
    );
    let http = client();
    let id = suspended_run(&http, &server).await;
    let url = server.url(&format!("/runs/{id}/events"));
    let first = http.get(&url).send().await.unwrap();
    let second = http.get(&url).send().await.unwrap();
    assert_eq!(
        (first.status().as_u16(), second.status().as_u16()),
        (200, 200)
    );
    let third = send(http.get(&url)).await;
    assert_problem(&third, 503);
    assert!(
        third.body["type"]
            .as_str()
            .is_some_and(|t| t.ends_with("too-many-streams")),
        "{}",
        third.text
    );
    assert!(!third.header("retry-after").is_empty());
    drop(first);
    eventually(30, "a closed stream makes room", || async {
        let reply = http.get(&url).send().await.ok()?;
        (reply.status() == 200).then_some(())
    })
    .await;
}
