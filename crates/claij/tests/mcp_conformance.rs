//! The MCP conformance suite (`@modelcontextprotocol/conformance` 0.1.12, installed by
//! `scripts/setup/mcp-clients`) against claij's MCP server (`claij mcp serve --http`) and
//! client (`claij mcp tools` and `claij mcp call`, through tests/mcp-conformance/client).
//!
//! The server scenarios claij does not pass are listed, with why, in
//! tests/mcp-conformance/expected-failures.yml: the suite fails when a scenario not
//! listed fails (a regression) or a listed one passes (a stale entry). The client
//! scenarios run here are the four that do not need OAuth, and each must pass.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const CLAIJ: &str = env!("CARGO_BIN_EXE_claij");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The suite's command, run on the system's Node (20).
fn conformance() -> Command {
    let bin =
        claij_testkit::cache::dir().join("mcp-clients/conformance/node_modules/.bin/conformance");
    assert!(
        bin.exists(),
        "the MCP conformance suite is missing ({}): run scripts/setup/mcp-clients",
        bin.display()
    );
    let mut command = Command::new(bin);
    // Its result folders go to a scratch directory, not the repository.
    command.current_dir(std::env::temp_dir());
    command
}

fn run(mut command: Command) -> (Output, String) {
    let output = command.output().expect("run the conformance suite");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output, text)
}

/// `claij mcp serve --http 127.0.0.1:0` on an FSM with a human wait, and its URL.
struct Server {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut child = Command::new(CLAIJ)
            .args(["mcp", "serve"])
            .arg(repo().join("examples/human-approval.yaml"))
            .args(["--http", "127.0.0.1:0", "--store"])
            .arg(dir.path().join("runs.db"))
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
                    let _ = tx.send(line[at..].split(';').next().unwrap_or("").to_owned());
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the server prints its URL");
        Self {
            child,
            url,
            _dir: dir,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_server_passes_every_scenario_not_listed_as_an_expected_failure() {
    let server = Server::start();
    let mut command = conformance();
    command
        .args(["server", "--url", &server.url, "--expected-failures"])
        .arg(repo().join("tests/mcp-conformance/expected-failures.yml"));
    let (output, text) = run(command);
    eprintln!("{text}");
    assert!(
        output.status.success(),
        "a server scenario regressed, or one listed as failing now passes"
    );
    // What claij's server passes today, by name: the suite really ran them.
    for scenario in [
        "server-initialize",
        "logging-set-level",
        "ping",
        "completion-complete",
        "tools-list",
        "server-sse-multiple-streams",
        "resources-list",
        "prompts-list",
        "dns-rebinding-protection",
    ] {
        assert!(
            text.contains(&format!("✓ {scenario}:")),
            "{scenario} did not pass"
        );
    }
}

#[test]
fn the_client_passes_the_scenarios_that_need_no_oauth() {
    for scenario in [
        "initialize",
        "tools_call",
        "elicitation-sep1034-client-defaults",
        "sse-retry",
    ] {
        let mut command = conformance();
        command
            .args(["client", "--scenario", scenario, "--command"])
            .arg(repo().join("tests/mcp-conformance/client"))
            .env("CLAIJ", CLAIJ);
        let (output, text) = run(command);
        eprintln!("{text}");
        assert!(output.status.success(), "client scenario {scenario} failed");
        assert!(
            text.contains("OVERALL: PASSED") && !text.contains("Passed: 0/"),
            "client scenario {scenario} passed no check"
        );
    }
}
