//! `claij serve`'s web page, in a real browser: the binary on a loopback port, a
//! human-approval run started over the API, then headless Chromium driven with Selenium
//! (tests/http-clients/page.py: Debian's chromium and chromium-driver from
//! scripts/setup/chromium, Selenium in the venv of scripts/setup/http-clients) through the
//! runs list, the run (its graph with the waiting state lit, its trail), a refused answer
//! (the validator's message by its field), a good one, and the run completing live, then
//! forked from the answer's entry with another answer (a refusal first, then the new run).
//! Screenshots are kept in target/artifacts/page-*.png. A resume link opened in the same
//! browser, on a server with an API token the person never has: the link's form, a refused
//! answer, a good one, the link used. And the page's routes over HTTP:
//! the assets with their content security policy, the graph drawn by Graphviz, the token
//! on the graph, and the answer when Graphviz is missing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

mod served;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use served::{Served, approval, client, repo, send};

const TOKEN: &str = "0123456789abcdef0123456789abcdef-page-token";
const CSP: &str = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'";

/// The Python of scripts/setup/http-clients' venv, with Selenium in it.
fn selenium_python() -> PathBuf {
    let python = claij_testkit::cache::http_clients_python();
    let has_selenium = Command::new(&python)
        .args(["-c", "import selenium"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_selenium,
        "Selenium is missing ({} cannot import it): run scripts/setup/http-clients",
        python.display()
    );
    python
}

/// Whether `program --version` runs.
fn runs(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Chromium and its WebDriver are there, or the test fails saying what to run.
fn require_chromium() {
    assert!(
        runs("chromium") || runs("chromium-browser"),
        "Chromium is missing: run scripts/setup/chromium (Debian: apt-get install chromium)"
    );
    assert!(
        runs("chromedriver") || runs("/usr/bin/chromedriver"),
        "chromedriver is missing: run scripts/setup/chromium (Debian: apt-get install chromium-driver)"
    );
}

/// Graphviz is there (scripts/test installs it), or the test fails saying so.
fn require_graphviz() {
    let dot = Command::new("dot")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        dot,
        "Graphviz is missing: scripts/test installs it (Debian: apt-get install graphviz)"
    );
}

/// `path` is a PNG `width` pixels wide and at least `min_height` high, with more in it
/// than a blank page (at least `min_bytes`).
fn assert_png(path: &Path, width: u32, min_height: u32, min_bytes: usize) {
    let bytes =
        std::fs::read(path).unwrap_or_else(|e| panic!("no screenshot {}: {e}", path.display()));
    assert!(bytes.len() > 24, "{} is empty", path.display());
    assert_eq!(
        &bytes[..8],
        b"\x89PNG\r\n\x1a\n",
        "{} is not a PNG",
        path.display()
    );
    assert_eq!(&bytes[12..16], b"IHDR");
    let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    assert_eq!(w, width, "{}", path.display());
    assert!(h >= min_height, "{}: {w}×{h}", path.display());
    // A blank page compresses to a few hundred bytes; a page with text does not.
    assert!(
        bytes.len() > min_bytes,
        "{}: a suspiciously small screenshot ({} bytes)",
        path.display(),
        bytes.len()
    );
}

/// target/artifacts, made if missing, with `shots` removed from it.
fn artifacts(shots: &[&str]) -> PathBuf {
    let dir = repo().join("target/artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    let dir = dir.canonicalize().unwrap();
    for shot in shots {
        let _ = std::fs::remove_file(dir.join(shot));
    }
    dir
}

/// Runs tests/http-clients/page.py with `args` (4 minutes at most); its JSON summary.
async fn page_py(python: &Path, args: &[&std::ffi::OsStr]) -> Value {
    let driven = tokio::process::Command::new(python)
        .arg(repo().join("tests/http-clients/page.py"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(240), driven)
        .await
        .expect("page.py ends within 4 minutes")
        .expect("page.py starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "page.py failed ({}):\n{stderr}\n{stdout}",
        out.status
    );
    stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .unwrap_or_else(|| panic!("no summary from page.py:\n{stdout}\n{stderr}"))
}

#[tokio::test]
async fn a_person_answers_a_waiting_run_on_the_web_page_and_watches_it_complete() {
    require_chromium();
    require_graphviz();
    let python = selenium_python();
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(&dir.path().join("claij.db"), &[&approval()]);
    let http = client();

    let started = send(
        http.post(server.url("/runs?wait=30"))
            .header("content-type", "application/json")
            .body(
                json!({"fsm": "human-approval", "input": {"id": ["start", "summarise"], "service": "billing", "version": "2.4.1", "changes": 14}})
                    .to_string(),
            ),
    )
    .await;
    assert_eq!(started.status, 201, "{}", started.text);
    let run = started.json();
    assert_eq!(run["status"], "suspended", "{run}");
    let id = run["id"].as_str().unwrap().to_owned();

    let shots = [
        "page-1-list.png",
        "page-2-run.png",
        "page-3-refused.png",
        "page-4-completed.png",
        "page-5-fork.png",
    ];
    let artifacts = artifacts(&shots);
    let summary = page_py(
        &python,
        &[server.base.as_ref(), id.as_ref(), artifacts.as_os_str()],
    )
    .await;

    // The list, then the run waiting in `approve`, lit in its graph, its trail so far.
    assert_eq!(summary["listed_status"], "suspended", "{summary}");
    assert_eq!(summary["state_before"], "approve", "{summary}");
    assert_eq!(summary["lit_before"], "approve", "{summary}");
    assert_eq!(
        summary["trail_before"],
        json!([[0, "start", "summarise"], [1, "summarise", "approve"]]),
        "{summary}"
    );
    assert_eq!(
        summary["graph_nodes"],
        json!(["start", "summarise", "approve", "deploy", "rejected"]),
        "{summary}"
    );
    assert_eq!(
        summary["answers"],
        json!([
            "approve → deploy — Approve.",
            "approve → rejected — Reject, with a reason."
        ]),
        "{summary}"
    );
    assert_eq!(summary["interrupt_shown"], true, "{summary}");
    assert!(
        summary["prompt"]
            .as_str()
            .is_some_and(|p| p.starts_with("Approve this deployment?")),
        "{summary}"
    );
    assert_eq!(summary["approver_required"], true, "{summary}");

    // The refused answer: the validator's message by the field; nothing changed.
    assert_eq!(
        summary["refused_message"], "\"x\" is shorter than 2 characters",
        "{summary}"
    );
    assert_eq!(summary["refused_field_invalid"], true, "{summary}");
    assert_eq!(summary["general_error_shown"], false, "{summary}");
    assert_eq!(summary["status_after_refusal"], "suspended", "{summary}");
    assert_eq!(summary["trail_after_refusal"], 2, "{summary}");

    // The good answer: completed, the entry arrived live (no reload), the light moved.
    assert_eq!(summary["status_after"], "completed", "{summary}");
    assert_eq!(summary["state_after"], "deploy", "{summary}");
    assert_eq!(summary["lit_after"], "deploy", "{summary}");
    assert_eq!(
        summary["trail_after"],
        json!([
            [0, "start", "summarise"],
            [1, "summarise", "approve"],
            [2, "approve", "deploy"]
        ]),
        "{summary}"
    );
    assert_eq!(
        summary["answer_event"],
        json!({"id": ["approve", "deploy"], "approver": "ada"}),
        "{summary}"
    );
    assert_eq!(summary["result"]["approver"], "ada", "{summary}");
    assert_eq!(summary["interrupt_shown_after"], false, "{summary}");
    assert_eq!(summary["not_reloaded"], true, "{summary}");

    // Forked from the answer's entry: the form holds its event; a refusal says why and
    // stays; the fork opens, completed in `rejected`, naming where it came from.
    assert_eq!(summary["fork_form_seq"], "2", "{summary}");
    assert_eq!(
        summary["fork_form_event"],
        json!({"id": ["approve", "deploy"], "approver": "ada"}),
        "{summary}"
    );
    assert!(
        summary["fork_refused"]
            .as_str()
            .is_some_and(|t| t.contains("$.event.reason")),
        "{summary}"
    );
    assert_eq!(summary["fork_refused_stayed"], true, "{summary}");
    let fork = summary["fork_id"]
        .as_str()
        .expect("the fork's id")
        .to_owned();
    assert_ne!(fork, id);
    assert_eq!(summary["fork_state"], "rejected", "{summary}");
    assert_eq!(summary["fork_from"][0], id.as_str(), "{summary}");
    assert_eq!(summary["fork_from"][1], "2", "{summary}");
    assert!(
        summary["fork_from"][2]
            .as_str()
            .is_some_and(|t| t.ends_with("at entry 2, its event replaced")),
        "{summary}"
    );
    assert_eq!(
        summary["fork_trail"],
        json!([
            [0, "start", "summarise"],
            [1, "summarise", "approve"],
            [2, "approve", "rejected"]
        ]),
        "{summary}"
    );
    // No script error, nothing refused by the content security policy.
    assert_eq!(summary["console_errors"], json!([]), "{summary}");

    for shot in shots {
        assert_png(&artifacts.join(shot), 1280, 600, 15_000);
    }

    // The API agrees.
    let shown = send(http.get(server.url(&format!("/runs/{id}")))).await;
    assert_eq!(shown.status, 200, "{}", shown.text);
    let run = shown.json();
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["state"], "deploy", "{run}");
    assert_eq!(run["result"]["approver"], "ada", "{run}");
    assert_eq!(run["trail_len"], 3, "{run}");
    let forked = send(http.get(server.url(&format!("/runs/{fork}"))))
        .await
        .json();
    assert_eq!(forked["result"]["reason"], "a freeze", "{forked}");
    assert_eq!(
        forked["forked_from"],
        json!({"run": id, "seq": 2, "edited": true}),
        "{forked}"
    );
}

#[tokio::test]
async fn a_person_answers_through_a_resume_link_in_the_browser_without_the_token() {
    require_chromium();
    let python = selenium_python();
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let server = Served::start(
        &dir.path().join("claij.db"),
        &[&approval(), "--token-file", token_file.to_str().unwrap()],
    );
    let http = client();

    // The run is started with the token; its wait carries the link.
    let started = send(
        http.post(server.url("/runs?wait=30"))
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(
                json!({"fsm": "human-approval", "input": {"id": ["start", "summarise"], "service": "billing", "version": "2.4.1", "changes": 14}})
                    .to_string(),
            ),
    )
    .await;
    assert_eq!(started.status, 201, "{}", started.text);
    let run = started.json();
    assert_eq!(run["status"], "suspended", "{run}");
    let id = run["id"].as_str().unwrap().to_owned();
    let hook_url = run["wait"]["hook_url"].as_str().unwrap().to_owned();
    assert!(hook_url.starts_with("/hooks/"), "{hook_url}");

    // With no token: JSON for a program, the page for a browser.
    let as_json = send(
        http.get(server.url(&hook_url))
            .header("accept", "application/json"),
    )
    .await;
    assert_eq!(as_json.status, 200, "{}", as_json.text);
    assert_eq!(as_json.header("content-type"), "application/json");
    assert_eq!(as_json.header("vary"), "accept");
    let view = as_json.json();
    assert_eq!(view["state"], "approve", "{view}");
    assert_eq!(
        view["answers"][0]["id"],
        json!(["approve", "deploy"]),
        "{view}"
    );
    let as_html = send(
        http.get(server.url(&hook_url))
            .header("accept", "text/html,application/xhtml+xml,*/*"),
    )
    .await;
    assert_eq!(as_html.status, 200, "{}", as_html.text);
    assert_eq!(as_html.header("content-type"), "text/html; charset=utf-8");
    assert_eq!(as_html.header("content-security-policy"), CSP);
    assert_eq!(as_html.header("x-frame-options"), "DENY");
    assert_eq!(as_html.header("vary"), "accept");
    assert!(as_html.text.contains("/ui/app.js"), "{}", as_html.text);
    let page = send(http.get(server.url("/"))).await;
    assert_eq!(as_html.text, page.text, "the same page as /");
    // A forged link: a problem for a program; the page (which says so) for a browser.
    let last = hook_url.chars().last().unwrap();
    let forged = format!(
        "{}{}",
        &hook_url[..hook_url.len() - 1],
        if last == '0' { '1' } else { '0' }
    );
    let forged_json = send(
        http.get(server.url(&forged))
            .header("accept", "application/json"),
    )
    .await;
    assert_eq!(forged_json.status, 404, "{}", forged_json.text);
    assert_eq!(
        forged_json.header("content-type"),
        "application/problem+json"
    );
    let forged_html = send(
        http.get(server.url(&forged))
            .header("accept", "text/html,application/xhtml+xml,*/*"),
    )
    .await;
    assert_eq!(forged_html.status, 200, "{}", forged_html.text);
    assert_eq!(forged_html.text, page.text);

    // The browser: the link's form, a refused answer, a good one, the link used.
    let shots = [
        "page-5-link.png",
        "page-6-link-refused.png",
        "page-7-link-done.png",
        "page-8-link-used.png",
    ];
    let artifacts = artifacts(&shots);
    let link = server.url(&hook_url);
    let summary = page_py(
        &python,
        &["--hook".as_ref(), link.as_ref(), artifacts.as_os_str()],
    )
    .await;

    assert_eq!(summary["title"], "Your answer is needed", "{summary}");
    assert_eq!(summary["state"], "approve", "{summary}");
    assert!(
        summary["prompt"]
            .as_str()
            .is_some_and(|p| p.starts_with("Approve this deployment?")),
        "{summary}"
    );
    assert_eq!(
        summary["answers"],
        json!([
            "approve → deploy — Approve.",
            "approve → rejected — Reject, with a reason."
        ]),
        "{summary}"
    );
    // No token asked for, no way to the runs.
    assert_eq!(summary["token_asked"], false, "{summary}");
    assert_eq!(summary["nav_shown"], false, "{summary}");
    assert_eq!(summary["runs_links_shown"], 0, "{summary}");
    assert_eq!(summary["approver_required"], true, "{summary}");

    // The refused answer: the validator's message by the field; the form stays.
    assert_eq!(
        summary["refused_message"], "\"x\" is shorter than 2 characters",
        "{summary}"
    );
    assert_eq!(summary["refused_field_invalid"], true, "{summary}");
    assert_eq!(summary["general_error_shown"], false, "{summary}");
    assert_eq!(summary["state_after_refusal"], "open", "{summary}");

    // The good answer: the thank-you, with the run's status.
    assert_eq!(summary["done_status"], "completed", "{summary}");
    assert!(
        summary["done_text"]
            .as_str()
            .is_some_and(|t| t.starts_with("Thank you: your answer was taken.")),
        "{summary}"
    );
    assert_eq!(
        summary["done_next"], "The run completed, in deploy.",
        "{summary}"
    );
    assert_eq!(summary["form_gone"], true, "{summary}");

    // Reloaded: the link no longer answers; a forged one is not valid.
    assert_eq!(summary["used_reason"], "used", "{summary}");
    assert_eq!(
        summary["used_message"],
        "This link no longer answers: the question was answered, withdrawn, or expired.",
        "{summary}"
    );
    assert_eq!(summary["form_after_reload"], false, "{summary}");
    assert_eq!(
        summary["forged_message"], "This link is not valid",
        "{summary}"
    );
    assert_eq!(summary["console_errors"], json!([]), "{summary}");

    for shot in shots {
        assert_png(&artifacts.join(shot), 1280, 600, 8_000);
    }

    // The API (with the token) agrees; the link, as JSON, answers 410 now.
    let shown = send(
        http.get(server.url(&format!("/runs/{id}")))
            .bearer_auth(TOKEN),
    )
    .await;
    assert_eq!(shown.status, 200, "{}", shown.text);
    let run = shown.json();
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["state"], "deploy", "{run}");
    assert_eq!(run["result"]["approver"], "ada", "{run}");
    let unauthorized = send(http.get(server.url(&format!("/runs/{id}")))).await;
    assert_eq!(unauthorized.status, 401, "the API still needs the token");
    let used = send(
        http.get(server.url(&hook_url))
            .header("accept", "application/json"),
    )
    .await;
    assert_eq!(used.status, 410, "{}", used.text);
    assert_eq!(used.header("content-type"), "application/problem+json");
}

#[tokio::test]
async fn a_person_answers_an_mcp_servers_question_through_a_resume_link() {
    // `ask`'s server (server-everything, on PATH) puts a form to a person during the run:
    // the run stops on it, and its resume link shows the question's own fields.
    require_chromium();
    let python = selenium_python();
    claij_testkit::cache::mcp_server_bin("mcp-server-everything");
    let path = format!(
        "{}:{}",
        claij_testkit::cache::mcp_server_bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let dir = tempfile::tempdir().unwrap();
    let ask = repo()
        .join("tests/mcp-clients/ask.yaml")
        .display()
        .to_string();
    let server = Served::start_env(
        &dir.path().join("claij.db"),
        &[&ask],
        &[("CLAIJ_API_TOKEN", TOKEN), ("PATH", &path)],
    );
    let http = client();
    let mut runs = Vec::new();
    for _ in 0..2 {
        let started = send(
            http.post(server.url("/runs?wait=30"))
                .bearer_auth(TOKEN)
                .header("content-type", "application/json")
                .body(json!({"fsm": "ask", "input": {}}).to_string()),
        )
        .await;
        assert_eq!(started.status, 201, "{}", started.text);
        let run = started.json();
        assert_eq!(run["status"], "suspended", "{run}");
        assert_eq!(run["wait"]["question"]["server"], "ev", "{run}");
        let link = run["wait"]["hook_url"].as_str().unwrap().to_owned();
        let view = send(
            http.get(server.url(&link))
                .header("accept", "application/json"),
        )
        .await
        .json();
        assert_eq!(view["question"]["server"], "ev", "{view}");
        assert_eq!(view["schema"]["required"], json!(["name"]), "{view}");
        assert_eq!(view["answers"], json!([]), "{view}");
        runs.push((run["id"].as_str().unwrap().to_owned(), server.url(&link)));
    }

    let shots = ["page-9-question.png", "page-10-answered.png"];
    let artifacts = artifacts(&shots);
    let summary = page_py(
        &python,
        &[
            "--question".as_ref(),
            runs[0].1.as_ref(),
            runs[1].1.as_ref(),
            artifacts.as_os_str(),
        ],
    )
    .await;
    assert_eq!(summary["question_server"], "ev", "{summary}");
    assert!(
        summary["asker"].as_str().is_some_and(|a| a.contains("ev")),
        "{summary}"
    );
    assert_eq!(
        summary["prompt"], "Please provide inputs for the following fields:",
        "{summary}"
    );
    assert_eq!(summary["select_shown"], false, "{summary}");
    let fields = summary["fields"].as_array().unwrap();
    assert!(fields.contains(&json!("name")), "{summary}");
    assert!(fields.contains(&json!("email")), "{summary}");
    assert_eq!(
        summary["buttons"],
        json!(["Send answer", "Decline", "Cancel"]),
        "{summary}"
    );
    assert_eq!(summary["accepted_status"], "completed", "{summary}");
    assert_eq!(summary["declined_status"], "completed", "{summary}");
    assert_eq!(summary["console_errors"], json!([]), "{summary}");
    for shot in shots {
        assert_png(&artifacts.join(shot), 1280, 600, 10_000);
    }

    // The server got each answer: the name on one, the refusal on the other.
    let said = |run: Value| {
        run["result"]["said"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let accepted = send(
        http.get(server.url(&format!("/runs/{}", runs[0].0)))
            .bearer_auth(TOKEN),
    )
    .await
    .json();
    assert!(said(accepted.clone()).contains("Lin"), "{accepted}");
    let declined = send(
        http.get(server.url(&format!("/runs/{}", runs[1].0)))
            .bearer_auth(TOKEN),
    )
    .await
    .json();
    assert!(
        said(declined.clone()).to_lowercase().contains("declined"),
        "{declined}"
    );
}

#[tokio::test]
async fn the_page_is_served_under_a_strict_policy_and_the_graph_is_drawn_by_graphviz() {
    require_graphviz();
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(&dir.path().join("claij.db"), &[&approval()]);
    let http = client();

    for (path, content_type, needle) in [
        ("/", "text/html; charset=utf-8", "/ui/app.js"),
        (
            "/ui/app.js",
            "text/javascript; charset=utf-8",
            "followEvents",
        ),
        ("/ui/app.css", "text/css; charset=utf-8", ".badge-suspended"),
    ] {
        let reply = send(http.get(server.url(path))).await;
        assert_eq!(reply.status, 200, "{path}: {}", reply.text);
        assert_eq!(reply.header("content-type"), content_type, "{path}");
        assert_eq!(reply.header("content-security-policy"), CSP, "{path}");
        assert_eq!(reply.header("cache-control"), "no-cache", "{path}");
        assert_eq!(reply.header("x-content-type-options"), "nosniff", "{path}");
        assert!(reply.text.contains(needle), "{path}");
    }
    let html = send(http.get(server.url("/"))).await.text;
    assert!(
        !html.contains("<script>") && !html.contains("<style"),
        "nothing inline: the policy would refuse it"
    );

    let graph = send(http.get(server.url("/ui/graph/human-approval.svg"))).await;
    assert_eq!(graph.status, 200, "{}", graph.text);
    assert_eq!(graph.header("content-type"), "image/svg+xml; charset=utf-8");
    assert!(graph.text.contains("<svg"), "{}", graph.text);
    assert!(
        graph.text.contains("<title>approve</title>"),
        "{}",
        graph.text
    );
    let versioned = send(http.get(server.url("/ui/graph/human-approval.svg?version=1"))).await;
    assert_eq!(versioned.status, 200);
    assert_eq!(versioned.text, graph.text);
    for missing in [
        "/ui/graph/human-approval.svg?version=9",
        "/ui/graph/nope.svg",
        "/ui/graph/human-approval",
    ] {
        let reply = send(http.get(server.url(missing))).await;
        assert_eq!(reply.status, 404, "{missing}: {}", reply.text);
        assert_eq!(reply.header("content-type"), "application/problem+json");
    }
    drop(server);

    // With a token and no Graphviz: the page and its assets need no token (the page asks
    // for it), the graph does; and without `dot` it says what is needed.
    let server = Served::start_env(
        &dir.path().join("claij.db"),
        &[&approval()],
        &[("CLAIJ_API_TOKEN", TOKEN), ("PATH", "/nonexistent")],
    );
    for path in ["/", "/ui/app.js", "/ui/app.css"] {
        let reply = send(http.get(server.url(path))).await;
        assert_eq!(reply.status, 200, "{path} needs no token");
    }
    let runs = send(http.get(server.url("/runs"))).await;
    assert_eq!(runs.status, 401, "the API does");
    let graph_url = server.url("/ui/graph/human-approval.svg");
    let refused = send(http.get(&graph_url)).await;
    assert_eq!(refused.status, 401, "{}", refused.text);
    assert_eq!(refused.json()["errors"][0]["place"], "header.authorization");
    let wrong = send(http.get(&graph_url).bearer_auth("not-the-token")).await;
    assert_eq!(wrong.status, 401, "{}", wrong.text);
    let no_dot = send(http.get(&graph_url).bearer_auth(TOKEN)).await;
    assert_eq!(no_dot.status, 501, "{}", no_dot.text);
    assert_eq!(no_dot.header("content-type"), "application/problem+json");
    let problem = no_dot.json();
    assert_eq!(problem["title"], "Graphviz is needed", "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|d| d.contains("Graphviz")),
        "{problem}"
    );
}
