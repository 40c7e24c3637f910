//! Low finding: a SIGKILLed server left its step's program running, and the restarted
//! server ran the step again beside it. Programs now die with the process that started
//! them, so after a restart only the new attempt's program runs.

use std::path::Path;
use std::time::{Duration, Instant};

use claij_testkit::process::alive;
use serde_json::json;

use crate::served::{Served, client, post};

/// A document whose one step records its program's pid, then sleeps.
fn sleeper(dir: &Path) -> String {
    let file = dir.join("sleeper.yaml");
    let pids = dir.join("pids");
    std::fs::write(
        &file,
        format!(
            "id: sleeper\nstates:\n  - id: work\n    action: command\n    config:\n      argv: [sh, -c, 'echo $$ >> {}; exec sleep 120']\n      timeout: 5m\n  - {{id: done, action: end}}\nxitions:\n  - {{id: [start, work]}}\n  - {{id: [work, done]}}\n",
            pids.display()
        ),
    )
    .unwrap();
    file.display().to_string()
}

fn pids(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("pids"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

async fn until(what: &str, mut holds: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !holds() {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_killed_servers_program_dies_with_it_and_the_step_runs_once_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("claij.db");
    let document = sleeper(dir.path());
    let server = Served::start(&store, &[&document]);
    let http = client();
    let started = post(
        &http,
        server.url("/runs"),
        &json!({"fsm": "sleeper", "input": {}}),
    )
    .await;
    assert_eq!(started.status, 202, "{}", started.body);
    until("the step's program starts", || pids(dir.path()).len() == 1).await;
    let first = pids(dir.path())[0];
    assert!(alive(first));

    server.kill();
    until("the program dies with the server", || !alive(first)).await;

    // The restarted server takes the run over and runs the step again: one program.
    let server = Served::start(&store, &[&document]);
    until("the step runs again", || pids(dir.path()).len() == 2).await;
    let second = pids(dir.path())[1];
    assert_ne!(first, second);
    assert!(
        alive(second) && !alive(first),
        "only the new attempt's program runs"
    );
    drop(server);
    until("the second program dies with its server", || !alive(second)).await;
}
