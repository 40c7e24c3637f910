//! Concurrent answers to a run that waits again and again (issue 35: "a concurrent answer
//! leaves a run stuck in `running`"): a `human` state looping on itself, and two `human`
//! states in a row, answered by many tasks racing `Engine::resume` on a real SQLite file
//! and a real PostgreSQL server. Exactly one answer per wait is taken, every other answer
//! is refused as a conflict, and no run is ever left claimed.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

use std::sync::Arc;
use std::time::{Duration, Instant};

use claij_core::store::{Durability, RunStatus, RunStore, StoreError};
use claij_core::{Fsm, load_str};
use claij_engine::{ActionRegistry, Engine, InputError, RunError, RunOptions};
use claij_testkit::TestStore;
use serde_json::{Value, json};

/// `ask` answers itself (a self-loop) for the first [`LOOPS`] waits, then `ask` and
/// `check` wait one after the other until `check` ends the run after [`WAITS`] waits.
const LOOPING: &str = include_str!("../../../tests/security/looping.yaml");

/// Waits answered by the self-loop `[ask, ask]`.
const LOOPS: u64 = 30;
/// Waits in all (`ask` and `check` alternate after the loops; the last is `check`'s).
const WAITS: u64 = 80;
/// Tasks answering at once.
const ANSWERERS: usize = 8;
/// How long a run may be seen running (an answer being taken) before it counts as left
/// claimed.
const STUCK: Duration = Duration::from_secs(15);

/// The transition that answers wait `k` in `state`.
fn answer_for(state: &str, k: u64) -> [&'static str; 2] {
    match state {
        "ask" if k < LOOPS => ["ask", "ask"],
        "ask" => ["ask", "check"],
        _ if k + 1 >= WAITS => ["check", "done"],
        _ => ["check", "ask"],
    }
}

async fn open(at: &TestStore) -> Arc<dyn RunStore> {
    claij_store::open(at.url(), Durability::Normal)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

fn load(engine: &Engine) -> Arc<Fsm> {
    Arc::new(load_str("looping.yaml", LOOPING, engine.registry()).unwrap_or_else(|e| panic!("{e}")))
}

/// What one answerer got.
#[derive(Default)]
struct Tally {
    /// The waits it answered (what it meant to answer, as its input says).
    won: Vec<u64>,
    /// Answers refused because another was taken first.
    conflicts: u64,
    /// Answers that came too late for their wait and named a transition the next one does
    /// not take (only when the answer does not say which wait it is for).
    stale: u64,
}

/// Races [`ANSWERERS`] tasks answering every wait of a run until it ends; `per_wait`:
/// each answer says the wait it is for (`RunOptions::wait_seq`).
async fn race(at: TestStore, per_wait: bool) {
    let store = open(&at).await;
    let engine = Arc::new(Engine::new(Arc::new(ActionRegistry::durable())));
    let fsm = load(&engine);
    let options = || RunOptions {
        store: Some(store.clone()),
        ..RunOptions::default()
    };
    let started = engine.run(fsm.clone(), json!({}), options()).await.unwrap();
    assert_eq!(started.status, RunStatus::Suspended);
    let run = started.run_id.clone();
    let mut tasks = Vec::new();
    for i in 0..ANSWERERS {
        let (engine, fsm, store, run) = (engine.clone(), fsm.clone(), store.clone(), run.clone());
        tasks.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            let mut running_since: Option<Instant> = None;
            loop {
                let record = store.run(&run).await.unwrap();
                match record.status {
                    RunStatus::Suspended => running_since = None,
                    RunStatus::Running => {
                        let since = *running_since.get_or_insert_with(Instant::now);
                        assert!(
                            since.elapsed() < STUCK,
                            "answerer {i}: the run is left running (trail {}, lease {:?})",
                            record.trail_len,
                            record.lease
                        );
                        tokio::task::yield_now().await;
                        continue;
                    }
                    _ => return tally,
                }
                let k = record.trail_len - 1;
                let state = record.wait.as_ref().map(|w| w.state.clone()).unwrap();
                let input =
                    json!({"id": answer_for(&state, k), "by": format!("answerer-{i}"), "wait": k});
                let options = RunOptions {
                    store: Some(store.clone()),
                    wait_seq: per_wait.then_some(record.trail_len),
                    ..RunOptions::default()
                };
                match engine.resume(fsm.clone(), &run, Some(input), options).await {
                    Ok(_) => tally.won.push(k),
                    Err(RunError::Store(StoreError::Conflict { .. })) => tally.conflicts += 1,
                    Err(RunError::Input(InputError::NotWaitedFor { .. })) if !per_wait => {
                        tally.stale += 1
                    }
                    Err(other) => panic!("answerer {i}, wait {k}: {other}"),
                }
            }
        }));
    }
    let mut tallies = Vec::new();
    for task in tasks {
        tallies.push(task.await.unwrap());
    }

    let record = store.run(&run).await.unwrap();
    assert_eq!(record.status, RunStatus::Completed, "{record:?}");
    assert!(record.lease.is_none(), "a finished run is held by no one");
    let trail = store.trail(&run, 0).await.unwrap();
    let answers: Vec<&Value> = trail[1..].iter().map(|e| &e.event).collect();
    assert!(
        trail.iter().all(|e| e.is_transition()),
        "no failed attempts"
    );
    let won: u64 = tallies.iter().map(|t| t.won.len() as u64).sum();
    assert_eq!(
        answers.len() as u64,
        won,
        "exactly one answer taken per wait, each counted by the answerer that won it"
    );
    if per_wait {
        assert_eq!(won, WAITS, "one answer per wait");
    } else {
        // An answer that does not say which wait it is for may come late and still fit:
        // `["ask","ask"]` meant for the last loop, taken at the first wait after the
        // loops, loops once more (the run then waits once more). So the waits are at
        // least as many as planned, and every answer taken was meant for its wait or an
        // earlier one.
        assert!(won >= WAITS, "{won} answers for at least {WAITS} waits");
        for (k, answer) in answers.iter().enumerate() {
            let meant = answer["wait"].as_u64().unwrap();
            assert!(
                meant <= k as u64,
                "the answer taken at wait {k} was written for a later wait: {answer}"
            );
        }
    }
    let conflicts: u64 = tallies.iter().map(|t| t.conflicts).sum();
    assert!(conflicts > 0, "the answers raced");
    for (i, tally) in tallies.iter().enumerate() {
        let by = format!("answerer-{i}");
        let taken = answers.iter().filter(|a| a["by"] == by.as_str()).count();
        assert_eq!(
            taken,
            tally.won.len(),
            "{by}: each answer it won is in the trail"
        );
        if per_wait {
            assert_eq!(tally.stale, 0);
        }
    }
    if per_wait {
        for (k, answer) in answers.iter().enumerate() {
            assert_eq!(
                answer["wait"], k as u64,
                "the answer taken at wait {k} was meant for it: {answer}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_resumes_of_a_looping_run_on_sqlite_leave_it_never_claimed() {
    race(TestStore::sqlite(), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_resumes_of_a_looping_run_on_postgres_leave_it_never_claimed() {
    race(TestStore::postgres(), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_answers_each_meant_for_one_wait_on_sqlite_take_exactly_one_per_wait() {
    race(TestStore::sqlite(), true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_answers_each_meant_for_one_wait_on_postgres_take_exactly_one_per_wait() {
    race(TestStore::postgres(), true).await;
}
