//! The run loop: routing, validation, retries, on_failure, timeouts, deadline, context,
//! entries, observers.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use claij_core::{FailureKind, Fsm, TrailEntry, load_str};
use claij_engine::{
    Action, ActionError, ActionInput, ActionOutput, ActionRegistry, BoxFuture, Engine, InputError,
    Observer, Outcome, RunError, RunOptions, RunStatus,
};
use serde_json::{Value, json};

/// An action that plays a script: the n-th call returns the n-th item (the last repeats).
struct Scripted {
    outputs: Vec<Result<Value, ActionError>>,
    calls: AtomicU32,
}

impl Scripted {
    fn new(outputs: Vec<Result<Value, ActionError>>) -> Arc<Self> {
        Arc::new(Self {
            outputs,
            calls: AtomicU32::new(0),
        })
    }
}

impl Action for Scripted {
    fn touches(&self) -> &'static [claij_engine::Field] {
        &[]
    }

    fn run<'a>(&'a self, _input: ActionInput<'a>) -> BoxFuture<'a, Result<Outcome, ActionError>> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) as usize;
        let out = self.outputs[n.min(self.outputs.len() - 1)].clone();
        Box::pin(async move { out.map(|e| ActionOutput::event(e).into()) })
    }
}

/// Sleeps longer than any test waits.
struct Sleeper;

impl Action for Sleeper {
    fn touches(&self) -> &'static [claij_engine::Field] {
        &[]
    }

    fn run<'a>(&'a self, _input: ActionInput<'a>) -> BoxFuture<'a, Result<Outcome, ActionError>> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Err(ActionError::failed("woke up"))
        })
    }
}

/// Counts up in the context and loops until the counter reaches the input's `limit`.
struct Counter;

impl Action for Counter {
    fn touches(&self) -> &'static [claij_engine::Field] {
        &[]
    }

    fn run<'a>(&'a self, input: ActionInput<'a>) -> BoxFuture<'a, Result<Outcome, ActionError>> {
        Box::pin(async move {
            let n = input.context.get("n").and_then(Value::as_u64).unwrap_or(0) + 1;
            let limit = input
                .event
                .get("limit")
                .and_then(Value::as_u64)
                .unwrap_or(3);
            let to = if n >= limit { "done" } else { "count" };
            Ok(ActionOutput {
                event: json!({"id": ["count", to], "limit": limit, "n": n}),
                context: Some(json!({"n": n})),
                model: None,
                usage: None,
                enforce: None,
                summary: None,
                votes: None,
                published: Vec::new(),
            }
            .into())
        })
    }
}

const WORKER: &str = r#"
id: retry
states:
  - id: work
    action: scripted
  - id: done
    action: end
xitions:
  - id: [start, work]
  - id: [work, done]
    schema:
      type: object
      required: [answer]
      properties:
        answer: {type: integer}
"#;

fn engine_with(name: &str, action: Arc<dyn Action>) -> Engine {
    let mut registry = ActionRegistry::with_builtins();
    registry
        .register(name, action)
        .expect("test action registers");
    Engine::new(Arc::new(registry))
}

fn load(engine: &Engine, text: &str) -> Arc<Fsm> {
    Arc::new(load_str("test.yaml", text, engine.registry()).unwrap_or_else(|e| panic!("{e}")))
}

fn failures(trail: &[TrailEntry]) -> Vec<FailureKind> {
    trail
        .iter()
        .filter_map(|e| e.failure.as_ref().map(|f| f.kind))
        .collect()
}

#[tokio::test]
async fn two_invalid_outputs_then_a_valid_one() {
    let script = Scripted::new(vec![
        Ok(json!({"id": ["work", "done"], "answer": "forty-two"})),
        Ok(json!({"id": ["work", "nowhere"], "answer": 42})),
        Ok(json!({"id": ["work", "done"], "answer": 42})),
    ]);
    let engine = engine_with("scripted", script.clone());
    let fsm = load(&engine, WORKER);
    let out = engine
        .run(fsm, json!({}), RunOptions::default())
        .await
        .unwrap();

    assert_eq!(out.status, RunStatus::Completed);
    assert_eq!(
        out.result,
        Some(json!({"id": ["work", "done"], "answer": 42}))
    );
    assert_eq!(
        failures(&out.trail),
        vec![FailureKind::Validation, FailureKind::UnknownTransition]
    );
    // input, two failures, one success
    assert_eq!(out.trail.len(), 4);
    let validation = out.trail[1].failure.as_ref().unwrap();
    assert_eq!(validation.attempt, 1);
    assert_eq!(validation.errors.len(), 1);
    assert_eq!(validation.errors[0].instance_path, "/answer");
    assert_eq!(
        out.trail[1].event["answer"], "forty-two",
        "the invalid output is kept"
    );
    assert!(
        out.trail[2]
            .failure
            .as_ref()
            .unwrap()
            .message
            .contains("[\"work\",\"done\"]")
    );
    assert_eq!(out.trail[3].attempt, 3);
    assert_eq!(out.trail[3].to.as_deref(), Some("done"));
    let seqs: Vec<u64> = out.trail.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, vec![0, 1, 2, 3]);
    assert_eq!(script.calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn always_invalid_ends_failed_after_max_attempts() {
    let script = Scripted::new(vec![Ok(json!({"garbage": true}))]);
    let engine = engine_with("scripted", script.clone());
    let fsm = load(&engine, WORKER);
    let out = engine
        .run(fsm, json!({}), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Failed);
    assert_eq!(out.state, "work");
    assert_eq!(failures(&out.trail).len(), 3, "default max_attempts is 3");
    assert_eq!(script.calls.load(Ordering::SeqCst), 3);
    assert_eq!(out.result, None);
}

#[tokio::test]
async fn always_invalid_follows_on_failure_with_the_failure_in_the_event() {
    let doc = WORKER
        .replace(
            "    action: scripted\n",
            "    action: scripted\n    config: {max_attempts: 2, on_failure: rescue}\n",
        )
        .replace("xitions:", "  - {id: rescue, action: end}\nxitions:")
        + "  - id: [work, rescue]\n";
    let script = Scripted::new(vec![Ok(json!("not even an object"))]);
    let engine = engine_with("scripted", script.clone());
    let fsm = load(&engine, &doc);
    let out = engine
        .run(fsm, json!({}), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Completed);
    assert_eq!(script.calls.load(Ordering::SeqCst), 2);
    let last = out.trail.last().unwrap();
    assert_eq!(last.to.as_deref(), Some("rescue"));
    assert_eq!(last.event["id"], json!(["work", "rescue"]));
    assert_eq!(last.event["failure"]["kind"], "unknown-transition");
    assert_eq!(last.event["failure"]["attempt"], 2);
    assert_eq!(last.event["state"], "work");
}

#[tokio::test]
async fn fsm_wide_max_attempts_applies_unless_the_state_overrides() {
    let doc = format!("config: {{max_attempts: 5}}\n{WORKER}");
    let script = Scripted::new(vec![Ok(json!({}))]);
    let engine = engine_with("scripted", script.clone());
    let out = engine
        .run(load(&engine, &doc), json!({}), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Failed);
    assert_eq!(script.calls.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn non_retryable_errors_give_up_at_once() {
    let script = Scripted::new(vec![Err(ActionError::fatal("no terminal"))]);
    let engine = engine_with("scripted", script.clone());
    let out = engine
        .run(load(&engine, WORKER), json!({}), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Failed);
    assert_eq!(script.calls.load(Ordering::SeqCst), 1);
    assert_eq!(failures(&out.trail), vec![FailureKind::Action]);
}

#[tokio::test(start_paused = true)]
async fn a_state_timeout_is_a_failure_like_any_other() {
    let doc = WORKER.replace(
        "    action: scripted\n",
        "    action: scripted\n    config: {timeout: 50ms, max_attempts: 2}\n",
    );
    let engine = engine_with("scripted", Arc::new(Sleeper));
    let out = engine
        .run(load(&engine, &doc), json!({}), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Failed);
    assert_eq!(
        failures(&out.trail),
        vec![FailureKind::Timeout, FailureKind::Timeout]
    );
    assert!(
        out.trail[1]
            .failure
            .as_ref()
            .unwrap()
            .message
            .contains("50ms")
    );
}

#[tokio::test(start_paused = true)]
async fn the_run_deadline_ends_the_run() {
    let doc = format!("config: {{deadline: 2s}}\n{WORKER}");
    let engine = engine_with("scripted", Arc::new(Sleeper));
    let out = engine
        .run(load(&engine, &doc), json!({}), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Failed);
    assert_eq!(failures(&out.trail), vec![FailureKind::Timeout]);
    assert!(
        out.trail[1]
            .failure
            .as_ref()
            .unwrap()
            .message
            .contains("deadline")
    );
    // a run option overrides the document
    let out = engine
        .run(
            load(&engine, &doc),
            json!({}),
            RunOptions {
                deadline: Some(Duration::from_millis(10)),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(
        out.trail[1]
            .failure
            .as_ref()
            .unwrap()
            .message
            .contains("10ms")
    );
}

#[tokio::test]
async fn interruption_records_an_interrupted_entry() {
    let engine = engine_with("scripted", Arc::new(Sleeper));
    let fsm = load(&engine, WORKER);
    let options = RunOptions::default();
    let cancel = options.cancel.clone();
    let run = tokio::spawn(async move { engine.run(fsm, json!({}), options).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    cancel.cancel();
    let out = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("an interrupted run ends promptly")
        .unwrap()
        .unwrap();
    assert_eq!(out.status, RunStatus::Interrupted);
    assert_eq!(failures(&out.trail), vec![FailureKind::Interrupted]);
}

#[tokio::test]
async fn context_threads_through_actions_and_self_transitions_loop() {
    let doc = r#"
id: counter
states:
  - {id: count, action: counter}
  - {id: done, action: end}
xitions:
  - id: [start, count]
    schema: {type: object, properties: {limit: {type: integer, minimum: 1}}}
  - id: [count, count]
  - id: [count, done]
"#;
    let engine = engine_with("counter", Arc::new(Counter));
    let out = engine
        .run(
            load(&engine, doc),
            json!({"limit": 5}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Completed);
    assert_eq!(out.context, json!({"n": 5}));
    assert_eq!(out.trail.len(), 6);
    assert_eq!(out.result.unwrap()["n"], 5);
}

#[tokio::test]
async fn a_run_takes_at_most_its_max_steps_and_no_route_past_them() {
    // Counting to 5 takes 6 steps: the input's entry, 4 loops, the way to `done`.
    let doc = |max_steps: u64| {
        format!(
            r#"
id: counter
config: {{max_steps: {max_steps}}}
states:
  - {{id: count, action: counter, config: {{on_failure: done}}}}
  - {{id: done, action: end}}
xitions:
  - id: [start, count]
  - id: [count, count]
  - id: [count, done]
"#
        )
    };
    let engine = engine_with("counter", Arc::new(Counter));
    let run = |max_steps| {
        let fsm = load(&engine, &doc(max_steps));
        assert_eq!(fsm.max_steps(), max_steps);
        engine.run(fsm, json!({"limit": 5}), RunOptions::default())
    };
    let done = run(6).await.unwrap();
    assert_eq!(
        done.status,
        RunStatus::Completed,
        "the last step reaches the end"
    );
    assert_eq!(done.trail.len(), 6);

    let stopped = run(5).await.unwrap();
    assert_eq!(
        stopped.status,
        RunStatus::Failed,
        "{:?}",
        stopped.trail.last()
    );
    assert_eq!(stopped.state, "count");
    assert_eq!(stopped.trail.len(), 6, "5 steps, then the failure");
    assert_eq!(
        stopped.trail.iter().filter(|e| e.is_transition()).count(),
        5
    );
    assert_eq!(failures(&stopped.trail), vec![FailureKind::Steps]);
    let failure = stopped.trail[5].failure.as_ref().unwrap();
    assert_eq!(
        failure.message,
        "the run took 5 steps, the most it may (config.max_steps: 5): it ends in `count`"
    );
    assert_eq!(
        stopped.context,
        json!({"n": 4}),
        "no attempt after the limit"
    );

    let plain = load(
        &engine,
        "id: plain\nstates: [{id: a, action: end}]\nxitions: [{id: [start, a]}]\n",
    );
    assert_eq!(plain.max_steps(), claij_core::fsm::DEFAULT_MAX_STEPS);
    assert_eq!(claij_core::fsm::DEFAULT_MAX_STEPS, 10_000);
}

const TWO_ENTRIES: &str = r#"
id: entries
states:
  - {id: a, action: transform, config: {template: '{"id": ["a", "end"], "via": "a"}'}}
  - {id: b, action: transform, config: {template: '{"id": ["b", "end"], "via": "b"}'}}
  - {id: end, action: end}
xitions:
  - id: [start, a]
    schema: {type: object, required: [x], properties: {x: {type: string}}}
  - id: [start, b]
  - id: [a, end]
  - id: [b, end]
"#;

#[tokio::test]
async fn the_input_id_picks_the_entry() {
    let engine = Engine::default();
    let fsm = load(&engine, TWO_ENTRIES);
    let out = engine
        .run(
            fsm.clone(),
            json!({"id": ["start", "b"]}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.result.unwrap()["via"], "b");
    let out = engine
        .run(
            fsm.clone(),
            json!({"id": ["start", "a"], "x": "hi"}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.result.unwrap()["via"], "a");

    let err = engine
        .run(fsm.clone(), json!({"x": "hi"}), RunOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, RunError::Input(InputError::UnknownEntry { .. })),
        "{err}"
    );
    assert!(err.to_string().contains("[\"start\",\"a\"]"), "{err}");
    let err = engine
        .run(
            fsm.clone(),
            json!({"id": ["start", "a"], "x": 7}),
            RunOptions::default(),
        )
        .await
        .unwrap_err();
    match err {
        RunError::Input(InputError::Invalid { issues, .. }) => {
            assert_eq!(issues[0].instance_path, "/x")
        }
        other => panic!("expected invalid input, got {other}"),
    }
}

#[tokio::test]
async fn with_one_entry_an_input_without_id_is_accepted() {
    let script = Scripted::new(vec![Ok(json!({"id": ["work", "done"], "answer": 1}))]);
    let engine = engine_with("scripted", script);
    let out = engine
        .run(
            load(&engine, WORKER),
            json!({"q": 1}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.trail[0].event, json!({"q": 1, "id": ["start", "work"]}));
    assert_eq!(out.trail[0].from.as_ref(), "start");
}

#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);

impl Observer for Recorder {
    fn attempt_started(&self, _run: &str, state: &claij_core::State, attempt: u32) {
        self.0
            .lock()
            .unwrap()
            .push(format!("attempt {} {attempt}", state.id));
    }
    fn entry_appended(&self, _run: &str, entry: &TrailEntry) {
        self.0.lock().unwrap().push(format!("entry {}", entry.seq));
    }
    fn run_finished(&self, _run: &str, status: RunStatus) {
        self.0.lock().unwrap().push(format!("finished {status:?}"));
    }
}

#[tokio::test]
async fn observers_see_every_entry_as_it_is_appended() {
    let script = Scripted::new(vec![
        Ok(json!({"id": ["work", "done"]})),
        Ok(json!({"id": ["work", "done"], "answer": 1})),
    ]);
    let engine = engine_with("scripted", script);
    let recorder = Arc::new(Recorder::default());
    let out = engine
        .run(
            load(&engine, WORKER),
            json!({}),
            RunOptions {
                observers: vec![recorder.clone()],
                run_id: Some("r-test".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(out.run_id, "r-test");
    assert_eq!(
        *recorder.0.lock().unwrap(),
        vec![
            "entry 0",
            "attempt work 1",
            "entry 1",
            "attempt work 2",
            "entry 2",
            "finished Completed"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_passed_deadline_follows_on_failure_once() {
    let doc = r#"
id: deadline-routes
config: {deadline: 1s}
states:
  - {id: a, action: sleeper, config: {on_failure: b}}
  - {id: b, action: sleeper, config: {on_failure: a}}
  - {id: rescue, action: end}
xitions:
  - id: [start, a]
  - id: [a, b]
  - id: [b, a]
  - id: [b, rescue]
"#;
    let engine = engine_with("sleeper", Arc::new(Sleeper));
    let out = engine
        .run(load(&engine, doc), json!({}), RunOptions::default())
        .await
        .unwrap();
    // a times out on the deadline → on_failure to b → b is past the deadline too → failed,
    // rather than bouncing between a and b forever.
    assert_eq!(out.status, RunStatus::Failed);
    assert_eq!(out.state, "b");
    let hops: Vec<String> = out
        .trail
        .iter()
        .map(|e| match (&e.to, &e.failure) {
            (Some(to), _) => format!("{}>{to}", e.from),
            (None, Some(f)) => format!("{}:{}", e.from, f.kind),
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(hops, ["start>a", "a:timeout", "a>b", "b:timeout"]);

    let to_rescue = doc.replace("{on_failure: a}", "{on_failure: rescue}");
    let out = engine
        .run(load(&engine, &to_rescue), json!({}), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(
        out.status,
        RunStatus::Failed,
        "b's deadline failure is the second"
    );
    let doc_b_first = doc
        .replace("{on_failure: b}", "{on_failure: rescue}")
        .replace(
            "  - id: [b, rescue]\n",
            "  - id: [b, rescue]\n  - id: [a, rescue]\n",
        );
    let out = engine
        .run(
            load(&engine, &doc_b_first),
            json!({}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Completed);
    assert_eq!(out.state, "rescue");
    assert_eq!(out.result.unwrap()["failure"]["kind"], "timeout");
}
