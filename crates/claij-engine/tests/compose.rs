//! Composition: sub-FSMs (trail modes; success, failure and timeout routes; the run
//! tree in a real SQLite store), chains (the next FSM's prompts show the previous one's
//! trail), fork/join (branch order under random completion order, race killing the
//! losers' processes, k-of-n with a concurrency limit) and branches that wait for a
//! person (every resume order gives the same joined result).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

mod support;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use claij_core::prompts::{PromptOptions, Role, trail_to_prompts};
use claij_core::store::ClaimFrom;
use claij_engine::{
    Action, ActionError, ActionInput, ActionOutput, ActionRegistry, BoxFuture, Engine, Outcome,
    RunOptions, RunOutcome, RunStatus,
};
use claij_testkit::process::alive;
use serde_json::{Value, json};
use support::{ASKER, DOUBLER, durable, load, sqlite, write};

fn parent(config: &str) -> String {
    format!(
        r#"
id: parent
states:
  - id: ask
    action: fsm
    config: {config}
  - {{id: collect, action: end}}
  - {{id: broken, action: end}}
  - {{id: late, action: end}}
xitions:
  - id: [start, ask]
  - id: [ask, collect]
  - id: [ask, broken]
  - id: [ask, late]
"#
    )
}

const ROUTES: &str = "success_to: collect, failure_to: broken, timeout_to: late";

#[tokio::test]
async fn each_trail_mode_shapes_what_the_parent_event_carries() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "doubler.yaml", DOUBLER);
    let engine = Engine::default();
    let mut events = Vec::new();
    for mode in ["omit", "summary", "full"] {
        let doc = parent(&format!("{{fsm: doubler.yaml, trail: {mode}, {ROUTES}}}"));
        let fsm = load(&engine, &write(dir.path(), &format!("{mode}.yaml"), &doc));
        let out = engine
            .run(fsm, json!({"n": 21}), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(out.status, RunStatus::Completed, "{mode}");
        assert_eq!(out.state, "collect");
        let event = out.result.unwrap();
        assert_eq!(
            event["result"],
            json!({"n": 42}),
            "{mode}: the result, id left out"
        );
        events.push(event);
    }
    assert!(events[0].get("child").is_none(), "omit: the result only");
    let summary = &events[1]["child"];
    assert_eq!(summary["fsm"], "doubler");
    assert_eq!(summary["status"], "completed");
    assert_eq!(summary["steps"], 2);
    assert_eq!(summary["first"], json!({"n": 21}));
    assert_eq!(summary["last"], json!({"n": 42}));
    assert!(summary.get("trail").is_none());
    let full = &events[2]["child"];
    let trail = full["trail"].as_array().unwrap();
    assert_eq!(trail.len(), 2);
    assert_eq!(trail[0]["from"], "start");
    assert_eq!(trail[1]["to"], "end");
    assert_eq!(trail[1]["event"]["n"], 42);
}

#[tokio::test]
async fn a_sub_fsm_follows_its_success_failure_and_timeout_routes() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "doubler.yaml", DOUBLER);
    write(
        dir.path(),
        "failing.yaml",
        r#"
id: failing
states:
  - id: work
    action: command
    config: {argv: [sh, -c, "echo no luck >&2; exit 3"], max_attempts: 1}
  - {id: end, action: end}
xitions:
  - id: [start, work]
  - id: [work, end]
"#,
    );
    write(
        dir.path(),
        "slow.yaml",
        r#"
id: slow
states:
  - id: work
    action: command
    config: {argv: [sleep, "300"]}
  - {id: end, action: end}
xitions:
  - id: [start, work]
  - id: [work, end]
"#,
    );
    let engine = Engine::default();
    let run = |child: &str, extra: &str| {
        let doc = parent(&format!("{{fsm: {child}, {ROUTES}{extra}}}"));
        let path = write(dir.path(), &format!("p-{child}"), &doc);
        let fsm = load(&engine, &path);
        let engine = &engine;
        async move {
            engine
                .run(fsm, json!({"n": 1}), RunOptions::default())
                .await
                .unwrap()
        }
    };
    let ok = run("doubler.yaml", "").await;
    assert_eq!(
        (ok.status, ok.state.as_str()),
        (RunStatus::Completed, "collect")
    );

    let failed = run("failing.yaml", "").await;
    assert_eq!(
        (failed.status, failed.state.as_str()),
        (RunStatus::Completed, "broken")
    );
    let event = failed.result.unwrap();
    assert_eq!(event["status"], "failed");
    assert!(
        event["error"].as_str().unwrap().contains("no luck"),
        "{event}"
    );

    // An input the child refuses is a failure of the child.
    let doc = parent(&format!("{{fsm: doubler.yaml, input: /nested, {ROUTES}}}"));
    let fsm = load(&engine, &write(dir.path(), "refused.yaml", &doc));
    let refused = engine
        .run(
            fsm,
            json!({"nested": {"n": "not a number"}}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(refused.state, "broken");
    assert!(
        refused.result.unwrap()["error"]
            .as_str()
            .unwrap()
            .contains("/n"),
        "the child's input error is reported"
    );

    let late = run("slow.yaml", ", deadline: 300ms").await;
    assert_eq!(
        (late.status, late.state.as_str()),
        (RunStatus::Completed, "late")
    );
    assert_eq!(late.result.unwrap()["status"], "timeout");

    // Without a failure route, a failing child fails the state.
    let doc = parent("{fsm: failing.yaml, success_to: collect, max_attempts: 2}");
    let fsm = load(&engine, &write(dir.path(), "strict.yaml", &doc));
    let out = engine
        .run(fsm, json!({}), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Failed);
    let failures: Vec<_> = out.trail.iter().filter(|e| e.failure.is_some()).collect();
    assert_eq!(failures.len(), 2, "each attempt runs a new child");
}

#[tokio::test]
async fn a_child_is_a_stored_run_of_its_own_linked_to_its_parent() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    write(dir.path(), "doubler.yaml", DOUBLER);
    let engine = Engine::new(Arc::new(ActionRegistry::durable()));
    let doc = parent(&format!("{{fsm: doubler.yaml, {ROUTES}}}"));
    let fsm = load(&engine, &write(dir.path(), "p.yaml", &doc));
    let out = engine
        .run(fsm, json!({"n": 2}), durable(&store))
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Completed);
    let child_id = out.result.as_ref().unwrap()["child"]["run"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(child_id, format!("{}.1", out.run_id));
    let child = store.run(&child_id).await.unwrap();
    assert_eq!(child.parent.as_deref(), Some(out.run_id.as_str()));
    assert_eq!(child.fsm_id, "doubler");
    assert_eq!(child.status, RunStatus::Completed);
    let trail = store.trail(&child_id, 0).await.unwrap();
    assert_eq!(trail.last().unwrap().event["n"], 4);
}

/// A stand-in for a model: answers with a fixed event and says which model it was, as
/// the model layer does (the trail's `model` is what makes an entry the assistant's).
struct Scripted(Value);

impl Action for Scripted {
    fn touches(&self) -> &'static [claij_engine::Field] {
        &[]
    }

    fn run<'a>(&'a self, _input: ActionInput<'a>) -> BoxFuture<'a, Result<Outcome, ActionError>> {
        let mut out = ActionOutput::event(self.0.clone());
        out.model = Some("scripted".into());
        Box::pin(async move { Ok(Outcome::Emit(out)) })
    }
}

#[tokio::test]
async fn a_chain_continues_the_trail_so_the_second_fsm_sees_the_first_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let mut registry = ActionRegistry::with_builtins();
    registry
        .register(
            "draft-model",
            Arc::new(Scripted(
                json!({"id": ["draft", "end"], "text": "ZEBRA-DRAFT-7"}),
            )),
        )
        .unwrap();
    let engine = Engine::new(Arc::new(registry));
    let a = write(
        dir.path(),
        "a.yaml",
        r#"
id: drafter
states:
  - {id: draft, action: draft-model}
  - {id: end, action: end}
xitions:
  - id: [start, draft]
  - id: [draft, end]
"#,
    );
    let b = write(
        dir.path(),
        "b.yaml",
        r#"
id: reviewer
states:
  - id: review
    action: transform
    config: {template: '{"id": ["review", "end"], "verdict": "ok: {{ event.text }}"}'}
  - {id: end, action: end}
xitions:
  - id: [start, review]
    schema: {type: object, required: [text]}
  - id: [review, end]
"#,
    );
    let fsms = [load(&engine, &a), load(&engine, &b)];
    let outs = engine
        .chain(
            &fsms,
            json!({"topic": "OKAPI-TOPIC"}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(outs.len(), 2);
    let last = &outs[1];
    assert_eq!(last.status, RunStatus::Completed);
    assert_eq!(
        last.result.as_ref().unwrap()["verdict"],
        "ok: ZEBRA-DRAFT-7"
    );
    assert_eq!(
        last.trail.len(),
        4,
        "the first run's two entries, then its own"
    );
    assert_eq!(&*last.trail[0].fsm, "drafter");
    assert_eq!(&*last.trail[3].fsm, "reviewer");
    assert_eq!(
        last.trail.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );

    // What a model in the second FSM would be sent: the whole conversation.
    let messages = trail_to_prompts(
        &fsms[1],
        &last.trail[..3],
        "review",
        &PromptOptions::default(),
    );
    let text: Vec<(Role, &str)> = messages
        .iter()
        .map(|m| (m.role, m.content.as_str()))
        .collect();
    assert!(text[1].1.contains("OKAPI-TOPIC"), "{text:?}");
    assert_eq!(text[2].0, Role::Assistant, "the first FSM's model answer");
    assert!(text[2].1.contains("ZEBRA-DRAFT-7"));
    assert!(text[3].1.contains("ZEBRA-DRAFT-7"), "the handed-on input");

    // The same chain from a document: `fsm` with a list.
    let doc = parent("{fsm: [a.yaml, b.yaml], success_to: collect, trail: full}");
    let fsm = load(&engine, &write(dir.path(), "p.yaml", &doc));
    let out = engine
        .run(fsm, json!({"topic": "OKAPI-TOPIC"}), RunOptions::default())
        .await
        .unwrap();
    let event = out.result.unwrap();
    assert_eq!(event["result"]["verdict"], "ok: ZEBRA-DRAFT-7");
    assert_eq!(event["child"]["fsm"], "reviewer");
}

/// Branches that each take `nap` seconds and echo their input.
const NAPPER: &str = r#"
id: napper
states:
  - id: work
    action: command
    config:
      argv: [sh, -c, 'in=$(cat); sleep "$(printf %s "$in" | sed -E "s/.*\"nap\": *([0-9.]+).*/\1/")"; printf "{\"id\":[\"work\",\"end\"],\"got\":%s}" "$in"']
  - {id: end, action: end}
xitions:
  - id: [start, work]
    schema: {type: object, required: [nap]}
  - id: [work, end]
"#;

fn fork_parent(config: &str) -> String {
    format!(
        r#"
id: fanout
states:
  - id: fan
    action: fork
    config: {config}
  - {{id: joined, action: end}}
  - {{id: broken, action: end}}
xitions:
  - id: [start, fan]
  - id: [fan, joined]
  - id: [fan, broken]
"#
    )
}

#[tokio::test]
async fn fork_results_come_in_branch_order_whatever_order_branches_finish_in() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "napper.yaml", NAPPER);
    let engine = Engine::default();
    let doc =
        fork_parent("{fsm: napper.yaml, over: /items, success_to: joined, failure_to: broken}");
    let fsm = load(&engine, &write(dir.path(), "p.yaml", &doc));
    let mut rng = claij_testkit::Rng::new(0x5eed);
    for round in 0..3 {
        // Reversed naps first (the last branch finishes first), then random ones.
        let naps: Vec<f64> = (0..5)
            .map(|i| {
                if round == 0 {
                    (5 - i) as f64 * 0.05
                } else {
                    rng.between(0, 5) as f64 * 0.04
                }
            })
            .collect();
        let items: Vec<Value> = naps
            .iter()
            .enumerate()
            .map(|(i, nap)| json!({"k": i, "nap": nap}))
            .collect();
        let out = engine
            .run(fsm.clone(), json!({"items": items}), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(out.state, "joined");
        let event = out.result.unwrap();
        let branches = event["branches"].as_array().unwrap();
        assert_eq!(branches.len(), 5);
        for (i, b) in branches.iter().enumerate() {
            assert_eq!(b["branch"], i);
            assert_eq!(b["status"], "completed");
            assert_eq!(b["result"]["got"]["k"], i, "round {round}: {b}");
        }
    }
}

#[tokio::test]
async fn a_failed_branch_is_reported_per_branch() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "napper.yaml", NAPPER);
    let engine = Engine::default();
    let doc =
        fork_parent("{fsm: napper.yaml, over: /items, success_to: joined, failure_to: broken}");
    let fsm = load(&engine, &write(dir.path(), "p.yaml", &doc));
    // The second item has no `nap`: its input is refused by the child.
    let items = json!([{"nap": 0}, {"k": 1}, {"nap": 0}]);
    let out = engine
        .run(fsm, json!({"items": items}), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.state, "broken");
    let event = out.result.unwrap();
    let status: Vec<&str> = event["branches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["status"].as_str().unwrap())
        .collect();
    assert_eq!(status, ["completed", "failed", "completed"]);
    assert!(
        event["branches"][1]["error"]
            .as_str()
            .unwrap()
            .contains("nap"),
        "{event}"
    );
}

async fn pid_in(path: &Path) -> i32 {
    let started = Instant::now();
    loop {
        if let Some(pid) = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return pid;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{} never written",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn race_takes_the_first_success_and_kills_the_losers() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let slow = |name: &str| {
        format!(
            r#"
id: {name}
states:
  - id: work
    action: command
    config: {{argv: [sh, -c, 'echo $$ > {d}/{name}.pid; exec sleep 300']}}
  - {{id: end, action: end}}
xitions:
  - id: [start, work]
  - id: [work, end]
"#
        )
    };
    write(dir.path(), "slow1.yaml", &slow("slow1"));
    write(dir.path(), "slow2.yaml", &slow("slow2"));
    // The fast one waits until both losers run, so they are there to be killed.
    write(
        dir.path(),
        "fast.yaml",
        &format!(
            r#"
id: fast
states:
  - id: work
    action: command
    config: {{argv: [sh, -c, 'while [ ! -s {d}/slow1.pid ] || [ ! -s {d}/slow2.pid ]; do sleep 0.02; done; echo "{{\"id\":[\"work\",\"end\"],\"won\":true}}"']}}
  - {{id: end, action: end}}
xitions:
  - id: [start, work]
  - id: [work, end]
"#
        ),
    );
    let engine = Engine::default();
    let doc =
        fork_parent("{fsms: [slow1.yaml, fast.yaml, slow2.yaml], join: race, success_to: joined}");
    let fsm = load(&engine, &write(dir.path(), "p.yaml", &doc));
    let out = engine
        .run(fsm, json!({}), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.state, "joined");
    let event = out.result.unwrap();
    assert_eq!(event["winner"], 1);
    let status: Vec<&str> = event["branches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["status"].as_str().unwrap())
        .collect();
    assert_eq!(status, ["cancelled", "completed", "cancelled"]);
    assert_eq!(event["branches"][1]["result"]["won"], true);
    for name in ["slow1", "slow2"] {
        let pid = pid_in(&dir.path().join(format!("{name}.pid"))).await;
        let started = Instant::now();
        while alive(pid) {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{name} ({pid}) outlived the race"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test]
async fn at_least_k_of_n_with_a_concurrency_limit() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "napper.yaml", NAPPER);
    let engine = Engine::default();
    // One at a time: ok, fails, ok -> two done, the fourth never starts.
    let items = json!([{"nap": 0, "k": 0}, {"k": 1}, {"nap": 0, "k": 2}, {"nap": 0, "k": 3}]);
    let doc = fork_parent(
        "{fsm: napper.yaml, over: /items, limit: 1, join: {at_least: 2}, success_to: joined, failure_to: broken}",
    );
    let fsm = load(&engine, &write(dir.path(), "p.yaml", &doc));
    let out = engine
        .run(fsm, json!({"items": items}), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.state, "joined");
    let event = out.result.unwrap();
    let status: Vec<&str> = event["branches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["status"].as_str().unwrap())
        .collect();
    assert_eq!(status, ["completed", "failed", "completed", "cancelled"]);

    // Three of four cannot be met once two have failed.
    let items = json!([{"k": 0}, {"nap": 0}, {"k": 2}, {"nap": 0}]);
    let doc = fork_parent(
        "{fsm: napper.yaml, over: /items, limit: 1, join: {at_least: 3}, success_to: joined, failure_to: broken}",
    );
    let fsm = load(&engine, &write(dir.path(), "p3.yaml", &doc));
    let out = engine
        .run(fsm, json!({"items": items}), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.state, "broken");
    let event = out.result.unwrap();
    let status: Vec<&str> = event["branches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["status"].as_str().unwrap())
        .collect();
    assert_eq!(status, ["failed", "completed", "failed", "cancelled"]);
}

/// Every order of a permutation of 0..n.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for at in 0..=p.len() {
            let mut q = p.clone();
            q.insert(at, n - 1);
            out.push(q);
        }
    }
    out
}

/// The joined event without run ids (which differ from run to run).
fn without_runs(mut event: Value) -> Value {
    for b in event["branches"].as_array_mut().into_iter().flatten() {
        b.as_object_mut().map(|m| m.remove("run"));
        if let Some(child) = b.get_mut("child").and_then(Value::as_object_mut) {
            child.remove("run");
        }
    }
    event
}

#[tokio::test]
async fn suspended_branches_resumed_in_any_order_give_the_same_join() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "asker.yaml", ASKER);
    write(dir.path(), "napper.yaml", NAPPER);
    let engine = Engine::new(Arc::new(ActionRegistry::durable()));
    // Three branches wait for a person; one (the napper) does not and is not held up.
    let doc = fork_parent(
        "{fsms: [asker.yaml, napper.yaml, asker.yaml, asker.yaml], success_to: joined, failure_to: broken}",
    );
    let fsm = load(&engine, &write(dir.path(), "p.yaml", &doc));
    let mut joined: Option<Value> = None;
    for (k, order) in permutations(3).into_iter().enumerate() {
        let store = sqlite(&dir.path().join(format!("s{k}"))).await;
        let out = engine
            .run(fsm.clone(), json!({"nap": 0}), durable(&store))
            .await
            .unwrap();
        assert_eq!(out.status, RunStatus::Suspended);
        let waiting = out.wait.unwrap().children;
        let ids: Vec<String> = [0, 2, 3]
            .iter()
            .map(|i| format!("{}.1.{i}", out.run_id))
            .collect();
        assert_eq!(waiting, ids, "the parent waits for the three askers");
        assert_eq!(
            store
                .run(&format!("{}.1.1", out.run_id))
                .await
                .unwrap()
                .status,
            RunStatus::Completed,
            "the branch that needs no person is done"
        );
        // A parent waiting for its children takes no input.
        assert!(
            engine
                .resume(
                    fsm.clone(),
                    &out.run_id,
                    Some(json!({"id": ["fan", "joined"]})),
                    durable(&store)
                )
                .await
                .is_err()
        );
        let mut last: Option<RunOutcome> = None;
        for (step, &b) in order.iter().enumerate() {
            let child = store.run(&ids[b]).await.unwrap();
            let child_fsm = engine.stored_fsm(store.as_ref(), &child).await.unwrap();
            let resumed = engine
                .resume(
                    child_fsm,
                    &ids[b],
                    Some(json!({"id": ["ask", "end"], "view": format!("view-{b}")})),
                    durable(&store),
                )
                .await
                .unwrap();
            assert_eq!(resumed.status, RunStatus::Completed);
            let parent_now = resumed.parent.expect("the parent was woken");
            let left: Vec<String> = order[step + 1..].iter().map(|&i| ids[i].clone()).collect();
            if left.is_empty() {
                assert_eq!(parent_now.status, RunStatus::Completed, "order {order:?}");
            } else {
                assert_eq!(
                    parent_now.status,
                    RunStatus::Suspended,
                    "order {order:?}: {:#?}",
                    parent_now
                        .trail
                        .iter()
                        .filter_map(|e| e.failure.as_ref())
                        .collect::<Vec<_>>()
                );
                let mut still = parent_now.wait.clone().unwrap().children;
                still.sort();
                let mut left = left;
                left.sort();
                assert_eq!(still, left, "order {order:?} after {step}");
            }
            last = Some(*parent_now);
        }
        let result = without_runs(last.unwrap().result.unwrap());
        assert_eq!(result["branches"][1]["result"]["got"]["nap"], 0);
        assert_eq!(result["branches"][3]["result"]["view"], "view-2");
        match &joined {
            None => joined = Some(result),
            Some(first) => assert_eq!(&result, first, "order {order:?}"),
        }
    }
}

#[tokio::test]
async fn a_sub_fsm_waiting_for_a_person_suspends_its_parent_until_it_is_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    write(dir.path(), "asker.yaml", ASKER);
    let engine = Engine::new(Arc::new(ActionRegistry::durable()));
    let doc = parent(&format!("{{fsm: asker.yaml, {ROUTES}}}"));
    let fsm = load(&engine, &write(dir.path(), "p.yaml", &doc));
    let out = engine
        .run(fsm.clone(), json!({}), durable(&store))
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Suspended);
    let child_id = format!("{}.1", out.run_id);
    assert_eq!(
        out.wait.as_ref().unwrap().children,
        std::slice::from_ref(&child_id)
    );
    let child = store.run(&child_id).await.unwrap();
    assert_eq!(child.status, RunStatus::Suspended);
    assert_eq!(
        child.wait.as_ref().unwrap().prompt.as_deref(),
        Some("Your view?")
    );

    // Resumed without anything new, the parent finds its child still waiting.
    let again = engine
        .resume(fsm.clone(), &out.run_id, None, durable(&store))
        .await
        .unwrap();
    assert_eq!(again.status, RunStatus::Suspended);

    let child_fsm = engine.stored_fsm(store.as_ref(), &child).await.unwrap();
    let done = engine
        .resume(
            child_fsm,
            &child_id,
            Some(json!({"id": ["ask", "end"], "view": "yes"})),
            durable(&store),
        )
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Completed);
    let parent_out = done.parent.expect("the parent continued");
    assert_eq!(parent_out.status, RunStatus::Completed);
    assert_eq!(parent_out.state, "collect");
    assert_eq!(parent_out.result.unwrap()["result"]["view"], "yes");
    assert_eq!(
        store.run(&out.run_id).await.unwrap().status,
        RunStatus::Completed
    );
}

#[tokio::test]
async fn interrupting_a_parent_that_waits_interrupts_its_children() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    write(dir.path(), "asker.yaml", ASKER);
    let engine = Engine::new(Arc::new(ActionRegistry::durable()));
    let doc = fork_parent("{fsms: [asker.yaml, asker.yaml], success_to: joined}");
    let fsm = load(&engine, &write(dir.path(), "p.yaml", &doc));
    let out = engine.run(fsm, json!({}), durable(&store)).await.unwrap();
    assert_eq!(out.status, RunStatus::Suspended);
    let record = claij_engine::interrupt(store.as_ref(), &out.run_id)
        .await
        .unwrap();
    assert_eq!(record.status, RunStatus::Interrupted);
    for i in 0..2 {
        let child = store.run(&format!("{}.1.{i}", out.run_id)).await.unwrap();
        assert_eq!(child.status, RunStatus::Interrupted, "branch {i}");
    }
}

/// A parent taken over (its driver's lease ran out while it went on) finds a child still
/// driven by that other process: it waits until the holder lets the child go, then
/// continues it — the branch is not failed for being busy elsewhere.
#[tokio::test]
async fn a_parent_taken_over_waits_for_a_child_driven_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    write(dir.path(), "asker.yaml", ASKER);
    let engine = Engine::new(Arc::new(ActionRegistry::durable()));
    let doc =
        fork_parent("{fsms: [asker.yaml, asker.yaml], success_to: joined, failure_to: broken}");
    let fsm = load(&engine, &write(dir.path(), "p.yaml", &doc));
    let out = engine
        .run(fsm.clone(), json!({}), durable(&store))
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Suspended);
    let held = format!("{}.1.0", out.run_id);
    // Another process holds the first branch, on a lease far longer than the test.
    let elsewhere = "elsewhere-host:1:1";
    let record = store.run(&held).await.unwrap();
    store
        .claim(
            &held,
            ClaimFrom::wait_of(&record),
            elsewhere,
            SystemTime::now() + Duration::from_secs(600),
        )
        .await
        .unwrap();
    let released = Arc::new(AtomicBool::new(false));
    let holder = {
        let (store, held, released) = (store.clone(), held.clone(), released.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            released.store(true, Ordering::SeqCst);
            assert!(store.release(&held, elsewhere).await.unwrap());
        })
    };
    let again = engine
        .resume(fsm, &out.run_id, None, durable(&store))
        .await
        .unwrap();
    holder.await.unwrap();
    assert!(
        released.load(Ordering::SeqCst),
        "the parent went on before the holder let its child go"
    );
    let failures: Vec<_> = again
        .trail
        .iter()
        .filter_map(|e| e.failure.as_ref())
        .collect();
    assert_eq!(
        (again.status, again.state.as_str()),
        (RunStatus::Suspended, "fan"),
        "{failures:#?} {:?}",
        again.result
    );
    let mut waits = again.wait.unwrap().children;
    waits.sort();
    assert_eq!(waits, [held.clone(), format!("{}.1.1", out.run_id)]);
    let child = store.run(&held).await.unwrap();
    assert_eq!(
        child.status,
        RunStatus::Suspended,
        "continued, then waiting again"
    );
    assert!(child.lease.is_none(), "{:?}", child.lease);
}

#[tokio::test]
async fn branches_past_their_deadline_take_the_timeout_route() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "napper.yaml", NAPPER);
    let engine = Engine::default();
    let doc = r#"
id: timed
states:
  - id: fan
    action: fork
    config: {fsm: napper.yaml, over: /items, deadline: 200ms, success_to: joined, failure_to: broken, timeout_to: late}
  - {id: joined, action: end}
  - {id: broken, action: end}
  - {id: late, action: end}
xitions:
  - id: [start, fan]
  - id: [fan, joined]
  - id: [fan, broken]
  - id: [fan, late]
"#;
    let fsm = load(&engine, &write(dir.path(), "p.yaml", doc));
    let out = engine
        .run(
            fsm,
            json!({"items": [{"nap": 0}, {"nap": 30}]}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.state, "late");
    let event = out.result.unwrap();
    assert_eq!(event["branches"][0]["status"], "completed");
    assert_eq!(event["branches"][1]["status"], "timeout");
}

#[tokio::test]
async fn a_join_state_says_that_forks_join_their_own_branches() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::default();
    let doc = "id: j\nstates: [{id: gather, action: join}, {id: done, action: end}]\nxitions: [{id: [start, gather]}, {id: [gather, done]}]\n";
    let fsm = load(&engine, &write(dir.path(), "j.yaml", doc));
    let out = engine
        .run(fsm, json!({}), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Failed);
    let failure = out.trail.last().unwrap().failure.as_ref().unwrap();
    assert!(
        failure.message.contains("joins its own branches"),
        "{}",
        failure.message
    );
}
