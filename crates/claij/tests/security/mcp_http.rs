//! `claij mcp serve --http` exposed: the same token rule as `claij serve`, bounded bodies,
//! a cap on MCP sessions.

use crate::door_support::{
    ECHO, McpServed, TOKEN, assert_problem, initialize_body, mcp_post, mcp_session, run_to_end,
    write,
};
use crate::served::{client, send};

/// Finding 4 (issue 35): `claij mcp serve --http` bound any address it was given, with no
/// authentication, so `--http 0.0.0.0:8765` served every workflow to the network. Now, as
/// `claij serve` does, it refuses any address but loopback without an API token, and says
/// why; with a token it starts (here on loopback).
#[test]
fn mcp_serve_refuses_an_open_address_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let echo = write(dir.path(), "echo.yaml", ECHO);
    let store = dir.path().join("claij.db").display().to_string();
    let (code, said) = run_to_end(
        &[
            "mcp",
            "serve",
            &echo,
            "--store",
            &store,
            "--http",
            "0.0.0.0:0",
        ],
        &[],
    );
    assert_eq!(code, Some(2), "refused, not served: {said}");
    assert!(said.contains("without an API token"), "{said}");
    assert!(said.contains("--token-file"), "{said}");
}

/// Finding 4 (issue 35): with `--token-file FILE` or `CLAIJ_API_TOKEN`, every request to
/// `/mcp` needs `Authorization: Bearer TOKEN` (the scheme in any case); others are refused
/// 401 with `WWW-Authenticate: Bearer` before the MCP layer sees them.
#[tokio::test]
async fn mcp_serve_http_needs_its_token() {
    let dir = tempfile::tempdir().unwrap();
    let echo = write(dir.path(), "echo.yaml", ECHO);
    let token_file = write(dir.path(), "token", &format!("{TOKEN}\n"));
    let by_file = McpServed::start(
        &dir.path().join("a.db"),
        &[&echo],
        &["--token-file", &token_file],
        &[],
    );
    let by_env = McpServed::start(
        &dir.path().join("b.db"),
        &[&echo],
        &[],
        &[("CLAIJ_API_TOKEN", TOKEN)],
    );
    let http = client();
    for server in [&by_file, &by_env] {
        let (none, _) = mcp_post(&http, &server.url, None, initialize_body(), None).await;
        assert_problem(&none, 401);
        assert_eq!(none.header("www-authenticate"), "Bearer", "{}", none.text);
        let (wrong, _) = mcp_post(
            &http,
            &server.url,
            None,
            initialize_body(),
            Some("0123456789abcdef0123456789abcdef-WRONG"),
        )
        .await;
        assert_problem(&wrong, 401);
        let shouted = send(
            http.post(&server.url)
                .header("authorization", format!("BEARER {TOKEN}"))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(initialize_body()),
        )
        .await;
        assert_eq!(shouted.status, 200, "{}", shouted.text);
        mcp_session(&http, &server.url, Some(TOKEN)).await;
    }
}

/// Finding 4 (issue 35): `claij mcp serve --http` had no body limit of its own (rmcp's
/// 4 MiB); it now takes `--body-limit` (default 1 MiB) like `claij serve`, and refuses a
/// larger body with 413 before reading more of it.
#[tokio::test]
async fn mcp_serve_http_bounds_request_bodies() {
    let dir = tempfile::tempdir().unwrap();
    let echo = write(dir.path(), "echo.yaml", ECHO);
    let server = McpServed::start(
        &dir.path().join("claij.db"),
        &[&echo],
        &["--body-limit", "4096"],
        &[],
    );
    let http = client();
    let session = mcp_session(&http, &server.url, None).await;
    let big = crate::door_support::tool_call(
        "echo_start",
        &format!(
            r#"{{"id": ["start", "done"], "text": "{}"}}"#,
            "x".repeat(8192)
        ),
    );
    let (reply, _) = mcp_post(&http, &server.url, Some(&session), big, None).await;
    assert_problem(&reply, 413);
}

/// Finding 5 (issue 35), "no cap on MCP sessions": every `initialize` made a session kept
/// for five idle minutes, without bound. Now at most `--max-sessions` are open at once; an
/// `initialize` beyond is a 503 problem saying so (with `Retry-After`), and a session
/// ended (`DELETE /mcp`) makes room again.
#[tokio::test]
async fn mcp_sessions_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let echo = write(dir.path(), "echo.yaml", ECHO);
    let server = McpServed::start(
        &dir.path().join("claij.db"),
        &[&echo],
        &["--max-sessions", "2"],
        &[],
    );
    let http = client();
    let first = mcp_session(&http, &server.url, None).await;
    mcp_session(&http, &server.url, None).await;
    let (third, _) = mcp_post(&http, &server.url, None, initialize_body(), None).await;
    assert_problem(&third, 503);
    assert!(
        third.body["type"]
            .as_str()
            .is_some_and(|t| t.ends_with("too-many-sessions")),
        "{}",
        third.text
    );
    assert!(!third.header("retry-after").is_empty(), "{}", third.text);
    let ended = send(
        http.delete(&server.url)
            .header("mcp-session-id", first)
            .header("mcp-protocol-version", "2025-06-18"),
    )
    .await;
    assert!(ended.status < 300, "{}", ended.text);
    mcp_session(&http, &server.url, None).await;
}
