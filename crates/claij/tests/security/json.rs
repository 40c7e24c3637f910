//! JSON from the network: one nesting limit and one rule on repeated keys for every JSON
//! the servers parse — request bodies, chat message contents, resume-link answers, MCP
//! tool arguments — so that nothing stored is too deep to read back.

use serde_json::{Value, json};

use crate::door_support::{
    ECHO, McpServed, assert_problem, deep_echo_input, first_place, mcp_post, mcp_session,
    run_count, status_of, suspended_run, tool_call, write,
};
use crate::served::{Served, approval, client, post, send};

/// A chat completion asking the echo workflow with `content` as the user's message.
fn chat(content: &str) -> Value {
    json!({"model": "fsm:echo", "messages": [{"role": "user", "content": content}]})
}

/// Finding 1 (issue 35), "a poison run through the OpenAI endpoint": a user message whose
/// JSON nests 126 deep was parsed without the body's 64-level check, a run was made of it,
/// and every later read of that run (and of the run list) failed with "recursion limit
/// exceeded". Now the message's JSON is held to the same limit: nothing is started, and
/// every run stays readable — one nested at the limit included.
#[tokio::test]
async fn a_deeply_nested_chat_message_starts_no_run_and_every_run_stays_readable() {
    let dir = tempfile::tempdir().unwrap();
    let echo = write(dir.path(), "echo.yaml", ECHO);
    let server = Served::start(&dir.path().join("claij.db"), &[&echo]);
    let http = client();
    let url = server.url("/v1/chat/completions");

    let at_the_limit = post(&http, url.clone(), &chat(&deep_echo_input(64))).await;
    assert_eq!(at_the_limit.status, 200, "{}", at_the_limit.text);

    let deep = post(&http, url, &chat(&deep_echo_input(126))).await;
    assert_eq!(deep.status, 400, "{}", deep.text);
    let message = deep.body["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("64"), "the limit is named: {message}");
    assert_eq!(deep.body["error"]["param"], "$.messages[0].content");

    let runs = send(http.get(server.url("/runs"))).await;
    assert_eq!(runs.status, 200, "{}", runs.text);
    let runs = runs.body["runs"].as_array().cloned().unwrap_or_default();
    assert_eq!(runs.len(), 1, "only the run at the limit: {runs:?}");
    for run in runs {
        let id = run["id"].as_str().unwrap();
        for path in [format!("/runs/{id}"), format!("/runs/{id}/trail")] {
            let read = send(http.get(server.url(&path))).await;
            assert_eq!(read.status, 200, "{path}: {}", read.text);
        }
    }
}

/// Finding 1 (issue 35), the same kind at `claij mcp serve --http`: a tool's arguments
/// nested 100 deep (the JSON-RPC body 102) were taken and a run made of them; now the body
/// is held to the 64-level limit like every other JSON the servers read, and nothing runs.
#[tokio::test]
async fn mcp_tool_arguments_are_held_to_the_same_nesting_limit() {
    let dir = tempfile::tempdir().unwrap();
    let echo = write(dir.path(), "echo.yaml", ECHO);
    let server = McpServed::start(&dir.path().join("claij.db"), &[&echo], &[], &[]);
    let http = client();
    let session = mcp_session(&http, &server.url, None).await;

    let deep = tool_call("echo_start", &deep_echo_input(100));
    let (reply, message) = mcp_post(&http, &server.url, Some(&session), deep, None).await;
    let refused = reply.status == 400 || message["error"].is_object();
    assert!(refused, "refused: {} {}", reply.status, reply.text);
    if reply.status == 400 {
        assert_problem(&reply, 400);
        assert!(reply.text.contains("64"), "{}", reply.text);
    }

    // A shallow call runs; the status tool then lists that run alone.
    let shallow = tool_call("echo_start", &deep_echo_input(3));
    let (ran, message) = mcp_post(&http, &server.url, Some(&session), shallow, None).await;
    assert_eq!(ran.status, 200, "{}", ran.text);
    assert_eq!(message["result"]["isError"], false, "{message}");
    let (listed, message) = mcp_post(
        &http,
        &server.url,
        Some(&session),
        tool_call("echo_status", "{}"),
        None,
    )
    .await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    let text = message["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("");
    let runs: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let count = runs["runs"]
        .as_array()
        .or_else(|| runs.as_array())
        .map(Vec::len);
    assert_eq!(count, Some(1), "one run: {text}");
}

/// Finding 5 (issue 35), "duplicate JSON keys accepted on `/runs` but refused on
/// `/definitions`": one rule now — a key given twice is refused wherever JSON comes in
/// (a start, an answer, a resume link's answer, a chat message, a document), naming the
/// key and its place, and nothing changes.
#[tokio::test]
async fn a_key_given_twice_is_refused_everywhere_naming_the_key_and_place() {
    let dir = tempfile::tempdir().unwrap();
    let echo = write(dir.path(), "echo.yaml", ECHO);
    let server = Served::start(&dir.path().join("claij.db"), &[&approval(), &echo]);
    let http = client();
    let raw = |path: &str, body: &str| {
        http.post(server.url(path))
            .header("content-type", "application/json")
            .body(body.to_owned())
    };

    let start = send(raw(
        "/runs",
        r#"{"fsm": "human-approval", "input": {"id": ["start", "summarise"], "service": "billing",
            "service": "payments", "version": "2.4.1", "changes": 14}}"#,
    ))
    .await;
    assert_problem(&start, 400);
    assert_eq!(first_place(&start), "$.input.service", "{}", start.text);
    assert!(start.text.contains("`service`"), "{}", start.text);
    assert_eq!(run_count(&http, &server).await, 0, "nothing started");

    let id = suspended_run(&http, &server).await;
    let answer = send(raw(
        &format!("/runs/{id}/resume"),
        r#"{"input": {"id": ["approve", "deploy"], "approver": "ada", "approver": "bob"}}"#,
    ))
    .await;
    assert_problem(&answer, 400);
    assert_eq!(first_place(&answer), "$.input.approver", "{}", answer.text);

    let link = send(raw(&format!("/runs/{id}/hooks"), "{}")).await;
    assert_eq!(link.status, 201, "{}", link.text);
    let link = link.body["url"].as_str().unwrap().to_owned();
    let by_link = send(raw(
        &link,
        r#"{"id": ["approve", "deploy"], "approver": "ada", "approver": "bob"}"#,
    ))
    .await;
    assert_problem(&by_link, 400);
    assert_eq!(first_place(&by_link), "$.approver", "{}", by_link.text);
    assert_eq!(status_of(&http, &server, &id).await, "suspended");

    let chat = post(
        &http,
        server.url("/v1/chat/completions"),
        &json!({"model": "fsm:echo", "messages": [{"role": "user",
            "content": r#"{"id": ["start", "done"], "a": 1, "a": 2}"#}]}),
    )
    .await;
    assert_eq!(chat.status, 400, "{}", chat.text);
    assert!(
        chat.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("`a`")),
        "{}",
        chat.text
    );

    let document = send(raw(
        "/definitions",
        r#"{"id": "twice", "id": "again", "states": [{"id": "done", "action": "end"}],
            "xitions": [{"id": ["start", "done"]}]}"#,
    ))
    .await;
    assert!(
        document.status == 400 || document.status == 422,
        "{}",
        document.text
    );
    assert!(
        document.text.contains("duplicate key `id`"),
        "{}",
        document.text
    );
    assert_eq!(run_count(&http, &server).await, 1, "only the suspended run");
}
