//! What the worker tests (tests/workers.rs) stand on: a workspace of documents and logs,
//! `claij` and `claij worker` processes, the store read back through the command line
//! (runs, published events, trails — the trails by a few processes at a time, since the
//! command line reads one trail per process), and trails compared with references.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

/// How many `claij runs trail` processes read trails at once: each costs some 30 ms of a
/// core (most of it the process starting and opening the store), so on 2 cores more than
/// this only queue for them (200 reads on PostgreSQL, the machine otherwise idle: 13 s one
/// at a time, 8 s two at a time, 6.7 s four at a time, 6.4 s eight at a time).
pub(crate) const TRAIL_READERS: usize = 4;

/// A temporary directory holding the documents (the processes' working directory) and
/// the workers' logs; kept when the test fails.
pub(crate) struct Workspace {
    dir: tempfile::TempDir,
    pub(crate) logs: PathBuf,
}

impl Workspace {
    /// A workspace holding `documents` (file name, text).
    pub(crate) fn new(documents: &[(&str, &str)]) -> Workspace {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in documents {
            fs::write(dir.path().join(name), text).unwrap();
        }
        let logs = dir.path().join("logs");
        fs::create_dir(&logs).unwrap();
        Workspace { dir, logs }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `claij ARGS --store STORE` in the workspace, its output captured.
    pub(crate) fn claij(&self, args: &[&str], store: &str) -> Command {
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

    pub(crate) fn output(&self, args: &[&str], store: &str) -> Output {
        self.claij(args, store).output().unwrap()
    }

    /// `claij worker ARGS`, its stderr going to `logs/NAME.log`.
    pub(crate) fn worker(&self, store: &str, name: &str, args: &[&str]) -> Worker {
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

    /// The lines of every worker log that name `what` (a run, an event), with the log's
    /// name.
    pub(crate) fn log_lines(&self, what: &str) -> String {
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
            for line in text.lines().filter(|l| l.contains(what)) {
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
    pub(crate) fn evidence(&self, run: &str, store: &str) -> String {
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
pub(crate) struct Worker {
    child: Child,
    log: PathBuf,
    pub(crate) name: String,
}

impl Worker {
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, reaped; whether it was still running (else how it had ended).
    pub(crate) fn kill(&mut self) -> Result<(), ExitStatus> {
        if let Some(status) = self.child.try_wait().unwrap() {
            return Err(status);
        }
        let _ = self.child.kill();
        self.child.wait().unwrap();
        Ok(())
    }

    pub(crate) fn terminate(&self) {
        kill(Pid::from_raw(self.pid() as i32), Signal::SIGTERM).unwrap();
    }

    /// Waits for it to exit, at most `within` (then kills it and says so).
    pub(crate) fn exit_within(&mut self, within: Duration) -> Result<ExitStatus, String> {
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

    pub(crate) fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether a run record is held by `worker` (its lease owner is `host:PID:…`).
pub(crate) fn held_by(record: &Value, worker: &Worker) -> bool {
    record["status"] == "running"
        && record["owner"]
            .as_str()
            .and_then(|o| o.split(':').nth(1))
            .is_some_and(|pid| pid == worker.pid().to_string())
}

/// The worker's closing line: `worker stopped: C run(s) claimed, D driven, H handed back`
/// (and whatever follows), as (C, D, H).
pub(crate) fn stop_report(log: &str) -> (u64, u64, u64) {
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

/// Stdout of a successful command, or a description of its failure.
pub(crate) fn stdout_of(what: &str, out: &Output) -> Result<String, String> {
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

pub(crate) fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// `claij runs list --json` (every run, or those of `status`), by id.
pub(crate) fn list_runs(
    ws: &Workspace,
    store: &str,
    status: Option<&str>,
) -> BTreeMap<String, Value> {
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

/// `claij events list --json` (every published event, or those of `status`), by id.
pub(crate) fn list_events(
    ws: &Workspace,
    store: &str,
    status: Option<&str>,
) -> BTreeMap<String, Value> {
    let mut args = vec!["events", "list", "--json"];
    if let Some(status) = status {
        args.extend(["--status", status]);
    }
    let out = ws.output(&args, store);
    let text = stdout_of("claij events list", &out).unwrap();
    json_lines(&text)
        .into_iter()
        .map(|e| (e["id"].as_str().unwrap().to_owned(), e))
        .collect()
}

/// `claij workers list --json`.
pub(crate) fn list_workers(ws: &Workspace, store: &str) -> Value {
    let out = ws.output(&["workers", "list", "--json"], store);
    serde_json::from_str(&stdout_of("claij workers list", &out).unwrap()).unwrap()
}

/// `claij runs trail RUN --json`.
pub(crate) fn stored_trail(ws: &Workspace, store: &str, run: &str) -> Result<Vec<Value>, String> {
    let out = ws.output(&["runs", "trail", run, "--json"], store);
    stdout_of(&format!("claij runs trail {run}"), &out).map(|t| json_lines(&t))
}

/// The trails of `runs`, read by [`TRAIL_READERS`] processes at a time.
pub(crate) fn stored_trails(
    ws: &Workspace,
    store: &str,
    runs: &[String],
) -> BTreeMap<String, Result<Vec<Value>, String>> {
    let trails = in_parallel(runs, TRAIL_READERS, |run| stored_trail(ws, store, run));
    runs.iter().cloned().zip(trails).collect()
}

/// `f` of every item, by `threads` threads that each take the next item when done with
/// one; the results in the items' order.
pub(crate) fn in_parallel<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let mut results: Vec<Option<R>> = std::iter::repeat_with(|| None).take(items.len()).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads.clamp(1, items.len().max(1)))
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        let Some(item) = items.get(i) else {
                            return done;
                        };
                        done.push((i, f(item)));
                    }
                })
            })
            .collect();
        for handle in handles {
            for (i, result) in handle.join().unwrap() {
                results[i] = Some(result);
            }
        }
    });
    results.into_iter().map(Option::unwrap).collect()
}

/// Whether `entry` records side effects a stopped process had in flight (a program noted
/// before it started, which may have run): an `interrupted` pause, not an attempt.
pub(crate) fn is_lost(entry: &Value) -> bool {
    entry["failure"]["kind"] == "interrupted"
        && entry["failure"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("may have happened"))
}

/// The attempts of `trail` (entries of side effects in flight when a process stopped left
/// out), each with the sequence number its idempotency key was made of: its own, less
/// the such entries just before it (the attempt made again has the key it had).
pub(crate) fn attempts(trail: &[Value]) -> Vec<(u64, &Value)> {
    let mut lost = 0;
    let mut kept = Vec::new();
    for entry in trail {
        if is_lost(entry) {
            lost += 1;
            continue;
        }
        kept.push((entry["seq"].as_u64().unwrap_or_default() - lost, entry));
        lost = 0;
    }
    kept
}

/// What must be equal between a run's trail and its reference: everything but times and
/// durations, with `run` (and the ids derived from it: `RUN.SEQ.i` children, `RUN:SEQ`
/// keys and event ids) written `RUN`. Entries of side effects in flight when a process
/// stopped are left out, the attempts numbered as if they were not there.
pub(crate) fn normalized(run: &str, trail: &[Value]) -> Vec<Value> {
    attempts(trail)
        .into_iter()
        .enumerate()
        .map(|(at, (key_seq, entry))| {
            let failure = &entry["failure"];
            let projected = json!({
                "seq": at,
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
                .replace(&format!("\"{run}:{key_seq}\""), &format!("\"RUN:{at}\""))
                .replace(&format!("\"{run}\""), "\"RUN\"")
                .replace(&format!("\"{run}."), "\"RUN.")
                .replace(&format!("\"{run}:"), "\"RUN:");
            serde_json::from_str(&text).unwrap()
        })
        .collect()
}

/// Whether `trail` of `run` equals `reference` (normalized): sequence numbers 0, 1, … with
/// no gap or duplicate, then entry by entry; what differs if not.
pub(crate) fn compare(run: &str, trail: &[Value], reference: &[Value]) -> Result<(), String> {
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
pub(crate) fn count(trail: &[Value], from: &str, to: Option<&str>, kind: Option<&str>) -> usize {
    trail
        .iter()
        .filter(|e| e["from"] == from)
        .filter(|e| e["to"].as_str() == to)
        .filter(|e| kind.is_none_or(|k| e["failure"]["kind"] == k))
        .count()
}

/// Problems seen by a test's helper threads (submitters, the answerer).
#[derive(Default)]
pub(crate) struct Problems(Mutex<Vec<String>>);

impl Problems {
    pub(crate) fn push(&self, problem: String) {
        self.0.lock().unwrap().push(problem);
    }

    pub(crate) fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// Polls the store until `done` holds of its runs, at most `within`.
pub(crate) fn wait_for(
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
pub(crate) fn wait_completed(ws: &Workspace, store: &str, runs: &[String]) {
    for run in runs {
        let out = ws.output(&["runs", "wait", run, "--timeout", "60s", "--json"], store);
        let record: Value =
            serde_json::from_str(&stdout_of(&format!("claij runs wait {run}"), &out).unwrap())
                .unwrap();
        assert_eq!(record["status"], "completed", "{record}");
    }
}
