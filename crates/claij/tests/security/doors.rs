//! The Low findings on `claij serve`'s doors: `/mcp` and the body limit, headers on every
//! answer, the token's scheme, `Last-Event-ID` at the top of its range, Graphviz runs,
//! event streams.

use serde_json::json;

use crate::door_support::{
    TOKEN, assert_problem, first_place, initialize_body, suspended_run, write,
};
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

/// Finding 5 (issue 35): `Last-Event-ID: 18446744073709551615` (the largest u64) was
/// read, then 1 added: it wrapped to 0 (and in a debug build the addition panicked). Now
/// an id with no entry after it within range is refused, naming the header.
#[tokio::test]
async fn a_last_event_id_at_the_top_of_its_range_is_refused_not_wrapped() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(&dir.path().join("claij.db"), &[&approval()]);
    let http = client();
    let id = suspended_run(&http, &server).await;
    let reply = send(
        http.get(server.url(&format!("/runs/{id}/events")))
            .header("last-event-id", u64::MAX.to_string()),
    )
    .await;
    assert_problem(&reply, 400);
    assert_eq!(
        first_place(&reply),
        "header.last-event-id",
        "{}",
        reply.text
    );
    let from_start = http
        .get(server.url(&format!("/runs/{id}/events")))
        .header("last-event-id", "0")
        .send()
        .await
        .unwrap();
    assert_eq!(from_start.status(), 200);
}

/// A fake Graphviz: logs each run's start (pid and the first line of its input: the
/// graph's name) and end, and draws a fixed SVG slowly.
const FAKE_DOT: &str = r#"#!/bin/sh
input=$(cat)
echo "start $$ $(printf '%s' "$input" | head -n 1)" >> "$DOT_LOG"
sleep 1
echo "end $$" >> "$DOT_LOG"
echo '<svg xmlns="http://www.w3.org/2000/svg"><title>fake</title></svg>'
"#;

/// How many `dot` runs the log shows, and the most at once.
fn dot_runs(log: &std::path::Path) -> (usize, usize) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let (mut started, mut now, mut most) = (0, 0usize, 0);
    for line in text.lines() {
        if line.starts_with("start") {
            started += 1;
            now += 1;
            most = most.max(now);
        } else if line.starts_with("end") {
            now = now.saturating_sub(1);
        }
    }
    (started, most)
}

/// Finding 5 (issue 35): `/ui/graph/{id}.svg` started one `dot` per request, with no cap
/// and no cache, so a burst of requests started a burst of processes. Now at most two
/// run at once, and each definition's drawing is kept by its hash: six FSMs asked for
/// three times each at once make six `dot` runs, two at a time; asked again, none.
#[tokio::test]
async fn graphs_are_drawn_by_few_dot_processes_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let dot = write(&bin, "dot", FAKE_DOT);
    std::fs::set_permissions(&dot, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let log = dir.path().join("dot.log");
    let fsms = dir.path().join("fsms");
    std::fs::create_dir(&fsms).unwrap();
    for i in 0..6 {
        write(
            &fsms,
            &format!("g{i}.yaml"),
            &format!(
                "id: g{i}\nstates:\n  - id: done\n    action: end\nxitions:\n  - id: [start, done]\n"
            ),
        );
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let server = Served::start_env(
        &dir.path().join("claij.db"),
        &[fsms.to_str().unwrap()],
        &[("PATH", path.as_str()), ("DOT_LOG", log.to_str().unwrap())],
    );
    let http = client();
    let burst: Vec<_> = (0..18)
        .map(|k| {
            let url = server.url(&format!("/ui/graph/g{}.svg", k % 6));
            let http = http.clone();
            tokio::spawn(async move { send(http.get(url)).await })
        })
        .collect();
    for task in burst {
        let reply = task.await.unwrap();
        assert_eq!(reply.status, 200, "{}", reply.text);
        assert!(reply.text.contains("<title>fake</title>"), "{}", reply.text);
    }
    let (runs, most) = dot_runs(&log);
    assert_eq!(
        runs,
        6,
        "one run per definition: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert!(most <= 2, "at most two at once, saw {most}");
    for i in 0..6 {
        let again = get(&http, server.url(&format!("/ui/graph/g{i}.svg"))).await;
        assert_eq!(again.status, 200, "{}", again.text);
    }
    assert_eq!(dot_runs(&log).0, 6, "kept: no more runs");
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
