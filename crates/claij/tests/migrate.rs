//! `claij runs migrate` through the real binary, on SQLite files and on a real PostgreSQL
//! server: suspended runs moved with and without a map, a run whose process was killed, a
//! fork waiting on a suspended branch and a chain waiting on a suspended link — each then
//! resumed to the end on the new version, its entries before the move unchanged; refused
//! moves (a removed state, a narrowed schema the run's last event breaks) that change
//! nothing, byte for byte; a migration of many runs killed with SIGKILL half-way, which
//! leaves each run moved or untouched; and the `on_new_version` policy, applied when a
//! version is registered (`claij defs add`, `claij mcp serve`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use claij_testkit::{Backend, TestStore};
use serde_json::{Value, json};

/// The request the human-approval example starts from.
const REQUEST: &str =
    r#"{"id": ["start", "summarise"], "service": "billing", "version": "2.4.1", "changes": 14}"#;

/// A process's exit and output.
#[derive(Debug)]
struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Out {
    #[track_caller]
    fn exits(self, code: i32) -> Self {
        assert_eq!(self.code, Some(code), "{self:#?}");
        self
    }
}

/// A store (either backend) and a directory of documents; the binary runs in that
/// directory with that store.
struct Env {
    store: TestStore,
    dir: tempfile::TempDir,
}

impl Env {
    fn new(backend: Backend) -> Self {
        let env = Env {
            store: TestStore::new(backend),
            dir: tempfile::tempdir().unwrap(),
        };
        let example = repo().join("examples/human-approval.yaml");
        std::fs::copy(example, env.path("approval.yaml")).unwrap();
        env
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes a document into the directory.
    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.path(name), text).unwrap();
    }

    /// `approval.yaml` with `edit` applied, as `name`.
    fn approval_variant(&self, name: &str, edit: impl Fn(String) -> String) {
        let text = std::fs::read_to_string(self.path("approval.yaml")).unwrap();
        self.write(name, &edit(text));
    }

    fn claij(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_claij"));
        cmd.current_dir(self.dir.path())
            .stdin(Stdio::null())
            .env("CLAIJ_STORE", self.store.url())
            .env("XDG_DATA_HOME", self.dir.path().join("xdg"))
            .env_remove("CLAIJ_DURABILITY");
        cmd
    }

    fn run(&self, args: &[&str]) -> Out {
        let out = self.claij().args(args).output().expect("claij starts");
        Out {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Starts the approval (v1) as `run`, which suspends in `approve`.
    fn suspended_approval(&self, run: &str) {
        self.run(&[
            "run",
            "approval.yaml",
            "--input",
            REQUEST,
            "--run-id",
            run,
            "-q",
        ])
        .exits(3);
    }

    fn record(&self, run: &str) -> Value {
        let out = self.run(&["runs", "show", run, "--json"]).exits(0);
        serde_json::from_str(&out.stdout).unwrap()
    }

    fn trail(&self, run: &str) -> Vec<Value> {
        let out = self.run(&["runs", "trail", run, "--json"]).exits(0);
        out.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The run as stored, as the binary prints it: its record and trail, as text.
    fn stored(&self, run: &str) -> (String, String) {
        let show = self.run(&["runs", "show", run, "--json"]).exits(0).stdout;
        let trail = self.run(&["runs", "trail", run, "--json"]).exits(0).stdout;
        (show, trail)
    }

    /// `claij runs migrate ARGS --json`: its exit and one plan per run, by run id.
    fn migrate(&self, args: &[&str]) -> (Option<i32>, Vec<Value>) {
        let mut all = vec!["runs", "migrate"];
        all.extend_from_slice(args);
        all.push("--json");
        let out = self.run(&all);
        let plans = out
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}\n{out:#?}")))
            .collect();
        (out.code, plans)
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The approval with `approve` renamed `review`, and a new way out of it.
fn renamed(text: String) -> String {
    text.replace("version: 1", "version: 2")
        .replace("  - id: approve\n", "  - id: review\n")
        .replace("[summarise, approve]", "[summarise, review]")
        .replace("[start, approve]", "[start, review]")
        .replace("[approve, deploy]", "[review, deploy]")
        .replace("[approve, rejected]", "[review, rejected]")
        .replace("\"approve\"]", "\"review\"]")
        .replace(
            "  - id: rejected\n    action: end\n",
            "  - id: rejected\n    action: end\n  - id: escalated\n    action: end\n",
        )
        + "  - id: [review, escalated]\n    schema: {type: object, required: [to]}\n"
}

/// The approval with its names kept, a new way out of `approve`, and approvers' names of
/// three characters at least.
fn extended(text: String) -> String {
    text.replace("version: 1", "version: 2")
        .replace(
            "approver: {type: string, minLength: 2}",
            "approver: {type: string, minLength: 3}",
        )
        .replace(
            "  - id: rejected\n    action: end\n",
            "  - id: rejected\n    action: end\n  - id: escalated\n    action: end\n",
        )
        + "  - id: [approve, escalated]\n    schema: {type: object, required: [to]}\n"
}

fn parked_runs_move_to_the_new_version_and_finish_there(backend: Backend) {
    let env = Env::new(backend);
    env.approval_variant("v2-renamed.yaml", renamed);
    env.approval_variant("v2-extended.yaml", extended);
    env.suspended_approval("kept");
    env.suspended_approval("mapped");
    let kept_before = env.trail("kept");
    let mapped_before = env.trail("mapped");

    // A dry run plans, and changes nothing.
    let stored = env.stored("kept");
    let (code, plans) = env.migrate(&["kept", "--to", "v2-extended.yaml", "--dry-run"]);
    assert_eq!(code, Some(0), "{plans:#?}");
    assert_eq!(plans[0]["outcome"], "would move");
    let changes = &plans[0]["changes"];
    assert_eq!(
        changes[0]["at"], "transition `approve → deploy`",
        "{plans:#?}"
    );
    let narrowed = changes[0]["message"].as_str().unwrap();
    assert!(
        narrowed.contains("narrowed") && narrowed.contains("/properties/approver/minLength: 2 → 3"),
        "{narrowed}"
    );
    assert_eq!(
        changes[1]["at"], "transition `approve → escalated`",
        "{plans:#?}"
    );
    assert_eq!(env.stored("kept"), stored);
    // Nor did it store the definition it would move to.
    let defs = env.run(&["defs", "list", "--json"]).exits(0).stdout;
    assert_eq!(defs.lines().count(), 1, "{defs}");

    // Without a map: same state, and the new transition is waited on.
    let (code, plans) = env.migrate(&["kept", "--to", "v2-extended.yaml"]);
    assert_eq!(code, Some(0), "{plans:#?}");
    assert_eq!(plans[0]["outcome"], "moved");
    let record = env.record("kept");
    assert_eq!(
        (record["version"].as_u64(), &record["state"]),
        (Some(2), &json!("approve"))
    );
    assert_eq!(
        record["wait"]["waiting_for"],
        json!([
            ["approve", "deploy"],
            ["approve", "rejected"],
            ["approve", "escalated"]
        ])
    );
    assert_eq!(record["migrations"][0]["from"]["version"], 1);
    // With a map: the state renamed, its wait with it.
    let (code, plans) = env.migrate(&[
        "mapped",
        "--to",
        "v2-renamed.yaml",
        "--map",
        "approve=review",
    ]);
    assert_eq!(code, Some(0), "{plans:#?}");
    let record = env.record("mapped");
    assert_eq!(record["state"], "review");
    assert_eq!(record["wait"]["state"], "review");
    assert_eq!(record["migrations"][0]["map"], json!({"approve": "review"}));
    // An answer in the old names is refused; in the new ones it is taken.
    env.run(&[
        "runs",
        "resume",
        "mapped",
        "--input",
        r#"{"id": ["approve", "deploy"], "approver": "ada"}"#,
    ])
    .exits(2);
    env.run(&[
        "runs",
        "resume",
        "mapped",
        "--input",
        r#"{"id": ["review", "deploy"], "approver": "ada"}"#,
        "-q",
    ])
    .exits(0);
    env.run(&[
        "runs",
        "resume",
        "kept",
        "--input",
        r#"{"id": ["approve", "escalated"], "to": "grace"}"#,
        "-q",
    ])
    .exits(0);
    for (run, before, end) in [
        ("kept", kept_before, "escalated"),
        ("mapped", mapped_before, "deploy"),
    ] {
        let record = env.record(run);
        assert_eq!(
            (&record["status"], &record["state"]),
            (&json!("completed"), &json!(end))
        );
        let trail = env.trail(run);
        assert_eq!(
            &trail[..before.len()],
            &before[..],
            "{run}: the entries before the move stay"
        );
        let moved = &trail[before.len()];
        assert_eq!(moved["failure"]["kind"], "migrated", "{moved}");
        assert_eq!(
            (
                moved["event"]["from"]["version"].as_u64(),
                moved["event"]["to"]["version"].as_u64()
            ),
            (Some(1), Some(2))
        );
        assert!(
            trail[before.len()..].iter().all(|e| e["version"] == 2),
            "{trail:#?}"
        );
    }
}

fn refused_moves_change_nothing(backend: Backend) {
    let env = Env::new(backend);
    // A version without the state the run waits in (and no map for it).
    env.approval_variant("v2-removed.yaml", renamed);
    // A version whose way into `approve` now needs a ticket the run's event lacks.
    env.approval_variant("v2-narrowed.yaml", |t| {
        t.replace("version: 1", "version: 2").replace(
            "  - id: [summarise, approve]\n    schema:\n      type: object\n      required: [service, version, summary]",
            "  - id: [summarise, approve]\n    schema:\n      type: object\n      required: [service, version, summary, ticket]",
        )
    });
    assert!(
        std::fs::read_to_string(env.path("v2-narrowed.yaml"))
            .unwrap()
            .contains("summary, ticket]")
    );
    env.suspended_approval("r");
    env.run(&[
        "run",
        "approval.yaml",
        "--input",
        REQUEST,
        "--run-id",
        "done",
        "-q",
    ])
    .exits(3);
    env.run(&[
        "runs",
        "resume",
        "done",
        "--input",
        r#"{"id": ["approve", "deploy"], "approver": "ada"}"#,
        "-q",
    ])
    .exits(0);
    let before = env.stored("r");
    let done_before = env.stored("done");

    let (code, plans) = env.migrate(&["r", "--to", "v2-removed.yaml"]);
    assert_eq!(code, Some(1), "{plans:#?}");
    assert_eq!(plans[0]["outcome"], "refused");
    assert_eq!(plans[0]["refusals"][0]["at"], "state `approve`");
    let message = plans[0]["refusals"][0]["message"].as_str().unwrap();
    assert!(message.contains("--map approve="), "{message}");
    assert_eq!(env.stored("r"), before);

    let (code, plans) = env.migrate(&["r", "done", "--to", "v2-narrowed.yaml"]);
    assert_eq!(code, Some(1), "{plans:#?}");
    let refusal = &plans[0]["refusals"][0];
    assert_eq!(refusal["at"], "entry 1", "{plans:#?}");
    assert!(
        refusal["message"].as_str().unwrap().contains("ticket"),
        "{refusal}"
    );
    assert_eq!(plans[1]["refusals"][0]["at"], "run");
    assert!(
        plans[1]["refusals"][0]["message"]
            .as_str()
            .unwrap()
            .contains("is completed")
    );
    assert_eq!(env.stored("r"), before);
    assert_eq!(env.stored("done"), done_before);
    // A map to a state the new version lacks is a usage error, before anything is read.
    let out = env.run(&[
        "runs",
        "migrate",
        "r",
        "--to",
        "v2-narrowed.yaml",
        "--map",
        "approve=nowhere",
    ]);
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert!(out.stderr.contains("no state `nowhere`"), "{out:#?}");
    assert_eq!(env.stored("r"), before);
}

/// A run whose process is killed in a slow step moves to a version that fixes the step,
/// and is resumed there.
fn a_crashed_run_moves_and_resumes_on_the_fix(backend: Backend) {
    let env = Env::new(backend);
    let document = |version: u32, script: &str| {
        json!({
            "id": "slow",
            "version": version,
            "states": [
                {"id": "work", "action": "command", "config": {"argv": ["sh", "-c", script]}},
                {"id": "done", "action": "end"}
            ],
            "xitions": [{"id": ["start", "work"]}, {"id": ["work", "done"]}]
        })
        .to_string()
    };
    env.write(
        "slow.json",
        &document(
            1,
            "echo $$ > pid; sleep 60; echo '{\"id\": [\"work\", \"done\"], \"by\": 1}'",
        ),
    );
    env.write(
        "fixed.json",
        &document(2, "echo '{\"id\": [\"work\", \"done\"], \"by\": 2}'"),
    );
    let mut child = env
        .claij()
        .args([
            "run",
            "slow.json",
            "--input",
            "{}",
            "--run-id",
            "crashed",
            "-q",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let script_pid = loop {
        if let Some(pid) = std::fs::read_to_string(env.path("pid"))
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok())
        {
            break pid;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the step never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(script_pid),
        nix::sys::signal::Signal::SIGKILL,
    );
    assert_eq!(env.record("crashed")["status"], "running");

    let (code, plans) = env.migrate(&["--fsm", "slow", "--to", "fixed.json"]);
    assert_eq!(code, Some(0), "{plans:#?}");
    assert_eq!(
        (plans.len(), &plans[0]["outcome"]),
        (1, &json!("moved")),
        "{plans:#?}"
    );
    env.run(&["runs", "resume", "crashed", "-q"]).exits(0);
    let record = env.record("crashed");
    assert_eq!(
        (&record["status"], record["version"].as_u64()),
        (&json!("completed"), Some(2))
    );
    assert_eq!(record["last_event"]["by"], 2, "the fixed step ran");
}

/// A panel forks two askers (each waits for a person); a chain runs a step, then an asker.
fn parents_waiting_for_children_move_and_are_continued_by_them(backend: Backend) {
    let env = Env::new(backend);
    env.write(
        "asker.yaml",
        "id: asker\nstates:\n  - {id: ask, action: human, config: {prompt: \"Your view?\"}}\n  - {id: end, action: end}\nxitions:\n  - id: [start, ask]\n  - id: [ask, end]\n    schema: {type: object, required: [view]}\n",
    );
    env.write(
        "prep.yaml",
        "id: prep\nstates:\n  - id: go\n    action: transform\n    config: {template: '{\"id\": [\"go\", \"end\"], \"ready\": true}'}\n  - {id: end, action: end}\nxitions:\n  - id: [start, go]\n  - id: [go, end]\n",
    );
    let panel = |version: u32, joined_schema: &str| {
        format!(
            "id: panel\nversion: {version}\nstates:\n  - id: fan\n    action: fork\n    config: {{fsms: [asker.yaml, asker.yaml], success_to: joined}}\n  - {{id: joined, action: end}}\nxitions:\n  - id: [start, fan]\n  - id: [fan, joined]\n    schema: {joined_schema}\n"
        )
    };
    env.write("panel.yaml", &panel(1, "{type: object}"));
    env.write(
        "panel-2.yaml",
        &panel(2, "{type: object, required: [branches]}"),
    );
    let chain = |version: u32, description: &str| {
        format!(
            "id: chained\nversion: {version}\ndescription: {description}\nstates:\n  - id: steps\n    action: fsm\n    config: {{fsm: [prep.yaml, asker.yaml], success_to: done}}\n  - {{id: done, action: end}}\nxitions:\n  - id: [start, steps]\n  - id: [steps, done]\n"
        )
    };
    env.write("chained.yaml", &chain(1, "first"));
    env.write("chained-2.yaml", &chain(2, "second"));
    env.run(&["run", "panel.yaml", "--input", "{}", "--run-id", "p", "-q"])
        .exits(3);
    env.run(&[
        "run",
        "chained.yaml",
        "--input",
        "{}",
        "--run-id",
        "c",
        "-q",
    ])
    .exits(3);
    let children = env.record("p")["wait"]["children"].clone();
    assert_eq!(children, json!(["p.1.0", "p.1.1"]));
    let link = env.record("c")["wait"]["children"][0]
        .as_str()
        .unwrap()
        .to_owned();

    // The askers' new version renames the state they wait in: the parent cannot carry
    // its children over, and nothing moves.
    let asker = std::fs::read_to_string(env.path("asker.yaml")).unwrap();
    env.write(
        "asker.yaml",
        &format!(
            "version: 2\n{}",
            asker
                .replace("id: ask,", "id: question,")
                .replace("[start, ask]", "[start, question]")
                .replace("[ask, end]", "[question, end]")
        ),
    );
    let before: Vec<_> = ["p", "p.1.0", "p.1.1"]
        .iter()
        .map(|r| env.stored(r))
        .collect();
    let (code, plans) = env.migrate(&["p", "--to", "panel-2.yaml"]);
    assert_eq!(code, Some(1), "{plans:#?}");
    assert_eq!(
        plans[0]["refusals"][0]["at"], "child `p.1.0`: state `ask`",
        "{plans:#?}"
    );
    let after: Vec<_> = ["p", "p.1.0", "p.1.1"]
        .iter()
        .map(|r| env.stored(r))
        .collect();
    assert_eq!(after, before);
    // Its new version keeps the state: the children move with their parent.
    env.write(
        "asker.yaml",
        &format!(
            "version: 2\n{}",
            asker.replace("Your view?", "Your view, please?")
        ),
    );
    for (run, to, children) in [("p", "panel-2.yaml", 2), ("c", "chained-2.yaml", 1)] {
        let (code, plans) = env.migrate(&[run, "--to", to]);
        assert_eq!(code, Some(0), "{plans:#?}");
        assert_eq!(plans[0]["outcome"], "moved");
        assert_eq!(
            plans[0]["children"].as_array().map(Vec::len),
            Some(children),
            "{plans:#?}"
        );
    }
    for child in ["p.1.0", "p.1.1", link.as_str()] {
        let record = env.record(child);
        assert_eq!(record["version"], 2, "{record:#}");
        assert_eq!(record["wait"]["prompt"], "Your view, please?", "{record:#}");
    }
    for (k, parent) in [("0", "suspended"), ("1", "completed")] {
        let input = json!({"id": ["ask", "end"], "view": format!("v{k}")}).to_string();
        let out = env
            .run(&["runs", "resume", &format!("p.1.{k}"), "--input", &input])
            .exits(0);
        assert!(
            out.stderr
                .contains(&format!("parent run p continued: {parent}")),
            "{out:#?}"
        );
    }
    let out = env
        .run(&[
            "runs",
            "resume",
            &link,
            "--input",
            r#"{"id": ["ask", "end"], "view": "chained"}"#,
        ])
        .exits(0);
    assert!(
        out.stderr.contains("parent run c continued: completed"),
        "{out:#?}"
    );
    for run in ["p", "c"] {
        let record = env.record(run);
        assert_eq!(
            (&record["status"], record["version"].as_u64()),
            (&json!("completed"), Some(2)),
            "{record:#}"
        );
        let trail = env.trail(run);
        let last = trail.last().unwrap();
        assert_eq!(last["version"], 2, "{trail:#?}");
        assert!(trail.iter().any(|e| e["failure"]["kind"] == "migrated"));
    }
    assert_eq!(
        env.record("p")["last_event"]["branches"][1]["result"]["view"],
        "v1"
    );
}

/// The approval as version `version`, with `config: {on_new_version: POLICY}` when given,
/// its way into `approve` asking for a summary of at least `min_summary` characters.
fn approval_version(text: String, version: u32, policy: Option<&str>, min_summary: u32) -> String {
    let config = policy
        .map(|p| format!("config: {{on_new_version: {p}}}\n"))
        .unwrap_or_default();
    text.replace("version: 1\n", &format!("version: {version}\n{config}")).replace(
        "  - id: [summarise, approve]\n    schema:\n      type: object\n      required: [service, version, summary]\n",
        &format!("  - id: [summarise, approve]\n    schema:\n      type: object\n      required: [service, version, summary]\n      properties: {{summary: {{type: string, minLength: {min_summary}}}}}\n"),
    )
}

/// Registering a version whose `on_new_version` is `migrate` moves the parked runs of
/// older versions that can move (`claij defs add`, and `claij mcp serve` as it starts);
/// `keep` moves none.
fn a_new_version_that_migrates_moves_the_parked_runs_it_can(backend: Backend) {
    let env = Env::new(backend);
    env.approval_variant("v2.yaml", |t| approval_version(t, 2, Some("migrate"), 30));
    env.approval_variant("v3.yaml", |t| approval_version(t, 3, None, 1));
    env.approval_variant("v4.yaml", |t| approval_version(t, 4, Some("migrate"), 1));
    assert!(
        std::fs::read_to_string(env.path("v2.yaml"))
            .unwrap()
            .contains("minLength: 30")
    );
    env.suspended_approval("long-1");
    env.suspended_approval("long-2");
    // "Deploy ui 2.4.1 (14 changes)": 28 characters, short of v2's 30.
    let short = REQUEST.replace("billing", "ui");
    env.run(&[
        "run",
        "approval.yaml",
        "--input",
        &short,
        "--run-id",
        "short",
        "-q",
    ])
    .exits(3);
    let short_before = env.stored("short");

    let out = env.run(&["defs", "add", "v2.yaml", "--json"]);
    assert_eq!(out.code, Some(1), "one run stays: {out:#?}");
    let added: Value = serde_json::from_str(&out.stdout).unwrap();
    let moved: Vec<&str> = added["migrated"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["run"].as_str().unwrap())
        .collect();
    assert_eq!(moved, ["long-1", "long-2"], "{added:#}");
    assert_eq!(added["not_migrated"][0]["run"], "short");
    assert_eq!(
        added["not_migrated"][0]["refusals"][0]["at"], "entry 1",
        "{added:#}"
    );
    assert_eq!(env.stored("short"), short_before);
    assert_eq!(env.record("long-1")["version"], 2);

    // `keep` (the default) moves nothing.
    let out = env.run(&["defs", "add", "v3.yaml"]).exits(0);
    assert_eq!(out.stdout.lines().count(), 1, "{out:#?}");
    assert_eq!(env.record("long-1")["version"], 2);
    assert_eq!(env.stored("short"), short_before);

    // The MCP server registers a migrating document it serves as it starts (it then
    // stops: its stdin is closed).
    let out = env.run(&["mcp", "serve", "v4.yaml"]);
    assert!(
        out.stderr.contains("moved 3 parked run(s) to v4"),
        "{out:#?}"
    );
    for run in ["long-1", "long-2", "short"] {
        assert_eq!(env.record(run)["version"], 4, "{run}");
    }
}

#[test]
fn sqlite_a_new_version_that_migrates_moves_the_parked_runs_it_can() {
    a_new_version_that_migrates_moves_the_parked_runs_it_can(Backend::Sqlite);
}

#[test]
fn postgres_a_new_version_that_migrates_moves_the_parked_runs_it_can() {
    a_new_version_that_migrates_moves_the_parked_runs_it_can(Backend::Postgres);
}

#[test]
fn sqlite_parked_runs_move_to_the_new_version_and_finish_there() {
    parked_runs_move_to_the_new_version_and_finish_there(Backend::Sqlite);
}

#[test]
fn postgres_parked_runs_move_to_the_new_version_and_finish_there() {
    parked_runs_move_to_the_new_version_and_finish_there(Backend::Postgres);
}

#[test]
fn sqlite_refused_moves_change_nothing() {
    refused_moves_change_nothing(Backend::Sqlite);
}

#[test]
fn postgres_refused_moves_change_nothing() {
    refused_moves_change_nothing(Backend::Postgres);
}

#[test]
fn sqlite_a_crashed_run_moves_and_resumes_on_the_fix() {
    a_crashed_run_moves_and_resumes_on_the_fix(Backend::Sqlite);
}

#[test]
fn postgres_a_crashed_run_moves_and_resumes_on_the_fix() {
    a_crashed_run_moves_and_resumes_on_the_fix(Backend::Postgres);
}

#[test]
fn sqlite_parents_waiting_for_children_move_and_are_continued_by_them() {
    parents_waiting_for_children_move_and_are_continued_by_them(Backend::Sqlite);
}

#[test]
fn postgres_parents_waiting_for_children_move_and_are_continued_by_them() {
    parents_waiting_for_children_move_and_are_continued_by_them(Backend::Postgres);
}

/// Many parked runs; `claij runs migrate` is killed (SIGKILL) once it has moved a few:
/// each run is then either moved (whole: new pin, state, wait and entry) or untouched
/// (byte for byte), and running the migration again moves the rest.
fn a_migration_killed_half_way_leaves_each_run_moved_or_untouched(backend: Backend) {
    const RUNS: usize = 30;
    let env = Env::new(backend);
    env.approval_variant("v2-renamed.yaml", renamed);
    let ids: Vec<String> = (0..RUNS).map(|i| format!("r{i:02}")).collect();
    for id in &ids {
        env.suspended_approval(id);
    }
    let before: Vec<(String, String)> = ids.iter().map(|id| env.stored(id)).collect();
    let mut child = env
        .claij()
        .args([
            "runs",
            "migrate",
            "--fsm",
            "human-approval",
            "--to",
            "v2-renamed.yaml",
            "--map",
            "approve=review",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for _ in 0..5 {
        let line = lines.next().expect("a plan").unwrap();
        assert!(line.contains("\"moved\""), "{line}");
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();

    let (mut moved, mut untouched) = (0, 0);
    for (id, (show, trail)) in ids.iter().zip(&before) {
        let now = env.stored(id);
        if now == (show.clone(), trail.clone()) {
            untouched += 1;
            continue;
        }
        moved += 1;
        let record: Value = serde_json::from_str(&now.0).unwrap();
        assert_eq!(
            (record["version"].as_u64(), &record["state"]),
            (Some(2), &json!("review")),
            "{id}"
        );
        assert_eq!(record["wait"]["state"], "review", "{id}");
        let old: Vec<&str> = trail.lines().collect();
        let new: Vec<&str> = now.1.lines().collect();
        assert_eq!(new.len(), old.len() + 1, "{id}");
        assert_eq!(
            &new[..old.len()],
            &old[..],
            "{id}: the entries before the move stay"
        );
        assert!(new[old.len()].contains("\"migrated\""), "{id}");
    }
    assert!(
        moved >= 5 && untouched >= 1,
        "moved {moved}, untouched {untouched}: the kill came half-way"
    );
    let (code, plans) = env.migrate(&[
        "--fsm",
        "human-approval",
        "--to",
        "v2-renamed.yaml",
        "--map",
        "approve=review",
    ]);
    assert_eq!(code, Some(0), "{plans:#?}");
    let count = |word: &str| plans.iter().filter(|p| p["outcome"] == word).count();
    assert_eq!((count("moved"), count("already there")), (untouched, moved));
}

#[test]
fn sqlite_a_migration_killed_half_way_leaves_each_run_moved_or_untouched() {
    a_migration_killed_half_way_leaves_each_run_moved_or_untouched(Backend::Sqlite);
}

#[test]
fn postgres_a_migration_killed_half_way_leaves_each_run_moved_or_untouched() {
    a_migration_killed_half_way_leaves_each_run_moved_or_untouched(Backend::Postgres);
}
