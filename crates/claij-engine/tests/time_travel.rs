//! Time travel: a stored run forked at one of its trail entries (`Engine::fork`), its
//! event kept or replaced, on a real SQLite store. The original never changes; nothing
//! before the fork point runs again; the states after it start child runs of their own
//! (sub-FSMs and fork branches alike), never sharing the original's, waiting ones
//! included.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

mod support;

use std::sync::Arc;

use claij_core::Fsm;
use claij_core::store::{ForkPoint, RunFilter, RunStore, StoreError};
use claij_engine::{ActionRegistry, Engine, ForkAt, InputError, RunError, RunOutcome, RunStatus};
use serde_json::{Value, json};
use support::{ASKER, DOUBLER, durable, load, sqlite, write};

/// `pick` routes the input to a sub-FSM (`doubled`) or to two fork branches (`fanned`),
/// each of the doubler; `[pick, doubled]` takes at most 100.
const DESK: &str = r#"
id: desk
config: {max_attempts: 2}
states:
  - id: pick
    action: transform
    config: {template: '{"id": ["pick", "{{ event.route }}"], "n": {{ event.n }}}'}
  - id: doubled
    action: fsm
    config: {fsm: doubler.yaml, success_to: done, failure_to: broken}
  - id: fanned
    action: fork
    config: {fsms: [doubler.yaml, doubler.yaml], success_to: joined, failure_to: broken}
  - {id: done, action: end}
  - {id: joined, action: end}
  - {id: broken, action: end}
xitions:
  - id: [start, pick]
    schema:
      type: object
      required: [route, n]
      properties: {route: {enum: [doubled, fanned]}, n: {type: integer}}
  - id: [pick, doubled]
    schema: {type: object, required: [n], properties: {n: {type: integer, maximum: 100}}}
  - id: [pick, fanned]
    schema: {type: object, required: [n], properties: {n: {type: integer}}}
  - id: [doubled, done]
  - id: [doubled, broken]
  - id: [fanned, joined]
  - id: [fanned, broken]
"#;

/// A parent whose sub-FSM waits for a person.
const WAITER: &str = r#"
id: waiter
states:
  - id: consult
    action: fsm
    config: {fsm: asker.yaml, success_to: done, failure_to: broken}
  - {id: done, action: end}
  - {id: broken, action: end}
xitions:
  - id: [start, consult]
  - id: [consult, done]
  - id: [consult, broken]
"#;

struct Desk {
    _dir: tempfile::TempDir,
    store: Arc<dyn RunStore>,
    engine: Engine,
    desk: Arc<Fsm>,
    waiter: Arc<Fsm>,
}

async fn desk() -> Desk {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "doubler.yaml", DOUBLER);
    write(dir.path(), "asker.yaml", ASKER);
    let engine = Engine::new(Arc::new(ActionRegistry::durable()));
    let desk = load(&engine, &write(dir.path(), "desk.yaml", DESK));
    let waiter = load(&engine, &write(dir.path(), "waiter.yaml", WAITER));
    let store = sqlite(dir.path()).await;
    Desk {
        _dir: dir,
        store,
        engine,
        desk,
        waiter,
    }
}

impl Desk {
    async fn run(&self, input: Value) -> RunOutcome {
        self.engine
            .run(self.desk.clone(), input, durable(&self.store))
            .await
            .unwrap()
    }

    async fn fork(
        &self,
        run: &str,
        seq: u64,
        event: Option<Value>,
    ) -> Result<RunOutcome, RunError> {
        self.engine
            .fork(
                self.desk.clone(),
                run,
                ForkAt { seq, event },
                durable(&self.store),
            )
            .await
    }

    /// Every run's record and trail, as JSON: what "nothing changed" compares.
    async fn everything(&self) -> Vec<Value> {
        let mut out = Vec::new();
        for record in self.store.runs(&RunFilter::default()).await.unwrap() {
            let trail = self.store.trail(&record.id, 0).await.unwrap();
            out.push(json!({"record": record, "trail": trail}));
        }
        out.sort_by_key(|v| v["record"]["id"].as_str().unwrap_or_default().to_owned());
        out
    }

    /// The ids of the runs whose parent is `run`.
    async fn children(&self, run: &str) -> Vec<String> {
        let mut ids: Vec<String> = self
            .store
            .runs(&RunFilter::default())
            .await
            .unwrap()
            .into_iter()
            .filter(|r| r.parent.as_deref() == Some(run))
            .map(|r| r.id)
            .collect();
        ids.sort();
        ids
    }
}

#[tokio::test]
async fn an_edited_event_takes_another_route_and_the_original_stays_as_it_was() {
    let d = desk().await;
    let original = d.run(json!({"route": "doubled", "n": 5})).await;
    assert_eq!(original.status, RunStatus::Completed);
    assert_eq!(original.state, "done");
    let before = d.everything().await;
    let original_trail = d.store.trail(&original.run_id, 0).await.unwrap();

    // As if `pick` had sent 7 to the fork branches.
    let fork = d
        .fork(
            &original.run_id,
            1,
            Some(json!({"id": ["pick", "fanned"], "n": 7})),
        )
        .await
        .unwrap();
    assert_eq!(fork.status, RunStatus::Completed, "{:#?}", fork.trail);
    assert_eq!(fork.state, "joined");
    assert_ne!(fork.run_id, original.run_id);
    let branches = &fork.result.as_ref().unwrap()["branches"];
    assert_eq!(branches[0]["result"]["n"], 14);
    assert_eq!(branches[1]["result"]["n"], 14);

    let trail = d.store.trail(&fork.run_id, 0).await.unwrap();
    // The entry before the fork point is the original's, unchanged; then the edited one,
    // made by no model; then the fork's own steps.
    assert_eq!(trail[0], original_trail[0]);
    assert_eq!(trail[1].to.as_deref(), Some("fanned"));
    assert_eq!(trail[1].event, json!({"id": ["pick", "fanned"], "n": 7}));
    assert!(trail[1].model.is_none() && trail[1].usage.is_none());
    assert_eq!(trail.last().unwrap().to.as_deref(), Some("joined"));
    let record = d.store.run(&fork.run_id).await.unwrap();
    assert_eq!(
        record.forked_from,
        Some(ForkPoint {
            run: original.run_id.clone(),
            seq: 1,
            edited: true
        })
    );
    assert_eq!(record.parent, None);

    // The fork's branches are its own; the original's child is untouched.
    assert_eq!(
        d.children(&fork.run_id).await,
        [
            format!("{}.2.0", fork.run_id),
            format!("{}.2.1", fork.run_id)
        ]
    );
    let mut after = d.everything().await;
    after.retain(|v| {
        let id = v["record"]["id"].as_str().unwrap();
        id != fork.run_id && !id.starts_with(&format!("{}.", fork.run_id))
    });
    assert_eq!(after, before, "the original runs and trails changed");
}

#[tokio::test]
async fn a_fork_before_a_sub_fsm_starts_a_child_of_its_own_and_one_after_it_starts_none() {
    let d = desk().await;
    let original = d.run(json!({"route": "doubled", "n": 5})).await;
    let child = format!("{}.2", original.run_id);
    assert_eq!(
        d.children(&original.run_id).await,
        std::slice::from_ref(&child)
    );

    // At the entry into `doubled`, kept: the sub-FSM runs again, as the fork's child.
    let again = d.fork(&original.run_id, 1, None).await.unwrap();
    assert_eq!(again.status, RunStatus::Completed);
    assert_eq!(again.result.as_ref().unwrap()["result"]["n"], 10);
    assert_eq!(
        d.children(&again.run_id).await,
        [format!("{}.2", again.run_id)]
    );
    assert_eq!(
        d.store.run(&again.run_id).await.unwrap().forked_from,
        Some(ForkPoint {
            run: original.run_id.clone(),
            seq: 1,
            edited: false
        })
    );
    assert_eq!(d.children(&original.run_id).await, [child]);

    // At the entry the sub-FSM's result made: nothing before it runs again.
    let after = d.fork(&original.run_id, 2, None).await.unwrap();
    assert_eq!(after.status, RunStatus::Completed);
    assert_eq!(after.state, "done");
    assert_eq!(after.result, original.result);
    assert!(d.children(&after.run_id).await.is_empty());
    assert_eq!(d.store.trail(&after.run_id, 0).await.unwrap().len(), 3);
}

#[tokio::test]
async fn a_failed_run_forked_at_its_input_with_a_better_one_completes() {
    let d = desk().await;
    // 500 is more than `[pick, doubled]` takes: both attempts fail, and so does the run.
    let failed = d.run(json!({"route": "doubled", "n": 500})).await;
    assert_eq!(failed.status, RunStatus::Failed);
    let trail = d.store.trail(&failed.run_id, 0).await.unwrap();
    assert!(trail[1].failure.is_some());

    // A failed attempt is no fork point.
    let before = d.everything().await;
    let refused = d.fork(&failed.run_id, 1, None).await.unwrap_err();
    assert!(
        matches!(&refused, RunError::NotForkable { seq: 1, reason, .. } if reason.contains("failed attempt of `pick`")),
        "{refused}"
    );
    assert_eq!(
        d.everything().await,
        before,
        "a refused fork stored something"
    );

    // The input replaced (its `id` left out: the entry's own): the fork goes through.
    let fixed = d
        .fork(
            &failed.run_id,
            0,
            Some(json!({"route": "doubled", "n": 50})),
        )
        .await
        .unwrap();
    assert_eq!(fixed.status, RunStatus::Completed);
    assert_eq!(fixed.result.as_ref().unwrap()["result"]["n"], 100);
    assert_eq!(
        d.store.run(&failed.run_id).await.unwrap().status,
        RunStatus::Failed
    );
}

#[tokio::test]
async fn a_refused_fork_names_what_is_wrong_and_stores_nothing() {
    let d = desk().await;
    let original = d.run(json!({"route": "doubled", "n": 5})).await;
    let before = d.everything().await;

    let past = d.fork(&original.run_id, 9, None).await.unwrap_err();
    assert!(
        matches!(&past, RunError::NotForkable { seq: 9, reason, .. } if reason.contains("past the end of the trail, which has 3 entries (0 to 2)")),
        "{past}"
    );
    // An event that does not leave the state that made the entry.
    let elsewhere = d
        .fork(
            &original.run_id,
            1,
            Some(json!({"id": ["doubled", "done"]})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&elsewhere, RunError::Input(InputError::NotFromState { state, seq: 1, routes, .. })
            if state == "pick" && routes.contains("[\"pick\",\"fanned\"]")),
        "{elsewhere}"
    );
    // An event its transition's schema refuses, each problem placed.
    let big = d
        .fork(&original.run_id, 1, Some(json!({"n": 1000})))
        .await
        .unwrap_err();
    match &big {
        RunError::Input(InputError::Invalid { from, to, issues }) => {
            assert_eq!((from.as_str(), to.as_str()), ("pick", "doubled"));
            assert_eq!(issues[0].instance_path, "/n", "{issues:?}");
        }
        other => panic!("{other}"),
    }
    let unknown = d.fork("no-such-run", 0, None).await.unwrap_err();
    assert!(
        matches!(unknown, RunError::Store(StoreError::NotFound { .. })),
        "{unknown}"
    );
    // A run of another definition.
    let other = d
        .engine
        .fork(
            d.waiter.clone(),
            &original.run_id,
            ForkAt::default(),
            durable(&d.store),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&other, RunError::NotResumable { reason, .. } if reason.contains("pinned")),
        "{other}"
    );
    assert_eq!(
        d.everything().await,
        before,
        "a refused fork stored something"
    );
}

#[tokio::test]
async fn a_fork_of_a_parent_waiting_on_a_person_waits_on_a_child_of_its_own() {
    let d = desk().await;
    let original = d
        .engine
        .run(d.waiter.clone(), json!({}), durable(&d.store))
        .await
        .unwrap();
    assert_eq!(original.status, RunStatus::Suspended);
    let asked = format!("{}.1", original.run_id);

    let fork = d
        .engine
        .fork(
            d.waiter.clone(),
            &original.run_id,
            ForkAt::default(),
            durable(&d.store),
        )
        .await
        .unwrap();
    assert_eq!(fork.status, RunStatus::Suspended);
    let fork_asked = format!("{}.1", fork.run_id);
    assert_eq!(
        fork.wait.as_ref().unwrap().children,
        std::slice::from_ref(&fork_asked)
    );

    // Answering the original's question finishes the original only.
    let answer = |id: &str, view: &str| {
        let (engine, store, id, view) = (&d.engine, &d.store, id.to_owned(), view.to_owned());
        async move {
            let child = store.run(&id).await.unwrap();
            let fsm = engine.stored_fsm(store.as_ref(), &child).await.unwrap();
            engine
                .resume(
                    fsm,
                    &id,
                    Some(json!({"id": ["ask", "end"], "view": view})),
                    durable(store),
                )
                .await
                .unwrap()
        }
    };
    let done = answer(&asked, "original").await;
    let parent = done.parent.expect("the original was woken");
    assert_eq!(parent.run_id, original.run_id);
    assert_eq!(parent.status, RunStatus::Completed);
    assert_eq!(
        d.store.run(&fork.run_id).await.unwrap().status,
        RunStatus::Suspended,
        "the fork was woken by the original's child"
    );

    let done = answer(&fork_asked, "forked").await;
    let parent = done.parent.expect("the fork was woken");
    assert_eq!(parent.run_id, fork.run_id);
    assert_eq!(parent.status, RunStatus::Completed);
    assert_eq!(parent.result.unwrap()["result"]["view"], "forked");
    let original_result = d.store.trail(&original.run_id, 0).await.unwrap();
    assert_eq!(
        original_result.last().unwrap().event["result"]["view"],
        "original"
    );
}

#[tokio::test]
async fn a_chains_later_run_forks_only_at_its_own_entries() {
    let d = desk().await;
    let tripler = Arc::new(
        claij_core::load_str(
            "tripler.yaml",
            r#"
id: tripler
states:
  - id: triple
    action: transform
    config: {template: '{"id": ["triple", "end"], "n": {{ event.n * 3 }}}'}
  - {id: end, action: end}
xitions:
  - id: [start, triple]
    schema: {type: object, required: [n], properties: {n: {type: integer}}}
  - id: [triple, end]
"#,
            d.engine.registry(),
        )
        .unwrap(),
    );
    let doubler =
        Arc::new(claij_core::load_str("doubler.yaml", DOUBLER, d.engine.registry()).unwrap());
    let outs = d
        .engine
        .chain(
            &[doubler, tripler.clone()],
            json!({"n": 2}),
            durable(&d.store),
        )
        .await
        .unwrap();
    let second = &outs[1];
    assert_eq!(second.result.as_ref().unwrap()["n"], 12);
    let trail = d.store.trail(&second.run_id, 0).await.unwrap();
    let own = trail.iter().position(|e| &*e.fsm == "tripler").unwrap() as u64;
    assert!(own > 0, "the doubler's entries head the tripler's trail");

    let fork = |seq: u64, event: Option<Value>| {
        d.engine.fork(
            tripler.clone(),
            &second.run_id,
            ForkAt { seq, event },
            durable(&d.store),
        )
    };
    let refused = fork(0, None).await.unwrap_err();
    assert!(
        matches!(&refused, RunError::NotForkable { reason, .. }
            if reason.contains("made by `doubler`, an earlier FSM of the run's chain")),
        "{refused}"
    );
    let again = fork(own, Some(json!({"n": 5}))).await.unwrap();
    assert_eq!(again.status, RunStatus::Completed);
    assert_eq!(again.result.as_ref().unwrap()["n"], 15);
    // The doubler's entries came along unchanged: the fork's prompts would see them.
    let forked = d.store.trail(&again.run_id, 0).await.unwrap();
    assert_eq!(forked[..own as usize], trail[..own as usize]);
}
