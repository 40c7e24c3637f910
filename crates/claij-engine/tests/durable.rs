//! Durable runs on a real SQLite store: suspension and resume, refused input changing
//! nothing, concurrent resumes, crash recovery, expired waits, interrupts from outside.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use claij_core::store::{Durability, RunStore, StoreError};
use claij_core::{FailureKind, Fsm, TrailEntry, load_str};
use claij_engine::{
    Action, ActionError, ActionInput, ActionOutput, ActionRegistry, BoxFuture, Engine, InputError,
    Outcome, RunError, RunOptions, RunStatus,
};
use serde_json::{Value, json};

async fn sqlite(dir: &tempfile::TempDir) -> Arc<dyn RunStore> {
    let path = dir.path().join("claij.db");
    claij_store::open(&path.display().to_string(), Durability::Normal)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

fn load(engine: &Engine, text: &str) -> Arc<Fsm> {
    Arc::new(load_str("test.yaml", text, engine.registry()).unwrap_or_else(|e| panic!("{e}")))
}

fn durable(store: &Arc<dyn RunStore>) -> RunOptions {
    RunOptions {
        store: Some(store.clone()),
        ..RunOptions::default()
    }
}

const APPROVAL: &str = r#"
id: approval
states:
  - id: ask
    action: human
    config: {prompt: "Ship it?", max_attempts: 2}
  - {id: shipped, action: end}
  - {id: stopped, action: end}
xitions:
  - id: [start, ask]
  - id: [ask, shipped]
    schema: {type: object, required: [approver], properties: {approver: {type: string, minLength: 2}}}
  - id: [ask, stopped]
"#;

#[tokio::test]
async fn a_human_state_suspends_and_a_valid_input_resumes_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir).await;
    let engine = Engine::new(Arc::new(ActionRegistry::durable()));
    let fsm = load(&engine, APPROVAL);
    let out = engine
        .run(fsm.clone(), json!({"version": "1.2"}), durable(&store))
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Suspended);
    assert_eq!(out.state, "ask");
    let wait = out.wait.clone().unwrap();
    assert_eq!(wait.prompt.as_deref(), Some("Ship it?"));
    assert_eq!(
        wait.transitions,
        vec![
            ("ask".into(), "shipped".into()),
            ("ask".into(), "stopped".into())
        ]
    );
    let record = store.run(&out.run_id).await.unwrap();
    assert_eq!(record.status, RunStatus::Suspended);
    assert_eq!(record.wait.as_ref(), Some(&wait));
    assert!(record.lease.is_none(), "a suspended run holds no lease");

    // Refused inputs change nothing.
    for bad in [
        json!({"id": ["ask", "shipped"], "approver": "x"}),
        json!({"id": ["ask", "elsewhere"]}),
        json!({"approver": "ada"}),
    ] {
        let err = engine
            .resume(fsm.clone(), &out.run_id, Some(bad.clone()), durable(&store))
            .await
            .unwrap_err();
        assert!(matches!(err, RunError::Input(_)), "{bad}: {err}");
        let after = store.run(&out.run_id).await.unwrap();
        assert_eq!(after, record, "a refused input must not change the run");
    }
    let err = engine
        .resume(
            fsm.clone(),
            &out.run_id,
            Some(json!({"id": ["ask", "shipped"], "approver": "x"})),
            durable(&store),
        )
        .await
        .unwrap_err();
    match err {
        RunError::Input(InputError::Invalid { issues, .. }) => {
            assert_eq!(issues[0].instance_path, "/approver")
        }
        other => panic!("{other}"),
    }

    let done = engine
        .resume(
            fsm.clone(),
            &out.run_id,
            Some(json!({"id": ["ask", "shipped"], "approver": "ada"})),
            durable(&store),
        )
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Completed);
    assert_eq!(done.result.unwrap()["approver"], "ada");
    let stored = store.trail(&out.run_id, 0).await.unwrap();
    assert_eq!(stored, done.trail, "the store holds exactly the trail");
    let record = store.run(&out.run_id).await.unwrap();
    assert_eq!(
        (record.status, record.state.as_str(), record.wait),
        (RunStatus::Completed, "shipped", None)
    );
    // A finished run cannot be resumed.
    let err = engine
        .resume(
            fsm,
            &out.run_id,
            Some(json!({"id": ["ask", "stopped"]})),
            durable(&store),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("is completed"), "{err}");
}

#[tokio::test]
async fn of_concurrent_resumes_exactly_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir).await;
    let engine = Arc::new(Engine::new(Arc::new(ActionRegistry::durable())));
    let fsm = load(&engine, APPROVAL);
    let out = engine
        .run(fsm.clone(), json!({}), durable(&store))
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (engine, fsm, store, run) = (
            engine.clone(),
            fsm.clone(),
            store.clone(),
            out.run_id.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let input = json!({"id": ["ask", "shipped"], "approver": format!("person-{i}")});
            engine.resume(fsm, &run, Some(input), durable(&store)).await
        }));
    }
    let mut wins = Vec::new();
    let mut conflicts = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(o) => wins.push(o),
            Err(RunError::Store(StoreError::Conflict { .. })) => conflicts += 1,
            Err(other) => panic!("unexpected: {other}"),
        }
    }
    assert_eq!(wins.len(), 1, "exactly one resume wins");
    assert_eq!(conflicts, 7);
    let trail = store.trail(&out.run_id, 0).await.unwrap();
    assert_eq!(trail.len(), 2, "one input appended, not eight");
    assert_eq!(
        trail[1].event["approver"],
        wins[0].result.as_ref().unwrap()["approver"]
    );
}

/// Counts calls and records the idempotency keys it saw; call number `stall_on` (0:
/// none) never returns (the process "dies" there).
struct Step {
    calls: AtomicU32,
    stall_on: AtomicU32,
    keys: std::sync::Mutex<Vec<String>>,
}

impl Action for Step {
    fn touches(&self) -> &'static [claij_engine::Field] {
        &[]
    }

    fn run<'a>(&'a self, input: ActionInput<'a>) -> BoxFuture<'a, Result<Outcome, ActionError>> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        self.keys.lock().unwrap().push(input.idempotency_key());
        let n = input.event.get("n").and_then(Value::as_u64).unwrap_or(0);
        let event = if n >= 5 {
            json!({"id": ["step", "done"], "n": n})
        } else {
            json!({"id": ["step", "step"], "n": n + 1})
        };
        let stall = call == self.stall_on.load(Ordering::SeqCst);
        Box::pin(async move {
            if stall {
                std::future::pending::<()>().await;
            }
            Ok(ActionOutput::event(event).into())
        })
    }
}

const STEPS: &str = r#"
id: steps
states:
  - {id: step, action: step}
  - {id: done, action: end}
xitions:
  - id: [start, step]
  - id: [step, step]
  - id: [step, done]
"#;

fn comparable(trail: &[TrailEntry]) -> Vec<(u64, String, Option<String>, Value, u32)> {
    trail
        .iter()
        .map(|e| {
            (
                e.seq,
                e.from.to_string(),
                e.to.as_deref().map(str::to_owned),
                e.event.clone(),
                e.attempt,
            )
        })
        .collect()
}

#[tokio::test]
async fn a_run_cut_off_mid_action_resumes_where_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir).await;
    let step = Arc::new(Step {
        calls: AtomicU32::new(0),
        stall_on: AtomicU32::new(0),
        keys: Default::default(),
    });
    let mut registry = ActionRegistry::with_builtins();
    registry.register("step", step.clone()).unwrap();
    let engine = Arc::new(Engine::new(Arc::new(registry)));
    let fsm = load(&engine, STEPS);

    // The uninterrupted trail, for comparison (in memory).
    let reference = engine
        .run(fsm.clone(), json!({"n": 0}), RunOptions::default())
        .await
        .unwrap();
    step.calls.store(0, Ordering::SeqCst);
    step.keys.lock().unwrap().clear();
    step.stall_on.store(4, Ordering::SeqCst);

    // A "process" that stalls in its 4th action and is then cut off (its future dropped).
    let options = RunOptions {
        store: Some(store.clone()),
        owner: Some("elsewhere:1:dead".into()),
        lease: Some(Duration::from_millis(300)),
        run_id: Some("r-crash".into()),
        ..RunOptions::default()
    };
    let cut = tokio::time::timeout(
        Duration::from_millis(500),
        engine.run(fsm.clone(), json!({"n": 0}), options),
    )
    .await;
    assert!(cut.is_err(), "the run was cut off");
    let record = store.run("r-crash").await.unwrap();
    assert_eq!(record.status, RunStatus::Running);
    assert_eq!(
        record.trail_len, 4,
        "input + 3 transitions committed before the 4th action"
    );

    // Until its lease expires nobody else may take it over.
    let early = engine
        .resume(fsm.clone(), "r-crash", None, durable(&store))
        .await;
    assert!(
        matches!(early, Err(RunError::Store(StoreError::Conflict { .. }))),
        "{early:?}"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let resumed = engine
        .resume(fsm.clone(), "r-crash", None, durable(&store))
        .await
        .unwrap();
    assert_eq!(resumed.status, RunStatus::Completed);
    assert_eq!(
        comparable(&resumed.trail),
        comparable(&reference.trail),
        "nothing lost, nothing duplicated"
    );
    assert_eq!(
        comparable(&store.trail("r-crash", 0).await.unwrap()),
        comparable(&reference.trail)
    );
    let keys = step.keys.lock().unwrap().clone();
    assert_eq!(
        keys[3], keys[4],
        "the in-flight action ran again with the same idempotency key"
    );
    assert_eq!(keys[3], "r-crash:4");
}

#[tokio::test]
async fn an_expired_wait_follows_its_route() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir).await;
    let engine = Engine::new(Arc::new(ActionRegistry::durable()));
    let doc = APPROVAL.replace(
        "config: {prompt: \"Ship it?\", max_attempts: 2}",
        "config: {prompt: \"Ship it?\", expires: 50ms, on_expiry: stopped}",
    );
    let fsm = load(&engine, &doc);
    let out = engine
        .run(fsm.clone(), json!({}), durable(&store))
        .await
        .unwrap();
    assert!(out.wait.as_ref().unwrap().expires_at.is_some());
    let early = engine
        .resume(fsm.clone(), &out.run_id, None, durable(&store))
        .await;
    assert!(
        matches!(early, Err(RunError::NotResumable { .. })),
        "{early:?}"
    );
    tokio::time::sleep(Duration::from_millis(80)).await;
    let done = engine
        .resume(fsm.clone(), &out.run_id, None, durable(&store))
        .await
        .unwrap();
    assert_eq!(
        (done.status, done.state.as_str()),
        (RunStatus::Completed, "stopped")
    );
    let kinds: Vec<_> = done
        .trail
        .iter()
        .filter_map(|e| e.failure.as_ref().map(|f| f.kind))
        .collect();
    assert_eq!(kinds, vec![FailureKind::Timeout]);
    assert_eq!(done.result.unwrap()["failure"]["kind"], "timeout");

    // Without a route, an expired wait fails the run.
    let doc = APPROVAL.replace(
        "config: {prompt: \"Ship it?\", max_attempts: 2}",
        "config: {expires: 10ms}",
    );
    let fsm = load(&engine, &doc);
    let out = engine
        .run(fsm.clone(), json!({}), durable(&store))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
    let done = engine
        .resume(fsm, &out.run_id, None, durable(&store))
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Failed);
}

#[tokio::test]
async fn interrupting_a_suspended_run_records_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir).await;
    let engine = Engine::new(Arc::new(ActionRegistry::durable()));
    let fsm = load(&engine, APPROVAL);
    let out = engine
        .run(fsm.clone(), json!({}), durable(&store))
        .await
        .unwrap();
    let record = claij_engine::interrupt(store.as_ref(), &out.run_id)
        .await
        .unwrap();
    assert_eq!(record.status, RunStatus::Interrupted);
    let trail = store.trail(&out.run_id, 0).await.unwrap();
    assert_eq!(
        trail.last().unwrap().failure.as_ref().unwrap().kind,
        FailureKind::Interrupted
    );
    let again = engine
        .resume(
            fsm,
            &out.run_id,
            Some(json!({"id": ["ask", "stopped"]})),
            durable(&store),
        )
        .await;
    assert!(again.is_err(), "an interrupted run stays interrupted");
}

/// Waits forever (until interrupted).
struct Forever;

impl Action for Forever {
    fn touches(&self) -> &'static [claij_engine::Field] {
        &[]
    }

    fn run<'a>(&'a self, _input: ActionInput<'a>) -> BoxFuture<'a, Result<Outcome, ActionError>> {
        Box::pin(std::future::pending())
    }
}

#[tokio::test]
async fn a_running_run_notices_an_interrupt_requested_from_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir).await;
    let mut registry = ActionRegistry::with_builtins();
    registry.register("step", Arc::new(Forever)).unwrap();
    let engine = Arc::new(Engine::new(Arc::new(registry)));
    let fsm = load(&engine, STEPS);
    let options = RunOptions {
        run_id: Some("r-long".into()),
        ..durable(&store)
    };
    let task = {
        let (engine, fsm) = (engine.clone(), fsm.clone());
        tokio::spawn(async move { engine.run(fsm, json!({"n": 0}), options).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Another process (a second store handle on the same file) asks for the interrupt.
    let other = sqlite(&dir).await;
    let record = claij_engine::interrupt(other.as_ref(), "r-long")
        .await
        .unwrap();
    assert_eq!(
        record.status,
        RunStatus::Running,
        "the owner is alive: it stops the run itself"
    );
    let out = tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("noticed within a heartbeat")
        .unwrap()
        .unwrap();
    assert_eq!(out.status, RunStatus::Interrupted);
    assert_eq!(
        other.run("r-long").await.unwrap().status,
        RunStatus::Interrupted
    );
}
