//! Composition through the real binary: a fork SIGKILLed while its branches run, then
//! resumed on the same SQLite store (every branch continues where it was: a finished
//! branch is not run again, an interrupted one runs again under the same idempotency
//! key); a branch suspended for a person whose resume continues the parent; a chain of
//! two documents on the command line.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use claij_testkit::process::alive;
use serde_json::{Value, json};

fn claij(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_claij"));
    cmd.args(args)
        .current_dir(dir)
        .env_remove("CLAIJ_STORE")
        .env_remove("CLAIJ_DURABILITY")
        .stdin(Stdio::null());
    cmd
}

fn ok(out: Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn record(dir: &Path, store: &str, run: &str) -> Value {
    let out = ok(
        claij(dir, &["runs", "show", run, "--json", "--store", store])
            .output()
            .unwrap(),
    );
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn last_event(dir: &Path, store: &str, run: &str) -> Value {
    let out = ok(
        claij(dir, &["runs", "trail", run, "--json", "--store", store])
            .output()
            .unwrap(),
    );
    let last = out.lines().last().expect("a trail");
    serde_json::from_str::<Value>(last).unwrap()["event"].clone()
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(30), "never: {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

fn lines(path: PathBuf) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Branch `k`: logs its idempotency key and pid; every branch but `0` then waits for
/// the file `go`; it answers with its `k`.
const BRANCH: &str = r#"
id: branch
states:
  - id: work
    action: command
    config:
      argv:
        - sh
        - -c
        - |
          in=$(cat)
          k=$(printf %s "$in" | sed -E 's/.*"k": *"([a-z0-9]+)".*/\1/')
          echo "$CLAIJ_IDEMPOTENCY_KEY" >> "ran-$k"
          echo $$ > "pid-$k"
          if [ "$k" != 0 ]; then while [ ! -e go ]; do sleep 0.02; done; fi
          printf '{"id":["work","end"],"k":"%s"}' "$k"
  - {id: end, action: end}
xitions:
  - id: [start, work]
  - id: [work, end]
"#;

const FORK: &str = r#"
id: fanout
states:
  - id: fan
    action: fork
    config: {fsm: branch.yaml, over: /items, success_to: joined}
  - {id: joined, action: end}
xitions:
  - id: [start, fan]
  - id: [fan, joined]
"#;

#[test]
fn a_fork_killed_mid_flight_resumes_every_branch_where_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fs::write(dir.join("branch.yaml"), BRANCH).unwrap();
    fs::write(dir.join("fork.yaml"), FORK).unwrap();
    let store = dir.join("claij.db").display().to_string();
    let input = json!({"items": [{"k": "0"}, {"k": "1"}, {"k": "2"}]}).to_string();
    let mut run = claij(
        dir,
        &[
            "run",
            "fork.yaml",
            "--run-id",
            "crash",
            "--input",
            &input,
            "--quiet",
            "--store",
            &store,
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();

    // Branch 0 done and committed; branches 1 and 2 inside their command.
    wait_for("branch 0 committed", || {
        dir.join("claij.db").exists()
            && claij(
                dir,
                &["runs", "show", "crash.1.0", "--json", "--store", &store],
            )
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| serde_json::from_slice::<Value>(&o.stdout).ok())
            .is_some_and(|r| r["status"] == "completed")
    });
    wait_for("branches 1 and 2 running", || {
        dir.join("pid-1").exists() && dir.join("pid-2").exists()
    });
    run.kill().unwrap(); // SIGKILL
    run.wait().unwrap();
    // The machine's crash takes the branches' programs with it.
    for k in ["1", "2"] {
        let pid: i32 = fs::read_to_string(dir.join(format!("pid-{k}")))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        wait_for("the branch program gone", || !alive(pid));
    }
    for run in ["crash", "crash.1.1", "crash.1.2"] {
        assert_eq!(
            record(dir, &store, run)["status"],
            "running",
            "{run} cut off"
        );
    }
    fs::write(dir.join("go"), "").unwrap();

    // `claij runs resume` continues every crashed run; the branches through their parent.
    let out = ok(claij(
        dir,
        &["runs", "resume", "--all", "--quiet", "--store", &store],
    )
    .output()
    .unwrap());
    let resumed: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        resumed.len(),
        1,
        "only the parent is resumed directly: {out}"
    );
    assert_eq!(resumed[0]["run_id"], "crash");
    assert_eq!(resumed[0]["status"], "completed");

    let event = last_event(dir, &store, "crash");
    let ks: Vec<&str> = event["branches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["result"]["k"].as_str().unwrap())
        .collect();
    assert_eq!(ks, ["0", "1", "2"], "branch order: {event}");
    for k in 0..3 {
        let branch = record(dir, &store, &format!("crash.1.{k}"));
        assert_eq!(branch["status"], "completed");
        assert_eq!(branch["parent"], "crash");
    }
    assert_eq!(
        lines(dir.join("ran-0")),
        ["crash.1.0:1"],
        "a finished branch is not run again"
    );
    for k in ["1", "2"] {
        let ran = lines(dir.join(format!("ran-{k}")));
        assert_eq!(
            ran,
            [format!("crash.1.{k}:1"), format!("crash.1.{k}:1")],
            "an interrupted branch runs again under the same key"
        );
    }
}

#[test]
fn resuming_a_suspended_branch_continues_its_parent() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fs::write(
        dir.join("asker.yaml"),
        r#"
id: asker
states:
  - {id: ask, action: human, config: {prompt: "Your view?"}}
  - {id: end, action: end}
xitions:
  - id: [start, ask]
  - id: [ask, end]
    schema: {type: object, required: [view]}
"#,
    )
    .unwrap();
    fs::write(
        dir.join("panel.yaml"),
        r#"
id: panel
states:
  - id: fan
    action: fork
    config: {fsms: [asker.yaml, asker.yaml], success_to: joined}
  - {id: joined, action: end}
xitions:
  - id: [start, fan]
  - id: [fan, joined]
"#,
    )
    .unwrap();
    let store = dir.join("claij.db").display().to_string();
    let out = claij(
        dir,
        &[
            "run",
            "panel.yaml",
            "--run-id",
            "p",
            "--quiet",
            "--store",
            &store,
        ],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(3), "suspended");
    let parent = record(dir, &store, "p");
    assert_eq!(parent["wait"]["children"], json!(["p.1.0", "p.1.1"]));
    // The parent takes no input of its own.
    let refused = claij(
        dir,
        &[
            "runs",
            "resume",
            "p",
            "--input",
            r#"{"id": ["fan", "joined"]}"#,
            "--store",
            &store,
        ],
    )
    .output()
    .unwrap();
    assert!(!refused.status.success());
    for (k, code) in [("1", Some(0)), ("0", Some(0))] {
        let input = json!({"id": ["ask", "end"], "view": format!("v{k}")}).to_string();
        let out = claij(
            dir,
            &[
                "runs",
                "resume",
                &format!("p.1.{k}"),
                "--input",
                &input,
                "--store",
                &store,
            ],
        )
        .output()
        .unwrap();
        assert_eq!(out.status.code(), code);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let expected = if k == "1" {
            "parent run p continued: suspended"
        } else {
            "parent run p continued: completed"
        };
        assert!(stderr.contains(expected), "{stderr}");
    }
    let event = last_event(dir, &store, "p");
    assert_eq!(event["branches"][0]["result"]["view"], "v0");
    assert_eq!(event["branches"][1]["result"]["view"], "v1");
}

#[test]
fn a_chain_on_the_command_line_hands_on_result_and_trail() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fs::write(
        dir.join("a.yaml"),
        r#"
id: a
states:
  - id: draft
    action: transform
    config: {template: '{"id": ["draft", "end"], "text": "draft of {{ event.topic }}"}'}
  - {id: end, action: end}
xitions:
  - id: [start, draft]
  - id: [draft, end]
"#,
    )
    .unwrap();
    fs::write(
        dir.join("b.yaml"),
        r#"
id: b
states:
  - id: review
    action: transform
    config: {template: '{"id": ["review", "end"], "verdict": "ok: {{ event.text }}"}'}
  - {id: end, action: end}
xitions:
  - id: [start, review]
    schema: {type: object, required: [text]}
  - id: [review, end]
"#,
    )
    .unwrap();
    let trail = dir.join("trail.jsonl");
    let out = ok(claij(
        dir,
        &[
            "run",
            "a.yaml",
            "b.yaml",
            "--input",
            r#"{"topic": "okapis"}"#,
            "--quiet",
            "--store",
            "memory",
            "--trail",
            &trail.display().to_string(),
        ],
    )
    .output()
    .unwrap());
    let result: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(result["verdict"], "ok: draft of okapis");
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn the_composition_examples_validate_and_the_map_runs() {
    let repo = repo();
    ok(claij(
        &repo,
        &[
            "validate",
            "examples/society.yaml",
            "examples/society/member.yaml",
            "examples/map-documents.yaml",
            "examples/map/summarise.yaml",
        ],
    )
    .output()
    .unwrap());
    let out = ok(claij(
        &repo,
        &[
            "run",
            "examples/map-documents.yaml",
            "--input",
            "@examples/inputs/documents.json",
            "--quiet",
            "--store",
            "memory",
        ],
    )
    .output()
    .unwrap());
    let result: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(result["documents"], 4);
    let titles: Vec<&str> = result["described"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["title"].as_str().unwrap())
        .collect();
    assert_eq!(
        titles,
        ["On Okapis", "Sorting", "Tea", "Finite state machines"],
        "document order"
    );
    assert_eq!(result["total_words"], 73);
}

/// A branch of three steps: two programs (each logs its idempotency key and state, and
/// naps) and a template.
const STEPPER: &str = r#"
id: stepper
states:
  - id: one
    action: command
    config:
      argv: [sh, -c, 'in=$(cat); echo "$CLAIJ_IDEMPOTENCY_KEY $CLAIJ_STATE" >> steps.log; sleep 0.1; printf %s "$in" | sed -E "s/\"id\":\[[^]]*\]/\"id\":[\"one\",\"two\"]/"']
  - id: two
    action: command
    config:
      argv: [sh, -c, 'in=$(cat); echo "$CLAIJ_IDEMPOTENCY_KEY $CLAIJ_STATE" >> steps.log; sleep 0.1; printf %s "$in" | sed -E "s/\"id\":\[[^]]*\]/\"id\":[\"two\",\"three\"]/"']
  - id: three
    action: transform
    config: {template: '{"id": ["three", "end"], "k": {{ event.k | tojson }}, "done": true}'}
  - {id: end, action: end}
xitions:
  - id: [start, one]
  - id: [one, two]
  - id: [two, three]
  - id: [three, end]
"#;

const STEPPED_FORK: &str = r#"
id: stepped
states:
  - id: fan
    action: fork
    config: {fsm: stepper.yaml, over: /items, limit: 2, success_to: joined}
  - {id: joined, action: end}
xitions:
  - id: [start, fan]
  - id: [fan, joined]
"#;

#[test]
fn forks_killed_at_random_points_end_as_an_uninterrupted_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fs::write(dir.join("stepper.yaml"), STEPPER).unwrap();
    fs::write(dir.join("fork.yaml"), STEPPED_FORK).unwrap();
    let input = json!({"items": [{"k": "a"}, {"k": "b"}, {"k": "c"}, {"k": "d"}]}).to_string();
    let (mut rng, seed) = claij_testkit::Rng::from_env("CLAIJ_FORK_CRASH_SEED");
    eprintln!("seed {seed} (CLAIJ_FORK_CRASH_SEED={seed} replays it)");

    // The reference: the same run, never killed.
    let reference_store = dir.join("reference.db").display().to_string();
    let started = Instant::now();
    ok(claij(
        dir,
        &[
            "run",
            "fork.yaml",
            "--run-id",
            "k",
            "--input",
            &input,
            "--quiet",
            "--store",
            &reference_store,
        ],
    )
    .output()
    .unwrap());
    // Kills land all along a run: up to half the reference run's time.
    let longest = (started.elapsed().as_millis() as u64 / 2).max(100);
    let reference = last_event(dir, &reference_store, "k");
    fs::remove_file(dir.join("steps.log")).unwrap();

    // The run, killed at random points until it completes. When it completes before three
    // kills landed (on a loaded machine its timing is unlike the reference's), it starts
    // over in a fresh store, so that a pass always saw at least three kills.
    let mut attempt = 0;
    let (store, kills) = loop {
        attempt += 1;
        let store = dir
            .join(format!("claij-{attempt}.db"))
            .display()
            .to_string();
        let _ = fs::remove_file(dir.join("steps.log"));
        let mut kills = 0;
        for round in 0..40 {
            let exists = claij(dir, &["runs", "show", "k", "--json", "--store", &store])
                .output()
                .unwrap()
                .status
                .success();
            if exists && record(dir, &store, "k")["status"] == "completed" {
                break;
            }
            let mut child = if exists {
                claij(
                    dir,
                    &["runs", "resume", "--all", "--quiet", "--store", &store],
                )
            } else {
                claij(
                    dir,
                    &[
                        "run",
                        "fork.yaml",
                        "--run-id",
                        "k",
                        "--input",
                        &input,
                        "--quiet",
                        "--store",
                        &store,
                    ],
                )
            }
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
            // Let the later rounds finish: every run ends.
            if round < 12 {
                std::thread::sleep(Duration::from_millis(rng.between(20, longest)));
                if child.try_wait().unwrap().is_none() {
                    child.kill().unwrap();
                    kills += 1;
                }
            }
            child.wait().unwrap();
        }
        if kills >= 3 || attempt == 5 {
            break (store, kills);
        }
        eprintln!("{kills} kills landed before the run completed: starting over");
    };
    eprintln!("{kills} kills");
    assert!(kills >= 3, "too few kills landed ({kills}); seed {seed}");
    assert_eq!(
        record(dir, &store, "k")["status"],
        "completed",
        "seed {seed}"
    );
    assert_eq!(last_event(dir, &store, "k"), reference, "seed {seed}");

    // Every step of every branch ran under one key of its own branch, whatever the
    // kills: a re-run reused it. (A crash's entry — the calls that may have happened —
    // moves the keys of the steps after it, never the key of the step made again.)
    let ran = lines(dir.join("steps.log"));
    let mut keys: std::collections::BTreeMap<(String, String), std::collections::BTreeSet<String>> =
        Default::default();
    for line in &ran {
        let (key, step) = line
            .split_once(' ')
            .unwrap_or_else(|| panic!("a key and a step: {line}; seed {seed}"));
        let (run, seq) = key
            .rsplit_once(':')
            .unwrap_or_else(|| panic!("RUN:SEQ: {key}; seed {seed}"));
        assert!(seq.parse::<u64>().is_ok(), "{line}; seed {seed}");
        keys.entry((run.to_owned(), step.to_owned()))
            .or_default()
            .insert(key.to_owned());
    }
    let expected: Vec<(String, String)> = (0..4)
        .flat_map(|i| {
            [
                (format!("k.1.{i}"), "one".to_owned()),
                (format!("k.1.{i}"), "two".to_owned()),
            ]
        })
        .collect();
    assert_eq!(
        keys.keys().cloned().collect::<Vec<_>>(),
        expected,
        "every step of every branch ran, and nothing else; seed {seed}"
    );
    for ((run, step), used) in &keys {
        assert_eq!(
            used.len(),
            1,
            "{run} {step} ran under {used:?}; seed {seed}"
        );
    }
}
