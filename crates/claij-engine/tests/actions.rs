//! The built-in actions that need no model: command, transform, human, reserved names.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use claij_testkit::process::alive;
use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use claij_core::{FailureKind, Fsm, load_str};
use claij_engine::actions::{Human, HumanIo};
use claij_engine::{ActionRegistry, Engine, RunOptions, RunOutcome, RunStatus};
use serde_json::{Value, json};

fn load(engine: &Engine, text: &str) -> Arc<Fsm> {
    Arc::new(load_str("test.yaml", text, engine.registry()).unwrap_or_else(|e| panic!("{e}")))
}

async fn run(engine: &Engine, text: &str, input: Value) -> RunOutcome {
    engine
        .run(load(engine, text), input, RunOptions::default())
        .await
        .expect("input accepted")
}

fn one_command(config: &str) -> String {
    format!(
        r#"
id: cmd
states:
  - id: work
    action: command
    config: {config}
  - id: done
    action: end
  - id: fix
    action: end
xitions:
  - id: [start, work]
  - id: [work, done]
  - id: [work, fix]
"#
    )
}

fn failure_messages(out: &RunOutcome) -> Vec<String> {
    out.trail
        .iter()
        .filter_map(|e| {
            e.failure
                .as_ref()
                .map(|f| format!("{}: {}", f.kind, f.message))
        })
        .collect()
}

#[tokio::test]
async fn command_gets_the_event_on_stdin_and_its_stdout_is_the_event() {
    let engine = Engine::default();
    // jq-free echo: python reads the event, adds fields from the environment.
    let script = r#"import json, os, sys
e = json.load(sys.stdin)
print(json.dumps({"id": ["work", "done"], "got": e["x"], "run": os.environ["CLAIJ_RUN_ID"],
  "state": os.environ["CLAIJ_STATE"], "key": os.environ["CLAIJ_IDEMPOTENCY_KEY"],
  "attempt": os.environ["CLAIJ_ATTEMPT"], "extra": os.environ["EXTRA"], "cwd": os.getcwd()}))"#;
    let config = json!({"argv": ["python3", "-c", script], "env": {"EXTRA": "yes"}, "cwd": "/tmp"});
    let out = engine
        .run(
            load(&engine, &one_command(&config.to_string())),
            json!({"x": 41}),
            RunOptions {
                run_id: Some("r-1".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        out.status,
        RunStatus::Completed,
        "{:?}",
        failure_messages(&out)
    );
    let result = out.result.unwrap();
    assert_eq!(result["got"], 41);
    assert_eq!(result["run"], "r-1");
    assert_eq!(result["state"], "work");
    assert_eq!(
        result["key"], "r-1:1",
        "idempotency key is run id + sequence number"
    );
    assert_eq!(result["attempt"], "1");
    assert_eq!(result["extra"], "yes");
    assert_eq!(result["cwd"], "/tmp");
}

#[tokio::test]
async fn command_failures_carry_the_tail_of_stderr() {
    let engine = Engine::default();
    let config = json!({"argv": ["sh", "-c", "echo 'compiler says: boom' >&2; exit 3"]});
    let out = run(&engine, &one_command(&config.to_string()), json!({})).await;
    assert_eq!(out.status, RunStatus::Failed);
    let messages = failure_messages(&out);
    assert_eq!(messages.len(), 3);
    assert!(
        messages[0].starts_with("action: `sh` exited with status 3"),
        "{messages:?}"
    );
    assert!(messages[0].contains("compiler says: boom"), "{messages:?}");

    let config = json!({"argv": ["sh", "-c", "echo not json; echo oops >&2"]});
    let out = run(&engine, &one_command(&config.to_string()), json!({})).await;
    let entry = &out.trail[1];
    let failure = entry.failure.as_ref().unwrap();
    assert_eq!(failure.kind, FailureKind::Parse);
    assert!(failure.message.contains("oops"), "{}", failure.message);
    assert_eq!(entry.event, json!("not json\n"), "the raw output is kept");

    let config = json!({"argv": ["/no/such/program"]});
    let out = run(&engine, &one_command(&config.to_string()), json!({})).await;
    assert!(failure_messages(&out)[0].contains("cannot start `/no/such/program`"));
}

#[tokio::test]
async fn command_capture_mode_routes_by_exit_code() {
    let engine = Engine::default();
    let config = json!({"argv": ["sh", "-c", "echo built; echo warn >&2; exit $0", "0"], "output": "capture", "routes": {"0": "done", "*": "fix"}});
    let out = run(&engine, &one_command(&config.to_string()), json!({})).await;
    let result = out.result.unwrap();
    assert_eq!(result["id"], json!(["work", "done"]));
    assert_eq!(result["exit_code"], 0);
    assert_eq!(result["stdout"], "built\n");
    assert_eq!(result["stderr"], "warn\n");

    let config = json!({"argv": ["sh", "-c", "exit 2"], "output": "capture", "routes": {"0": "done", "*": "fix"}});
    let out = run(&engine, &one_command(&config.to_string()), json!({})).await;
    assert_eq!(out.result.unwrap()["id"], json!(["work", "fix"]));
}

async fn read_pids(path: &Path) -> Vec<i32> {
    let started = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            let pids: Vec<i32> = text
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect();
            if pids.len() == 2 {
                return pids;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the program never wrote its pids"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn assert_gone(pids: &[i32]) {
    let started = Instant::now();
    while pids.iter().any(|&p| alive(p)) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "processes {pids:?} outlived the attempt"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A program that starts a grandchild and waits; both pids go to `pidfile`.
fn long_running(pidfile: &Path) -> Value {
    let script = format!("sleep 300 & echo $$ $! > {}; wait", pidfile.display());
    json!({"argv": ["sh", "-c", script]})
}

#[tokio::test]
async fn interrupting_a_long_command_kills_it_and_records_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pids");
    let engine = Arc::new(Engine::default());
    let fsm = load(&engine, &one_command(&long_running(&pidfile).to_string()));
    let options = RunOptions::default();
    let cancel = options.cancel.clone();
    let task = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.run(fsm, json!({}), options).await })
    };
    let pids = read_pids(&pidfile).await;
    assert!(pids.iter().all(|&p| alive(p)));
    cancel.cancel();
    let out = tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("interrupt is prompt")
        .unwrap()
        .unwrap();
    assert_eq!(out.status, RunStatus::Interrupted);
    assert_eq!(
        out.trail.last().unwrap().failure.as_ref().unwrap().kind,
        FailureKind::Interrupted
    );
    assert_gone(&pids).await;
}

#[tokio::test]
async fn a_command_timeout_kills_the_program_and_its_children() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pids");
    let mut config = long_running(&pidfile);
    config["argv"][2] = json!(format!(
        "[ -e {0} ] && exit 9; sleep 300 & echo $$ $! > {0}; wait",
        pidfile.display()
    ));
    config["timeout"] = json!("300ms");
    config["max_attempts"] = json!(1);
    let doc = one_command(&config.to_string());
    let engine = Engine::default();
    let out = run(&engine, &doc, json!({})).await;
    assert_eq!(out.status, RunStatus::Failed);
    assert_eq!(
        out.trail[1].failure.as_ref().unwrap().kind,
        FailureKind::Timeout
    );
    let pids = read_pids(&pidfile).await;
    assert_gone(&pids).await;
}

#[tokio::test]
async fn transform_renders_the_next_event_from_event_and_context() {
    let doc = r#"
id: t
states:
  - id: shape
    action: transform
    config:
      template: |
        {"id": ["shape", "end"], "greeting": {{ ("Hello, " ~ event.name ~ "!") | tojson }}, "tags": {{ event.tags | tojson }}, "state": "{{ state }}"}
  - {id: end, action: end}
xitions:
  - id: [start, shape]
  - id: [shape, end]
    schema: {type: object, required: [greeting], properties: {greeting: {type: string}}}
"#;
    let engine = Engine::default();
    let out = run(
        &engine,
        doc,
        json!({"name": "Ada \"Lovelace\"", "tags": ["a", 1]}),
    )
    .await;
    assert_eq!(
        out.status,
        RunStatus::Completed,
        "{:?}",
        failure_messages(&out)
    );
    let result = out.result.unwrap();
    assert_eq!(result["greeting"], "Hello, Ada \"Lovelace\"!");
    assert_eq!(result["tags"], json!(["a", 1]));
    assert_eq!(result["state"], "shape");

    let bad = doc.replace("event.name", "event.missing");
    let out = run(&engine, &bad, json!({"name": "x", "tags": []})).await;
    assert_eq!(out.status, RunStatus::Failed);
    assert!(
        failure_messages(&out)[0].contains("template failed"),
        "{:?}",
        failure_messages(&out)
    );
}

/// A person who answers from a list.
struct Script {
    answers: Mutex<VecDeque<String>>,
    shown: Mutex<Vec<String>>,
    interactive: bool,
}

impl HumanIo for Script {
    fn is_interactive(&self) -> bool {
        self.interactive
    }
    fn show(&self, text: &str) -> std::io::Result<()> {
        self.shown.lock().unwrap().push(text.to_owned());
        Ok(())
    }
    fn read_json(&self) -> std::io::Result<Option<String>> {
        Ok(self.answers.lock().unwrap().pop_front())
    }
}

const APPROVAL: &str = r#"
id: approval
states:
  - id: review
    action: human
    config: {prompt: "Approve the deployment?"}
  - {id: shipped, action: end}
  - {id: stopped, action: end}
xitions:
  - id: [start, review]
  - id: [review, shipped]
    description: Approve.
    schema: {type: object, required: [approver], properties: {approver: {type: string}}}
  - id: [review, stopped]
    description: Reject.
"#;

fn human_engine(answers: &[&str], interactive: bool) -> (Engine, Arc<Script>) {
    let script = Arc::new(Script {
        answers: Mutex::new(answers.iter().map(|s| s.to_string()).collect()),
        shown: Mutex::new(Vec::new()),
        interactive,
    });
    let mut registry = ActionRegistry::with_builtins();
    registry
        .register("human", Arc::new(Human::with_io(script.clone())))
        .unwrap();
    (Engine::new(Arc::new(registry)), script)
}

#[tokio::test]
async fn human_answers_are_validated_and_refusals_shown_again() {
    let (engine, script) = human_engine(
        &[
            "{\"id\": [\"review\", \"shipped\"]}",
            "{\"id\": [\"review\", \"shipped\"], \"approver\": \"ada\"}",
        ],
        true,
    );
    let out = run(&engine, APPROVAL, json!({"version": "1.2"})).await;
    assert_eq!(out.status, RunStatus::Completed);
    assert_eq!(out.result.unwrap()["approver"], "ada");
    let shown = script.shown.lock().unwrap();
    assert!(shown[0].contains("Approve the deployment?"));
    assert!(
        shown[0].contains("[\"review\",\"shipped\"]")
            && shown[0].contains("[\"review\",\"stopped\"]")
    );
    assert!(shown[0].contains("\"1.2\""), "the input is shown");
    assert!(
        shown[1].contains("refused") && shown[1].contains("approver"),
        "{}",
        shown[1]
    );
}

#[tokio::test]
async fn human_without_a_terminal_is_a_clear_error() {
    let (engine, _) = human_engine(&[], false);
    let out = run(&engine, APPROVAL, json!({})).await;
    assert_eq!(out.status, RunStatus::Failed);
    let messages = failure_messages(&out);
    assert_eq!(messages.len(), 1, "no point retrying: {messages:?}");
    assert!(messages[0].contains("no terminal"), "{messages:?}");
}

#[tokio::test]
async fn layer_actions_load_but_say_which_layer_provides_them() {
    let doc = r#"
id: r
states:
  - {id: think, action: llm, config: {model: anything}}
  - {id: end, action: end}
xitions:
  - id: [start, think]
  - id: [think, end]
"#;
    let engine = Engine::default();
    let out = run(&engine, doc, json!({})).await;
    assert_eq!(out.status, RunStatus::Failed);
    let messages = failure_messages(&out);
    assert_eq!(messages.len(), 1, "no point retrying: {messages:?}");
    assert!(
        messages[0].contains("provided by claij-llm")
            && messages[0].contains("claij_llm::register"),
        "{messages:?}"
    );
}
