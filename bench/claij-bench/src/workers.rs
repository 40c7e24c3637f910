//! `claij-bench workers`: `claij worker` processes on a real PostgreSQL server (the test
//! kit's cluster, a fresh database per measure), driven through the real binary.
//!
//! - transitions per second with 1, 2 and 4 workers: RUNS queued runs of the ping-pong
//!   loop (bench/workloads/ping-pong-http.yaml, ROUNDS hits: ROUNDS + 1 transitions each,
//!   every one committed) submitted first (`claij run --submit --inputs`), then the
//!   workers started and timed until every run has completed;
//! - runs started per second: the same with one-hit runs and 4 workers (claims dominate);
//! - submissions per second: how fast `claij run --submit --inputs` queues runs;
//! - NOTIFY → claim: one idle worker (its poll 30 s, so only the notice wakes it); a run
//!   submitted SAMPLES times; the time from the run's creation to its first transition
//!   (the claim, a `transform` and a commit);
//! - idle cost: SUSPENDED runs waiting for a person, 4 idle workers (their default poll),
//!   the statements their sessions send over IDLE seconds, SETTLE seconds after the runs
//!   suspended: counted in the cluster's log (`log_statement = 'all'` on the bench's
//!   database, each line with its backend's pid; the bench's own queries are not its
//!   sessions'). (`pg_stat_database`'s transaction count is no measure here: backends
//!   report it late, and the extended protocol's prepare steps count as transactions.)

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

use crate::{Args, Fail};

const LOOP: &str = "bench/workloads/ping-pong-http.yaml";

const WAITING: &str = r#"
id: waiting
states:
  - id: note
    action: transform
    config: {template: '{"id": ["note", "ask"], "n": {{ event.n }}}'}
  - {id: ask, action: human}
  - {id: done, action: end}
xitions:
  - id: [start, note]
    schema: {type: object, required: [n]}
  - id: [note, ask]
  - id: [ask, done]
"#;

struct Bench {
    claij: PathBuf,
    dir: tempfile::TempDir,
}

impl Bench {
    fn claij(&self, args: &[&str]) -> Result<String, Fail> {
        let out = Command::new(&self.claij)
            .args(args)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.claij.display()))?;
        if !out.status.success() {
            return Err(format!(
                "claij {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn workers(&self, url: &str, n: usize, poll: &str) -> Result<Vec<Child>, Fail> {
        (0..n)
            .map(|_| {
                Command::new(&self.claij)
                    .args([
                        "worker",
                        "--store",
                        url,
                        "--concurrency",
                        "32",
                        "--poll",
                        poll,
                    ])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .map_err(|e| format!("cannot start a worker: {e}"))
            })
            .collect()
    }

    /// Submits one run per input line; returns the seconds it took.
    fn submit(&self, url: &str, document: &str, inputs: &[Value]) -> Result<f64, Fail> {
        let file = self.dir.path().join("inputs.jsonl");
        let text: String = inputs.iter().map(|i| format!("{i}\n")).collect();
        std::fs::write(&file, text).map_err(|e| e.to_string())?;
        let started = Instant::now();
        self.claij(&[
            "run",
            document,
            "--submit",
            "--inputs",
            &file.display().to_string(),
            "--store",
            url,
            "-q",
        ])?;
        Ok(started.elapsed().as_secs_f64())
    }
}

fn stop(workers: Vec<Child>) {
    for mut w in workers {
        let _ = Command::new("kill")
            .args(["-TERM", &w.id().to_string()])
            .status();
        let _ = w.wait();
    }
}

/// A number from psql's unaligned output.
fn number(db: &claij_testkit::postgres::TestDatabase, sql: &str) -> Result<f64, Fail> {
    let out = db.psql(sql)?;
    out.trim()
        .parse()
        .map_err(|_| format!("`{sql}` gave `{}`", out.trim()))
}

/// Waits until `sql` counts `want`; returns when, or fails after `limit`.
fn wait_for(
    db: &claij_testkit::postgres::TestDatabase,
    sql: &str,
    want: f64,
    limit: Duration,
) -> Result<Instant, Fail> {
    let give_up = Instant::now() + limit;
    loop {
        if number(db, sql)? >= want {
            return Ok(Instant::now());
        }
        if Instant::now() > give_up {
            return Err(format!("`{sql}` did not reach {want} in {limit:?}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn throughput(bench: &Bench, runs: u64, rounds: u64, workers: usize) -> Result<Value, Fail> {
    let db = claij_testkit::postgres::database();
    let url = db.url();
    let inputs: Vec<Value> = (0..runs)
        .map(|_| json!({"n": 0, "rounds": rounds, "player": "ping"}))
        .collect();
    let submit_s = bench.submit(&url, LOOP, &inputs)?;
    let started = Instant::now();
    let children = bench.workers(&url, workers, "30s")?;
    let done = wait_for(
        &db,
        "SELECT count(*) FROM runs WHERE status = 'completed'",
        runs as f64,
        Duration::from_secs(600),
    );
    stop(children);
    let elapsed = done?.duration_since(started).as_secs_f64();
    let transitions = number(&db, "SELECT sum(trail_len) FROM runs")?;
    Ok(json!({
        "workers": workers,
        "runs": runs,
        "transitions": transitions,
        "seconds": elapsed,
        "transitions_per_s": transitions / elapsed,
        "runs_per_s": runs as f64 / elapsed,
        "submitted_per_s": runs as f64 / submit_s,
    }))
}

fn notify_latency(bench: &Bench, samples: u64) -> Result<Value, Fail> {
    let db = claij_testkit::postgres::database();
    let url = db.url();
    let document = bench.dir.path().join("one.yaml");
    std::fs::write(
        &document,
        "id: one\nstates:\n  - id: go\n    action: transform\n    config: {template: '{\"id\": [\"go\", \"done\"]}'}\n  - {id: done, action: end}\nxitions:\n  - id: [start, go]\n  - id: [go, done]\n",
    )
    .map_err(|e| e.to_string())?;
    let document = document.display().to_string();
    let children = bench.workers(&url, 1, "30s")?;
    std::thread::sleep(Duration::from_secs(2));
    let mut millis = Vec::new();
    let result = (|| -> Result<(), Fail> {
        for _ in 0..samples {
            let id = bench.claij(&["run", &document, "--submit", "--store", &url, "-q"])?;
            let id = id.trim().to_owned();
            bench.claij(&[
                "runs",
                "wait",
                &id,
                "--store",
                &url,
                "--timeout",
                "60s",
                "--json",
            ])?;
            let trail = bench.claij(&["runs", "trail", &id, "--store", &url, "--json"])?;
            let ats: Vec<SystemTime> = trail
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter_map(|e| e.get("at").and_then(Value::as_str).map(str::to_owned))
                .filter_map(|at| humantime::parse_rfc3339(&at).ok())
                .collect();
            if let [created, claimed, ..] = ats.as_slice() {
                millis.push(
                    claimed
                        .duration_since(*created)
                        .unwrap_or_default()
                        .as_secs_f64()
                        * 1000.0,
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(())
    })();
    stop(children);
    result?;
    millis.sort_by(f64::total_cmp);
    let at = |p: f64| millis[((millis.len() as f64 - 1.0) * p).round() as usize];
    Ok(json!({"samples": millis.len(), "p50_ms": at(0.5), "p95_ms": at(0.95), "max_ms": at(1.0)}))
}

fn idle_cost(bench: &Bench, suspended: u64, idle: u64, settle: u64) -> Result<Value, Fail> {
    let db = claij_testkit::postgres::database();
    let url = db.url();
    // Every statement of this database's sessions is logged (with its backend's pid) in
    // the cluster's log: the statements the idle workers send are counted there.
    db.psql(&format!(
        "ALTER DATABASE \"{}\" SET log_statement = 'all'",
        db.name()
    ))?;
    let log = claij_testkit::postgres::base_dir().join("postgres.log");
    let document = bench.dir.path().join("waiting.yaml");
    std::fs::write(&document, WAITING).map_err(|e| e.to_string())?;
    let inputs: Vec<Value> = (0..suspended).map(|n| json!({"n": n})).collect();
    bench.submit(&url, &document.display().to_string(), &inputs)?;
    let children = bench.workers(&url, 4, "60s")?;
    let result = (|| -> Result<Value, Fail> {
        wait_for(
            &db,
            "SELECT count(*) FROM runs WHERE status = 'suspended'",
            suspended as f64,
            Duration::from_secs(900),
        )?;
        std::thread::sleep(Duration::from_secs(settle));
        let pids = |db: &claij_testkit::postgres::TestDatabase| -> Result<Vec<String>, Fail> {
            Ok(db
                .psql("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")?
                .lines()
                .map(|l| format!("[{}]", l.trim()))
                .collect())
        };
        let mut sessions = pids(&db)?;
        let start = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
        std::thread::sleep(Duration::from_secs(idle));
        sessions.extend(pids(&db)?);
        let text = std::fs::read(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let window = String::from_utf8_lossy(text.get(start as usize..).unwrap_or_default());
        let statements = window
            .lines()
            .filter(|l| l.contains("LOG:  statement: ") || l.contains("LOG:  execute "))
            .filter(|l| sessions.iter().any(|p| l.contains(p.as_str())))
            .count();
        Ok(json!({
            "suspended": suspended,
            "workers": 4,
            "seconds": idle,
            "statements": statements,
            "statements_per_s": statements as f64 / idle as f64,
        }))
    })();
    stop(children);
    result
}

/// `claij-bench workers`.
pub(crate) fn workers(args: &Args) -> Result<Value, Fail> {
    let claij = PathBuf::from(args.str("claij", "target/release/claij"));
    if !Path::new(&claij).is_file() {
        return Err(format!(
            "{} is not built (cargo build --release -p claij)",
            claij.display()
        ));
    }
    let bench = Bench {
        claij,
        dir: tempfile::tempdir().map_err(|e| format!("a scratch directory: {e}"))?,
    };
    let runs = args.u64("runs", 400)?;
    let rounds = args.u64("rounds", 20)?;
    let mut scaling = Vec::new();
    for w in args.list("workers", &[1, 2, 4])? {
        eprintln!(
            "workers: {runs} runs of {} transitions on {w} worker(s) …",
            rounds + 1
        );
        scaling.push(throughput(&bench, runs, rounds, w as usize)?);
    }
    eprintln!("workers: runs started per second (one-hit runs, 4 workers) …");
    let starts = throughput(&bench, args.u64("starts", 1000)?, 1, 4)?;
    eprintln!("workers: NOTIFY → claim …");
    let latency = notify_latency(&bench, args.u64("samples", 20)?)?;
    let suspended = args.u64("suspended", 10_000)?;
    let idle = args.u64("idle", 60)?;
    eprintln!("workers: {suspended} suspended runs, 4 idle workers, {idle} s …");
    let idle = idle_cost(&bench, suspended, idle, args.u64("settle", 15)?)?;
    Ok(json!({
        "workload": "workers",
        "scaling": scaling,
        "starts": starts,
        "notify_to_claim": latency,
        "idle": idle,
    }))
}
