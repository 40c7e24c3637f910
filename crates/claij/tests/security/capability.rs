//! Documents registered over the API touch only what the operator's policy allows, and
//! never take the operator's FSMs' ids (issue 35: findings 1, 9 and 11, and the Low
//! finding on versions named). Each test drives the real `claij serve` process.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use claij_testkit::process::which;

use crate::served::{CLAIJ, Served, approval, client, get, places, post, send};

/// A fork whose branches are the FSM files `files`.
fn fork_of(id: &str, files: &[&str]) -> Value {
    json!({
        "id": id,
        "states": [
            {"id": "go", "action": "fork", "config": {"fsms": files, "success_to": "done"}},
            {"id": "done", "action": "end"}
        ],
        "xitions": [{"id": ["start", "go"]}, {"id": ["go", "done"]}]
    })
}

async fn served_ids(http: &reqwest::Client, server: &Served) -> Vec<String> {
    get(http, server.url("/definitions"))
        .await
        .body
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["id"].as_str().map(str::to_owned))
        .collect()
}

/// Finding 1: a fork registered over the API named `/etc/passwd`, `/dev/zero`, the
/// server's own token file and an FSM file on disk that runs programs; each was read (or
/// run). Now each is refused where it is written, nothing is stored, and the refusal
/// quotes nothing of the file.
#[tokio::test]
async fn a_fork_registered_over_the_api_reads_no_file_of_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("claij.db");
    let token_file = dir.path().join("token");
    let token = "0123456789abcdef0123456789abcdef-secret-of-the-server";
    std::fs::write(&token_file, token).unwrap();
    let programs = dir.path().join("programs.yaml");
    std::fs::write(
        &programs,
        "id: programs\nstates:\n  - {id: run, action: command, config: {argv: [touch, /tmp/claij-fork-pwned]}}\n  - {id: end, action: end}\nxitions:\n  - {id: [start, run]}\n  - {id: [run, end]}\n",
    )
    .unwrap();
    let token_arg = token_file.display().to_string();
    let server = Served::start(&store, &["--token-file", &token_arg]);
    let http = client();
    let authed = |request: reqwest::RequestBuilder| request.bearer_auth(token);
    let programs = programs.display().to_string();
    for (i, file) in ["/etc/passwd", "/dev/zero", &token_arg, &programs]
        .into_iter()
        .enumerate()
    {
        let id = format!("reads-{i}");
        let reply =
            send(authed(http.post(server.url("/definitions"))).json(&fork_of(&id, &[file]))).await;
        assert_eq!(reply.status, 403, "{file}: {}", reply.body);
        assert_eq!(
            places(&reply.body),
            ["$.states[0].config.fsms[0]"],
            "{}",
            reply.body
        );
        assert!(!reply.text.contains("root:"), "{}", reply.text);
        assert!(
            !reply.text.contains(token),
            "the token leaked: {}",
            reply.text
        );
        let start =
            send(authed(http.post(server.url("/runs"))).json(&json!({"fsm": id, "input": {}})))
                .await;
        assert_eq!(start.status, 404, "not served: {}", start.body);
    }
    assert!(!Path::new("/tmp/claij-fork-pwned").exists());
}

/// Finding 11: `--allow-program` allowed a name, so a document setting `env.PATH` ran its
/// own `echo`; and a stored document was served again after a restart without the
/// allowance. Now programs are allowed by absolute path, a document may not set
/// variables the operator does not name, and a restart re-checks what is stored.
#[tokio::test]
async fn programs_are_allowed_by_path_and_allowances_hold_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("claij.db");

    // A name is refused at start: it would let the document's PATH choose.
    let by_name = Command::new(CLAIJ)
        .args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--allow-program",
            "touch",
            "--store",
        ])
        .arg(&store)
        .output()
        .unwrap();
    assert_eq!(by_name.status.code(), Some(2));
    let said = String::from_utf8_lossy(&by_name.stderr);
    assert!(said.contains("absolute path"), "{said}");

    let sh = which("sh");
    let server = Served::start(&store, &["--allow-program", &sh]);
    let http = client();
    let marker = dir.path().join("ran");
    let runs_sh = |id: &str, env: Value| {
        json!({
            "id": id,
            "states": [
                {"id": "go", "action": "command", "config": {"argv": ["sh", "-c", format!("touch {}; echo '{{\"id\": [\"go\", \"done\"]}}'", marker.display())], "env": env}},
                {"id": "done", "action": "end"}
            ],
            "xitions": [{"id": ["start", "go"]}, {"id": ["go", "done"]}]
        })
    };
    let with_path = post(
        &http,
        server.url("/definitions"),
        &runs_sh("sets-path", json!({"PATH": dir.path()})),
    )
    .await;
    assert_eq!(with_path.status, 403, "{}", with_path.body);
    assert_eq!(places(&with_path.body), ["$.states[0].config.env.PATH"]);

    let plain = post(
        &http,
        server.url("/definitions"),
        &runs_sh("plain", json!({})),
    )
    .await;
    assert_eq!(plain.status, 201, "{}", plain.body);
    let run = post(
        &http,
        server.url("/runs?wait=30"),
        &json!({"fsm": "plain", "input": {}}),
    )
    .await;
    assert_eq!(run.body["status"], "completed", "{}", run.body);
    assert!(marker.exists());
    drop(server);

    // Restarted without the allowance: the stored document is not served.
    let server = Served::start(&store, &[]);
    assert!(
        !served_ids(&http, &server)
            .await
            .contains(&"plain".to_owned())
    );
    let start = post(
        &http,
        server.url("/runs"),
        &json!({"fsm": "plain", "input": {}}),
    )
    .await;
    assert_eq!(start.status, 404, "{}", start.body);
}

/// Finding 9: an API client registered `human-approval` v99, and every start by id ran
/// it. Now the operator's FSM ids are the operator's, unless `--allow-new-versions`.
#[tokio::test]
async fn an_api_client_cannot_replace_the_operators_workflow() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("claij.db");
    let server = Served::start(&store, &[&approval()]);
    let http = client();
    let mut document: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(approval()).unwrap()).unwrap();
    document["version"] = json!(99);
    let replaced = post(&http, server.url("/definitions"), &document).await;
    assert_eq!(replaced.status, 403, "{}", replaced.body);
    assert_eq!(
        replaced.body["type"]
            .as_str()
            .map(|t| t.ends_with("operator-definition")),
        Some(true),
        "{}",
        replaced.body
    );
    let shown = get(&http, server.url("/definitions/human-approval")).await;
    assert_eq!(shown.body["version"], 1, "{}", shown.body);
    drop(server);

    let server = Served::start(
        &store,
        &[&approval(), "--allow-new-versions", "human-approval"],
    );
    let replaced = post(&http, server.url("/definitions"), &document).await;
    assert_eq!(replaced.status, 201, "{}", replaced.body);
}

/// Low finding: `fsm:ID@abc` ran the newest version. A version named is that version or
/// nothing.
#[tokio::test]
async fn a_version_named_resolves_exactly_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("claij.db");
    let server = Served::start(&store, &[&approval()]);
    let http = client();
    for model in ["fsm:human-approval@abc", "fsm:human-approval@7"] {
        let reply = post(
            &http,
            server.url("/v1/chat/completions"),
            &json!({"model": model, "messages": [{"role": "user", "content": "{}"}]}),
        )
        .await;
        assert_eq!(reply.status, 404, "{model}: {}", reply.body);
    }
    let start = post(
        &http,
        server.url("/runs"),
        &json!({"fsm": "human-approval", "version": 7, "input": {}}),
    )
    .await;
    assert_eq!(start.status, 404, "{}", start.body);
}
