//! Questions from MCP servers as durable waits, on a real SQLite store, through an action
//! that asks one the way the `mcp` action does (`ActionInput::questions`): the run stops
//! for it, suspended on the question; an answer the requested schema refuses changes
//! nothing; the answer — given by `resume`, or queued by `answer` for a worker — is
//! recorded, and the state's attempt made again finds it. Without a store nothing waits.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime};

use claij_core::store::Durability;
use claij_core::{Answer, FailureKind, Fsm, Question, load_str};
use claij_engine::{
    Action, ActionError, ActionInput, ActionOutput, ActionRegistry, BoxFuture, Engine, InputError,
    Outcome, RunError, RunOptions, RunStatus,
};
use claij_store::roles::Store;
use serde_json::json;

/// Asks "Who are you?" (name required, a default for `team`) and answers with what it
/// was told; counts its attempts. With a `hold`, it waits that long for the answer (as
/// the `mcp` action holds a server's request open).
struct Asker {
    calls: AtomicU32,
    hold: Duration,
}

fn question() -> Question {
    Question {
        server: "forms".into(),
        message: "Who are you?".into(),
        schema: json!({
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string"}, "team": {"type": "string", "default": "core"}}
        }),
    }
}

impl Action for Asker {
    fn touches(&self) -> &'static [claij_engine::Field] {
        &[]
    }

    fn run<'a>(&'a self, input: ActionInput<'a>) -> BoxFuture<'a, Result<Outcome, ActionError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let told = input.questions.answer_for(&question());
        let waits = input.questions.wait_for_answers();
        let hold = self.hold;
        Box::pin(async move {
            let told = match told {
                None if waits && !hold.is_zero() => input.questions.hold(question(), hold).await,
                told => told,
            };
            let got = match told {
                Some(Answer::Accept(content)) => content,
                Some(Answer::Decline) => json!("declined"),
                Some(Answer::Cancel) => json!("cancelled"),
                None if waits && !hold.is_zero() => {
                    return Err(ActionError::failed("no answer in time"));
                }
                None if waits => {
                    input.questions.ask(question());
                    return Err(ActionError::failed("stopped for a question"));
                }
                None => return Err(ActionError::fatal("no one to ask here")),
            };
            Ok(ActionOutput::event(json!({"id": ["ask", "done"], "got": got})).into())
        })
    }
}

const ASKING: &str = r#"
id: asking
states:
  - {id: ask, action: asker}
  - {id: done, action: end}
xitions:
  - id: [start, ask]
  - id: [ask, done]
"#;

async fn setup() -> (
    tempfile::TempDir,
    Arc<dyn Store>,
    Engine,
    Arc<Fsm>,
    Arc<Asker>,
) {
    setup_holding(Duration::ZERO).await
}

async fn setup_holding(
    hold: Duration,
) -> (
    tempfile::TempDir,
    Arc<dyn Store>,
    Engine,
    Arc<Fsm>,
    Arc<Asker>,
) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("claij.db");
    let store = claij_store::open(&path.display().to_string(), Durability::Normal)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let asker = Arc::new(Asker {
        calls: AtomicU32::new(0),
        hold,
    });
    let mut registry = ActionRegistry::with_builtins();
    registry.register("asker", asker.clone()).unwrap();
    let engine = Engine::new(Arc::new(registry));
    let fsm = Arc::new(load_str("asking.yaml", ASKING, engine.registry()).unwrap());
    (dir, store, engine, fsm, asker)
}

fn durable(store: &Arc<dyn Store>) -> RunOptions {
    RunOptions {
        store: Some(store.clone()),
        owner: Some("me".into()),
        ..RunOptions::default()
    }
}

/// The kinds of a trail answered at `ask`: the entry, the question, the answer, the exit.
const ANSWERED: [Option<FailureKind>; 4] = [
    None,
    Some(FailureKind::Question),
    Some(FailureKind::Answer),
    None,
];

fn kinds(trail: &[claij_core::TrailEntry]) -> Vec<Option<FailureKind>> {
    trail
        .iter()
        .map(|e| e.failure.as_ref().map(|f| f.kind))
        .collect()
}

#[tokio::test]
async fn a_question_suspends_the_run_and_its_answer_lets_the_attempt_be_made_again() {
    let (_dir, store, engine, fsm, asker) = setup().await;
    let out = engine
        .run(fsm.clone(), json!({}), durable(&store))
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Suspended);
    let wait = out.wait.clone().expect("a wait");
    assert_eq!(wait.question.as_deref(), Some(&question()));
    assert_eq!(wait.schema, question().schema);
    assert!(wait.transitions.is_empty() && wait.takes_input());
    assert_eq!(kinds(&out.trail), [None, Some(FailureKind::Question)]);

    // Refused: the reason at its field, nothing stored changes.
    let before = store.trail(&out.run_id, 0).await.unwrap();
    let refused = engine
        .resume(
            fsm.clone(),
            &out.run_id,
            Some(json!({"name": 7})),
            durable(&store),
        )
        .await;
    match refused {
        Err(RunError::Input(InputError::Answer { server, message })) => {
            assert_eq!(server, "forms");
            assert!(message.contains("/name"), "{message}");
        }
        other => panic!("refused? {other:?}"),
    }
    assert_eq!(store.trail(&out.run_id, 0).await.unwrap(), before);
    assert_eq!(
        store.run(&out.run_id).await.unwrap().status,
        RunStatus::Suspended
    );

    // The answer: recorded, the attempt made again (attempt 1: the question was a pause),
    // the default filled in.
    let done = engine
        .resume(
            fsm,
            &out.run_id,
            Some(json!({"name": "Ada"})),
            durable(&store),
        )
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Completed);
    assert_eq!(
        done.result.unwrap()["got"],
        json!({"name": "Ada", "team": "core"})
    );
    let trail = store.trail(&out.run_id, 0).await.unwrap();
    assert_eq!(kinds(&trail), ANSWERED);
    assert_eq!(trail[3].attempt, 1, "pauses are not attempts");
    assert_eq!(
        trail[2].event["answer"],
        json!({"action": "accept", "content": {"name": "Ada", "team": "core"}})
    );
    assert_eq!(asker.calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn an_answer_queued_for_a_worker_is_recorded_and_the_worker_makes_the_attempt() {
    let (_dir, store, engine, fsm, _asker) = setup().await;
    let out = engine
        .run(fsm.clone(), json!({}), durable(&store))
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Suspended);
    let refused = engine
        .answer(
            fsm.clone(),
            &out.run_id,
            json!({"team": "x"}),
            durable(&store),
        )
        .await;
    assert!(
        matches!(refused, Err(RunError::Input(InputError::Answer { .. }))),
        "{refused:?}"
    );
    engine
        .answer(fsm, &out.run_id, json!("decline"), durable(&store))
        .await
        .unwrap();
    let queued = store.run(&out.run_id).await.unwrap();
    assert_eq!(queued.status, RunStatus::Running);
    assert!(queued.wait.is_none(), "the wait is answered");

    let far = SystemTime::now() + Duration::from_secs(3600);
    let claimed = store.claim_due("worker", far, 10, &[]).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let fsm = engine
        .stored_fsm(store.as_ref(), &claimed[0])
        .await
        .unwrap();
    let done = engine
        .continue_claimed(
            fsm,
            &claimed[0],
            RunOptions {
                owner: Some("worker".into()),
                ..durable(&store)
            },
        )
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Completed);
    assert_eq!(done.result.unwrap()["got"], "declined");
}

#[tokio::test]
async fn without_a_store_nothing_waits_for_an_answer() {
    let (_dir, _store, engine, fsm, _asker) = setup().await;
    let out = engine
        .run(fsm, json!({}), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Failed);
    let failure = out.trail.last().and_then(|e| e.failure.as_deref()).unwrap();
    assert_eq!(failure.kind, FailureKind::Action);
    assert!(failure.message.contains("no one to ask"), "{failure:?}");
}

/// Waits for the run to be suspended on its question with its request held open; the
/// run's id.
async fn held_run(store: &Arc<dyn Store>) -> String {
    for _ in 0..200 {
        let runs = store
            .runs(&claij_core::store::RunFilter::default())
            .await
            .unwrap();
        if let Some(run) = runs.iter().find(|r| {
            r.status == RunStatus::Suspended && r.wait.as_ref().is_some_and(|w| w.held.is_some())
        }) {
            return run.id.clone();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the run never waited with its request held");
}

#[tokio::test]
async fn an_answer_given_while_the_request_is_held_goes_straight_back_to_the_asker() {
    let (_dir, store, engine, fsm, asker) = setup_holding(Duration::from_secs(20)).await;
    let answering = async {
        let id = held_run(&store).await;
        let record = store.run(&id).await.unwrap();
        let wait = record.wait.unwrap();
        assert_eq!(wait.question.as_deref(), Some(&question()));
        assert_eq!(wait.held.as_ref().map(|h| h.owner.as_str()), Some("me"));
        // Refused as ever: nothing changes, the hold goes on.
        let refused = engine
            .resume(fsm.clone(), &id, Some(json!({"name": 7})), durable(&store))
            .await;
        assert!(
            matches!(refused, Err(RunError::Input(InputError::Answer { .. }))),
            "{refused:?}"
        );
        // Another process answers (another owner): the run goes back to the one holding.
        let answered = engine
            .resume(
                fsm.clone(),
                &id,
                Some(json!({"name": "Ada"})),
                RunOptions {
                    owner: Some("answerer".into()),
                    ..durable(&store)
                },
            )
            .await
            .unwrap();
        (id, answered)
    };
    let (out, (id, answered)) = tokio::join!(
        engine.run(fsm.clone(), json!({}), durable(&store)),
        answering
    );
    let out = out.unwrap();
    assert_eq!(out.run_id, id);
    assert_eq!(out.status, RunStatus::Completed);
    assert_eq!(
        out.result.unwrap()["got"],
        json!({"name": "Ada", "team": "core"})
    );
    assert!(
        matches!(answered.status, RunStatus::Running | RunStatus::Completed),
        "the answerer sees the run go on: {:?}",
        answered.status
    );
    assert_eq!(
        asker.calls.load(Ordering::SeqCst),
        1,
        "the attempt ran once"
    );
    let trail = store.trail(&id, 0).await.unwrap();
    assert_eq!(trail, out.trail, "the trail in memory is the one stored");
    assert_eq!(kinds(&trail), ANSWERED);
    assert_eq!(trail[3].attempt, 1);
    let record = store.run(&id).await.unwrap();
    assert_eq!(record.status, RunStatus::Completed);
    assert!(record.lease.is_none() && record.wait.is_none());
}

#[tokio::test]
async fn an_answer_queued_while_the_request_is_held_goes_to_the_asker_not_a_worker() {
    let (_dir, store, engine, fsm, asker) = setup_holding(Duration::from_secs(20)).await;
    let answering = async {
        let id = held_run(&store).await;
        engine
            .answer(fsm.clone(), &id, json!("decline"), durable(&store))
            .await
            .unwrap();
    };
    let (out, ()) = tokio::join!(
        engine.run(fsm.clone(), json!({}), durable(&store)),
        answering
    );
    let out = out.unwrap();
    assert_eq!(out.status, RunStatus::Completed);
    assert_eq!(out.result.unwrap()["got"], "declined");
    assert_eq!(asker.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_hold_that_ends_unanswered_leaves_the_run_waiting_on_its_question() {
    let (_dir, store, engine, fsm, asker) = setup_holding(Duration::from_millis(300)).await;
    let out = engine
        .run(fsm.clone(), json!({}), durable(&store))
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Suspended);
    let wait = out.wait.clone().expect("a wait");
    assert_eq!(wait.question.as_deref(), Some(&question()));
    assert!(wait.held.is_none(), "the hold is over");
    let record = store.run(&out.run_id).await.unwrap();
    assert_eq!(record.wait, Some(wait));
    assert!(record.lease.is_none());
    assert_eq!(store.trail(&out.run_id, 0).await.unwrap(), out.trail);
    assert_eq!(kinds(&out.trail), [None, Some(FailureKind::Question)]);

    // Answered later: the attempt is made again, and finds the answer.
    let done = engine
        .resume(
            fsm,
            &out.run_id,
            Some(json!({"name": "Lin"})),
            durable(&store),
        )
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Completed);
    assert_eq!(done.result.unwrap()["got"]["name"], "Lin");
    assert_eq!(asker.calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn an_answer_after_the_holder_is_gone_makes_the_attempt_again() {
    let (_dir, store, engine, fsm, asker) = setup_holding(Duration::from_secs(1)).await;
    // The holding process stops while it holds (its future dropped): the run is
    // suspended, held by no one alive.
    let id = tokio::select! {
        out = engine.run(fsm.clone(), json!({}), durable(&store)) => panic!("ended: {out:?}"),
        id = held_run(&store) => id,
    };
    let done = engine
        .resume(
            fsm,
            &id,
            Some(json!({"name": "Bo"})),
            RunOptions {
                owner: Some("answerer".into()),
                ..durable(&store)
            },
        )
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Completed);
    assert_eq!(done.result.unwrap()["got"]["name"], "Bo");
    assert_eq!(asker.calls.load(Ordering::SeqCst), 2, "made again");
    let trail = store.trail(&id, 0).await.unwrap();
    assert_eq!(kinds(&trail), ANSWERED);
}

#[tokio::test]
async fn a_run_interrupted_while_its_request_is_held_ends_interrupted_for_the_holder_too() {
    let (_dir, store, engine, fsm, asker) = setup_holding(Duration::from_secs(20)).await;
    let interrupting = async {
        let id = held_run(&store).await;
        claij_engine::interrupt(store.as_ref(), &id).await.unwrap();
        id
    };
    let (out, id) = tokio::join!(
        engine.run(fsm.clone(), json!({}), durable(&store)),
        interrupting
    );
    let out = out.unwrap();
    assert_eq!(out.run_id, id);
    assert_eq!(out.status, RunStatus::Interrupted, "{:?}", out.trail);
    assert_eq!(store.trail(&id, 0).await.unwrap(), out.trail);
    assert_eq!(store.run(&id).await.unwrap().status, RunStatus::Interrupted);
    assert_eq!(asker.calls.load(Ordering::SeqCst), 1);
}
