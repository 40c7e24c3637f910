//! `claij worker` processes sharing one store's queue, killed and stopped under load.
//!
//! `workers_share_the_queue_under_kills` (PostgreSQL: 4 workers, [`PG_RUNS`] runs, at
//! least [`PG_MIN_KILLS`] kills; SQLite: 3 workers, [`SQLITE_RUNS`] runs, at least
//! [`SQLITE_MIN_KILLS`] kills) submits runs of [`MIX`] with `claij run --submit` — four
//! fifths before the workers start, so that they are busy from the start, the rest while
//! they work — and kills a worker with SIGKILL at random points (a killed worker is
//! started again at once, and the new one takes over the dead one's runs; the runs it
//! held when it died are counted from the store). The input decides each run's path,
//! about 20 trail entries of `transform` states in all: straight through; through a
//! `human` wait that the test answers from another process (`claij runs resume RUN
//! --input … --submit`) as soon as `claij runs list --status suspended` shows it; through
//! a `human` wait that nobody answers, which expires after 2 s and follows `on_expiry` (a
//! timer a worker acts on); through a `fork` of two or three branches (child runs). Some
//! runs are submitted twice under the same idempotency key. Once every run is final the
//! workers are stopped with SIGTERM (each must exit 0), and: the store holds exactly the
//! runs submitted and their branches, every one `completed` and held by no one; `claij
//! workers list` shows no worker and an empty queue; every trail (`claij runs trail RUN
//! --json`) equals that of an uninterrupted reference run of the same input (plain `claij
//! run` on another store, its waits answered with `claij runs resume RUN --input …` or,
//! for the expiring one, resumed once the wait expired) — the sequence numbers without gap
//! or duplicate, and per entry the states, event, attempt and failure, not times or
//! durations, run ids made neutral; each expiring wait expired exactly once, each answered
//! wait was answered once and took its answer once.
//!
//! `sigterm_drains_with_nothing_lost` (both backends): runs of [`SLOW`] (three `command`
//! naps of 1 s) are driven by one worker stopped with SIGTERM while they are under way.
//! With a short grace it exits 0, hands the runs back (none is left held), leaves `claij
//! workers list`, and a second worker finishes them with the reference trail; with a long
//! grace it finishes the runs it holds, claims nothing more meanwhile, and exits 0.
//!
//! Seeds are printed; `CLAIJ_WORKERS_SEED=N` replays one (the kill points, not the
//! machine's timing). When a check fails, the workers' logs (their stderr, run with
//! `RUST_LOG=info`; `claij worker` itself prints warnings and up) are kept: the failure
//! message says where, and quotes the lines that name the run.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use claij_testkit::{Backend, Rng, TestStore};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

/// Runs submitted on PostgreSQL. Measured on 2 cores, debug build, the machine shared
/// with another job's tests (load 3 to 8): 750 runs take 110 to 180 s beside this file's
/// other tests (the whole file: 115 s to 3 min), about a third of it submitting the backlog
/// (a `claij run --submit` process per run), a third the workers' part, a third reading
/// and comparing some 1200 trails (a `claij runs trail` process each). 1000 runs took
/// 212 s beside the other tests (submitted while the workers ran, the machine busier).
const PG_RUNS: usize = 750;
/// Worker processes on PostgreSQL.
const PG_WORKERS: usize = 4;
/// Kills that must land on PostgreSQL while runs are unfinished.
const PG_MIN_KILLS: usize = 50;
/// Runs submitted on SQLite (enough for the kills to find workers holding runs: 60 to
/// 100 s beside the other tests).
const SQLITE_RUNS: usize = 250;
/// Worker processes on SQLite.
const SQLITE_WORKERS: usize = 3;
/// Kills that must land on SQLite while runs are unfinished.
const SQLITE_MIN_KILLS: usize = 20;
/// How long the runs may take to end once the last one is submitted, at most (a hang
/// guard, not a timing: the runs take a few seconds).
const SETTLE: Duration = Duration::from_secs(150);

/// The workflow under test: the input's `kind` picks a path, its `len` the number of
/// `step`s. Every path ends with `check`, which fails validation twice and follows
/// `on_failure`, and `finish`, whose event names the run. 18 to 22 entries for a `len`
/// of 11 to 15 (the expiring path always steps 9 times). `fork`'s branches (two or
/// three: `len % 2 + 2`) run [`BRANCH`], found relative to the working directory when a
/// worker continues the run (the stored definition has no path).
const MIX: &str = r##"
id: worker-mix
version: 1
description: Paths decided by the input, for the workers test.
schemas:
  job:
    type: object
    required: [n, acc, len]
    properties:
      n: {type: integer, minimum: 0}
      acc: {type: integer, minimum: 0}
      len: {type: integer, minimum: 1}
states:
  - id: intake
    action: transform
    config:
      template: '{"id": ["intake", "route"], "kind": {{ event.kind | tojson }}, "len": {{ event.len }}, "acc": {{ event.len * 31 + 7 }}}'
  - id: route
    action: transform
    config:
      template: |
        {% if event.kind == "ask" %}{"id": ["route", "ask"], "n": 0, "acc": {{ event.acc }}, "len": {{ event.len }}}
        {% elif event.kind == "expire" %}{"id": ["route", "linger"], "n": 0, "acc": {{ event.acc }}, "len": {{ event.len }}}
        {% elif event.kind == "fork" %}{"id": ["route", "fan"], "len": {{ event.len }}, "items": [{% for i in range(event.len % 2 + 2) %}{"i": {{ i }}, "acc": {{ event.acc + i }}}{{ "," if not loop.last }}{% endfor %}]}
        {% else %}{"id": ["route", "step"], "n": 0, "acc": {{ event.acc }}, "len": {{ event.len }}}{% endif %}
  - id: ask
    action: human
    description: Answered by the test, from another process.
    config:
      prompt: Go on?
  - id: linger
    action: human
    description: Answered by nobody; expires.
    config:
      prompt: Nobody answers this one.
      expires: 2s
      on_expiry: expired
  - id: expired
    action: transform
    config:
      template: '{"id": ["expired", "step"], "n": 0, "acc": 3, "len": 9, "after": {{ event.failure.kind | tojson }}}'
  - id: fan
    action: fork
    config:
      fsm: branch.yaml
      over: /items
      trail: summary
      success_to: joined
      failure_to: broken
  - id: joined
    action: transform
    config:
      template: |
        {% set ns = namespace(acc=0) %}{% for b in event.branches %}{% set ns.acc = ns.acc + b.result.acc %}{% endfor %}
        {"id": ["joined", "step"], "n": 0, "acc": {{ ns.acc }}, "len": {{ event.branches | length + 8 }}}
  - id: step
    action: transform
    config:
      template: |
        {% if event.n + 1 >= event.len %}{"id": ["step", "check"], "n": {{ event.n + 1 }}, "acc": {{ (event.acc * 3 + event.n) % 100003 }}, "run": {{ run_id | tojson }}}
        {% else %}{"id": ["step", "step"], "n": {{ event.n + 1 }}, "acc": {{ (event.acc * 3 + event.n) % 100003 }}, "len": {{ event.len }}}{% endif %}
  - id: check
    action: transform
    config:
      max_attempts: 2
      on_failure: finish
      template: '{"id": ["check", "finish"], "verdict": "not a number"}'
  - id: finish
    action: transform
    config:
      template: '{"id": ["finish", "done"], "run": {{ run_id | tojson }}}'
  - {id: done, action: end}
  - {id: broken, action: end}
xitions:
  - id: [start, intake]
    schema:
      type: object
      required: [kind, len]
      properties:
        kind: {enum: [straight, ask, expire, fork]}
        len: {type: integer, minimum: 1, maximum: 50}
  - id: [intake, route]
  - id: [route, step]
    schema: {$ref: "#/$defs/job"}
  - id: [route, ask]
    schema: {$ref: "#/$defs/job"}
  - id: [route, linger]
    schema: {$ref: "#/$defs/job"}
  - id: [route, fan]
    schema: {type: object, required: [items]}
  - id: [ask, step]
    schema: {$ref: "#/$defs/job"}
  - id: [linger, step]
    schema: {$ref: "#/$defs/job"}
  - id: [linger, expired]
    omit: true
  - id: [expired, step]
    schema: {$ref: "#/$defs/job"}
  - id: [fan, joined]
    schema: {type: object, required: [branches]}
  - id: [fan, broken]
  - id: [joined, step]
    schema: {$ref: "#/$defs/job"}
  - id: [step, step]
    schema: {$ref: "#/$defs/job"}
  - id: [step, check]
    schema: {type: object, required: [n, acc, run]}
  - id: [check, finish]
    schema: {type: object, required: [verdict], properties: {verdict: {type: integer}}}
  - id: [finish, done]
    schema: {type: object, required: [run]}
"##;

/// A branch of [`MIX`]'s fork: two transforms.
const BRANCH: &str = r#"
id: worker-branch
version: 1
states:
  - id: work
    action: transform
    config:
      template: '{"id": ["work", "twice"], "i": {{ event.i }}, "acc": {{ event.acc * 2 + event.i }}}'
  - id: twice
    action: transform
    config:
      template: '{"id": ["twice", "done"], "acc": {{ event.acc * 2 + 1 }}}'
  - {id: done, action: end}
xitions:
  - id: [start, work]
    schema: {type: object, required: [i, acc]}
  - id: [work, twice]
    schema: {type: object, required: [i, acc]}
  - id: [twice, done]
    schema: {type: object, required: [acc]}
"#;

/// Three naps of a second each, by a program that logs the idempotency key it runs
/// under to `$CLAIJ_WORKERS_LOG_DIR/RUN.log` (the side effect) and puts it in its event.
const SLOW: &str = r##"
id: slow-naps
version: 1
states:
  - id: nap
    action: command
    config:
      argv:
        - sh
        - -c
        - |
          ev=$(cat)
          n=${ev#*\"n\":}; n=${n%%[!0-9]*}
          printf '%s\n' "$CLAIJ_IDEMPOTENCY_KEY" >> "$CLAIJ_WORKERS_LOG_DIR/$CLAIJ_RUN_ID.log"
          sleep 1
          n=$((n + 1))
          if [ "$n" -ge 3 ]; then to=done; else to=nap; fi
          printf '{"id": ["nap", "%s"], "n": %s, "key": "%s"}\n' "$to" "$n" "$CLAIJ_IDEMPOTENCY_KEY"
  - {id: done, action: end}
xitions:
  - id: [start, nap]
    schema: {type: object, required: [n], properties: {n: {const: 0}}}
  - id: [nap, nap]
    schema: {type: object, required: [n, key], properties: {n: {type: integer}}}
  - id: [nap, done]
    schema: {type: object, required: [n, key], properties: {n: {const: 3}}}
"##;

/// The input of every [`SLOW`] run.
const SLOW_INPUT: &str = r#"{"n": 0}"#;

/// The paths through [`MIX`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Kind {
    Straight,
    Ask,
    Expire,
    Fork,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::Straight, Kind::Ask, Kind::Expire, Kind::Fork];

    fn name(self) -> &'static str {
        match self {
            Kind::Straight => "straight",
            Kind::Ask => "ask",
            Kind::Expire => "expire",
            Kind::Fork => "fork",
        }
    }
}

/// One run's input.
fn input(kind: Kind, len: u64) -> String {
    json!({"kind": kind.name(), "len": len}).to_string()
}

/// The answer to an `ask` wait (the same for the run and its reference).
fn answer(len: u64) -> String {
    json!({"id": ["ask", "step"], "n": 0, "acc": len * 5, "len": len}).to_string()
}

/// A run the test submits.
#[derive(Debug, Clone)]
struct Planned {
    id: String,
    kind: Kind,
    len: u64,
    /// Submitted a second time under the same idempotency key.
    twice: bool,
}

/// A temporary directory holding the documents (the processes' working directory) and
/// the workers' logs; kept when the test fails.
struct Workspace {
    dir: tempfile::TempDir,
    logs: PathBuf,
}

impl Workspace {
    fn new() -> Workspace {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("mix.yaml"), MIX).unwrap();
        fs::write(dir.path().join("branch.yaml"), BRANCH).unwrap();
        fs::write(dir.path().join("slow.yaml"), SLOW).unwrap();
        let logs = dir.path().join("logs");
        fs::create_dir(&logs).unwrap();
        Workspace { dir, logs }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `claij ARGS --store STORE` in the workspace, its output captured.
    fn claij(&self, args: &[&str], store: &str) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_claij"));
        cmd.args(args)
            .args(["--store", store])
            .current_dir(self.path())
            .env("CLAIJ_WORKERS_LOG_DIR", &self.logs)
            .env("RUST_LOG", "info")
            .env_remove("CLAIJ_STORE")
            .env_remove("CLAIJ_DURABILITY")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    fn output(&self, args: &[&str], store: &str) -> Output {
        self.claij(args, store).output().unwrap()
    }

    /// `claij worker ARGS`, its stderr going to `logs/NAME.log`.
    fn worker(&self, store: &str, name: &str, args: &[&str]) -> Worker {
        let log = self.logs.join(format!("{name}.log"));
        let mut cmd = self.claij(&["worker"], store);
        cmd.args(args)
            .stdout(Stdio::null())
            .stderr(File::create(&log).unwrap());
        Worker {
            child: cmd.spawn().unwrap(),
            log,
            name: name.to_owned(),
        }
    }

    /// The lines of every worker log that name `run`, with the log's name.
    fn log_lines(&self, run: &str) -> String {
        let mut lines = String::new();
        let mut logs: Vec<PathBuf> = fs::read_dir(&self.logs)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .collect();
        logs.sort();
        for log in logs {
            let text = fs::read_to_string(&log).unwrap_or_default();
            let name = log.file_stem().unwrap().to_string_lossy().into_owned();
            for line in text.lines().filter(|l| l.contains(run)) {
                lines.push_str(&format!("    [{name}] {line}\n"));
            }
        }
        if lines.is_empty() {
            lines.push_str("    (no worker log line names it)\n");
        }
        lines
    }

    /// What the store says of `run`, and what the workers logged of it: for failure
    /// messages.
    fn evidence(&self, run: &str, store: &str) -> String {
        let show = self.output(&["runs", "show", run, "--json"], store);
        let trail = self.output(&["runs", "trail", run], store);
        format!(
            "  run {run}:\n  record: {}\n  trail:\n{}\n  worker logs:\n{}",
            String::from_utf8_lossy(&show.stdout).trim(),
            String::from_utf8_lossy(&trail.stdout),
            self.log_lines(run)
        )
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.dir.disable_cleanup(true);
            eprintln!(
                "the workers test failed: its documents and worker logs are kept in {}",
                self.path().display()
            );
        }
    }
}

/// A worker process.
struct Worker {
    child: Child,
    log: PathBuf,
    name: String,
}

impl Worker {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, reaped; whether it was still running (else how it had ended).
    fn kill(&mut self) -> Result<(), ExitStatus> {
        if let Some(status) = self.child.try_wait().unwrap() {
            return Err(status);
        }
        let _ = self.child.kill();
        self.child.wait().unwrap();
        Ok(())
    }

    fn terminate(&self) {
        kill(Pid::from_raw(self.pid() as i32), Signal::SIGTERM).unwrap();
    }

    /// Waits for it to exit, at most `within` (then kills it and says so).
    fn exit_within(&mut self, within: Duration) -> Result<ExitStatus, String> {
        let give_up = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Ok(status);
            }
            if Instant::now() >= give_up {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return Err(format!(
                    "worker {} did not exit within {within:?}; log:\n{}",
                    self.name,
                    self.log_text()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Stdout of a successful command, or a description of its failure.
fn stdout_of(what: &str, out: &Output) -> Result<String, String> {
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`{what}` failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        ))
    }
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// `claij runs list --json` (every run, or those of `status`), by id.
fn list_runs(ws: &Workspace, store: &str, status: Option<&str>) -> BTreeMap<String, Value> {
    let mut args = vec!["runs", "list", "--json", "--limit", "1000000"];
    if let Some(status) = status {
        args.extend(["--status", status]);
    }
    let out = ws.output(&args, store);
    let text = stdout_of("claij runs list", &out).unwrap();
    json_lines(&text)
        .into_iter()
        .map(|r| (r["id"].as_str().unwrap().to_owned(), r))
        .collect()
}

/// `claij runs trail RUN --json`.
fn stored_trail(ws: &Workspace, store: &str, run: &str) -> Result<Vec<Value>, String> {
    let out = ws.output(&["runs", "trail", run, "--json"], store);
    stdout_of(&format!("claij runs trail {run}"), &out).map(|t| json_lines(&t))
}

/// The trails of `runs`, read by a few processes at a time.
fn stored_trails(
    ws: &Workspace,
    store: &str,
    runs: &[String],
) -> BTreeMap<String, Result<Vec<Value>, String>> {
    let threads = 3;
    let chunk = runs.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = runs
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|run| (run.clone(), stored_trail(ws, store, run)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

/// What must be equal between a run's trail and its reference: everything but times and
/// durations, with `run` (and the ids derived from it: `RUN.SEQ.i` children, `RUN:SEQ`
/// keys) written `RUN`.
fn normalized(run: &str, trail: &[Value]) -> Vec<Value> {
    trail
        .iter()
        .map(|entry| {
            let failure = &entry["failure"];
            let projected = json!({
                "seq": entry["seq"],
                "fsm": entry["fsm"],
                "version": entry["version"],
                "from": entry["from"],
                "to": entry["to"],
                "event": entry["event"],
                "attempt": entry["attempt"],
                "model": entry["model"],
                "usage": entry["usage"],
                "failure": failure.is_object().then(|| json!({
                    "kind": failure["kind"],
                    "message": failure["message"],
                    "errors": failure["errors"],
                    "attempt": failure["attempt"],
                })),
            });
            let text = projected
                .to_string()
                .replace(&format!("\"{run}\""), "\"RUN\"")
                .replace(&format!("\"{run}."), "\"RUN.")
                .replace(&format!("\"{run}:"), "\"RUN:");
            serde_json::from_str(&text).unwrap()
        })
        .collect()
}

/// Whether `trail` of `run` equals `reference` (normalized): sequence numbers 0, 1, … with
/// no gap or duplicate, then entry by entry; what differs if not.
fn compare(run: &str, trail: &[Value], reference: &[Value]) -> Result<(), String> {
    let seqs: Vec<Option<u64>> = trail.iter().map(|e| e["seq"].as_u64()).collect();
    let expected: Vec<Option<u64>> = (0..trail.len() as u64).map(Some).collect();
    if seqs != expected {
        return Err(format!("gaps or duplicates: sequence numbers {seqs:?}"));
    }
    let got = normalized(run, trail);
    for (i, (g, w)) in got.iter().zip(reference).enumerate() {
        if g != w {
            return Err(format!(
                "entry {i} differs from the reference:\n    got  {g}\n    want {w}"
            ));
        }
    }
    if got.len() != reference.len() {
        return Err(format!(
            "{} entries, the reference has {}: {}",
            got.len(),
            reference.len(),
            if got.len() < reference.len() {
                format!("missing {}", json!(reference[got.len()..]))
            } else {
                format!("extra {}", json!(got[reference.len()..]))
            }
        ));
    }
    Ok(())
}

/// How many entries of `trail` go `from` → `to` (`to: None`: failures of `from`), and of
/// those how many are failures of `kind`.
fn count(trail: &[Value], from: &str, to: Option<&str>, kind: Option<&str>) -> usize {
    trail
        .iter()
        .filter(|e| e["from"] == from)
        .filter(|e| e["to"].as_str() == to)
        .filter(|e| kind.is_none_or(|k| e["failure"]["kind"] == k))
        .count()
}

/// The reference of one input: its trail and its children's (by the suffix that follows
/// the run id), normalized.
#[derive(Debug)]
struct Reference {
    trail: Vec<Value>,
    children: BTreeMap<String, Vec<Value>>,
}

/// Uninterrupted runs of every (kind, len) in `wanted`, on a store of their own:
/// `claij run` (exit 0, or 3 for the waits); a wait answered with `claij runs resume RUN
/// --input …`; an expiring wait resumed (`claij runs resume RUN`, no input) once it has
/// expired.
fn references(
    ws: &Workspace,
    backend: Backend,
    wanted: &BTreeSet<(Kind, u64)>,
) -> BTreeMap<(Kind, u64), Reference> {
    let store = TestStore::new(backend);
    let store = store.url();
    let id = |kind: Kind, len: u64| format!("ref-{}-{len}", kind.name());
    let mut last_expiring = None;
    for &(kind, len) in wanted {
        let run = id(kind, len);
        let out = ws.output(
            &[
                "run",
                "mix.yaml",
                "--run-id",
                &run,
                "--input",
                &input(kind, len),
                "--quiet",
            ],
            store,
        );
        let waits = matches!(kind, Kind::Ask | Kind::Expire);
        assert_eq!(
            out.status.code(),
            Some(if waits { 3 } else { 0 }),
            "reference run {run}: {out:?}"
        );
        match kind {
            Kind::Ask => {
                let out = ws.output(
                    &["runs", "resume", &run, "--input", &answer(len), "--quiet"],
                    store,
                );
                stdout_of(&format!("claij runs resume {run}"), &out).unwrap();
            }
            Kind::Expire => last_expiring = Some(Instant::now()),
            _ => {}
        }
    }
    if let Some(at) = last_expiring {
        // `expires: 2s` from the wait's creation; a little more for the clock's rounding.
        std::thread::sleep(
            (at + Duration::from_millis(2300)).saturating_duration_since(Instant::now()),
        );
        for &(kind, len) in wanted.iter().filter(|(k, _)| *k == Kind::Expire) {
            let run = id(kind, len);
            let out = ws.output(&["runs", "resume", &run, "--quiet"], store);
            stdout_of(&format!("claij runs resume {run}"), &out).unwrap();
        }
    }
    let records = list_runs(ws, store, None);
    wanted
        .iter()
        .map(|&(kind, len)| {
            let run = id(kind, len);
            let record = &records[&run];
            assert_eq!(record["status"], "completed", "reference {run}: {record}");
            let trail = stored_trail(ws, store, &run).unwrap();
            let children = records
                .values()
                .filter(|r| r["parent"] == run.as_str())
                .map(|r| {
                    let child = r["id"].as_str().unwrap();
                    assert_eq!(r["status"], "completed", "reference {child}: {r}");
                    let suffix = child.strip_prefix(&run).unwrap().to_owned();
                    let trail = stored_trail(ws, store, child).unwrap();
                    (suffix, normalized(child, &trail))
                })
                .collect::<BTreeMap<_, _>>();
            let expected_children = if kind == Kind::Fork {
                (len % 2 + 2) as usize
            } else {
                0
            };
            assert_eq!(
                children.len(),
                expected_children,
                "reference {run}: {children:#?}"
            );
            let reference = Reference {
                trail: normalized(&run, &trail),
                children,
            };
            ((kind, len), reference)
        })
        .collect()
}

/// Problems seen by the test's helper threads (submitters, the answerer).
#[derive(Default)]
struct Problems(Mutex<Vec<String>>);

impl Problems {
    fn push(&self, problem: String) {
        self.0.lock().unwrap().push(problem);
    }

    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// Submits `runs` one after the other: `claij run mix.yaml --submit --run-id ID
/// --idempotency-key key-ID` must print the id; a run planned `twice` is submitted again
/// under its key (another run id) and must print the first id.
fn submit(ws: &Workspace, store: &str, runs: &[Planned], done: &AtomicUsize, problems: &Problems) {
    for run in runs {
        let key = format!("key-{}", run.id);
        let mut ids = vec![run.id.clone()];
        if run.twice {
            ids.push(format!("{}-again", run.id));
        }
        for id in &ids {
            let out = ws.output(
                &[
                    "run",
                    "mix.yaml",
                    "--submit",
                    "--run-id",
                    id,
                    "--idempotency-key",
                    &key,
                    "--input",
                    &input(run.kind, run.len),
                    "--quiet",
                ],
                store,
            );
            match stdout_of(&format!("claij run --submit --run-id {id}"), &out) {
                Ok(printed) if printed.trim() == run.id => {}
                Ok(printed) => problems.push(format!(
                    "submitting {id} under key {key} printed `{}`, not {}",
                    printed.trim(),
                    run.id
                )),
                Err(problem) => problems.push(problem),
            }
        }
        done.fetch_add(1, Ordering::SeqCst);
    }
}

/// Until `stop`: the runs suspended in `ask` are answered (`claij runs resume RUN --input
/// … --submit`) as they appear, each once. Returns how many times each run was answered.
fn answer_waits(
    ws: &Workspace,
    store: &str,
    plan: &BTreeMap<String, Planned>,
    stop: &AtomicBool,
    problems: &Problems,
) -> BTreeMap<String, usize> {
    let mut answered: BTreeMap<String, usize> = BTreeMap::new();
    while !stop.load(Ordering::SeqCst) {
        for (id, record) in list_runs(ws, store, Some("suspended")) {
            if !record["parent"].is_null() {
                problems.push(format!("a branch suspended: {record}"));
                continue;
            }
            let Some(planned) = plan.get(&id) else {
                problems.push(format!("a run nobody submitted is suspended: {record}"));
                continue;
            };
            match (record["state"].as_str(), planned.kind) {
                (Some("ask"), Kind::Ask) => {}
                (Some("linger"), Kind::Expire) => continue,
                _ => {
                    problems.push(format!(
                        "run {id} ({:?}) suspended in the wrong place: {record}",
                        planned.kind
                    ));
                    continue;
                }
            }
            if answered.contains_key(&id) {
                // Answered but listed suspended again: the answer was lost (or the list
                // was read before the answer was recorded, which cannot be: the answer's
                // process ended before this listing began).
                problems.push(format!(
                    "run {id} waits in `ask` again after it was answered:\n{}",
                    ws.evidence(&id, store)
                ));
                *answered.get_mut(&id).unwrap() += 1;
                continue;
            }
            let out = ws.output(
                &[
                    "runs",
                    "resume",
                    &id,
                    "--input",
                    &answer(planned.len),
                    "--submit",
                    "--quiet",
                ],
                store,
            );
            *answered.entry(id.clone()).or_default() += 1;
            if let Err(problem) = stdout_of(&format!("claij runs resume {id} --submit"), &out) {
                problems.push(format!("{problem}\n{}", ws.evidence(&id, store)));
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    answered
}

/// Whether every submitted run (and every run in the store) is final.
fn all_final(ws: &Workspace, store: &str, runs: usize) -> bool {
    let records = list_runs(ws, store, None);
    let top = records.values().filter(|r| r["parent"].is_null()).count();
    top >= runs
        && records.values().all(|r| {
            matches!(
                r["status"].as_str(),
                Some("completed" | "failed" | "interrupted")
            )
        })
}

/// What one backend's test did.
#[derive(Debug, Default)]
struct Tally {
    kills: usize,
    /// Kills of a worker that held runs (by the store: running, its lease owner).
    kills_holding: usize,
    /// The runs those workers held.
    held_at_kills: usize,
    /// Kills that found the worker already gone (it exited by itself: a failure).
    exited_by_itself: Vec<String>,
    by_kind: BTreeMap<Kind, usize>,
    children: usize,
    twice: usize,
    answered: usize,
    expired: usize,
}

fn share_the_queue(
    backend: Backend,
    runs: usize,
    workers: usize,
    min_kills: usize,
    kill_delay_ms: (u64, u64),
    submitters: usize,
) {
    let began = Instant::now();
    let (mut rng, seed) = Rng::from_env("CLAIJ_WORKERS_SEED");
    eprintln!(
        "workers test on {backend}: seed {seed} (CLAIJ_WORKERS_SEED={seed} replays it): \
         {runs} runs, {workers} workers"
    );
    let ws = Workspace::new();

    // The plan: the first four runs take each path, the rest are drawn.
    let plan: Vec<Planned> = (0..runs)
        .map(|i| {
            let kind = match (i, rng.between(0, 99)) {
                (i, _) if i < 4 => Kind::ALL[i],
                (_, 0..=39) => Kind::Straight,
                (_, 40..=59) => Kind::Ask,
                (_, 60..=79) => Kind::Expire,
                _ => Kind::Fork,
            };
            Planned {
                id: format!("w-{i:05}"),
                kind,
                len: rng.between(11, 15),
                twice: rng.chance(5),
            }
        })
        .collect();
    let by_id: BTreeMap<String, Planned> = plan.iter().map(|p| (p.id.clone(), p.clone())).collect();
    let wanted: BTreeSet<(Kind, u64)> = plan.iter().map(|p| (p.kind, p.len)).collect();
    let references = references(&ws, backend, &wanted);
    eprintln!(
        "workers test on {backend}: {} reference runs in {:.1?}",
        references.len(),
        began.elapsed()
    );

    let test_store = TestStore::new(backend);
    let store = test_store.url();
    // The store's migrations, once, before the crowd.
    let out = ws.output(&["workers", "list", "--json"], store);
    let listed: Value =
        serde_json::from_str(&stdout_of("claij workers list", &out).unwrap()).unwrap();
    assert_eq!(listed["workers"], json!([]), "{listed}");

    let problems = Problems::default();
    let submitted = AtomicUsize::new(0);
    let submit_in_parallel = |runs: &[Planned]| {
        std::thread::scope(|s| {
            for part in runs.chunks(runs.len().div_ceil(submitters).max(1)) {
                let (ws, problems, submitted) = (&ws, &problems, &submitted);
                s.spawn(move || submit(ws, store, part, submitted, problems));
            }
        })
    };
    // A backlog, so that the workers are busy from the start and kills land mid-run (runs
    // of transforms take milliseconds: workers kept waiting for submissions are idle most
    // of the time, and a kill would find nothing to interrupt); the rest is submitted
    // while they work.
    let backlog = runs * 4 / 5;
    submit_in_parallel(&plan[..backlog]);
    let problems_now = problems.take();
    assert!(problems_now.is_empty(), "{}", problems_now.join("\n"));
    let backlog_submitted = began.elapsed();

    let worker_args = ["--lease", "3s"];
    let mut generation = 0;
    let mut spawn = |slot: usize| {
        generation += 1;
        ws.worker(
            store,
            &format!("worker-{slot}-{generation:03}"),
            &worker_args,
        )
    };
    let mut pool: Vec<Worker> = (0..workers).map(&mut spawn).collect();

    let stop = AtomicBool::new(false);
    let kills = AtomicUsize::new(0);
    let mut tally = Tally::default();
    let work_began = Instant::now();
    let mut submitted_at = None;
    let answered = std::thread::scope(|s| {
        s.spawn(|| {
            // The last few wait for the kills wanted, so that the runs cannot all be done
            // before they have landed however fast the machine.
            let last = runs - (runs - backlog).min(10);
            submit_in_parallel(&plan[backlog..last]);
            while kills.load(Ordering::SeqCst) < min_kills && !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50));
            }
            submit_in_parallel(&plan[last..]);
        });
        let answerer = s.spawn(|| answer_waits(&ws, store, &by_id, &stop, &problems));

        // Kill a worker at random points until every run is final.
        let failure = loop {
            std::thread::sleep(Duration::from_millis(
                rng.between(kill_delay_ms.0, kill_delay_ms.1),
            ));
            let problems = problems.take();
            if !problems.is_empty() {
                break Some(problems.join("\n"));
            }
            if !tally.exited_by_itself.is_empty() {
                break Some(tally.exited_by_itself.join("\n"));
            }
            if submitted.load(Ordering::SeqCst) == runs {
                let at = *submitted_at.get_or_insert_with(Instant::now);
                if all_final(&ws, store, runs) {
                    break None;
                }
                if at.elapsed() > SETTLE {
                    let unfinished: Vec<String> = list_runs(&ws, store, None)
                        .into_iter()
                        .filter(|(_, r)| {
                            !matches!(
                                r["status"].as_str(),
                                Some("completed" | "failed" | "interrupted")
                            )
                        })
                        .map(|(id, _)| id)
                        .collect();
                    let evidence: Vec<String> = unfinished
                        .iter()
                        .take(5)
                        .map(|id| ws.evidence(id, store))
                        .collect();
                    let out = ws.output(&["workers", "list", "--json"], store);
                    break Some(format!(
                        "{} run(s) still unfinished {SETTLE:?} after the last submission: {unfinished:?}\n\
                         workers list: {}\n{}",
                        unfinished.len(),
                        String::from_utf8_lossy(&out.stdout),
                        evidence.join("\n")
                    ));
                }
            }
            let slot = rng.between(0, workers as u64 - 1) as usize;
            match pool[slot].kill() {
                Ok(()) => {
                    tally.kills += 1;
                    kills.store(tally.kills, Ordering::SeqCst);
                    // What it held when it died (still held: it is restarted below).
                    let held = list_runs(&ws, store, Some("running"))
                        .values()
                        .filter(|r| held_by(r, &pool[slot]))
                        .count();
                    if held > 0 {
                        tally.kills_holding += 1;
                        tally.held_at_kills += held;
                    }
                }
                Err(status) => tally.exited_by_itself.push(format!(
                    "worker {} exited by itself ({status}); its log:\n{}",
                    pool[slot].name,
                    pool[slot].log_text()
                )),
            }
            pool[slot] = spawn(slot);
        };
        stop.store(true, Ordering::SeqCst);
        let answered = answerer.join().unwrap();
        if let Some(failure) = failure {
            panic!(
                "workers test on {backend} (seed {seed}), after {} kills: {failure}",
                tally.kills
            );
        }
        answered
    });
    let settled = work_began.elapsed();

    // Every worker stops on SIGTERM, at once (nothing is under way), exiting 0.
    for worker in &pool {
        worker.terminate();
    }
    for worker in &mut pool {
        let status = worker.exit_within(Duration::from_secs(40)).unwrap();
        assert!(
            status.success(),
            "worker {} ended with {status} after SIGTERM; its log:\n{}",
            worker.name,
            worker.log_text()
        );
    }
    let out = ws.output(&["workers", "list", "--json"], store);
    let listed: Value =
        serde_json::from_str(&stdout_of("claij workers list", &out).unwrap()).unwrap();
    assert_eq!(
        listed["workers"],
        json!([]),
        "stopped and dead workers are still listed: {listed}"
    );
    for what in [
        "queued",
        "held",
        "timers_due",
        "timers_pending",
        "scheduled",
    ] {
        assert_eq!(listed["queue"][what], 0, "{what}: {listed}");
    }

    // Exactly the runs submitted and their branches, each completed and held by no one.
    let records = list_runs(&ws, store, None);
    let mut expected: BTreeSet<String> = BTreeSet::new();
    for p in &plan {
        expected.insert(p.id.clone());
        for suffix in references[&(p.kind, p.len)].children.keys() {
            expected.insert(format!("{}{suffix}", p.id));
        }
    }
    let stored: BTreeSet<String> = records.keys().cloned().collect();
    let missing: Vec<&String> = expected.difference(&stored).collect();
    let extra: Vec<&String> = stored.difference(&expected).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "the store does not hold exactly the runs submitted and their branches: missing \
         {missing:?}, extra {extra:?}"
    );
    let mut failures: Vec<String> = Vec::new();
    for (id, record) in &records {
        if record["status"] != "completed" || !record["owner"].is_null() {
            failures.push(format!(
                "run {id} is {} (owner {})\n{}",
                record["status"],
                record["owner"],
                ws.evidence(id, store)
            ));
        }
    }

    // Each trail equals its reference's.
    let ids: Vec<String> = records.keys().cloned().collect();
    let checking = Instant::now();
    let trails = stored_trails(&ws, store, &ids);
    for p in &plan {
        let reference = &references[&(p.kind, p.len)];
        *tally.by_kind.entry(p.kind).or_default() += 1;
        tally.twice += usize::from(p.twice);
        let check = |run: &str, want: &[Value]| match &trails[run] {
            Ok(trail) => compare(run, trail, want).map(|()| trail.clone()),
            Err(problem) => Err(problem.clone()),
        };
        let trail = match check(&p.id, &reference.trail) {
            Ok(trail) => trail,
            Err(problem) => {
                failures.push(format!(
                    "run {} ({:?}, len {}) ends with another trail than the reference: {problem}\n{}",
                    p.id,
                    p.kind,
                    p.len,
                    ws.evidence(&p.id, store)
                ));
                continue;
            }
        };
        for (suffix, want) in &reference.children {
            let child = format!("{}{suffix}", p.id);
            tally.children += 1;
            if let Err(problem) = check(&child, want) {
                failures.push(format!(
                    "branch {child} ends with another trail than the reference: {problem}\n{}",
                    ws.evidence(&child, store)
                ));
            }
        }
        // Spelled out, though the comparison implies them: one expiry, one answer.
        let expiries = count(&trail, "linger", None, Some("timeout"));
        let expiry_routes = count(&trail, "linger", Some("expired"), None);
        let answers = count(&trail, "ask", Some("step"), None);
        let times_answered = answered.get(&p.id).copied().unwrap_or(0);
        let (want_expiries, want_answers) = match p.kind {
            Kind::Expire => (1, 0),
            Kind::Ask => (0, 1),
            _ => (0, 0),
        };
        if (expiries, expiry_routes, answers, times_answered)
            != (want_expiries, want_expiries, want_answers, want_answers)
        {
            failures.push(format!(
                "run {} ({:?}): {expiries} expiries, {expiry_routes} `on_expiry` routes, \
                 {answers} answers taken, answered {times_answered} time(s)\n{}",
                p.id,
                p.kind,
                ws.evidence(&p.id, store)
            ));
        }
        tally.expired += expiries;
        tally.answered += times_answered;
    }
    if !failures.is_empty() {
        let shown: Vec<&String> = failures.iter().take(8).collect();
        panic!(
            "workers test on {backend} (seed {seed}, {} kills): {} failure(s); the first:\n{}",
            tally.kills,
            failures.len(),
            shown
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }

    eprintln!(
        "workers test on {backend}: {} kills (every {}–{} ms) of {workers} workers, {} of \
         which holding runs ({} runs in all), over \
         {runs} runs {:?} ({} submitted twice, {} branches, {} waits answered, {} expired); \
         backlog of {backlog} submitted {:.1?} after the start, then with the workers running: \
         all submitted after {:.1?}, every run final after {:.1?}; trails read and compared in \
         {:.1?}; whole test {:.1?}",
        tally.kills,
        kill_delay_ms.0,
        kill_delay_ms.1,
        tally.kills_holding,
        tally.held_at_kills,
        tally.by_kind,
        tally.twice,
        tally.children,
        tally.answered,
        tally.expired,
        backlog_submitted,
        submitted_at.map(|at| at - work_began).unwrap_or_default(),
        settled,
        checking.elapsed(),
        began.elapsed(),
    );
    assert!(
        tally.kills >= min_kills,
        "only {} kills landed before the runs were done (at least {min_kills} wanted): {tally:?}",
        tally.kills
    );
    assert!(
        tally.kills_holding >= min_kills / 5,
        "only {} kills found the worker holding runs: the test interrupted too few runs to \
         test much: {tally:?}",
        tally.kills_holding
    );
}

#[test]
fn postgres_workers_share_the_queue_under_kills() {
    share_the_queue(
        Backend::Postgres,
        PG_RUNS,
        PG_WORKERS,
        PG_MIN_KILLS,
        (50, 400),
        2,
    );
}

#[test]
fn sqlite_workers_share_the_queue_under_kills() {
    share_the_queue(
        Backend::Sqlite,
        SQLITE_RUNS,
        SQLITE_WORKERS,
        SQLITE_MIN_KILLS,
        (30, 300),
        1,
    );
}

/// The worker's closing line: `worker stopped: C run(s) claimed, D driven, H handed back`
/// (and whatever follows), as (C, D, H).
fn stop_report(log: &str) -> (u64, u64, u64) {
    let line = log
        .lines()
        .find_map(|l| l.split_once("worker stopped: ").map(|(_, rest)| rest))
        .unwrap_or_else(|| panic!("no `worker stopped` line in the worker's log:\n{log}"));
    let number = |label: &str| -> u64 {
        line.split(", ")
            .find_map(|part| part.trim().strip_suffix(label))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no `N {label}` in `{line}`"))
    };
    (
        number("run(s) claimed"),
        number("driven"),
        number("handed back"),
    )
}

/// Polls the store until `done` holds of its runs, at most `within`.
fn wait_for(
    ws: &Workspace,
    store: &str,
    within: Duration,
    what: &str,
    done: impl Fn(&BTreeMap<String, Value>) -> bool,
) -> BTreeMap<String, Value> {
    let give_up = Instant::now() + within;
    loop {
        let records = list_runs(ws, store, None);
        if done(&records) {
            return records;
        }
        assert!(
            Instant::now() < give_up,
            "{what}: not so after {within:?}: {records:#?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `claij runs wait RUN --json` for each run: each must complete (exit 0) within a minute.
fn wait_completed(ws: &Workspace, store: &str, runs: &[String]) {
    for run in runs {
        let out = ws.output(&["runs", "wait", run, "--timeout", "60s", "--json"], store);
        let record: Value =
            serde_json::from_str(&stdout_of(&format!("claij runs wait {run}"), &out).unwrap())
                .unwrap();
        assert_eq!(record["status"], "completed", "{record}");
    }
}

/// Whether a run record is held by `worker` (its lease owner is `host:PID:…`).
fn held_by(record: &Value, worker: &Worker) -> bool {
    record["status"] == "running"
        && record["owner"]
            .as_str()
            .and_then(|o| o.split(':').nth(1))
            .is_some_and(|pid| pid == worker.pid().to_string())
}

/// Submits `n` runs of [`SLOW`] named `PREFIX-i`.
fn submit_slow(ws: &Workspace, store: &str, prefix: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let id = format!("{prefix}-{i}");
            let out = ws.output(
                &[
                    "run",
                    "slow.yaml",
                    "--submit",
                    "--run-id",
                    &id,
                    "--input",
                    SLOW_INPUT,
                    "--quiet",
                ],
                store,
            );
            assert_eq!(stdout_of("claij run --submit", &out).unwrap().trim(), id);
            id
        })
        .collect()
}

/// Checks the finished runs' trails against the reference, and their side effects: every
/// nap of the trail ran, under its own key, and nothing ran under a key the trail lacks.
/// Returns how many naps ran again under a key already used (the handed-back ones).
fn check_slow_runs(ws: &Workspace, store: &str, runs: &[String], reference: &[Value]) -> usize {
    let mut reruns = 0;
    for run in runs {
        let trail = stored_trail(ws, store, run).unwrap();
        if let Err(problem) = compare(run, &trail, reference) {
            panic!("run {run}: {problem}\n{}", ws.evidence(run, store));
        }
        let logged: Vec<String> = fs::read_to_string(ws.logs.join(format!("{run}.log")))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect();
        let distinct: BTreeSet<&String> = logged.iter().collect();
        let in_trail: BTreeSet<String> = trail
            .iter()
            .filter(|e| e["from"] == "nap")
            .map(|e| format!("{run}:{}", e["seq"]))
            .collect();
        assert_eq!(
            distinct,
            in_trail.iter().collect(),
            "run {run}: the keys the naps ran under are not those of the trail's naps"
        );
        reruns += logged.len() - distinct.len();
    }
    reruns
}

fn sigterm_drains(backend: Backend) {
    let began = Instant::now();
    let ws = Workspace::new();

    // The reference: one uninterrupted run.
    let reference_store = TestStore::new(backend);
    let out = ws.output(
        &[
            "run",
            "slow.yaml",
            "--run-id",
            "ref-slow",
            "--input",
            SLOW_INPUT,
            "--quiet",
        ],
        reference_store.url(),
    );
    stdout_of("claij run slow.yaml", &out).unwrap();
    let reference_trail = stored_trail(&ws, reference_store.url(), "ref-slow").unwrap();
    assert_eq!(reference_trail.len(), 4, "{reference_trail:#?}");
    let reference = normalized("ref-slow", &reference_trail);

    // A short grace: the runs under way are handed back, then finished by another worker.
    let short = TestStore::new(backend);
    let store = short.url();
    let runs = submit_slow(&ws, store, "short", 6);
    let mut first = ws.worker(
        store,
        "short-grace",
        &[
            "--concurrency",
            "64",
            "--grace",
            "300ms",
            "--lease",
            "3s",
            "--poll",
            "200ms",
        ],
    );
    wait_for(
        &ws,
        store,
        Duration::from_secs(60),
        "every run held by the worker",
        |r| runs.iter().all(|id| held_by(&r[id], &first)),
    );
    first.terminate();
    let status = first
        .exit_within(Duration::from_millis(300) + Duration::from_secs(10))
        .unwrap();
    let log = first.log_text();
    assert!(
        status.success(),
        "the worker ended with {status} after SIGTERM:\n{log}"
    );
    let (claimed, driven, handed_back) = stop_report(&log);
    let records = list_runs(&ws, store, None);
    let unfinished: Vec<&Value> = records
        .values()
        .filter(|r| r["status"] != "completed")
        .collect();
    for record in &unfinished {
        assert_eq!(record["status"], "running", "{record}");
        assert!(
            record["owner"].is_null(),
            "a run is still held after its worker stopped: {record}"
        );
    }
    assert_eq!(claimed, runs.len() as u64, "{log}");
    assert!(
        handed_back >= 1,
        "a grace of 300 ms let runs of 3 s finish:\n{log}"
    );
    assert_eq!(unfinished.len() as u64, handed_back, "{log}\n{records:#?}");
    let out = ws.output(&["workers", "list", "--json"], store);
    let listed: Value =
        serde_json::from_str(&stdout_of("claij workers list", &out).unwrap()).unwrap();
    assert_eq!(
        listed["workers"],
        json!([]),
        "the stopped worker is still listed: {listed}"
    );
    assert_eq!(listed["queue"]["queued"], handed_back, "{listed}");

    let mut second = ws.worker(
        store,
        "short-grace-next",
        &["--lease", "3s", "--poll", "200ms"],
    );
    wait_completed(&ws, store, &runs);
    second.terminate();
    let status = second.exit_within(Duration::from_secs(40)).unwrap();
    assert!(status.success(), "{status}: {}", second.log_text());
    let short_reruns = check_slow_runs(&ws, store, &runs, &reference);
    eprintln!(
        "sigterm on {backend}, grace 300ms: {claimed} claimed, {driven} driven, {handed_back} \
         handed back; {short_reruns} nap(s) ran again under their key"
    );

    // A long grace: the runs under way finish; nothing more is claimed meanwhile.
    let long = TestStore::new(backend);
    let store = long.url();
    let runs = submit_slow(&ws, store, "long", 8);
    let mut first = ws.worker(
        store,
        "long-grace",
        &[
            "--concurrency",
            "4",
            "--grace",
            "30s",
            "--lease",
            "3s",
            "--poll",
            "200ms",
        ],
    );
    let records = wait_for(
        &ws,
        store,
        Duration::from_secs(60),
        "four runs held by the worker",
        |r| r.values().filter(|record| held_by(record, &first)).count() == 4,
    );
    let held: BTreeSet<&String> = records
        .iter()
        .filter(|(_, record)| held_by(record, &first))
        .map(|(id, _)| id)
        .collect();
    first.terminate();
    let status = first.exit_within(Duration::from_secs(30 + 10)).unwrap();
    let log = first.log_text();
    assert!(
        status.success(),
        "the worker ended with {status} after SIGTERM:\n{log}"
    );
    assert_eq!(stop_report(&log), (4, 4, 0), "{log}");
    let records = list_runs(&ws, store, None);
    for (id, record) in &records {
        if held.contains(id) {
            assert_eq!(
                record["status"], "completed",
                "a run under way at SIGTERM: {record}"
            );
        } else {
            // Untouched since its submission: still queued, its first entry only.
            assert_eq!(record["status"], "running", "{record}");
            assert!(record["owner"].is_null(), "{record}");
            assert_eq!(
                record["steps"], 1,
                "a run was claimed after SIGTERM: {record}"
            );
        }
    }
    let out = ws.output(&["workers", "list", "--json"], store);
    let listed: Value =
        serde_json::from_str(&stdout_of("claij workers list", &out).unwrap()).unwrap();
    assert_eq!(
        listed["workers"],
        json!([]),
        "the stopped worker is still listed: {listed}"
    );
    assert_eq!(listed["queue"]["queued"], 4, "{listed}");
    let mut second = ws.worker(
        store,
        "long-grace-next",
        &["--lease", "3s", "--poll", "200ms"],
    );
    wait_completed(&ws, store, &runs);
    second.terminate();
    let status = second.exit_within(Duration::from_secs(40)).unwrap();
    assert!(status.success(), "{status}: {}", second.log_text());
    let long_reruns = check_slow_runs(&ws, store, &runs, &reference);
    assert_eq!(long_reruns, 0, "no nap was cut off, none should run twice");
    eprintln!(
        "sigterm on {backend}: both graces checked in {:.1?}",
        began.elapsed()
    );
}

#[test]
fn sqlite_sigterm_drains_with_nothing_lost() {
    sigterm_drains(Backend::Sqlite);
}

#[test]
fn postgres_sigterm_drains_with_nothing_lost() {
    sigterm_drains(Backend::Postgres);
}

/// The comparison itself: run ids are made neutral, times do not count, and an entry
/// lost, repeated or changed is caught.
#[test]
fn the_comparison_catches_lost_duplicated_and_changed_entries() {
    let entry = |run: &str, seq: u64, to: &str| {
        json!({"seq": seq, "fsm": "f", "version": 1, "from": "a", "to": to,
               "event": {"id": ["a", to], "run": run, "child": format!("{run}.{seq}.0"),
                         "key": format!("{run}:{seq}")},
               "attempt": 1, "at": format!("2026-01-01T00:00:0{seq}Z"), "duration_ms": seq})
    };
    let trail = |run: &str| vec![entry(run, 0, "b"), entry(run, 1, "c"), entry(run, 2, "d")];
    let reference = normalized("ref-x", &trail("ref-x"));
    let good = trail("w-1");
    assert_eq!(compare("w-1", &good, &reference), Ok(()));
    let mut retimed = good.clone();
    retimed[1]["at"] = json!("2030-01-01T00:00:00Z");
    retimed[1]["duration_ms"] = json!(999);
    assert_eq!(
        compare("w-1", &retimed, &reference),
        Ok(()),
        "times do not count"
    );

    let foreign = trail("w-2");
    let lost = vec![good[0].clone(), good[2].clone()];
    let duplicated = vec![good[0].clone(), good[1].clone(), good[1].clone()];
    let short = good[..2].to_vec();
    let mut longer = good.clone();
    longer.push(entry("w-1", 3, "e"));
    let mut changed = good.clone();
    changed[2]["attempt"] = json!(2);
    let mut failed = good.clone();
    failed[1]["failure"] = json!({"kind": "timeout", "message": "m", "attempt": 1});
    for (name, run, trail) in [
        ("another run's", "w-1", foreign),
        ("lost", "w-1", lost),
        ("duplicated", "w-1", duplicated),
        ("missing last", "w-1", short),
        ("extra", "w-1", longer),
        ("changed", "w-1", changed),
        ("failed", "w-1", failed),
    ] {
        assert!(
            compare(run, &trail, &reference).is_err(),
            "a {name} entry went unnoticed"
        );
    }
    let expiry = json!({"from": "linger", "to": null, "failure": {"kind": "timeout"}});
    let route = json!({"from": "linger", "to": "expired"});
    let twice = [expiry.clone(), route.clone(), expiry];
    assert_eq!(count(&twice, "linger", None, Some("timeout")), 2);
    assert_eq!(count(&twice, "linger", Some("expired"), None), 1);
}
