//! Budgets on a real SQLite store, with a stand-in for a model call that goes through
//! the attempt's meter as the `llm` action's calls do (the model layer's own tests and
//! claij's run the real layer): a fork whose branches together cross a shared budget
//! stops the whole tree at the crossing and, resumed with more, ends with the trails of
//! an uncapped run; `on_budget` routes; `time` leaves waiting out; calls in flight when a
//! process dies are counted when the run is taken over.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use claij_core::budget::{Budget, Limit, Spend, is_pause};
use claij_core::store::{Durability, RunStore};
use claij_core::{FailureKind, Fsm, TrailEntry, Usage, load_file};
use claij_engine::{
    Action, ActionError, ActionInput, ActionOutput, ActionRegistry, BoxFuture, Engine, Outcome,
    RunOptions, RunStatus,
};
use serde_json::json;

/// A model call stand-in: asks the meter for `tokens` in and out at `cost`, (optionally)
/// takes `sleep_ms`, then reports that usage and takes the transition to `to`. With
/// `hang` set, the first call never answers (a process that dies in a call).
struct Priced {
    hang: Arc<AtomicBool>,
}

impl Action for Priced {
    fn touches(&self) -> &'static [claij_engine::Field] {
        &[]
    }

    fn run<'a>(&'a self, input: ActionInput<'a>) -> BoxFuture<'a, Result<Outcome, ActionError>> {
        Box::pin(async move {
            let c = &input.state.config;
            let tokens = c["tokens"].as_u64().unwrap_or(100);
            let cost = c["cost"].as_f64().unwrap_or(0.1);
            let at_most = Spend {
                input_tokens: tokens,
                output_tokens: tokens,
                cost_usd: cost,
                calls: 1,
                ..Spend::default()
            };
            input
                .meter
                .before_call("stub-model", at_most)
                .await
                .map_err(|e| ActionError::failed(e.to_string()))?;
            if c["hang"] == true && self.hang.swap(false, Ordering::SeqCst) {
                std::future::pending::<()>().await;
            }
            if let Some(ms) = c["sleep_ms"].as_u64() {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            let usage = Usage {
                input_tokens: tokens,
                output_tokens: tokens,
                cost_usd: Some(cost),
                ..Usage::default()
            };
            input.meter.after_call(&at_most, Some(&usage));
            let to = c["to"].as_str().unwrap_or("end");
            let mut event = input.event.clone();
            event["id"] = json!([&*input.state.id, to]);
            let mut out = ActionOutput::event(event);
            out.model = Some("stub-model".into());
            Ok(Outcome::Emit(out))
        })
    }
}

fn engine(hang: &Arc<AtomicBool>) -> Engine {
    let mut registry = ActionRegistry::durable();
    registry
        .register("priced", Arc::new(Priced { hang: hang.clone() }))
        .unwrap();
    Engine::new(Arc::new(registry))
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn load(engine: &Engine, path: &Path) -> Arc<Fsm> {
    Arc::new(load_file(path, engine.registry()).unwrap_or_else(|e| panic!("{e}")))
}

async fn sqlite(dir: &Path) -> Arc<dyn RunStore> {
    claij_store::open(
        &dir.join("claij.db").display().to_string(),
        Durability::Normal,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

fn durable(store: &Arc<dyn RunStore>, run_id: &str, budget: Option<Budget>) -> RunOptions {
    RunOptions {
        store: Some(store.clone()),
        run_id: Some(run_id.into()),
        budget,
        ..RunOptions::default()
    }
}

/// A member of the panel: two priced calls.
const MEMBER: &str = r#"
id: member
states:
  - {id: think, action: priced, config: {cost: 0.1, to: answer}}
  - {id: answer, action: priced, config: {cost: 0.1, to: end}}
  - {id: end, action: end}
xitions:
  - id: [start, think]
  - id: [think, answer]
  - id: [answer, end]
"#;

/// A chairman's call, then a panel of three members, then a closing call.
const PANEL: &str = r#"
id: panel
states:
  - {id: open, action: priced, config: {cost: 0.1, to: panel}}
  - id: panel
    action: fork
    config: {fsm: member.yaml, over: /items, success_to: close, failure_to: failed}
  - {id: close, action: priced, config: {cost: 0.1, to: end}}
  - {id: end, action: end}
  - {id: failed, action: end}
xitions:
  - id: [start, open]
  - id: [open, panel]
  - id: [panel, close]
  - id: [panel, failed]
  - id: [close, end]
"#;

/// Every run of the tree under `root` (itself first), by id with the root's prefix cut.
async fn tree(store: &Arc<dyn RunStore>, root: &str) -> Vec<(String, Vec<TrailEntry>)> {
    let mut ids = vec![root.to_owned()];
    let mut out = Vec::new();
    while let Some(id) = ids.pop() {
        let trail = store.trail(&id, 0).await.unwrap();
        for run in store
            .runs(&claij_core::store::RunFilter::default())
            .await
            .unwrap()
        {
            if run.parent.as_deref() == Some(&id) {
                ids.push(run.id);
            }
        }
        out.push((id[root.len()..].to_owned(), trail));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// What a trail of the tree under `root` says, without times, sequence numbers, pauses
/// or the root's id (branches' reports name their runs).
fn said(trail: &[TrailEntry], root: &str) -> Vec<String> {
    trail
        .iter()
        .filter(|e| !is_pause(e))
        .map(|e| {
            json!([
                e.from,
                e.to,
                e.event,
                e.attempt,
                e.model,
                e.usage,
                e.failure.as_ref().map(|f| f.kind.to_string())
            ])
            .to_string()
            .replace(&format!("\"{root}."), "\"ROOT.")
        })
        .collect()
}

#[tokio::test]
async fn a_fork_crossing_a_shared_budget_stops_the_tree_and_resumes_to_the_uncapped_trails() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "member.yaml", MEMBER);
    let hang = Arc::new(AtomicBool::new(false));
    let engine = engine(&hang);
    let fsm = load(&engine, &write(dir.path(), "panel.yaml", PANEL));
    let store = sqlite(dir.path()).await;
    let input = json!({"items": [{"n": 1}, {"n": 2}, {"n": 3}]});

    let free = engine
        .run(fsm.clone(), input.clone(), durable(&store, "free", None))
        .await
        .unwrap();
    assert_eq!(free.status, RunStatus::Completed, "{:#?}", free.trail);
    // 1 + 3 × 2 + 1 calls at $0.10.
    let spent = store.tree_spend("free").await.unwrap();
    assert_eq!(spent.calls, 8);
    assert!((spent.cost_usd - 0.8).abs() < 1e-9, "{spent:?}");
    assert_eq!(spent.tokens(), 8 * 200);

    // $0.45 lets the opening call and three of the branches' six through: the fourth
    // branch call would cross it, so the whole tree stops there.
    let cap = Budget::parse("cost=0.45").unwrap();
    let capped = engine
        .run(
            fsm.clone(),
            input.clone(),
            durable(&store, "capped", Some(cap)),
        )
        .await
        .unwrap();
    assert_eq!(capped.status, RunStatus::Suspended, "{:?}", capped.trail);
    let wait = capped.wait.clone().unwrap();
    assert_eq!(wait.state, "panel");
    // Which branches got the budget's calls depends on how they were scheduled: one may
    // have finished; the others stopped.
    assert!(!wait.children.is_empty(), "{wait:?}");
    let spent = store.tree_spend("capped").await.unwrap();
    assert_eq!(spent.calls, 4, "never past the budget: {spent:?}");
    assert!(spent.cost_usd <= 0.45 + 1e-9);
    let mut stopped = 0;
    for child in &wait.children {
        let record = store.run(child).await.unwrap();
        assert_eq!(record.status, RunStatus::Suspended, "{child}");
        let pause = record.wait.unwrap().budget.expect("stopped for the budget");
        assert_eq!(pause.run, "capped", "the budget is the tree's");
        assert_eq!(pause.limit, Limit::Cost);
        assert_eq!(pause.asked.calls, 1);
        assert!(pause.spent.cost_usd + pause.asked.cost_usd > 0.45);
        let trail = store.trail(child, 0).await.unwrap();
        let last = trail.last().unwrap();
        assert_eq!(last.failure.as_ref().unwrap().kind, FailureKind::Budget);
        assert!(is_pause(last));
        stopped += 1;
    }
    assert_eq!(stopped, wait.children.len());

    // An input is refused; resuming without more budget stops again, spending nothing.
    let refused = engine
        .resume(
            fsm.clone(),
            &wait.children[0],
            Some(json!({"id": ["think", "answer"]})),
            durable(&store, &wait.children[0], None),
        )
        .await;
    assert!(refused.is_err());
    let again = engine
        .resume(fsm.clone(), "capped", None, durable(&store, "capped", None))
        .await
        .unwrap();
    assert_eq!(again.status, RunStatus::Suspended);
    assert_eq!(store.tree_spend("capped").await.unwrap().calls, 4);

    // Raised: it goes on where it stopped and ends as the uncapped run did.
    store
        .set_budget("capped", Some(&Budget::parse("cost=2").unwrap()))
        .await
        .unwrap();
    let done = engine
        .resume(fsm, "capped", None, durable(&store, "capped", None))
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.trail);
    let spent = store.tree_spend("capped").await.unwrap();
    assert_eq!(spent.calls, 8);
    assert!((spent.cost_usd - 0.8).abs() < 1e-9);
    let (free_tree, capped_tree) = (tree(&store, "free").await, tree(&store, "capped").await);
    assert_eq!(free_tree.len(), 4);
    assert_eq!(capped_tree.len(), 4);
    for ((a_id, a), (b_id, b)) in free_tree.iter().zip(&capped_tree) {
        assert_eq!(a_id, b_id);
        assert_eq!(said(a, "free"), said(b, "capped"), "run {b_id}");
    }
    assert!(
        capped_tree.iter().any(|(_, t)| t.iter().any(is_pause)),
        "the pauses stay in the trails"
    );
}

#[tokio::test]
async fn on_budget_routes_instead_of_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let hang = Arc::new(AtomicBool::new(false));
    let engine = engine(&hang);
    let doc = r#"
id: frugal
config: {budget: {calls: 1}}
states:
  - {id: first, action: priced, config: {to: second}}
  - {id: second, action: priced, config: {to: end, on_budget: cheap}}
  - {id: end, action: end}
  - {id: cheap, action: end}
xitions:
  - id: [start, first]
  - id: [first, second]
  - id: [second, end]
  - id: [second, cheap]
"#;
    let fsm = load(&engine, &write(dir.path(), "frugal.yaml", doc));
    let store = sqlite(dir.path()).await;
    let out = engine
        .run(fsm, json!({}), durable(&store, "r", None))
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Completed);
    assert_eq!(out.state, "cheap");
    let event = out.result.unwrap();
    assert_eq!(event["state"], "second");
    assert_eq!(event["budget"]["limit"], "calls");
    assert_eq!(event["budget"]["spent"]["calls"], 1);
    let record = store.run("r").await.unwrap();
    assert_eq!(
        record.budget.unwrap().calls,
        Some(1),
        "the document's budget"
    );
    assert_eq!(record.spend.calls, 1);
}

#[tokio::test]
async fn time_counts_running_not_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let hang = Arc::new(AtomicBool::new(false));
    let engine = engine(&hang);
    // 300 ms of work, a wait for a person, 300 ms more, then calls of 400 ms until the
    // second of running time is used up.
    let doc = r#"
id: slow
config: {budget: {time: 1s}}
states:
  - {id: work, action: priced, config: {sleep_ms: 300, to: ask}}
  - {id: ask, action: human}
  - {id: more, action: priced, config: {sleep_ms: 300, to: loop}}
  - {id: loop, action: priced, config: {sleep_ms: 400, to: loop2}}
  - {id: loop2, action: priced, config: {sleep_ms: 400, to: loop}}
  - {id: end, action: end}
xitions:
  - id: [start, work]
  - id: [work, ask]
  - id: [ask, more]
  - id: [more, loop]
  - id: [loop, loop2]
  - id: [loop2, loop]
  - id: [loop2, end]
"#;
    let fsm = load(&engine, &write(dir.path(), "slow.yaml", doc));
    let store = sqlite(dir.path()).await;
    let out = engine
        .run(fsm.clone(), json!({}), durable(&store, "t", None))
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Suspended);
    assert!(out.wait.unwrap().budget.is_none(), "waits for the person");
    // Waiting longer than the whole budget does not use it up.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let out = engine
        .resume(
            fsm,
            "t",
            Some(json!({"id": ["ask", "more"]})),
            durable(&store, "t", None),
        )
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Suspended, "{:?}", out.trail);
    let pause = out.wait.unwrap().budget.expect("stopped for time");
    assert_eq!(pause.limit, Limit::Time);
    assert!(pause.spent.time_ms >= 1000, "{pause:?}");
    let record = store.run("t").await.unwrap();
    assert!(record.spend.waiting_ms >= 1200, "{:?}", record.spend);
    assert!(
        record.spend.time_ms < 2500,
        "the wait is not running time: {:?}",
        record.spend
    );
    // It got past the wait and did some of the loop's work before its second was up.
    assert!(
        out.trail
            .iter()
            .any(|e| &*e.from == "more" && e.is_transition())
    );
}

#[tokio::test]
async fn calls_in_flight_when_a_process_dies_are_counted_when_the_run_is_taken_over() {
    let dir = tempfile::tempdir().unwrap();
    let hang = Arc::new(AtomicBool::new(true));
    let engine = Arc::new(engine(&hang));
    let doc = r#"
id: fragile
states:
  - {id: call, action: priced, config: {hang: true, tokens: 50, cost: 0.25, to: end}}
  - {id: end, action: end}
xitions:
  - id: [start, call]
  - id: [call, end]
"#;
    let fsm = load(&engine, &write(dir.path(), "fragile.yaml", doc));
    let store = sqlite(dir.path()).await;
    let options = RunOptions {
        lease: Some(Duration::from_millis(300)),
        owner: Some("gone-host:1:1".into()),
        ..durable(&store, "f", None)
    };
    let running = {
        let (engine, fsm) = (engine.clone(), fsm.clone());
        tokio::spawn(async move { engine.run(fsm, json!({}), options).await })
    };
    // The call is recorded as in flight before it is made.
    let mut noted = None;
    for _ in 0..200 {
        noted = store.run("f").await.ok().and_then(|r| r.pending);
        if noted.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let noted = noted.expect("the call in flight is in the store");
    assert_eq!(noted.models, vec!["stub-model".to_owned()]);
    assert!((noted.at_most.cost_usd - 0.25).abs() < 1e-9);
    // The process dies in the call: nothing else is written.
    running.abort();
    let _ = running.await;
    tokio::time::sleep(Duration::from_millis(400)).await;

    let out = engine
        .resume(fsm, "f", None, durable(&store, "f", None))
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Completed);
    let lost = out
        .trail
        .iter()
        .find(|e| {
            e.failure
                .as_ref()
                .is_some_and(|f| f.kind == FailureKind::Interrupted)
        })
        .expect("the lost call has its entry");
    assert!(is_pause(lost), "not an attempt");
    assert_eq!(lost.usage.as_ref().unwrap().cost_usd, Some(0.25));
    let call = out
        .trail
        .iter()
        .find(|e| &*e.from == "call" && e.is_transition())
        .unwrap();
    assert_eq!(
        call.attempt, 1,
        "the call made again is still the first attempt"
    );
    let record = store.run("f").await.unwrap();
    assert!(record.pending.is_none());
    assert_eq!(
        record.spend.calls, 2,
        "the lost call and the one made again"
    );
    assert!((record.spend.cost_usd - 0.5).abs() < 1e-9);
}

#[tokio::test]
async fn a_run_without_a_store_ends_failed_at_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let hang = Arc::new(AtomicBool::new(false));
    let engine = engine(&hang);
    let doc = r#"
id: twice
states:
  - {id: first, action: priced, config: {to: second}}
  - {id: second, action: priced, config: {to: end}}
  - {id: end, action: end}
xitions:
  - id: [start, first]
  - id: [first, second]
  - id: [second, end]
"#;
    let fsm = load(&engine, &write(dir.path(), "twice.yaml", doc));
    let out = engine
        .run(
            fsm,
            json!({}),
            RunOptions {
                budget: Some(Budget::parse("calls=1").unwrap()),
                ..RunOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Failed);
    assert_eq!(out.state, "second");
    let last = out.trail.last().unwrap();
    assert_eq!(last.failure.as_ref().unwrap().kind, FailureKind::Budget);
    assert_eq!(out.spend.calls, 1);
}
