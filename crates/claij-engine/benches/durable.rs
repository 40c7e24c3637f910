//! Durable transitions per second: the two-state loop of `transitions.rs` (a
//! deterministic native action, schema validation on), 200 transitions per run, each
//! committed to a store before the next state starts — on SQLite (`normal` and `strict`,
//! a file on the real disk under `target/tmp`, not a tmpfs) and on PostgreSQL (a database
//! on the test kit's local server, `normal` and `strict`; skipped, with a note, when
//! PostgreSQL is not installed).
//!
//! `concurrent/*` runs 16 such runs at once on one store: their commits are grouped (one
//! transaction, one fsync for all the checkpoints queued at that moment), so aggregate
//! throughput is far above one run's. The commit grouping achieved is printed.
//!
//! `cargo bench -p claij-engine --bench durable`; criterion reports time per transition
//! and transitions per second (throughput in elements = transitions).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use claij_core::Fsm;
use claij_core::store::{Durability, RunStore};
use claij_engine::{Engine, RunOptions, RunStatus};
use claij_store::CommitStats;
use claij_testkit::postgres::TestDatabase;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use tokio::runtime::Runtime;

/// Transitions per run.
const TRANSITIONS: u64 = 200;

/// Runs at once in the `concurrent` group.
const CONCURRENT_RUNS: u64 = 16;

/// A store under test, with its commit counters.
struct Bench {
    name: String,
    store: Arc<dyn RunStore>,
    stats: Box<dyn Fn() -> CommitStats>,
}

/// Runs the loop once on `store` to completion; returns its trail's length.
async fn one_run(engine: &Engine, fsm: &Arc<Fsm>, store: &Arc<dyn RunStore>) -> usize {
    let options = RunOptions {
        store: Some(store.clone()),
        ..RunOptions::default()
    };
    match engine
        .run(fsm.clone(), json!({"n": 0, "player": "ping"}), options)
        .await
    {
        Ok(o) if o.status == RunStatus::Completed && o.trail.len() as u64 == TRANSITIONS => {
            o.trail.len()
        }
        other => panic!("the loop did not complete as expected: {other:?}"),
    }
}

/// The directory for SQLite files: `target/tmp`, on the disk the build is on (a tmpfs
/// `/tmp` would make `strict` meaningless).
fn disk_dir() -> tempfile::TempDir {
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    tempfile::tempdir_in(&base)
        .unwrap_or_else(|e| panic!("cannot create a directory in {}: {e}", base.display()))
}

/// The stores to measure, the PostgreSQL database they use (dropped at the end), and why
/// PostgreSQL is skipped, if it is.
fn stores(
    runtime: &Runtime,
    dir: &tempfile::TempDir,
) -> (Vec<Bench>, Option<TestDatabase>, Option<String>) {
    let mut benches = Vec::new();
    for (name, durability) in [
        ("normal", Durability::Normal),
        ("strict", Durability::Strict),
    ] {
        let path = dir.path().join(format!("{name}.db"));
        let store = runtime
            .block_on(claij_store::open_sqlite(&path, durability))
            .unwrap_or_else(|e| panic!("{e}"));
        let counters = store.clone();
        benches.push(Bench {
            name: format!("sqlite-{name}"),
            store,
            stats: Box::new(move || counters.stats()),
        });
    }
    match claij_testkit::postgres::try_database() {
        Ok(db) => {
            let url = db.url();
            for (name, durability) in [
                ("normal", Durability::Normal),
                ("strict", Durability::Strict),
            ] {
                let store = runtime
                    .block_on(claij_store::open_postgres(&url, durability))
                    .unwrap_or_else(|e| panic!("{e}"));
                let counters = store.clone();
                benches.push(Bench {
                    name: format!("postgres-{name}"),
                    store,
                    stats: Box::new(move || counters.stats()),
                });
            }
            (benches, Some(db), None)
        }
        Err(why) => (benches, None, Some(why)),
    }
}

fn bench(c: &mut Criterion) {
    let (engine, fsm) = common::ping_pong(TRANSITIONS);
    let engine = Arc::new(engine);
    // As the CLI runs: one worker per core (tokio's default, `available_parallelism`;
    // `TOKIO_WORKER_THREADS` overrides it), so the figures are the machine's.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("{e}"),
    };
    let dir = disk_dir();
    let (benches, database, skipped) = stores(&runtime, &dir);
    if let Some(why) = &skipped {
        eprintln!("durable: PostgreSQL benchmarks skipped: {why}");
    }

    let mut group = c.benchmark_group("durable");
    group.throughput(Throughput::Elements(TRANSITIONS));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(5));
    for bench in &benches {
        group.bench_function(format!("{}/200-transition run", bench.name), |b| {
            b.iter(|| runtime.block_on(one_run(&engine, &fsm, &bench.store)))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("concurrent");
    group.throughput(Throughput::Elements(TRANSITIONS * CONCURRENT_RUNS));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(5));
    for bench in benches.iter().filter(|b| b.name.ends_with("strict")) {
        let before = (bench.stats)();
        group.bench_function(
            format!("{}/{CONCURRENT_RUNS} runs of 200 transitions", bench.name),
            |b| {
                b.iter(|| {
                    runtime.block_on(async {
                        let mut runs = tokio::task::JoinSet::new();
                        for _ in 0..CONCURRENT_RUNS {
                            let (engine, fsm, store) =
                                (engine.clone(), fsm.clone(), bench.store.clone());
                            runs.spawn(async move { one_run(&engine, &fsm, &store).await });
                        }
                        let mut entries = 0;
                        while let Some(done) = runs.join_next().await {
                            entries += done.unwrap_or_else(|e| panic!("a run panicked: {e}"));
                        }
                        entries
                    })
                })
            },
        );
        let after = (bench.stats)();
        let commits = after.commits - before.commits;
        let transactions = (after.transactions - before.transactions).max(1);
        if commits == 0 {
            // Filtered out on the command line.
            continue;
        }
        eprintln!(
            "concurrent/{}: {commits} commits in {transactions} transactions ({:.1} commits \
             per transaction, largest group {})",
            bench.name,
            commits as f64 / transactions as f64,
            after.largest_group
        );
    }
    group.finish();
    // The stores (and their connections) first, then their PostgreSQL database.
    drop(benches);
    drop(database);
}

criterion_group!(benches, bench);
criterion_main!(benches);
