//! What a document may touch is decided by whose it is, and enforced by the actions as
//! they run, not only when the document is registered (issue 35, finding 1 and 11): an
//! API client's document run directly by the engine — as if registration had missed it —
//! starts no program, reads no file and sets no variable the policy does not name, and
//! the programs it may start get this process's program and none of its secrets.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

use std::path::Path;
use std::sync::Arc;

use claij_core::{Fsm, Owner};
use claij_engine::{ActionRegistry, Engine, Policy, RunOptions, RunOutcome, RunStatus};
use claij_testkit::process::which;
use serde_json::{Value, json};

fn engine(policy: Policy) -> Engine {
    Engine::new(Arc::new(ActionRegistry::with_builtins())).governed_by(Arc::new(policy))
}

fn document(owner: Owner, state: Value) -> Arc<Fsm> {
    let document = json!({
        "id": "probe",
        "states": [state, {"id": "done", "action": "end"}],
        "xitions": [{"id": ["start", "go"]}, {"id": ["go", "done"]}]
    });
    let mut fsm = claij_core::load_value("<request>", document, &ActionRegistry::with_builtins())
        .unwrap_or_else(|d| panic!("{d}"));
    fsm.owner = owner;
    Arc::new(fsm)
}

async fn run(engine: &Engine, fsm: Arc<Fsm>) -> RunOutcome {
    engine
        .run(fsm, json!({"id": ["start", "go"]}), RunOptions::default())
        .await
        .expect("the run runs")
}

/// The message of the run's last failure.
fn failure(outcome: &RunOutcome) -> String {
    outcome
        .trail
        .iter()
        .rev()
        .find_map(|e| e.failure.as_ref().map(|f| f.message.clone()))
        .unwrap_or_default()
}

#[tokio::test]
async fn a_clients_program_that_is_not_allowed_never_starts() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("pwned");
    let state = json!({"id": "go", "action": "command", "config": {"argv": ["touch", marker]}});
    let outcome = run(
        &engine(Policy::nothing()),
        document(Owner::Client, state.clone()),
    )
    .await;
    assert_eq!(outcome.status, RunStatus::Failed);
    let message = failure(&outcome);
    assert!(
        message.contains("the program `touch` is not allowed"),
        "{message}"
    );
    assert!(!marker.exists(), "the program ran");
    // The operator's document runs it.
    let outcome = run(&engine(Policy::nothing()), document(Owner::Operator, state)).await;
    assert_eq!(outcome.status, RunStatus::Failed, "touch prints no event");
    assert!(marker.exists(), "the operator's program ran");
}

#[tokio::test]
async fn a_clients_path_cannot_choose_another_program_and_its_program_gets_no_secrets() {
    let evil = tempfile::tempdir().unwrap();
    let fake = evil.path().join("sh");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho '{\"id\": [\"go\", \"done\"], \"who\": \"fake\"}'\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = r#"printf '{"id": ["go", "done"], "who": "real", "sees": "%s"}' "${CARGO_MANIFEST_DIR:-nothing}""#;
    let state = json!({"id": "go", "action": "command", "config": {
        "argv": ["sh", "-c", script],
        "env": {"PATH": evil.path()}
    }});
    let allowed = || Policy::nothing().allow_program(&which("sh")).unwrap();

    // Setting PATH is not allowed unless named.
    let outcome = run(&engine(allowed()), document(Owner::Client, state.clone())).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    assert!(
        failure(&outcome).contains("the environment variable `PATH` is not allowed"),
        "{}",
        failure(&outcome)
    );

    // Allowed to set it, the document still gets the allowed program, not its own.
    let policy = allowed().allow_environment("PATH");
    let outcome = run(&engine(policy), document(Owner::Client, state.clone())).await;
    assert_eq!(
        outcome.status,
        RunStatus::Completed,
        "{}",
        failure(&outcome)
    );
    let result = outcome.result.unwrap();
    assert_eq!(result["who"], "real");
    // cargo gives the test process CARGO_MANIFEST_DIR; a client's program does not see it.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    assert_eq!(result["sees"], "nothing");

    // The operator's program sees the process's environment, as before.
    let operator =
        json!({"id": "go", "action": "command", "config": {"argv": ["sh", "-c", script]}});
    let outcome = run(
        &engine(Policy::nothing()),
        document(Owner::Operator, operator),
    )
    .await;
    assert_eq!(
        outcome.status,
        RunStatus::Completed,
        "{}",
        failure(&outcome)
    );
    assert_ne!(outcome.result.unwrap()["sees"], "nothing");
}

#[tokio::test]
async fn a_clients_child_file_is_read_only_under_an_allowed_folder() {
    for file in ["/etc/passwd", "/dev/zero"] {
        let state =
            json!({"id": "go", "action": "fork", "config": {"fsms": [file], "success_to": "done"}});
        let outcome = run(&engine(Policy::nothing()), document(Owner::Client, state)).await;
        assert_eq!(outcome.status, RunStatus::Failed);
        let message = failure(&outcome);
        assert!(
            message.contains(&format!("the file `{file}` is not allowed")),
            "{message}"
        );
        assert!(
            !message.contains("root:"),
            "the file's text leaked: {message}"
        );
    }

    // Under an allowed folder: read, and the child is the client's too, so its programs
    // are refused.
    let folder = tempfile::tempdir().unwrap();
    let child = folder.path().join("child.yaml");
    std::fs::write(
        &child,
        "id: child\nstates:\n  - {id: run, action: command, config: {argv: [touch, /tmp/claij-child-pwned]}}\n  - {id: end, action: end}\nxitions:\n  - {id: [start, run]}\n  - {id: [run, end]}\n",
    )
    .unwrap();
    let policy = Policy::nothing()
        .allow_folder(&folder.path().display().to_string())
        .unwrap();
    let state = json!({"id": "go", "action": "fsm", "config": {"fsm": child, "success_to": "done", "failure_to": "done"}});
    let outcome = run(&engine(policy), document(Owner::Client, state)).await;
    let child_view = outcome
        .trail
        .iter()
        .find_map(|e| e.event.get("status").cloned());
    assert_eq!(child_view, Some(json!("failed")), "{:?}", outcome.trail);
    assert!(!Path::new("/tmp/claij-child-pwned").exists());
}

#[tokio::test]
async fn an_operators_child_file_must_be_a_document_not_a_device() {
    let state =
        json!({"id": "go", "action": "fsm", "config": {"fsm": "/dev/zero", "success_to": "done"}});
    let outcome = run(&engine(Policy::nothing()), document(Owner::Operator, state)).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    assert!(
        failure(&outcome).contains("not a regular file"),
        "{}",
        failure(&outcome)
    );
}

#[tokio::test]
async fn a_clients_working_directory_must_be_under_an_allowed_folder() {
    let state = json!({"id": "go", "action": "command", "config": {"argv": ["sh", "-c", "pwd"], "cwd": "/etc"}});
    let policy = Policy::nothing().allow_program(&which("sh")).unwrap();
    let outcome = run(&engine(policy), document(Owner::Client, state)).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    assert!(
        failure(&outcome).contains("the file `/etc` is not allowed"),
        "{}",
        failure(&outcome)
    );
}
