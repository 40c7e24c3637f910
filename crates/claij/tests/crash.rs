//! The crash test (DESIGN §3): runs of many transitions are killed with SIGKILL at random
//! points, resumed (and killed again) until they complete, and each final trail must
//! equal that of an uninterrupted run — nothing lost, nothing duplicated.
//!
//! It drives the real binary: `claij run DOC --run-id R --store B`, killed after a random
//! delay of 0–150 ms (the whole run takes about 200 ms in a debug build, so kills land
//! during start-up and migrations, before the run exists, inside actions and inside
//! commits); then `claij runs resume R --store B`, killed again, and so on. A kill that
//! lands before the run was created leaves nothing to resume: the run is started again
//! with the same id. After every kill the stored trail must be a prefix of the reference
//! trail (what is committed is never wrong, only short). At the end the trail must equal
//! the reference (sequence, states, event, attempt, failure; not times or durations), and
//! the `command` state's side-effect log must show that every re-run of an interrupted
//! action reused its idempotency key (`RUN:SEQ`), and that no action ran under a key the
//! trail does not hold. A program in flight when its process was killed leaves an
//! `interrupted` entry saying it may have run, with its key: such entries are not
//! attempts (left out of the comparison), and each must name the key the attempt made
//! again runs under.
//!
//! The same body runs on SQLite and on PostgreSQL (the test kit's server), 30 kills each
//! at least. The seed is printed; `CLAIJ_CRASH_SEED=N` replays one.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use claij_testkit::{Backend, Rng, TestStore};
use serde_json::{Value, json};

/// Kills that must land (on a live process) on each backend.
const KILLS_PER_BACKEND: usize = 30;
/// At least this many runs on each backend, however early the kills are met.
const MIN_RUNS: usize = 3;
/// At most this many runs on each backend (a bound on the test's time).
const MAX_RUNS: usize = 40;
/// Kills per run after which the run is let finish (so every run ends).
const MAX_KILLS_PER_RUN: usize = 12;
/// Kill delays are drawn from 0..=this many milliseconds — or up to three quarters of
/// the reference run's time, if that is longer (a loaded machine), so that kills still
/// land all along a run.
const MAX_DELAY_MS: u64 = 150;

/// A deterministic loop of 16 rounds of `double` (transform, reading the context) →
/// `square` (transform) → `tick` (command): 49 transitions and 7 failed attempts
/// (validation, unknown transition, and a program exiting non-zero twice), 56 trail
/// entries. `tick` logs its
/// idempotency key to `$CLAIJ_CRASH_LOG_DIR/RUN.log` (the side effect) and puts it in its
/// event, so the trail itself shows which key each attempt ran under.
const DOCUMENT: &str = r##"
id: crash-loop
description: A deterministic loop for the crash test.
schemas:
  tally:
    type: object
    required: [n, acc]
    properties:
      n: {type: integer, minimum: 0}
      acc: {type: integer, minimum: 0}
states:
  - id: double
    action: transform
    config:
      template: '{"id": ["double", "square"], "n": {{ event.n }}, "acc": {{ (event.acc * 2 + event.n + context.salt) % 1000003 }}}'
  - id: square
    action: transform
    config:
      template: '{"id": ["square", "tick"], "n": {{ event.n }}, "acc": {{ (event.acc * event.acc + 7) % 1000003 }}}'
  - id: tick
    action: command
    config:
      max_attempts: 3
      argv:
        - sh
        - -c
        - |
          ev=$(cat)
          n=${ev#*\"n\":}; n=${n%%[!0-9]*}
          acc=${ev#*\"acc\":}; acc=${acc%%[!0-9]*}
          printf '%s\n' "$CLAIJ_IDEMPOTENCY_KEY" >> "$CLAIJ_CRASH_LOG_DIR/$CLAIJ_RUN_ID.log"
          n=$((n + 1))
          if [ "$CLAIJ_ATTEMPT" = 1 ] && [ $((n % 5)) = 3 ]; then
            printf '{"id": ["tick", "double"], "n": "%s", "acc": %s}\n' "$n" "$acc"; exit 0
          fi
          if [ "$CLAIJ_ATTEMPT" = 1 ] && [ $((n % 7)) = 4 ]; then
            printf '{"id": ["tick", "elsewhere"], "n": %s}\n' "$n"; exit 0
          fi
          if [ "$CLAIJ_ATTEMPT" -lt 3 ] && [ $((n % 11)) = 6 ]; then
            echo "deliberate failure on attempt $CLAIJ_ATTEMPT" >&2; exit 3
          fi
          if [ "$n" -ge 16 ]; then to=done; else to=double; fi
          printf '{"id": ["tick", "%s"], "n": %s, "acc": %s, "key": "%s"}\n' "$to" "$n" "$((acc % 1000))" "$CLAIJ_IDEMPOTENCY_KEY"
  - {id: done, action: end}
xitions:
  - id: [start, double]
    schema: {$ref: "#/$defs/tally"}
  - id: [double, square]
    schema: {$ref: "#/$defs/tally"}
  - id: [square, tick]
    schema: {$ref: "#/$defs/tally"}
  - id: [tick, double]
    schema: {$ref: "#/$defs/tally"}
  - id: [tick, done]
    schema: {type: object, required: [n, key], properties: {n: {const: 16}, key: {type: string}}}
"##;

const INPUT: &str = r#"{"n": 0, "acc": 1}"#;

/// The run's initial context: `double` reads it, so a resume that lost it would show.
const CONTEXT: &str = r#"{"salt": 5}"#;

/// Entries of one uninterrupted run of [`DOCUMENT`].
const ENTRIES: usize = 56;

/// The files of one backend's crash test: the document, the side-effect logs, and the
/// captured output of the last process.
struct Workspace {
    _dir: tempfile::TempDir,
    document: PathBuf,
    logs: PathBuf,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Workspace {
    fn new() -> Workspace {
        let dir = tempfile::tempdir().unwrap();
        let document = dir.path().join("crash-loop.yaml");
        fs::write(&document, DOCUMENT).unwrap();
        let logs = dir.path().join("logs");
        fs::create_dir(&logs).unwrap();
        Workspace {
            document,
            logs,
            stdout: dir.path().join("stdout"),
            stderr: dir.path().join("stderr"),
            _dir: dir,
        }
    }

    /// `claij ARGS --store STORE`, with the log directory in its environment and its
    /// output going to files (read after it ends, however it ends).
    fn claij(&self, args: &[&str], store: &str) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_claij"));
        cmd.args(args)
            .args(["--store", store])
            .env("CLAIJ_CRASH_LOG_DIR", &self.logs)
            .env_remove("CLAIJ_STORE")
            .env_remove("CLAIJ_DURABILITY")
            .stdin(Stdio::null())
            .stdout(File::create(&self.stdout).unwrap())
            .stderr(File::create(&self.stderr).unwrap());
        cmd
    }

    /// `claij run DOC --run-id RUN`.
    fn start(&self, run: &str, store: &str) -> Command {
        let document = self.document.display().to_string();
        let args = [
            "run",
            &document,
            "--run-id",
            run,
            "--input",
            INPUT,
            "--context",
            CONTEXT,
            "--quiet",
        ];
        self.claij(&args, store)
    }

    /// `claij runs resume RUN`.
    fn resume(&self, run: &str, store: &str) -> Command {
        self.claij(&["runs", "resume", run, "--quiet"], store)
    }

    fn output(&self) -> (String, String) {
        (
            fs::read_to_string(&self.stdout).unwrap_or_default(),
            fs::read_to_string(&self.stderr).unwrap_or_default(),
        )
    }

    /// The keys the `command` state ran under for `run`, in the order it ran.
    fn side_effects(&self, run: &str) -> Vec<String> {
        fs::read_to_string(self.logs.join(format!("{run}.log")))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// A run's stored trail (`claij runs trail RUN --json`), or `None` when the store does not
/// know the run.
fn stored_trail(ws: &Workspace, run: &str, store: &str) -> Option<Vec<Value>> {
    let status = ws
        .claij(&["runs", "trail", run, "--json"], store)
        .status()
        .unwrap();
    let (stdout, stderr) = ws.output();
    if !status.success() {
        assert!(
            stderr.contains("is not in the store"),
            "`claij runs trail {run}` failed ({status}): {stderr}"
        );
        return None;
    }
    Some(
        stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect(),
    )
}

/// Whether `entry` records side effects a killed process had in flight (the `command`
/// state's program, noted before it started): an `interrupted` pause, not an attempt.
fn is_lost(entry: &Value) -> bool {
    entry["failure"]["kind"] == "interrupted"
        && entry["failure"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("may have happened"))
}

/// The attempts of `trail` (lost-call entries left out), each with the sequence number
/// its idempotency key was made of: its own, less the lost-call entries just before it
/// (the attempt made again after a crash has the key it had). A lost-call entry must
/// name the key of the attempt that follows it.
fn attempts<'a>(run: &str, trail: &'a [Value]) -> Result<Vec<(u64, &'a Value)>, String> {
    let mut kept = Vec::new();
    let mut lost: Vec<&Value> = Vec::new();
    for entry in trail {
        let seq = entry["seq"]
            .as_u64()
            .ok_or_else(|| format!("an entry of run {run} has no seq: {entry}"))?;
        if is_lost(entry) {
            lost.push(entry);
            continue;
        }
        let key_seq = seq - lost.len() as u64;
        for l in lost.drain(..) {
            let named = format!("(key `{run}:{key_seq}`)");
            if !l["failure"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(&named))
            {
                return Err(format!(
                    "entry {} of run {run} does not name the key {named} of the attempt made again: {l}",
                    l["seq"]
                ));
            }
        }
        kept.push((key_seq, entry));
    }
    Ok(kept)
}

/// What must be equal between an interrupted run's trail and the reference: everything
/// but times and durations, with the run id in the idempotency key made neutral once it
/// is checked to be the attempt's own `RUN:SEQ`; `at` is the attempt's place among the
/// attempts (lost-call entries left out), `key_seq` what its key was made of.
fn project(run: &str, at: usize, key_seq: u64, entry: &Value) -> Result<Value, String> {
    let seq = at as u64;
    let mut event = entry["event"].clone();
    if let Some(key) = event.get_mut("key") {
        if key.as_str() != Some(format!("{run}:{key_seq}").as_str()) {
            return Err(format!(
                "entry {seq} of run {run} carries the key of another attempt: {entry}"
            ));
        }
        *key = json!(format!("RUN:{seq}"));
    }
    let failure = &entry["failure"];
    Ok(json!({
        "seq": seq,
        "fsm": entry["fsm"],
        "version": entry["version"],
        "from": entry["from"],
        "to": entry["to"],
        "event": event,
        "attempt": entry["attempt"],
        "model": entry["model"],
        "usage": entry["usage"],
        "failure": failure.is_object().then(|| json!({
            "kind": failure["kind"],
            "message": failure["message"],
            "errors": failure["errors"],
            "attempt": failure["attempt"],
        })),
    }))
}

fn projected(run: &str, trail: &[Value]) -> Result<Vec<Value>, String> {
    attempts(run, trail)?
        .into_iter()
        .enumerate()
        .map(|(at, (key_seq, e))| project(run, at, key_seq, e))
        .collect()
}

/// How many attempts `trail` holds (lost-call entries left out).
fn attempt_count(trail: &[Value]) -> usize {
    trail.iter().filter(|e| !is_lost(e)).count()
}

/// Whether the attempts of `trail` are `reference[..n]`, entry by entry, with no gap or
/// duplicate in its sequence numbers; what differs if not. Entries of side effects a
/// killed process had in flight are not attempts: they must name the key of the attempt
/// made again.
fn check_prefix(run: &str, trail: &[Value], reference: &[Value]) -> Result<(), String> {
    let seqs: Vec<Option<u64>> = trail.iter().map(|e| e["seq"].as_u64()).collect();
    let expected: Vec<Option<u64>> = (0..trail.len() as u64).map(Some).collect();
    if seqs != expected {
        return Err(format!("gaps or duplicates: sequence numbers {seqs:?}"));
    }
    let got = projected(run, trail)?;
    if got.len() > reference.len() {
        return Err(format!(
            "{} attempts, the uninterrupted run has {}",
            got.len(),
            reference.len()
        ));
    }
    for (got, want) in got.iter().zip(reference) {
        if got != want {
            return Err(format!(
                "entry differs from the reference:\n  got  {got}\n  want {want}"
            ));
        }
    }
    Ok(())
}

/// The key seqs of the attempts of the `command` state (transitions and failures alike).
fn command_seqs(run: &str, trail: &[Value]) -> BTreeSet<u64> {
    attempts(run, trail)
        .unwrap()
        .into_iter()
        .filter(|(_, e)| e["from"] == "tick")
        .map(|(key_seq, _)| key_seq)
        .collect()
}

/// Checks the side-effect log of `run` against its final trail: every attempt of the
/// `command` state ran, under its own key; nothing ran under a key the trail lacks.
/// Returns how many times an action ran again under a key it had already used.
fn check_side_effects(ws: &Workspace, run: &str, trail: &[Value]) -> usize {
    let keys = ws.side_effects(run);
    let mut counts: BTreeMap<u64, usize> = BTreeMap::new();
    for key in &keys {
        let seq = key
            .strip_prefix(run)
            .and_then(|k| k.strip_prefix(':'))
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("run {run}: a side effect under a foreign key `{key}`"));
        *counts.entry(seq).or_default() += 1;
    }
    let ran: BTreeSet<u64> = counts.keys().copied().collect();
    assert_eq!(
        ran,
        command_seqs(run, trail),
        "run {run}: the keys the command ran under are not those of its attempts in the trail"
    );
    counts.values().map(|n| n - 1).sum()
}

/// How one process ended.
enum Ended {
    /// It finished by itself with this status.
    Exited(ExitStatus),
    /// SIGKILL took it.
    Killed,
}

/// Starts `cmd`, kills it after `delay` unless it ended first, and reaps it.
fn run_and_kill(mut cmd: Command, delay: Duration) -> Ended {
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + delay;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Ended::Exited(status);
        }
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(2)));
    }
    // `Child::kill` is SIGKILL. If the process exited meanwhile, its status says so.
    let _ = child.kill();
    let status = child.wait().unwrap();
    match status.signal() {
        Some(9) => Ended::Killed,
        _ => Ended::Exited(status),
    }
}

/// What one backend's crash test did.
#[derive(Debug, Default)]
struct Tally {
    runs: usize,
    kills: usize,
    /// Kills that left no run to resume (start-up, migrations, before `create_run`).
    before_creation: usize,
    /// Kills by how many entries were committed when they landed.
    by_committed: BTreeMap<usize, usize>,
    /// Processes that ran a run to its end (after the last kill of each run).
    finished: usize,
    /// Actions that ran again under a key they had already used.
    reruns: usize,
    /// Entries of programs in flight when a process was killed (they may have run).
    lost: usize,
}

fn crash_test(backend: Backend) {
    let began = Instant::now();
    let (mut rng, seed) = Rng::from_env("CLAIJ_CRASH_SEED");
    eprintln!("crash test on {backend}: seed {seed} (CLAIJ_CRASH_SEED={seed} replays it)");
    let ws = Workspace::new();

    // The reference: one uninterrupted run.
    let a = TestStore::new(backend);
    let started = Instant::now();
    let status = ws.start("reference", a.url()).status().unwrap();
    let max_delay = MAX_DELAY_MS.max(started.elapsed().as_millis() as u64 * 3 / 4);
    let (stdout, stderr) = ws.output();
    assert!(status.success(), "the reference run failed: {stderr}");
    assert!(stdout.contains(r#""reference:55""#), "{stdout}");
    let reference_trail = stored_trail(&ws, "reference", a.url()).unwrap();
    assert_eq!(reference_trail.len(), ENTRIES, "{reference_trail:#?}");
    let reference = projected("reference", &reference_trail).unwrap();
    let kinds: BTreeSet<&str> = reference_trail
        .iter()
        .filter_map(|e| e["failure"]["kind"].as_str())
        .collect();
    assert_eq!(
        kinds,
        BTreeSet::from(["action", "unknown-transition", "validation"])
    );
    assert_eq!(
        check_side_effects(&ws, "reference", &reference_trail),
        0,
        "an uninterrupted run runs each action once"
    );

    // Runs killed at random points on store B, resumed until they complete.
    let b = TestStore::new(backend);
    let store = b.url();
    let mut tally = Tally::default();
    while tally.runs < MIN_RUNS || tally.kills < KILLS_PER_BACKEND {
        assert!(
            tally.runs < MAX_RUNS,
            "{MAX_RUNS} runs landed only {} kills: {tally:?}",
            tally.kills
        );
        let run = format!("crash-{}", tally.runs);
        tally.runs += 1;
        let mut created = false;
        let mut kills_here = 0;
        let mut printed = None;
        loop {
            let cmd = if created {
                ws.resume(&run, store)
            } else {
                ws.start(&run, store)
            };
            let delay = if kills_here < MAX_KILLS_PER_RUN {
                Duration::from_millis(rng.between(0, max_delay))
            } else {
                Duration::from_secs(600)
            };
            let what = if created { "resume" } else { "run" };
            match run_and_kill(cmd, delay) {
                Ended::Killed => {
                    tally.kills += 1;
                    kills_here += 1;
                    let when = format!("after kill {kills_here} ({what}, {delay:?})");
                    match stored_trail(&ws, &run, store) {
                        None => {
                            assert!(!created, "run {run} vanished from the store {when}");
                            tally.before_creation += 1;
                        }
                        Some(trail) => {
                            if let Err(problem) = check_prefix(&run, &trail, &reference) {
                                panic!("run {run} {when}: {problem}");
                            }
                            *tally.by_committed.entry(attempt_count(&trail)).or_default() += 1;
                            created = true;
                            if attempt_count(&trail) == ENTRIES {
                                // Killed after its last commit, before it exited: the run
                                // is complete (its last commit also ended it).
                                break;
                            }
                        }
                    }
                }
                Ended::Exited(status) => {
                    let (stdout, stderr) = ws.output();
                    if status.success() {
                        // The key its last attempt ran under (checked against the trail
                        // below): `RUN:55`, later when programs in flight were recorded.
                        assert!(stdout.contains(&format!(r#""key": "{run}:"#)), "{stdout}");
                        printed = Some(stdout);
                        tally.finished += 1;
                        break;
                    }
                    // A run that cannot be started or resumed is a failure of the engine
                    // or the store (a kill before creation was seen in the store above,
                    // and the run is started again rather than resumed).
                    panic!(
                        "`claij {what}` of run {run} failed ({status}) after {kills_here} \
                         kill(s): {stderr}"
                    );
                }
            }
        }
        let trail = stored_trail(&ws, &run, store).unwrap();
        let complete =
            check_prefix(&run, &trail, &reference).and_then(|()| match attempt_count(&trail) {
                ENTRIES => Ok(()),
                n => Err(format!("{n} attempts, the uninterrupted run has {ENTRIES}")),
            });
        if let Err(problem) = complete {
            panic!(
                "run {run}, killed {kills_here} time(s), ends with another trail than an \
                 uninterrupted run: {problem}"
            );
        }
        if let Some(stdout) = printed {
            let key = &trail.last().unwrap()["event"]["key"];
            assert!(stdout.contains(&key.to_string()), "{key} in {stdout}");
        }
        tally.reruns += check_side_effects(&ws, &run, &trail);
        let status = ws
            .claij(&["runs", "show", &run, "--json"], store)
            .status()
            .unwrap();
        let (stdout, stderr) = ws.output();
        assert!(status.success(), "{stderr}");
        let record: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(record["status"], "completed", "{record:#}");
        assert_eq!(record["owner"], Value::Null, "{record:#}");
        assert_eq!(record["steps"], trail.len(), "{record:#}");
        tally.lost += trail.len() - ENTRIES;
    }

    let mid_run: usize = tally
        .by_committed
        .iter()
        .filter(|&(&n, _)| n > 0 && n < ENTRIES)
        .map(|(_, k)| k)
        .sum();
    eprintln!(
        "crash test on {backend}: {} kills (delays 0–{max_delay} ms) over {} runs in {:.1?}: \
         {} before the run existed, {mid_run} mid-run at {} distinct points (committed entries: {:?}); {} \
         action re-run(s) under the same key ({} recorded as in flight when killed); {} \
         process(es) finished a run",
        tally.kills,
        tally.runs,
        began.elapsed(),
        tally.before_creation,
        tally.by_committed.len(),
        tally.by_committed,
        tally.reruns,
        tally.lost,
        tally.finished,
    );
    assert!(tally.kills >= KILLS_PER_BACKEND, "{tally:?}");
    assert!(
        tally.by_committed.len() >= 5,
        "the kills landed at too few points to test much: {tally:?}"
    );
}

#[test]
fn sqlite_runs_killed_at_random_points_resume_to_the_uninterrupted_trail() {
    crash_test(Backend::Sqlite);
}

#[test]
fn postgres_runs_killed_at_random_points_resume_to_the_uninterrupted_trail() {
    crash_test(Backend::Postgres);
}

/// The checks themselves: a trail with an entry dropped, repeated or changed is caught.
#[test]
fn the_comparison_catches_lost_duplicated_and_changed_entries() {
    let entry = |seq: u64, to: &str| {
        json!({"seq": seq, "fsm": "f", "version": 1, "from": "a", "to": to,
               "event": {"id": ["a", to], "key": format!("r:{seq}")}, "attempt": 1,
               "at": "2026-01-01T00:00:00Z", "duration_ms": seq})
    };
    let good = vec![entry(0, "b"), entry(1, "c"), entry(2, "d")];
    let reference = projected("r", &good).unwrap();
    assert_eq!(check_prefix("r", &good, &reference), Ok(()));
    assert_eq!(check_prefix("r", &good[..2], &reference), Ok(()));
    let mut retimed = good.clone();
    retimed[1]["at"] = json!("2030-01-01T00:00:00Z");
    retimed[1]["duration_ms"] = json!(999);
    assert_eq!(
        check_prefix("r", &retimed, &reference),
        Ok(()),
        "times do not count"
    );

    let lost = vec![good[0].clone(), good[2].clone()];
    let duplicated = vec![good[0].clone(), good[1].clone(), good[1].clone()];
    let mut changed = good.clone();
    changed[2]["attempt"] = json!(2);
    let mut foreign_key = good.clone();
    foreign_key[1]["event"]["key"] = json!("r:0");
    let mut longer = good.clone();
    longer.push(entry(3, "e"));
    // A program in flight when the process was killed: its entry names the key of the
    // attempt made again, which has the key it had.
    let in_flight = |seq: u64, key: &str| {
        json!({"seq": seq, "fsm": "f", "version": 1, "from": "a", "event": null, "attempt": 1,
               "failure": {"kind": "interrupted", "attempt": 1, "errors": [],
                           "message": format!("a run of program `sh` (key `{key}`) was in flight when the process stopped; it may have happened")}})
    };
    let mut resumed = vec![good[0].clone(), in_flight(1, "r:1"), entry(1, "c")];
    resumed[2]["seq"] = json!(2);
    assert_eq!(check_prefix("r", &resumed, &reference), Ok(()));
    let mut wrong_key = resumed.clone();
    wrong_key[1] = in_flight(1, "r:2");
    let mut new_key = resumed.clone();
    new_key[2]["event"]["key"] = json!("r:2");
    for (name, trail) in [
        ("lost-call entry naming another key", wrong_key),
        ("attempt made again under a new key", new_key),
        ("lost", lost),
        ("duplicated", duplicated),
        ("changed", changed),
        ("foreign key", foreign_key),
        ("longer", longer),
    ] {
        assert!(
            check_prefix("r", &trail, &reference).is_err(),
            "a {name} entry went unnoticed"
        );
    }
}
