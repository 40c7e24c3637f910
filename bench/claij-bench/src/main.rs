//! claij's side of `bench/run`: the workloads that are compared with LangGraph and Burr,
//! each printed as one JSON object on stdout.
//!
//! ```text
//! claij-bench w1     [--transitions 1000] [--reps 5] [--batch 1]
//! claij-bench w2     [--transitions 1000] [--reps 5] --dir DIR --durability normal|strict
//! claij-bench w3     [--steps 100,200,400,800] --dir DIR
//! claij-bench w4     [--runs 10000] [--transitions 10] [--reps 5] --mode seq|concurrent
//! claij-bench w4mem  [--runs 10000] [--transitions 10] [--at 5]
//! claij-bench w5     --server …/server-everything/dist/index.js [--reps 5] [--calls 200]
//! claij-bench workers --claij target/release/claij [--runs 400] [--rounds 20] [--workers 1,2,4]
//!                     [--starts 1000] [--samples 20] [--suspended 10000] [--idle 60] [--settle 15]
//! ```
//!
//! The loop is the two-state ping-pong of `crates/claij-engine/benches`: a deterministic
//! native action hands the ball `{n, player}` to the other state, every event validated
//! against its transition's schema; a run of T transitions has T trail entries (the input
//! and the end included). W3's events also carry a 1 KiB chunk: claij keeps a run's
//! history in its trail (every action sees it as `ActionInput::trail`), so "appending to
//! the history" is emitting the chunk in the step's event.
//!
//! Runtimes: W1 runs on a current-thread runtime (as the criterion benchmark does); W2-W5
//! on a multi-threaded runtime with one worker per core (as the CLI runs, and as the
//! peers size their thread pools: `os.cpu_count()`).
//!
//! Modules: `mcp` is W5 (MCP tool calls against the reference `everything` server);
//! `workers` measures `claij worker` processes on the test kit's PostgreSQL.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use claij_core::store::{Durability, RunStore};
use claij_core::{Fsm, load_str};
use claij_engine::{
    Action, ActionError, ActionInput, ActionOutput, ActionRegistry, BoxFuture, Engine, Outcome,
    RunOptions, RunOutcome, RunStatus,
};
use serde_json::{Value, json};
use tokio::runtime::Runtime;
use tokio::sync::watch;

mod mcp;
mod workers;

/// The ping-pong loop (the same document as the engine's criterion benchmarks).
const LOOP: &str = include_str!("../../workloads/ping-pong.yaml");

/// W3's loop: every step's event carries the chunk it appends to the history.
const GROWTH: &str = r##"
id: growth
schemas:
  step:
    type: object
    required: [n, player, chunk]
    properties:
      n: {type: integer, minimum: 0}
      player: {type: string, enum: [ping, pong]}
      chunk: {type: string}
states:
  - {id: ping, action: hit}
  - {id: pong, action: hit}
  - {id: done, action: end}
xitions:
  - id: [start, ping]
    schema: {type: object, required: [n, player], properties: {n: {type: integer}}}
  - id: [ping, pong]
    schema: {$ref: "#/$defs/step"}
  - id: [pong, ping]
    schema: {$ref: "#/$defs/step"}
  - id: [ping, done]
    schema: {type: object, required: [n, chunk], properties: {n: {type: integer}, chunk: {type: string}}}
  - id: [pong, done]
    schema: {type: object, required: [n, chunk], properties: {n: {type: integer}, chunk: {type: string}}}
"##;

/// The bytes one W3 step appends.
const CHUNK_BYTES: usize = 1024;

/// The deterministic 1 KiB chunk of step `n` (the same bytes as bench/peers/common.py's).
fn chunk(n: u64) -> String {
    let seed = format!("step {n:06} ");
    seed.repeat(CHUNK_BYTES / seed.len() + 1)[..CHUNK_BYTES].to_owned()
}

/// Holds every run at one step until opened (W4's memory per live run).
struct Gate {
    /// The `n` of the event whose action waits.
    at: u64,
    open: watch::Receiver<bool>,
    arrived: Arc<AtomicUsize>,
}

/// Returns the ball to the other player until the run's trail holds `transitions`
/// entries (the entry and the end included).
struct Hit {
    transitions: u64,
    /// W3: every event carries the chunk of its step.
    chunk: bool,
    gate: Option<Gate>,
}

impl Hit {
    fn new(transitions: u64) -> Self {
        Self {
            transitions,
            chunk: false,
            gate: None,
        }
    }

    fn event(&self, n: u64, me: &str) -> Value {
        let other = if me == "ping" { "pong" } else { "ping" };
        let mut event = if n + 1 >= self.transitions {
            json!({"id": [me, "done"], "n": n})
        } else {
            json!({"id": [me, other], "n": n, "player": other})
        };
        if self.chunk {
            event["chunk"] = Value::String(chunk(n));
        }
        event
    }
}

impl Action for Hit {
    fn touches(&self) -> &'static [claij_engine::Field] {
        &[]
    }

    fn run<'a>(&'a self, input: ActionInput<'a>) -> BoxFuture<'a, Result<Outcome, ActionError>> {
        let n = input.event.get("n").and_then(Value::as_u64).unwrap_or(0) + 1;
        let event = self.event(n, &input.state.id);
        match &self.gate {
            Some(gate) if gate.at == n => {
                let mut open = gate.open.clone();
                gate.arrived.fetch_add(1, Ordering::SeqCst);
                Box::pin(async move {
                    if open.wait_for(|o| *o).await.is_err() {
                        return Err(ActionError::fatal("the gate was dropped"));
                    }
                    Ok(ActionOutput::event(event).into())
                })
            }
            _ => Box::pin(std::future::ready(Ok(ActionOutput::event(event).into()))),
        }
    }
}

type Fail = String;

/// An engine with `hit` registered, and the document loaded against it.
fn setup(document: &str, hit: Hit) -> Result<(Arc<Engine>, Arc<Fsm>), Fail> {
    let mut registry = ActionRegistry::with_builtins();
    registry
        .register("hit", Arc::new(hit))
        .map_err(|e| e.to_string())?;
    let engine = Engine::new(Arc::new(registry));
    let fsm = load_str("bench.yaml", document, engine.registry()).map_err(|e| e.to_string())?;
    Ok((Arc::new(engine), Arc::new(fsm)))
}

/// Runs the loop once to completion and checks it took `transitions` transitions.
async fn one_run(
    engine: &Engine,
    fsm: &Arc<Fsm>,
    store: Option<&Arc<dyn RunStore>>,
    transitions: u64,
) -> Result<RunOutcome, Fail> {
    let options = RunOptions {
        store: store.cloned(),
        ..RunOptions::default()
    };
    match engine
        .run(fsm.clone(), json!({"n": 0, "player": "ping"}), options)
        .await
    {
        Ok(o) if o.status == RunStatus::Completed && o.trail.len() as u64 == transitions => Ok(o),
        Ok(o) => Err(format!(
            "the loop ended {} after {} transitions, not completed after {transitions}",
            o.status,
            o.trail.len()
        )),
        Err(e) => Err(e.to_string()),
    }
}

fn current_thread() -> Result<Runtime, Fail> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
}

/// tokio's multi-threaded runtime with its default of one worker per core, as `claij`
/// runs (`TOKIO_WORKER_THREADS` overrides both).
fn multi_thread() -> Result<Runtime, Fail> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
}

/// What a result's `runtime` field says of `rt`.
fn described(rt: &Runtime) -> String {
    format!("tokio multi-thread, {} workers", rt.metrics().num_workers())
}

/// Times `once` `reps` times after one unmeasured call.
fn timed(reps: u64, mut once: impl FnMut() -> Result<(), Fail>) -> Result<Vec<Duration>, Fail> {
    once()?;
    let mut times = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        once()?;
        times.push(t.elapsed());
    }
    Ok(times)
}

/// Median, min and max per unit over the repetitions (`per` units per repetition): the
/// fields the peers print too.
fn summary(times: &[Duration], per: u64) -> Value {
    let mut secs: Vec<f64> = times.iter().map(Duration::as_secs_f64).collect();
    secs.sort_by(f64::total_cmp);
    let median = match secs.len() {
        0 => 0.0,
        n if n % 2 == 1 => secs[n / 2],
        n => (secs[n / 2 - 1] + secs[n / 2]) / 2.0,
    };
    let us = |s: f64| s / per as f64 * 1e6;
    json!({
        "reps": secs.len(),
        "median_s": median,
        "median_us_per": us(median),
        "min_us_per": secs.first().map_or(0.0, |s| us(*s)),
        "max_us_per": secs.last().map_or(0.0, |s| us(*s)),
    })
}

/// Merges `extra`'s fields into `base`.
fn merged(mut base: Value, extra: Value) -> Value {
    if let (Some(b), Value::Object(e)) = (base.as_object_mut(), extra) {
        b.extend(e);
    }
    base
}

/// A field of /proc/self/status, in KiB (`VmHWM`: peak resident memory; `VmRSS`: now).
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Removes a SQLite database and its companions, so a workload starts from nothing.
fn fresh(path: &Path) -> Result<(), Fail> {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot remove {}: {e}", path.display())),
        }
    }
    Ok(())
}

/// W1: µs per in-memory transition.
fn w1(args: &Args) -> Result<Value, Fail> {
    let transitions = args.u64("transitions", 1000)?;
    let reps = args.u64("reps", 5)?;
    // Runs per repetition: one run of 1,000 transitions takes about a millisecond, too
    // short a window to time alone.
    let batch = args.u64("batch", 1)?.max(1);
    let (engine, fsm) = setup(LOOP, Hit::new(transitions))?;
    let rt = current_thread()?;
    let times = timed(reps, || {
        rt.block_on(async {
            for _ in 0..batch {
                one_run(&engine, &fsm, None, transitions).await?;
            }
            Ok(())
        })
    })?;
    Ok(merged(
        json!({"engine": "claij", "workload": "w1", "validate": true,
               "transitions": transitions, "runs_per_rep": batch,
               "runtime": "tokio current-thread"}),
        summary(&times, transitions * batch),
    ))
}

/// W2: time per transition with a SQLite checkpoint committed before every step.
fn w2(args: &Args) -> Result<Value, Fail> {
    let transitions = args.u64("transitions", 1000)?;
    let reps = args.u64("reps", 5)?;
    let dir = args.dir()?;
    let (name, durability, synchronous) = match args.str("durability", "normal") {
        "normal" => ("normal", Durability::Normal, "NORMAL"),
        "strict" => ("strict", Durability::Strict, "FULL"),
        other => return Err(format!("--durability: `{other}` is not normal or strict")),
    };
    let (engine, fsm) = setup(LOOP, Hit::new(transitions))?;
    let rt = multi_thread()?;
    let path = dir.join(format!("claij-w2-{name}.db"));
    fresh(&path)?;
    let store = rt
        .block_on(claij_store::open_sqlite(&path, durability))
        .map_err(|e| e.to_string())?;
    let store: Arc<dyn RunStore> = store;
    let times = timed(reps, || {
        rt.block_on(one_run(&engine, &fsm, Some(&store), transitions))
            .map(drop)
    })?;
    Ok(merged(
        json!({"engine": "claij", "workload": "w2", "validate": true,
               "transitions": transitions, "durability": name,
               "journal_mode": "wal", "synchronous": synchronous,
               "runtime": described(&rt),
               "store": store.describe()}),
        summary(&times, transitions),
    ))
}

/// W3: what a run stores after N steps that each append 1 KiB. The database files are
/// left in DIR (`claij-w3-N.db`, and `claij-w3-empty.db`: a store with no run) for
/// bench/run to measure once this process has closed them.
fn w3(args: &Args) -> Result<Value, Fail> {
    let dir = args.dir()?;
    let rt = multi_thread()?;
    let mut points = Vec::new();
    let empty = dir.join("claij-w3-empty.db");
    fresh(&empty)?;
    rt.block_on(claij_store::open_sqlite(&empty, Durability::Normal))
        .map_err(|e| e.to_string())?;
    for steps in args.list("steps", &[100, 200, 400, 800])? {
        // The input, then one entry per step.
        let transitions = steps + 1;
        let (engine, fsm) = setup(
            GROWTH,
            Hit {
                chunk: true,
                ..Hit::new(transitions)
            },
        )?;
        let path = dir.join(format!("claij-w3-{steps}.db"));
        fresh(&path)?;
        let (run_bytes, event_bytes, entry_bytes) = rt.block_on(async {
            let store: Arc<dyn RunStore> = claij_store::open_sqlite(&path, Durability::Normal)
                .await
                .map_err(|e| e.to_string())?;
            let outcome = one_run(&engine, &fsm, Some(&store), transitions).await?;
            let run_bytes = store
                .run_bytes(&outcome.run_id)
                .await
                .map_err(|e| e.to_string())?;
            let json_len = |v: &dyn Fn() -> serde_json::Result<String>| v().map_or(0, |s| s.len());
            let event_bytes: usize = outcome
                .trail
                .iter()
                .map(|e| json_len(&|| serde_json::to_string(&e.event)))
                .sum();
            let entry_bytes: usize = outcome
                .trail
                .iter()
                .map(|e| json_len(&|| serde_json::to_string(e)))
                .sum();
            Ok::<_, Fail>((run_bytes, event_bytes, entry_bytes))
        })?;
        points.push(json!({
            "steps": steps,
            "file": path.display().to_string(),
            "run_bytes": run_bytes,
            "event_bytes": event_bytes,
            "entry_bytes": entry_bytes,
            "chunk_bytes": steps as usize * CHUNK_BYTES,
        }));
    }
    Ok(
        json!({"engine": "claij", "workload": "w3", "empty_file": empty.display().to_string(),
              "points": points}),
    )
}

/// W4: many short in-memory runs, one after another or all spawned at once.
fn w4(args: &Args) -> Result<Value, Fail> {
    let runs = args.u64("runs", 10_000)?;
    let transitions = args.u64("transitions", 10)?;
    let reps = args.u64("reps", 5)?;
    let mode = args.str("mode", "seq").to_owned();
    let (engine, fsm) = setup(LOOP, Hit::new(transitions))?;
    let rt = multi_thread()?;
    let times = timed(reps, || match mode.as_str() {
        "seq" => rt.block_on(async {
            for _ in 0..runs {
                one_run(&engine, &fsm, None, transitions).await?;
            }
            Ok(())
        }),
        "concurrent" => rt.block_on(async {
            let mut set = tokio::task::JoinSet::new();
            for _ in 0..runs {
                let (engine, fsm) = (engine.clone(), fsm.clone());
                set.spawn(async move { one_run(&engine, &fsm, None, transitions).await.map(drop) });
            }
            while let Some(done) = set.join_next().await {
                done.map_err(|e| e.to_string())??;
            }
            Ok(())
        }),
        other => Err(format!("--mode: `{other}` is not seq or concurrent")),
    })?;
    let s = summary(&times, runs);
    let per_run_us = s["median_us_per"].as_f64().unwrap_or(f64::NAN);
    Ok(merged(
        json!({"engine": "claij", "workload": "w4", "mode": mode,
               "concurrency": if mode == "seq" { "none" } else { "every run a task on a 2-worker tokio runtime" },
               "runs": runs, "transitions": transitions,
               "runs_per_s": 1e6 / per_run_us, "peak_rss_kib": status_kib("VmHWM")}),
        s,
    ))
}

/// W4's memory per live in-memory run: `runs` runs spawned at once, all held at
/// transition `--at` (default: half-way; their action waits at a gate, the trail holding
/// `at` entries) while the resident memory is read.
fn w4mem(args: &Args) -> Result<Value, Fail> {
    let runs = args.u64("runs", 10_000)?;
    let transitions = args.u64("transitions", 10)?;
    let at = args.u64("at", transitions / 2)?;
    if at == 0 || at + 1 >= transitions {
        return Err(format!(
            "--at must be from 1 to {}",
            transitions.saturating_sub(2)
        ));
    }
    let (tx, rx) = watch::channel(false);
    let arrived = Arc::new(AtomicUsize::new(0));
    let gate = Gate {
        at,
        open: rx,
        arrived: arrived.clone(),
    };
    let (engine, fsm) = setup(
        LOOP,
        Hit {
            gate: Some(gate),
            ..Hit::new(transitions)
        },
    )?;
    let rt = multi_thread()?;
    rt.block_on(async {
        // Warm up (lazy statics, the runtime's threads) with a few gated runs.
        run_gated(&engine, &fsm, transitions, 16, &arrived, &tx).await?;
        let _ = tx.send(false);
        arrived.store(0, Ordering::SeqCst);
        let before = status_kib("VmRSS");
        let held = run_gated(&engine, &fsm, transitions, runs, &arrived, &tx).await?;
        let per_run = (held.rss_kib.saturating_sub(before) * 1024) as f64 / runs as f64;
        Ok(json!({
            "engine": "claij", "workload": "w4mem", "runs": runs, "transitions": transitions,
            "held_at_transition": at,
            "rss_before_kib": before, "rss_held_kib": held.rss_kib,
            "bytes_per_run": per_run, "peak_rss_kib": status_kib("VmHWM"),
        }))
    })
}

struct Held {
    rss_kib: u64,
}

/// Spawns `runs` gated runs, waits until all wait at the gate, reads the resident
/// memory, opens the gate and waits for every run to complete.
async fn run_gated(
    engine: &Arc<Engine>,
    fsm: &Arc<Fsm>,
    transitions: u64,
    runs: u64,
    arrived: &AtomicUsize,
    open: &watch::Sender<bool>,
) -> Result<Held, Fail> {
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..runs {
        let (engine, fsm) = (engine.clone(), fsm.clone());
        set.spawn(async move { one_run(&engine, &fsm, None, transitions).await.map(drop) });
    }
    let waiting_since = Instant::now();
    while (arrived.load(Ordering::SeqCst) as u64) < runs {
        if waiting_since.elapsed() > Duration::from_secs(120) {
            return Err("the runs did not all reach the gate within 120 s".into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let rss_kib = status_kib("VmRSS");
    let _ = open.send(true);
    while let Some(done) = set.join_next().await {
        done.map_err(|e| e.to_string())??;
    }
    Ok(Held { rss_kib })
}

/// `--name value` options.
struct Args {
    options: HashMap<String, String>,
}

impl Args {
    fn parse(rest: impl Iterator<Item = String>) -> Result<Self, Fail> {
        let mut options = HashMap::new();
        let mut rest = rest.peekable();
        while let Some(arg) = rest.next() {
            let Some(name) = arg.strip_prefix("--") else {
                return Err(format!("unexpected argument `{arg}`"));
            };
            let value = rest
                .next()
                .ok_or_else(|| format!("--{name} needs a value"))?;
            options.insert(name.to_owned(), value);
        }
        Ok(Self { options })
    }

    fn str<'a>(&'a self, name: &str, default: &'a str) -> &'a str {
        self.options.get(name).map_or(default, String::as_str)
    }

    fn u64(&self, name: &str, default: u64) -> Result<u64, Fail> {
        match self.options.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| format!("--{name}: `{v}` is not a whole number")),
        }
    }

    fn list(&self, name: &str, default: &[u64]) -> Result<Vec<u64>, Fail> {
        match self.options.get(name) {
            None => Ok(default.to_vec()),
            Some(v) => v
                .split(',')
                .map(|s| {
                    s.trim()
                        .parse()
                        .map_err(|_| format!("--{name}: `{s}` is not a whole number"))
                })
                .collect(),
        }
    }

    fn dir(&self) -> Result<PathBuf, Fail> {
        let dir = PathBuf::from(
            self.options
                .get("dir")
                .ok_or("--dir DIR is needed (a directory on the disk to measure)")?,
        );
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(dir)
    }
}

fn main() -> ExitCode {
    let mut argv = std::env::args().skip(1);
    let workload = argv.next().unwrap_or_default();
    let result = Args::parse(argv).and_then(|args| match workload.as_str() {
        "w1" => w1(&args),
        "w2" => w2(&args),
        "w3" => w3(&args),
        "w4" => w4(&args),
        "w4mem" => w4mem(&args),
        "w5" => mcp::w5(&args),
        "workers" => workers::workers(&args),
        other => Err(format!(
            "unknown workload `{other}`: use w1, w2, w3, w4, w4mem, w5 or workers (see the source's header)"
        )),
    });
    match result {
        Ok(value) => {
            println!("{value}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("claij-bench {workload}: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(pairs: &[(&str, &str)]) -> Args {
        Args {
            options: pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    #[test]
    fn chunks_are_one_kib_and_match_the_peers() {
        let c = chunk(7);
        assert_eq!(c.len(), CHUNK_BYTES);
        assert!(c.starts_with("step 000007 step 000007 "));
    }

    #[test]
    fn the_in_memory_workloads_run() {
        let one = w1(&args(&[("transitions", "20"), ("reps", "1")]));
        assert_eq!(one.map(|v| v["reps"].clone()), Ok(json!(1)));
        for mode in ["seq", "concurrent"] {
            let four = w4(&args(&[("runs", "20"), ("reps", "1"), ("mode", mode)]));
            assert_eq!(four.map(|v| v["runs"].clone()), Ok(json!(20)));
        }
        let mem = w4mem(&args(&[("runs", "50")]));
        assert_eq!(mem.map(|v| v["runs"].clone()), Ok(json!(50)));
    }

    #[test]
    fn the_durable_workloads_run() {
        let dir = std::env::temp_dir().join(format!("claij-bench-test-{}", std::process::id()));
        let d = dir.display().to_string();
        for durability in ["normal", "strict"] {
            let two = w2(&args(&[
                ("transitions", "10"),
                ("reps", "1"),
                ("dir", &d),
                ("durability", durability),
            ]));
            assert_eq!(two.map(|v| v["transitions"].clone()), Ok(json!(10)));
        }
        let three = w3(&args(&[("steps", "3,6"), ("dir", &d)]));
        let points = three.map(|v| v["points"].clone());
        let _ = std::fs::remove_dir_all(&dir);
        let points = points.unwrap_or_else(|e| panic!("{e}"));
        let points = points.as_array().cloned().unwrap_or_default();
        // One point per step count asked for, so the checks below run on both.
        let steps: Vec<u64> = points.iter().filter_map(|p| p["steps"].as_u64()).collect();
        assert_eq!(steps, [3, 6], "{points:?}");
        // Every step's event holds its chunk; the run's stored bytes hold the events.
        for p in &points {
            let events = p["event_bytes"].as_u64().unwrap_or(0);
            assert!(events >= p["chunk_bytes"].as_u64().unwrap_or(u64::MAX));
            assert!(p["run_bytes"].as_u64().unwrap_or(0) >= events);
        }
    }

    /// W5 against the real server-everything, as installed for the tests by
    /// scripts/setup/mcp-servers (every `get-sum` answer is checked by the workload).
    #[test]
    fn the_mcp_workload_runs() {
        let cache = std::env::var_os("CLAIJ_CACHE_DIR").map_or_else(
            || PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/claij"),
            PathBuf::from,
        );
        let server = cache
            .join("mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
        let server = server.display().to_string();
        let five = mcp::w5(&args(&[("server", &server), ("reps", "1"), ("calls", "3")]))
            .unwrap_or_else(|e| panic!("{e} (run scripts/setup/mcp-servers first)"));
        assert_eq!(five["calls_per_rep"], json!(3));
        assert!(
            five["call_us"].as_f64().is_some_and(|us| us > 0.0),
            "{five}"
        );
        assert!(
            five["spawn_to_ready_ms"]
                .as_f64()
                .is_some_and(|ms| ms > 0.0),
            "{five}"
        );
    }
}
