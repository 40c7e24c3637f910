//! Work for workers on a real SQLite store: submissions (idempotent, scheduled), answers
//! queued, claimed runs continued (expired waits, deadlines passed while waiting), and
//! events that start workflows (publish, triggers, dispatch exactly once, unmatched kept).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use claij_core::store::{Durability, EventStatus, RunStore};
use claij_core::{Fsm, load_str};
use claij_engine::{ActionRegistry, Engine, RunOptions, RunStatus, Submission};
use claij_store::roles::Store;
use serde_json::json;

async fn sqlite(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    let path = dir.path().join("claij.db");
    claij_store::open(&path.display().to_string(), Durability::Normal)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The store seen as the engine sees it.
fn runs(store: &Arc<dyn Store>) -> Arc<dyn RunStore> {
    store.clone()
}

fn load(engine: &Engine, text: &str) -> Arc<Fsm> {
    Arc::new(load_str("test.yaml", text, engine.registry()).unwrap_or_else(|e| panic!("{e}")))
}

fn options(store: &Arc<dyn Store>, owner: &str) -> RunOptions {
    RunOptions {
        store: Some(store.clone()),
        owner: Some(owner.into()),
        ..RunOptions::default()
    }
}

/// Claims everything due for `owner` and continues it; returns the runs continued.
async fn work(engine: &Engine, store: &Arc<dyn Store>, owner: &str) -> Vec<String> {
    let mut done = Vec::new();
    loop {
        for event in store.claim_events(owner, far(), 10, &[]).await.unwrap() {
            engine.dispatch(&runs(store), &event).await.unwrap();
        }
        let claimed = store.claim_due(owner, far(), 10, &[]).await.unwrap();
        if claimed.is_empty() {
            return done;
        }
        for before in claimed {
            let fsm = engine.stored_fsm(store.as_ref(), &before).await.unwrap();
            engine
                .continue_claimed(fsm, &before, options(store, owner))
                .await
                .unwrap();
            done.push(before.id);
        }
    }
}

fn far() -> SystemTime {
    SystemTime::now() + Duration::from_secs(3600)
}

const WAITING: &str = r#"
id: waiting
config: {deadline: 1s}
states:
  - id: ask
    action: human
    config: {expires: 30s, on_expiry: late, on_failure: missed}
  - {id: done, action: end}
  - {id: late, action: end}
  - {id: missed, action: end}
xitions:
  - id: [start, ask]
    schema: {type: object, required: [n]}
  - id: [ask, done]
    schema: {type: object, required: [ok]}
  - id: [ask, late]
  - id: [ask, missed]
"#;

#[tokio::test]
async fn submissions_are_queued_once_per_key_and_answers_go_back_to_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir).await;
    let engine = Engine::new(Arc::new(ActionRegistry::durable()));
    let fsm = load(
        &engine,
        WAITING.replace("deadline: 1s", "deadline: 1h").as_str(),
    );
    let key = Submission {
        idempotency_key: Some("order-1".into()),
        ..Submission::default()
    };
    let first = engine
        .submit(
            fsm.clone(),
            json!({"n": 1}),
            options(&store, "cli"),
            key.clone(),
        )
        .await
        .unwrap();
    let again = engine
        .submit(fsm.clone(), json!({"n": 2}), options(&store, "cli"), key)
        .await
        .unwrap();
    assert!(first.created && !again.created);
    assert_eq!(first.run_id, again.run_id);
    let refused = engine
        .submit(
            fsm.clone(),
            json!({}),
            options(&store, "cli"),
            Submission::default(),
        )
        .await;
    assert!(refused.is_err(), "an input its entry refuses is not queued");
    let queued = store.run(&first.run_id).await.unwrap();
    assert_eq!(
        (queued.status, queued.lease.clone()),
        (RunStatus::Running, None)
    );

    assert_eq!(
        work(&engine, &store, "w1").await,
        vec![first.run_id.clone()]
    );
    assert_eq!(
        store.run(&first.run_id).await.unwrap().status,
        RunStatus::Suspended
    );
    // A refused answer changes nothing; a good one is committed and queued.
    assert!(
        engine
            .answer(
                fsm.clone(),
                &first.run_id,
                json!({"id": ["ask", "done"]}),
                options(&store, "cli")
            )
            .await
            .is_err()
    );
    assert_eq!(
        store.run(&first.run_id).await.unwrap().status,
        RunStatus::Suspended
    );
    engine
        .answer(
            fsm.clone(),
            &first.run_id,
            json!({"id": ["ask", "done"], "ok": true}),
            options(&store, "cli"),
        )
        .await
        .unwrap();
    let answered = store.run(&first.run_id).await.unwrap();
    assert_eq!(
        (
            answered.status,
            answered.lease.clone(),
            answered.state.as_str()
        ),
        (RunStatus::Running, None, "done")
    );
    assert!(
        engine
            .answer(
                fsm.clone(),
                &first.run_id,
                json!({"id": ["ask", "done"], "ok": true}),
                options(&store, "cli")
            )
            .await
            .is_err(),
        "a second answer is refused"
    );
    assert_eq!(
        work(&engine, &store, "w2").await,
        vec![first.run_id.clone()]
    );
    let done = store.run(&first.run_id).await.unwrap();
    assert_eq!(
        (done.status, done.state.as_str()),
        (RunStatus::Completed, "done")
    );
    assert_eq!(done.trail_len, 2, "the input and the answer, once each");

    // A scheduled start waits for its time.
    let later = engine
        .submit(
            fsm,
            json!({"n": 3}),
            options(&store, "cli"),
            Submission {
                not_before: Some(far()),
                ..Submission::default()
            },
        )
        .await
        .unwrap();
    assert!(work(&engine, &store, "w1").await.is_empty());
    assert_eq!(store.run(&later.run_id).await.unwrap().lease, None);
    assert_eq!(store.queue().await.unwrap().scheduled, 1);
}

#[tokio::test]
async fn a_deadline_passed_while_waiting_is_followed_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir).await;
    let engine = Engine::new(Arc::new(ActionRegistry::durable()));
    let fsm = load(&engine, WAITING);
    let run = engine
        .submit(
            fsm,
            json!({"n": 1}),
            options(&store, "cli"),
            Submission::default(),
        )
        .await
        .unwrap();
    work(&engine, &store, "w1").await;
    let waiting = store.run(&run.run_id).await.unwrap();
    let wait = waiting.wait.expect("a wait");
    assert!(wait.deadline_at.is_some() && wait.deadline_at < wait.expires_at);
    assert_eq!(
        store.due().await.unwrap().next,
        wait.deadline_at,
        "the deadline is the next timer"
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(work(&engine, &store, "w1").await, vec![run.run_id.clone()]);
    let trail = store.trail(&run.run_id, 0).await.unwrap();
    let ended = store.run(&run.run_id).await.unwrap();
    assert_eq!(
        (ended.status, ended.state.as_str()),
        (RunStatus::Completed, "missed")
    );
    let failures: Vec<&str> = trail
        .iter()
        .filter_map(|e| e.failure.as_ref().map(|f| f.message.as_str()))
        .collect();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(failures[0].contains("deadline"), "{failures:?}");
    assert!(work(&engine, &store, "w1").await.is_empty(), "fired once");
}

const PUBLISHER: &str = r#"
id: intake
states:
  - id: announce
    action: publish
    config: {topic: orders.created}
  - {id: done, action: end}
xitions:
  - id: [start, announce]
  - id: [announce, done]
"#;

const SUBSCRIBER: &str = r#"
id: shipping
triggers:
  - on: orders.created
    schema: {type: object, required: [order_id]}
states:
  - id: ship
    action: transform
    config: {template: '{"id": ["ship", "shipped"], "order_id": {{ event.order_id }}}'}
  - {id: shipped, action: end}
xitions:
  - id: [start, ship]
  - id: [ship, shipped]
"#;

#[tokio::test]
async fn published_events_start_each_subscriber_once_and_unmatched_ones_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir).await;
    let engine = Engine::new(Arc::new(ActionRegistry::durable()));
    let publisher = load(&engine, PUBLISHER);
    let subscriber = load(&engine, SUBSCRIBER);
    assert_eq!(
        engine.subscribe(store.as_ref(), &subscriber).await.unwrap(),
        1
    );
    let out = engine
        .run(
            publisher.clone(),
            json!({"order_id": 7}),
            options(&store, "cli"),
        )
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Completed);
    engine
        .run(
            publisher,
            json!({"note": "no order id"}),
            options(&store, "cli"),
        )
        .await
        .unwrap();
    let pending = store.events(Some(EventStatus::Pending)).await.unwrap();
    assert_eq!(pending.len(), 2);
    assert_eq!(
        pending[0].id,
        format!("{}:1", out.run_id),
        "RUN:SEQ of the publishing entry"
    );
    assert_eq!(
        pending[0].event,
        json!({"order_id": 7}),
        "published without its id"
    );

    let continued = work(&engine, &store, "w1").await;
    assert_eq!(continued.len(), 1, "one run of the subscriber");
    let shipped = store.run(&continued[0]).await.unwrap();
    assert_eq!(
        (shipped.fsm_id.as_str(), shipped.status),
        ("shipping", RunStatus::Completed)
    );
    let dispatched = store.events(Some(EventStatus::Dispatched)).await.unwrap();
    assert_eq!(dispatched.len(), 1);
    assert_eq!(dispatched[0].runs, [continued[0].clone()]);
    let unmatched = store.events(Some(EventStatus::Unmatched)).await.unwrap();
    assert_eq!(unmatched.len(), 1);
    let note = unmatched[0].note.clone().unwrap_or_default();
    assert!(
        note.contains("shipping") && note.contains("order_id"),
        "{note}"
    );

    // Dispatched again (a worker that died before settling it): nothing starts twice.
    let again = engine
        .dispatch(&runs(&store), &dispatched[0])
        .await
        .unwrap();
    assert_eq!(again.runs, dispatched[0].runs);
    assert!(work(&engine, &store, "w1").await.is_empty());
    let shipping_runs = store
        .runs(&claij_core::store::RunFilter {
            fsm_id: Some("shipping".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(shipping_runs.len(), 1);
}

#[test]
fn triggers_are_checked_when_documents_load() {
    let engine = Engine::new(Arc::new(ActionRegistry::durable()));
    let bad = SUBSCRIBER.replace(
        "required: [order_id]}",
        "required: 7}\n    entry: [ship, shipped]",
    );
    let err = load_str("bad.yaml", &bad, engine.registry())
        .map(|_| ())
        .expect_err("refused")
        .to_string();
    assert!(
        err.contains("triggers[0].schema") || err.contains("$.triggers[0]"),
        "{err}"
    );
    assert!(err.contains("not an entry transition"), "{err}");
    let no_topic = SUBSCRIBER.replace("  - on: orders.created\n", "  - schema: {}\n");
    let err = load_str("bad.yaml", &no_topic, engine.registry())
        .map(|_| ())
        .expect_err("refused")
        .to_string();
    assert!(err.contains("on"), "{err}");
}

#[tokio::test]
async fn a_claimer_that_dies_before_its_first_commit_leaves_the_wait_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir).await;
    let engine = Engine::new(Arc::new(ActionRegistry::durable()));
    let short = WAITING
        .replace("deadline: 1s", "deadline: 1h")
        .replace("expires: 30s", "expires: 1s");
    let fsm = load(&engine, &short);
    let expiring = engine
        .submit(
            fsm.clone(),
            json!({"n": 1}),
            options(&store, "cli"),
            Submission::default(),
        )
        .await
        .unwrap();
    work(&engine, &store, "w1").await;
    let expires_at = store
        .run(&expiring.run_id)
        .await
        .unwrap()
        .wait
        .unwrap()
        .expires_at;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // w1 claims the expired wait and dies before acting on it.
    let claimed = store.claim_due("w1", far(), 10, &[]).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let left = store.run(&expiring.run_id).await.unwrap();
    assert_eq!(left.status, RunStatus::Running);
    assert_eq!(
        left.wait.as_ref().and_then(|w| w.expires_at),
        expires_at,
        "the wait is kept"
    );
    // w2 takes over w1's runs: the expiry is followed now, not waited for again.
    let taken = store
        .claim_due("w2", far(), 10, &["w1".to_owned()])
        .await
        .unwrap();
    assert_eq!(taken.len(), 1);
    let fsm2 = engine.stored_fsm(store.as_ref(), &taken[0]).await.unwrap();
    let out = engine
        .continue_claimed(fsm2, &taken[0], options(&store, "w2"))
        .await
        .unwrap();
    assert_eq!(
        (out.status, out.state.as_str()),
        (RunStatus::Completed, "late")
    );
    let expiries = out
        .trail
        .iter()
        .filter(|e| {
            e.failure
                .as_ref()
                .is_some_and(|f| f.message.contains("expired"))
        })
        .count();
    assert_eq!(expiries, 1);

    // An answer lost with the claimer that had it: the run waits again, for the same wait.
    let waiting = engine
        .submit(
            fsm,
            json!({"n": 2}),
            options(&store, "cli"),
            Submission::default(),
        )
        .await
        .unwrap();
    work(&engine, &store, "w1").await;
    let found = store.run(&waiting.run_id).await.unwrap();
    let wait = found.wait.clone().unwrap();
    store
        .claim(
            &waiting.run_id,
            claij_core::store::ClaimFrom::wait_of(&found),
            "answerer",
            SystemTime::now(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(
        work(&engine, &store, "w2").await,
        vec![waiting.run_id.clone()]
    );
    let again = store.run(&waiting.run_id).await.unwrap();
    assert_eq!(again.status, RunStatus::Suspended);
    assert_eq!(again.wait, Some(wait), "its expiry is not pushed back");
    assert_eq!(again.trail_len, 1, "nothing was appended: the input only");
}
