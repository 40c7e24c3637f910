//! The `claij` binary with a store: runs that suspend for a person and are resumed,
//! inspected, raced, interrupted from other processes, recovered after a SIGKILL and
//! pruned; stored definitions; store errors. Every test has its own SQLite file.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use claij_testkit::process::alive;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use claij_core::TrailEntry;
use serde_json::{Value, json};

/// The request the human-approval example starts from.
const REQUEST: &str =
    r#"{"id": ["start", "summarise"], "service": "billing", "version": "2.4.1", "changes": 14}"#;
/// A valid answer to it.
const APPROVE: &str = r#"{"id": ["approve", "deploy"], "approver": "ada"}"#;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A process's exit and output, as text.
#[derive(Debug)]
struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Out {
    fn from(out: std::process::Output) -> Self {
        Self {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Asserts the exit status; returns self for more checks.
    #[track_caller]
    fn exits(self, code: i32) -> Self {
        assert_eq!(self.code, Some(code), "{self:#?}");
        self
    }

    /// Stdout as one JSON value.
    #[track_caller]
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:#?}"))
    }

    /// Stdout as JSON lines.
    #[track_caller]
    fn json_lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
            .collect()
    }
}

/// A store of its own (a SQLite file in a temporary directory), named to the binary by
/// `CLAIJ_STORE`.
struct Store {
    dir: tempfile::TempDir,
}

impl Store {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn db(&self) -> PathBuf {
        self.dir.path().join("claij.db")
    }

    /// A file path in the store's directory.
    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The binary, run from the repository root with this store.
    fn claij(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_claij"));
        cmd.current_dir(repo())
            .stdin(Stdio::null())
            .env("CLAIJ_STORE", self.db())
            // Nothing may land in the default store of whoever runs the tests.
            .env("XDG_DATA_HOME", self.dir.path().join("xdg"))
            .env_remove("CLAIJ_DURABILITY");
        cmd
    }

    fn run(&self, args: &[&str]) -> Out {
        Out::from(self.claij().args(args).output().expect("claij starts"))
    }

    /// Starts claij in the background, output captured.
    fn spawn(&self, args: &[&str]) -> Child {
        self.claij()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("claij starts")
    }

    /// Runs the human-approval example until it suspends; returns the run's id.
    fn suspended_approval(&self, run_id: &str) -> String {
        let out = self
            .run(&[
                "run",
                "examples/human-approval.yaml",
                "--run-id",
                run_id,
                "--input",
                REQUEST,
            ])
            .exits(3);
        out.json()["run_id"].as_str().unwrap().to_owned()
    }

    /// `runs show RUN --json`.
    fn show(&self, run: &str) -> Value {
        self.run(&["runs", "show", run, "--json"]).exits(0).json()
    }

    /// `runs trail RUN --json`, read back as trail entries.
    fn trail(&self, run: &str) -> Vec<TrailEntry> {
        self.run(&["runs", "trail", run, "--json"])
            .exits(0)
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
            .collect()
    }

    /// Writes an FSM document (JSON) into the store's directory; returns its path.
    fn document(&self, name: &str, doc: &Value) -> String {
        let path = self.file(name);
        std::fs::write(&path, serde_json::to_string_pretty(doc).unwrap()).unwrap();
        path.display().to_string()
    }
}

/// Waits until `ready` holds, for at most 5 s.
#[track_caller]
fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let started = Instant::now();
    while !ready() {
        assert!(
            started.elapsed() < HANG_GUARD,
            "timed out waiting until {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How long a test waits for something before calling it a hang. A guard, not a
/// timing target: the programs these tests stop sleep for far longer, and CI runs
/// these tests on two busy cores.
const HANG_GUARD: Duration = Duration::from_secs(30);

/// A pid written to a file by a test's program (once it is there).
fn pid_in(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Kills a process the test started (directly or not) when dropped, whatever happened.
struct KillOnDrop(i32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if alive(self.0) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.0),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// A one-state document whose `command` runs `script` with `sh -c` and ends in `done`.
fn command_document(id: &str, script: &str) -> Value {
    json!({
        "id": id,
        "states": [
            {"id": "work", "action": "command", "config": {"argv": ["sh", "-c", script]}},
            {"id": "done", "action": "end"}
        ],
        "xitions": [
            {"id": ["start", "work"]},
            {"id": ["work", "done"]}
        ]
    })
}

#[test]
fn a_waiting_person_suspends_the_run_with_exit_3_and_it_is_listed_and_shown() {
    let store = Store::new();
    let out = store
        .run(&["run", "examples/human-approval.yaml", "--input", REQUEST])
        .exits(3);
    let wait = out.json();
    let run = wait["run_id"].as_str().expect("the wait names the run");
    assert_eq!(wait["status"], "suspended");
    assert_eq!(wait["state"], "approve");
    assert_eq!(
        wait["waiting_for"],
        json!([["approve", "deploy"], ["approve", "rejected"]])
    );
    assert!(
        wait["prompt"]
            .as_str()
            .unwrap()
            .starts_with("Approve this deployment?")
    );
    assert_eq!(wait["schema"]["oneOf"].as_array().map(Vec::len), Some(2));
    assert!(
        out.stderr
            .contains(&format!("claij runs resume {run} --store sqlite:")),
        "{}",
        out.stderr
    );

    // `runs list`: the table, JSON lines, and both filters.
    let table = store.run(&["runs", "list"]).exits(0).stdout;
    let row = table
        .lines()
        .find(|l| l.starts_with(run))
        .unwrap_or_else(|| panic!("{run} not listed: {table}"));
    assert!(
        row.contains("human-approval v1") && row.contains("suspended") && row.contains("approve"),
        "{row}"
    );
    let listed = store.run(&["runs", "list", "--json"]).exits(0).json_lines();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["id"], run);
    assert_eq!(listed[0]["status"], "suspended");
    assert_eq!(listed[0]["steps"], 2);
    assert_eq!(listed[0]["wait"]["waiting_for"], wait["waiting_for"]);
    let ids = |args: &[&str]| -> Vec<Value> {
        let mut all = vec!["runs", "list", "--json"];
        all.extend(args);
        store
            .run(&all)
            .exits(0)
            .json_lines()
            .iter()
            .map(|r| r["id"].clone())
            .collect()
    };
    assert_eq!(ids(&["--status", "suspended"]), [json!(run)]);
    assert_eq!(
        ids(&["--status", "running", "--status", "suspended"]),
        [json!(run)]
    );
    assert!(ids(&["--status", "completed"]).is_empty());
    assert_eq!(ids(&["--fsm", "human-approval"]), [json!(run)]);
    assert!(ids(&["--fsm", "template-pipeline"]).is_empty());
    let none = store.run(&["runs", "list", "--status", "failed"]).exits(0);
    assert!(none.stderr.contains("no runs match"), "{}", none.stderr);

    // `runs show`: the text and the JSON.
    let text = store.run(&["runs", "show", run]).exits(0).stdout;
    for line in [
        format!("run       {run}"),
        "status    suspended".into(),
        "state     approve".into(),
        "waits for [approve, deploy], [approve, rejected]".into(),
        "asking    Approve this deployment?".into(),
        "schema    {\"oneOf\":".into(),
        "last      {\"id\":[\"summarise\",\"approve\"]".into(),
    ] {
        assert!(text.contains(&line), "no `{line}` in:\n{text}");
    }
    let shown = store.show(run);
    assert_eq!(shown["status"], "suspended");
    assert_eq!(shown["wait"]["prompt"], wait["prompt"]);
    assert_eq!(shown["wait"]["schema"], wait["schema"]);
    assert_eq!(shown["wait"]["waiting_for"], wait["waiting_for"]);
    assert_eq!(
        shown["last_event"]["summary"],
        "Deploy billing 2.4.1 (14 changes)"
    );
    assert_eq!(shown["owner"], Value::Null, "a suspended run has no owner");
}

#[test]
fn a_refused_resume_exits_2_and_changes_nothing() {
    let store = Store::new();
    let run = store.suspended_approval("refused");
    let shown = store.show(&run);
    let trail = store
        .run(&["runs", "trail", &run, "--json"])
        .exits(0)
        .stdout;

    let out = store
        .run(&[
            "runs",
            "resume",
            &run,
            "--input",
            r#"{"id": ["approve", "deploy"], "approver": "x"}"#,
        ])
        .exits(2);
    assert!(
        out.stderr
            .contains("the input does not satisfy the schema of [approve, deploy]")
            && out.stderr.contains("/approver"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "{}", out.stdout);

    let out = store
        .run(&[
            "runs",
            "resume",
            &run,
            "--input",
            r#"{"id": ["approve", "ship"]}"#,
        ])
        .exits(2);
    assert!(
        out.stderr
            .contains("waits for one of: [approve, deploy], [approve, rejected]"),
        "{}",
        out.stderr
    );

    let out = store.run(&["runs", "resume", &run]).exits(2);
    assert!(
        out.stderr.contains("give it with --input"),
        "{}",
        out.stderr
    );

    let out = store
        .run(&["runs", "resume", &run, "--input", "{not json"])
        .exits(2);
    assert!(out.stderr.contains("not valid JSON"), "{}", out.stderr);

    assert_eq!(store.show(&run), shown, "the run changed");
    assert_eq!(
        store
            .run(&["runs", "trail", &run, "--json"])
            .exits(0)
            .stdout,
        trail,
        "the trail changed"
    );
}

#[test]
fn a_valid_resume_completes_the_run_and_the_trail_shows_all_of_it() {
    let store = Store::new();
    let run = store.suspended_approval("approved");
    let out = store
        .run(&["runs", "resume", &run, "--input", APPROVE])
        .exits(0);
    assert_eq!(out.json(), serde_json::from_str::<Value>(APPROVE).unwrap());
    assert!(
        out.stderr
            .contains(&format!("run {run} completed in state `deploy`")),
        "{}",
        out.stderr
    );

    let table = store.run(&["runs", "trail", &run]).exits(0).stdout;
    let rows: Vec<&str> = table.lines().collect();
    assert_eq!(rows.len(), 4, "{table}");
    assert!(
        rows[0].contains("SEQ") && rows[0].contains("TRANSITION"),
        "{table}"
    );
    for (row, (seq, hop)) in rows[1..].iter().zip([
        ("0", "start → summarise"),
        ("1", "summarise → approve"),
        ("2", "approve → deploy"),
    ]) {
        assert!(
            row.trim_start().starts_with(seq) && row.contains(hop),
            "{row}"
        );
    }

    let trail = store.trail(&run);
    assert_eq!(trail.iter().map(|e| e.seq).collect::<Vec<_>>(), [0, 1, 2]);
    assert!(
        trail
            .iter()
            .all(|e| e.is_transition() && &*e.fsm == "human-approval")
    );
    assert_eq!(trail[2].to.as_deref(), Some("deploy"));
    assert_eq!(trail[2].event["approver"], "ada");

    let shown = store.show(&run);
    assert_eq!(shown["status"], "completed");
    assert_eq!(shown["state"], "deploy");
    assert_eq!(shown["wait"], Value::Null);

    // Once answered, the run waits for nothing.
    let out = store
        .run(&["runs", "resume", &run, "--input", APPROVE])
        .exits(1);
    assert!(
        out.stderr.contains("is completed, not suspended"),
        "{}",
        out.stderr
    );
    assert_eq!(store.trail(&run).len(), 3);
}

#[test]
fn a_run_forked_at_an_entry_goes_on_from_there_and_the_original_is_unchanged() {
    let store = Store::new();
    let run = store.suspended_approval("forked");
    store
        .run(&["runs", "resume", &run, "--input", APPROVE])
        .exits(0);
    let original = (store.show(&run), store.trail(&run));

    // The approval replaced by a rejection: the fork ends in `rejected`.
    let reject = r#"{"id": ["approve", "rejected"], "reason": "a freeze"}"#;
    let out = store
        .run(&["runs", "fork", &run, "--at", "2", "--input", reject])
        .exits(0);
    assert_eq!(
        out.json(),
        json!({"id": ["approve", "rejected"], "reason": "a freeze"})
    );
    let forked = out
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix(&format!("claij: forking run {run} at entry 2 into run ")))
        .unwrap_or_else(|| panic!("{}", out.stderr))
        .to_owned();
    assert!(
        out.stderr
            .contains(&format!("run {forked} completed in state `rejected`")),
        "{}",
        out.stderr
    );
    let trail = store.trail(&forked);
    assert_eq!(trail.len(), 3);
    assert_eq!(
        trail[..2],
        original.1[..2],
        "the entries before the fork point"
    );
    assert_eq!(trail[2].event["reason"], "a freeze");
    let shown = store.show(&forked);
    assert_eq!(
        shown["forked_from"],
        json!({"run": run, "seq": 2, "edited": true})
    );
    let text = store.run(&["runs", "show", &forked]).exits(0).stdout;
    assert!(
        text.contains(&format!(
            "forked    from {run} at entry 2, its event replaced"
        )),
        "{text}"
    );

    // Kept as it was at entry 1: the fork waits for the person again.
    let again = store.run(&["runs", "fork", &run, "--at", "1"]).exits(3);
    let waiting = again.json();
    assert_eq!(waiting["state"], "approve");
    let second = waiting["run_id"].as_str().unwrap();
    assert_eq!(store.show(second)["forked_from"]["edited"], false);

    // Refused forks exit 2, name what is wrong, and store nothing.
    let count = || {
        store
            .run(&["runs", "list", "--json"])
            .exits(0)
            .json_lines()
            .len()
    };
    let before = count();
    let past = store.run(&["runs", "fork", &run, "--at", "7"]).exits(2);
    assert!(
        past.stderr.contains(&format!(
            "run `{run}` cannot be forked at entry 7: it is past the end of the trail, which has 3 entries (0 to 2); nothing was stored"
        )),
        "{}",
        past.stderr
    );
    let short = store
        .run(&[
            "runs",
            "fork",
            &run,
            "--at",
            "2",
            "--input",
            r#"{"id": ["approve", "rejected"], "reason": "no"}"#,
        ])
        .exits(2);
    assert!(
        short.stderr.contains("[approve, rejected]") && short.stderr.contains("/reason"),
        "{}",
        short.stderr
    );
    let elsewhere = store
        .run(&[
            "runs",
            "fork",
            &run,
            "--at",
            "2",
            "--input",
            r#"{"id": ["summarise", "approve"]}"#,
        ])
        .exits(2);
    assert!(
        elsewhere
            .stderr
            .contains("does not leave `approve`, the state that made entry 2"),
        "{}",
        elsewhere.stderr
    );
    store
        .run(&["runs", "fork", "no-such-run", "--at", "0"])
        .exits(2);
    assert_eq!(count(), before);
    assert_eq!((store.show(&run), store.trail(&run)), original);

    // --submit: stored for a worker, its id on stdout.
    let submitted = store
        .run(&["runs", "fork", &run, "--at", "1", "--submit"])
        .exits(0);
    let queued = store.show(submitted.stdout.trim());
    assert_eq!(queued["status"], "running");
    assert_eq!(queued["owner"], Value::Null, "held by no one");
    assert_eq!(queued["forked_from"]["run"], json!(run));
}

#[test]
fn of_two_resumes_started_together_exactly_one_wins() {
    let store = Store::new();
    // A few rounds, so the loser loses at different points (the claim, or finding the
    // run no longer suspended).
    for round in 0..3 {
        let run = store.suspended_approval(&format!("race-{round}"));
        let reject = r#"{"id": ["approve", "rejected"], "reason": "not today"}"#;
        let racers: Vec<Child> = [APPROVE, reject]
            .iter()
            .map(|input| store.spawn(&["runs", "resume", &run, "--quiet", "--input", input]))
            .collect();
        let outs: Vec<Out> = racers
            .into_iter()
            .map(|c| Out::from(c.wait_with_output().unwrap()))
            .collect();
        let winners: Vec<usize> = (0..2).filter(|&i| outs[i].code == Some(0)).collect();
        assert_eq!(winners.len(), 1, "round {round}: {outs:#?}");
        let (winner, loser) = (&outs[winners[0]], &outs[1 - winners[0]]);
        assert_eq!(loser.code, Some(1), "{loser:#?}");
        assert!(
            loser.stderr.contains("not suspended") && loser.stderr.contains("another resume"),
            "round {round}: {loser:#?}"
        );
        assert!(loser.stdout.is_empty(), "{loser:#?}");

        // The trail holds the winner's answer, once.
        let trail = store.trail(&run);
        assert_eq!(trail.len(), 3, "{trail:#?}");
        assert_eq!(trail[2].event, winner.json());
        let shown = store.show(&run);
        assert_eq!(shown["status"], "completed");
        assert_eq!(shown["state"], trail[2].to.as_deref().unwrap());
    }
}

#[test]
fn interrupting_a_suspended_run_records_interrupted() {
    let store = Store::new();
    let run = store.suspended_approval("stop-waiting");
    let out = store.run(&["runs", "interrupt", &run]).exits(0);
    assert_eq!(
        out.stdout.trim(),
        format!("run {run} interrupted in state `approve`")
    );
    let shown = store.show(&run);
    assert_eq!(shown["status"], "interrupted");
    assert_eq!(shown["wait"], Value::Null);
    let trail = store.trail(&run);
    let last = trail.last().unwrap();
    assert_eq!(last.seq, 2);
    assert_eq!(&*last.from, "approve");
    assert_eq!(
        last.failure.as_ref().map(|f| f.kind.to_string()).as_deref(),
        Some("interrupted")
    );

    // Finished runs cannot be interrupted, or answered.
    let out = store.run(&["runs", "interrupt", &run]).exits(1);
    assert!(
        out.stderr.contains("a finished run cannot be interrupted"),
        "{}",
        out.stderr
    );
    store
        .run(&["runs", "resume", &run, "--input", APPROVE])
        .exits(1);
}

#[test]
fn interrupting_a_running_run_from_another_process_stops_it_and_its_program() {
    let store = Store::new();
    let pidfile = store.file("pid");
    let doc = store.document(
        "slow.json",
        &command_document(
            "slow",
            &format!("echo $$ > {}; exec sleep 300", pidfile.display()),
        ),
    );
    let mut child = store.spawn(&["run", &doc, "--run-id", "busy"]);
    let runner = KillOnDrop(child.id() as i32);
    wait_until(
        "the run is listed as running and its program started",
        || {
            let running = store
                .run(&["runs", "list", "--status", "running", "--json"])
                .json_lines();
            running.iter().any(|r| r["id"] == "busy") && pid_in(&pidfile).is_some()
        },
    );
    let program = KillOnDrop(pid_in(&pidfile).unwrap());
    assert!(alive(program.0));

    let out = store.run(&["runs", "interrupt", "busy"]).exits(0);
    assert_eq!(out.stdout.trim(), "run busy interrupted in state `work`");
    // The program sleeps for 300 s: the run and the program ending well within the
    // guard means the interrupt stopped them, not the program finishing.
    wait_until("the run has stopped", || {
        child.try_wait().ok().flatten().is_some()
    });
    let first = Out::from(child.wait_with_output().unwrap()).exits(1);
    assert!(first.stderr.contains("interrupted"), "{}", first.stderr);
    wait_until("the program is gone", || !alive(program.0));
    drop(runner);

    assert_eq!(store.show("busy")["status"], "interrupted");
    let trail = store.trail("busy");
    assert_eq!(
        trail
            .last()
            .and_then(|e| e.failure.as_ref())
            .map(|f| f.kind.to_string())
            .as_deref(),
        Some("interrupted")
    );
}

#[test]
fn resume_all_finishes_a_run_whose_process_was_killed() {
    let store = Store::new();
    let marker = store.file("first-attempt-pid");
    // The first attempt records its pid and hangs; the next one answers at once, with
    // the idempotency key it was given.
    let script = format!(
        r#"if [ ! -e {m} ]; then echo $$ > {m}; exec sleep 30; fi; printf '{{"id": ["work", "done"], "key": "%s"}}' "$CLAIJ_IDEMPOTENCY_KEY""#,
        m = marker.display()
    );
    let doc = store.document("crashy.json", &command_document("crashy", &script));
    let mut child = store.spawn(&["run", &doc, "--run-id", "crashed"]);
    let runner = KillOnDrop(child.id() as i32);
    wait_until("the first attempt started", || pid_in(&marker).is_some());
    // Its program is left behind by the SIGKILL (nothing can clean up after one).
    let _orphan = KillOnDrop(pid_in(&marker).unwrap());
    child.kill().unwrap();
    // Reaped: a zombie would still look alive to the dead-owner check.
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    drop(runner);

    let shown = store.run(&["runs", "show", "crashed"]).exits(0).stdout;
    assert!(shown.contains("status    running"), "{shown}");
    assert!(shown.contains("(process gone"), "{shown}");

    let out = store.run(&["runs", "resume", "--all"]).exits(0);
    assert_eq!(
        out.json_lines(),
        [json!({"run_id": "crashed", "status": "completed", "state": "done"})]
    );
    assert!(
        out.stderr
            .contains("resuming run crashed (running in `work`)"),
        "{}",
        out.stderr
    );
    // The attempt cut off is recorded as a program that may have run, with its key (an
    // entry that is not an attempt), then made again under the same key.
    let trail = store.trail("crashed");
    assert_eq!(trail.len(), 3, "{trail:#?}");
    let lost = trail[1].failure.as_deref().expect("the lost attempt");
    assert_eq!(lost.kind, claij_core::FailureKind::Interrupted);
    assert!(
        lost.message.contains("(key `crashed:1`)") && lost.message.contains("may have happened"),
        "{}",
        lost.message
    );
    assert_eq!(trail[2].to.as_deref(), Some("done"));
    assert_eq!(
        trail[2].event["key"], "crashed:1",
        "the attempt made again has the key of the one cut off"
    );

    let again = store.run(&["runs", "resume", "--all"]).exits(0);
    assert!(again.stdout.is_empty());
    assert!(
        again.stderr.contains("nothing to resume"),
        "{}",
        again.stderr
    );
}

#[test]
fn prune_deletes_only_the_finished_runs_it_is_asked_to() {
    let store = Store::new();
    store
        .run(&[
            "run",
            "examples/template-pipeline.yaml",
            "--run-id",
            "done",
            "--input",
            "@examples/inputs/order.json",
        ])
        .exits(0);
    store.suspended_approval("waiting");
    store.suspended_approval("stopped");
    store.run(&["runs", "interrupt", "stopped"]).exits(0);

    let out = store.run(&["runs", "prune", "--older-than", "1h"]).exits(0);
    assert_eq!(out.stdout.trim(), "pruned 0 run(s)");

    let out = store
        .run(&[
            "runs",
            "prune",
            "--older-than",
            "0s",
            "--status",
            "completed",
        ])
        .exits(0);
    assert_eq!(out.stdout.trim(), "pruned 1 run(s)");
    let mut left: Vec<String> = store
        .run(&["runs", "list", "--json"])
        .json_lines()
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r["id"].as_str().unwrap(),
                r["status"].as_str().unwrap()
            )
        })
        .collect();
    left.sort();
    assert_eq!(left, ["stopped interrupted", "waiting suspended"]);
    let out = store.run(&["runs", "trail", "done"]).exits(1);
    assert!(
        out.stderr.contains("`done` is not in the store"),
        "{}",
        out.stderr
    );

    let out = store
        .run(&[
            "runs",
            "prune",
            "--older-than",
            "0s",
            "--status",
            "suspended",
        ])
        .exits(2);
    assert!(out.stderr.contains("only finished runs"), "{}", out.stderr);
    assert_eq!(store.run(&["runs", "list", "--json"]).json_lines().len(), 2);
}

#[test]
fn defs_list_and_show_the_stored_definitions() {
    let store = Store::new();
    let run = store.suspended_approval("pinned");
    let hash = store.show(&run)["hash"].as_str().unwrap().to_owned();
    assert_eq!(hash.len(), 64);

    let table = store.run(&["defs", "list"]).exits(0).stdout;
    let row = table
        .lines()
        .find(|l| l.starts_with("human-approval"))
        .unwrap_or_else(|| panic!("{table}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[..3], ["human-approval", "1", &hash[..12]], "{row}");
    let listed = store.run(&["defs", "list", "--json"]).exits(0).json_lines();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["fsm"], "human-approval");
    assert_eq!(listed[0]["version"], 1);
    assert_eq!(listed[0]["hash"], hash.as_str());

    let document = store
        .run(&["defs", "show", "human-approval"])
        .exits(0)
        .json();
    assert_eq!(document["id"], "human-approval");
    assert_eq!(document["states"][1]["action"], "human");
    for args in [
        &["defs", "show", "human-approval", "--version", "1"][..],
        &["defs", "show", "human-approval", "--hash", &hash[..8]][..],
    ] {
        assert_eq!(store.run(args).exits(0).json(), document, "{args:?}");
    }
    let out = store
        .run(&["defs", "show", "human-approval", "--version", "2"])
        .exits(1);
    assert!(
        out.stderr
            .contains("no stored definition of `human-approval` v2"),
        "{}",
        out.stderr
    );
}

#[test]
fn defs_diff_names_what_changed_between_two_stored_versions() {
    let store = Store::new();
    store.suspended_approval("v1-run");
    // Version 2: the prompt reworded, a state and its transition added.
    let v1 = std::fs::read_to_string(repo().join("examples/human-approval.yaml")).unwrap();
    let v2 = v1.replacen("version: 1", "version: 2", 1).replacen(
        "prompt: Approve this deployment?",
        "prompt: Approve this deployment now?",
        1,
    );
    assert_ne!(v1, v2);
    let dir = tempfile::tempdir().unwrap();
    let v2_path = dir.path().join("human-approval-v2.yaml");
    std::fs::write(&v2_path, &v2).unwrap();
    store
        .run(&[
            "run",
            v2_path.to_str().unwrap(),
            "--run-id",
            "v2-run",
            "--input",
            REQUEST,
        ])
        .exits(3);

    let text = store
        .run(&["defs", "diff", "human-approval"])
        .exits(0)
        .stdout;
    assert!(text.starts_with("human-approval v1 ("), "{text}");
    assert!(text.contains(") → v2 ("), "{text}");
    assert!(
        text.contains("states:\n  ~ approve: config.prompt\n"),
        "{text}"
    );
    let json = store
        .run(&[
            "defs",
            "diff",
            "human-approval",
            "--from",
            "1",
            "--to",
            "2",
            "--json",
        ])
        .exits(0)
        .json();
    assert_eq!(json["from"]["version"], 1, "{json}");
    assert_eq!(json["to"]["version"], 2, "{json}");
    assert_eq!(
        json["states"],
        serde_json::json!([{"change": "changed", "name": "approve", "fields": ["config.prompt"]}]),
        "{json}"
    );
    assert_eq!(json["transitions"], serde_json::json!([]), "{json}");

    // The same version against itself: nothing differs.
    let same = store
        .run(&["defs", "diff", "human-approval", "--from", "2", "--to", "2"])
        .exits(0)
        .stdout;
    assert!(same.contains("no differences"), "{same}");
    // A version not stored: refused, listing the stored ones.
    let out = store
        .run(&["defs", "diff", "human-approval", "--from", "7"])
        .exits(1);
    assert!(
        out.stderr.contains("v7") && out.stderr.contains("stored: v1, v2"),
        "{}",
        out.stderr
    );
}

#[test]
fn the_store_can_be_named_after_the_subcommand_and_strict_durability_works() {
    let store = Store::new();
    let other = store.file("other.db").display().to_string();
    store
        .run(&[
            "run",
            "examples/human-approval.yaml",
            "--store",
            &other,
            "--durability",
            "strict",
            "--run-id",
            "elsewhere",
            "--input",
            REQUEST,
        ])
        .exits(3);
    let listed = store
        .run(&["runs", "list", "--json", "--store", &other])
        .exits(0)
        .json_lines();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["id"], "elsewhere");
    assert!(
        store
            .run(&["runs", "list", "--json"])
            .exits(0)
            .stdout
            .is_empty(),
        "CLAIJ_STORE's store holds nothing"
    );
    store
        .claij()
        .env("CLAIJ_DURABILITY", "strict")
        .args([
            "runs",
            "--store",
            &other,
            "resume",
            "elsewhere",
            "--input",
            APPROVE,
        ])
        .output()
        .map(Out::from)
        .unwrap()
        .exits(0);
    let out = Out::from(
        store
            .claij()
            .env("CLAIJ_DURABILITY", "sloppy")
            .args(["runs", "list"])
            .output()
            .unwrap(),
    )
    .exits(2);
    assert!(out.stderr.contains("sloppy"), "{}", out.stderr);
}

#[test]
fn runs_and_defs_need_a_store() {
    let store = Store::new();
    for args in [
        &["runs", "list", "--store", "memory"][..],
        &["runs", "--store", "memory", "show", "x"][..],
        &["defs", "list", "--store", "memory"][..],
    ] {
        let out = store.run(args).exits(2);
        assert!(
            out.stderr
                .contains("this command needs a store; `--store memory` keeps nothing"),
            "{args:?}: {}",
            out.stderr
        );
    }
    let out = Out::from(
        store
            .claij()
            .env("CLAIJ_STORE", "memory")
            .args(["runs", "list"])
            .output()
            .unwrap(),
    )
    .exits(2);
    assert!(out.stderr.contains("needs a store"), "{}", out.stderr);
    // `claij run` without a store cannot suspend: it says what to do.
    let out = Out::from(
        store
            .claij()
            .args(["run", "examples/human-approval.yaml", "--store", "memory"])
            .args(["--input", REQUEST])
            .output()
            .unwrap(),
    )
    .exits(1);
    assert!(out.stderr.contains("no terminal"), "{}", out.stderr);
}

/// A server that speaks just enough of the PostgreSQL protocol to ask for a password
/// in clear text and refuse it; returns its port and the password it was sent.
fn postgres_refusing_passwords() -> (u16, std::thread::JoinHandle<Option<String>>) {
    fn message(conn: &mut std::net::TcpStream) -> Option<Vec<u8>> {
        let mut len = [0u8; 4];
        conn.read_exact(&mut len).ok()?;
        let mut body = vec![0; (u32::from_be_bytes(len) as usize).checked_sub(4)?];
        conn.read_exact(&mut body).ok()?;
        Some(body)
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().ok()?;
        conn.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        // SSL or GSS encryption requests are declined; then comes the startup message.
        loop {
            let body = message(&mut conn)?;
            match body.get(..4) {
                Some([4, 210, 22, 47] | [4, 210, 22, 48]) => conn.write_all(b"N").ok()?,
                _ => break,
            }
        }
        conn.write_all(&[b'R', 0, 0, 0, 8, 0, 0, 0, 3]).ok()?; // cleartext password, please
        let mut tag = [0u8; 1];
        conn.read_exact(&mut tag).ok()?;
        let password = message(&mut conn)?;
        let mut fields = Vec::new();
        for (code, text) in [
            (b'S', "FATAL"),
            (b'V', "FATAL"),
            (b'C', "28P01"),
            (b'M', "password authentication failed for user \"ada\""),
        ] {
            fields.push(code);
            fields.extend_from_slice(text.as_bytes());
            fields.push(0);
        }
        fields.push(0);
        let mut error = vec![b'E'];
        error.extend_from_slice(&(fields.len() as u32 + 4).to_be_bytes());
        error.extend_from_slice(&fields);
        conn.write_all(&error).ok()?;
        Some(String::from_utf8_lossy(password.strip_suffix(&[0]).unwrap_or(&password)).into_owned())
    });
    (port, server)
}

#[test]
fn postgres_errors_never_show_the_password() {
    let store = Store::new();
    // A wrong password: the server refuses it.
    let (port, server) = postgres_refusing_passwords();
    let url = format!("postgres://ada:s3cret-pw@127.0.0.1:{port}/claij");
    let out = store.run(&["runs", "list", "--store", &url]).exits(2);
    assert_eq!(
        server.join().unwrap().as_deref(),
        Some("s3cret-pw"),
        "the password reached the server"
    );
    assert!(
        out.stderr.contains("password authentication failed")
            && out.stderr.contains(&format!("127.0.0.1:{port}")),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("s3cret"), "{}", out.stderr);

    // Nor does help, which shows where options come from in the environment.
    for args in [&["run", "--help"][..], &["runs", "list", "--help"][..]] {
        let out = Out::from(
            store
                .claij()
                .env("CLAIJ_STORE", &url)
                .args(args)
                .output()
                .unwrap(),
        )
        .exits(0);
        assert!(out.stdout.contains("CLAIJ_STORE"), "{}", out.stdout);
        assert!(!out.stdout.contains("s3cret"), "{args:?}: {}", out.stdout);
    }

    // A port nobody listens on, the password in the user part or in the query.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for url in [
        format!("postgres://ada:s3cret-pw@127.0.0.1:{closed}/claij"),
        format!("postgresql://ada@127.0.0.1:{closed}/claij?sslmode=disable&password=s3cret-pw"),
    ] {
        for args in [
            &["runs", "list", "--store", &url][..],
            &["defs", "list", "--store", &url][..],
            &[
                "run",
                "examples/human-approval.yaml",
                "--store",
                &url,
                "--input",
                REQUEST,
            ][..],
        ] {
            let out = store.run(args).exits(2);
            assert!(
                out.stderr.contains("cannot open the store")
                    && out.stderr.contains(&format!("127.0.0.1:{closed}")),
                "{args:?}: {}",
                out.stderr
            );
            assert!(!out.stderr.contains("s3cret"), "{args:?}: {}", out.stderr);
            assert!(out.stdout.is_empty());
        }
    }
}

#[test]
fn a_closed_stderr_or_stdout_stops_nothing() {
    let store = Store::new();
    // Progress cannot be written (`claij run … 2>&1 | head -1`): the run still completes.
    let mut child = store.spawn(&[
        "run",
        "examples/template-pipeline.yaml",
        "--run-id",
        "unwatched",
        "--input",
        "@examples/inputs/order.json",
    ]);
    drop(child.stderr.take());
    let out = Out::from(child.wait_with_output().unwrap()).exits(0);
    assert_eq!(out.json()["id"], json!(["invoice", "done"]));
    assert_eq!(store.show("unwatched")["status"], "completed");

    // A listing whose reader went away (`claij runs list | head -1`) ends quietly.
    for args in [
        &["runs", "list"][..],
        &["runs", "trail", "unwatched", "--json"][..],
        &["defs", "show", "template-pipeline"][..],
    ] {
        let mut child = store.spawn(args);
        drop(child.stdout.take());
        let out = Out::from(child.wait_with_output().unwrap()).exits(0);
        assert!(!out.stderr.contains("panicked"), "{args:?}: {}", out.stderr);
    }
}

/// A one-state document whose `transform` answers `{"id": ["echo", "done"], "n": 1}`:
/// no model, no program.
fn transform_document() -> Value {
    json!({
        "id": "echo",
        "states": [
            {"id": "echo", "action": "transform",
             "config": {"template": "{\"id\": [\"echo\", \"done\"], \"n\": 1}"}},
            {"id": "done", "action": "end"}
        ],
        "xitions": [
            {"id": ["start", "echo"]},
            {"id": ["echo", "done"]}
        ]
    })
}

/// A document whose first state (a program) runs for 0.4 s, longer than a budget of
/// `time=200ms`: the run stops for its budget before its second state, with no model.
fn slow_document() -> Value {
    json!({
        "id": "slow",
        "states": [
            {"id": "work", "action": "command",
             "config": {"argv": ["sh", "-c", "sleep 0.4; echo '{\"id\": [\"work\", \"more\"]}'"]}},
            {"id": "more", "action": "command",
             "config": {"argv": ["sh", "-c", "echo '{\"id\": [\"more\", \"done\"]}'"]}},
            {"id": "done", "action": "end"}
        ],
        "xitions": [
            {"id": ["start", "work"]},
            {"id": ["work", "more"]},
            {"id": ["more", "done"]}
        ]
    })
}

/// The budget suggested in a `… --budget SPEC` command of `text` (after `resume RUN`).
#[track_caller]
fn suggested_budget(text: &str, run: &str) -> String {
    let line = text
        .lines()
        .find(|l| l.contains(&format!("claij runs resume {run} ")) && l.contains("--budget "))
        .unwrap_or_else(|| panic!("no `claij runs resume {run} … --budget` in:\n{text}"));
    let (_, after) = line.split_once("--budget ").unwrap();
    after.split_whitespace().next().unwrap().to_owned()
}

#[test]
fn budget_specs_that_do_not_parse_are_usage_errors_naming_the_flag_and_the_problem() {
    let store = Store::new();
    let doc = store.document("echo.json", &transform_document());
    for (spec, problem) in [
        ("cost=abc", "cost: `abc` is not an amount"),
        ("money=3", "unknown budget `money`"),
        ("tokens=lots", "tokens: `lots` is not a count"),
        ("calls", "`calls` is not KEY=VALUE"),
        (",", "an empty budget"),
    ] {
        let out = store.run(&["run", &doc, "--budget", spec]).exits(2);
        assert!(
            out.stderr.contains("--budget") && out.stderr.contains(problem),
            "{spec}: {}",
            out.stderr
        );
    }
    // Nothing ran: no run was stored.
    assert!(
        store
            .run(&["runs", "list", "--json"])
            .exits(0)
            .json_lines()
            .is_empty()
    );
    let out = store
        .run(&["runs", "resume", "any", "--budget", "time=soon"])
        .exits(2);
    assert!(
        out.stderr.contains("--budget") && out.stderr.contains("time: `soon`"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_run_keeps_the_budget_it_was_given_and_shows_what_it_spent() {
    let store = Store::new();
    let doc = store.document("echo.json", &transform_document());
    let out = store
        .run(&[
            "run",
            &doc,
            "--run-id",
            "budgeted",
            "--budget",
            "cost=1,calls=5",
        ])
        .exits(0);
    assert_eq!(out.json()["n"], 1, "{out:#?}");
    let shown = store.show("budgeted");
    assert_eq!(shown["budget"], json!({"cost_usd": 1.0, "calls": 5}));
    for spend in [&shown["spend"], &shown["tree_spend"]] {
        assert_eq!(spend["input_tokens"], 0, "{shown:#}");
        assert_eq!(spend["output_tokens"], 0, "{shown:#}");
        assert_eq!(spend["calls"], 0, "{shown:#}");
        assert_eq!(spend["cost_usd"], 0.0, "{shown:#}");
    }
    let text = store.run(&["runs", "show", "budgeted"]).exits(0).stdout;
    for line in [
        "spent     0 tokens (0 in, 0 out), $0.000000, 0 call(s)",
        "budget    cost=1,calls=5",
    ] {
        assert!(text.contains(line), "no `{line}` in:\n{text}");
    }
    let listed = store.run(&["runs", "list", "--json"]).exits(0).json_lines();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["budget"], shown["budget"]);
    assert_eq!(listed[0]["spend"]["calls"], 0);
    let table = store.run(&["runs", "list"]).exits(0).stdout;
    assert!(
        table
            .lines()
            .next()
            .is_some_and(|h| h.contains("COST") && h.contains("TOKENS")),
        "{table}"
    );

    // A run without --budget has none.
    store.run(&["run", &doc, "--run-id", "free"]).exits(0);
    assert_eq!(store.show("free")["budget"], Value::Null);
}

#[test]
fn resuming_a_completed_run_with_a_budget_is_refused_and_changes_nothing() {
    let store = Store::new();
    let doc = store.document("echo.json", &transform_document());
    store
        .run(&[
            "run",
            &doc,
            "--run-id",
            "done",
            "--budget",
            "cost=1,calls=5",
        ])
        .exits(0);
    let before = store.show("done");
    let out = store
        .run(&["runs", "resume", "done", "--budget", "cost=5,tokens=10k"])
        .exits(1);
    assert!(
        out.stderr.contains("not resumable") && out.stderr.contains("completed"),
        "{}",
        out.stderr
    );
    let after = store.show("done");
    assert_eq!(after["budget"], json!({"cost_usd": 1.0, "calls": 5}));
    assert_eq!(after["status"], "completed");
    assert_eq!(after["steps"], before["steps"]);
    assert_eq!(after["updated_at"], before["updated_at"]);
}

#[test]
fn a_run_stopped_for_its_budget_says_how_to_raise_it_and_goes_on_once_raised() {
    let store = Store::new();
    let doc = store.document("slow.json", &slow_document());
    let out = store
        .run(&["run", &doc, "--run-id", "slow", "--budget", "time=200ms"])
        .exits(3);
    let wait = out.json();
    assert_eq!(wait["state"], "more");
    assert_eq!(wait["budget"]["limit"], "time", "{wait:#}");
    assert_eq!(wait["budget"]["run"], "slow");
    assert_eq!(wait["waiting_for"], json!([]), "it takes no input");
    assert!(
        out.stderr
            .contains("run slow stopped for a budget: the budget of run `slow`"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("claij runs resume slow --store sqlite:"),
        "{}",
        out.stderr
    );
    let suggested = suggested_budget(&out.stderr, "slow");
    assert!(suggested.starts_with("time="), "{suggested}");

    // `runs show`: why it stopped and the command to continue.
    let text = store.run(&["runs", "show", "slow"]).exits(0).stdout;
    assert!(
        text.contains("stopped for its budget: the budget of run `slow` (200ms running)"),
        "{text}"
    );
    assert!(text.contains("budget    time=200ms"), "{text}");
    assert_eq!(suggested_budget(&text, "slow"), suggested);
    let shown = store.show("slow");
    assert_eq!(shown["wait"]["budget"]["limit"], "time", "{shown:#}");
    assert!(
        shown["spend"]["time_ms"].as_u64().unwrap() >= 400,
        "{shown:#}"
    );

    // It takes no input.
    let out = store
        .run(&[
            "runs",
            "resume",
            "slow",
            "--input",
            r#"{"id": ["more", "done"]}"#,
        ])
        .exits(2);
    assert!(
        out.stderr.contains("stopped for a budget"),
        "{}",
        out.stderr
    );
    assert_eq!(store.show("slow")["steps"], shown["steps"]);

    // Without a larger budget it simply stops again.
    let out = store.run(&["runs", "resume", "slow"]).exits(3);
    assert_eq!(out.json()["budget"]["limit"], "time");
    assert_eq!(store.show("slow")["status"], "suspended");

    // With the suggested one it goes on; the other limits of its budget stay.
    store
        .run(&["runs", "resume", "slow", "--budget", "calls=7"])
        .exits(3);
    let out = store
        .run(&["runs", "resume", "slow", "--budget", &suggested])
        .exits(0);
    assert_eq!(out.json()["id"], json!(["more", "done"]));
    let done = store.show("slow");
    assert_eq!(done["status"], "completed");
    assert_eq!(done["budget"]["calls"], 7, "{done:#}");
    assert_eq!(
        done["budget"]["time_ms"],
        serde_json::to_value(
            humantime::parse_duration(suggested.trim_start_matches("time="))
                .unwrap()
                .as_millis() as u64
        )
        .unwrap()
    );
}

#[test]
fn a_child_stopped_for_its_parents_budget_is_continued_by_raising_the_parents() {
    let store = Store::new();
    store.document("slow.json", &slow_document());
    let parent = store.document(
        "parent.json",
        &json!({
            "id": "parent",
            "states": [
                {"id": "delegate", "action": "fsm",
                 "config": {"fsm": "slow.json", "success_to": "done"}},
                {"id": "done", "action": "end"}
            ],
            "xitions": [
                {"id": ["start", "delegate"]},
                {"id": ["delegate", "done"]}
            ]
        }),
    );
    let out = store
        .run(&["run", &parent, "--run-id", "top", "--budget", "time=200ms"])
        .exits(3);
    let child = out.json()["children"][0]
        .as_str()
        .unwrap_or_else(|| panic!("no child: {out:#?}"))
        .to_owned();
    assert!(
        out.stderr.contains(&format!(
            "child run {child} stopped for a budget: the budget of run `top`"
        )),
        "{}",
        out.stderr
    );
    let suggested = suggested_budget(&out.stderr, "top");
    let text = store.run(&["runs", "show", "top"]).exits(0).stdout;
    assert!(
        text.contains(&format!("stopped   child run {child} for a budget")),
        "{text}"
    );
    assert_eq!(suggested_budget(&text, "top"), suggested);

    // Raising the child's own budget would not help: refused, nothing changed.
    let out = store
        .run(&["runs", "resume", &child, "--budget", &suggested])
        .exits(2);
    assert!(
        out.stderr.contains("stopped for the budget of run `top`"),
        "{}",
        out.stderr
    );
    assert_eq!(store.show(&child)["budget"], Value::Null);

    let out = store
        .run(&["runs", "resume", "top", "--budget", &suggested])
        .exits(0);
    assert_eq!(out.json()["child"]["run"], json!(child), "{out:#?}");
    assert_eq!(store.show(&child)["status"], "completed");
    assert_eq!(store.show("top")["status"], "completed");
}
