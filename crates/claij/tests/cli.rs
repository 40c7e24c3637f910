//! The `claij` binary, end to end: validate, run (progress, trail, exit codes,
//! interruption), graph, schema.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use claij_testkit::process::alive;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The binary, run from the repository root, keeping runs in memory (the durable side
/// has tests of its own, each with its own store).
fn claij() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_claij"));
    cmd.current_dir(repo())
        .stdin(Stdio::null())
        .env("CLAIJ_STORE", "memory");
    cmd
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(args: &[&str]) -> Output {
    claij().args(args).output().expect("claij starts")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn trail_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("trail file written")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each trail line is JSON"))
        .collect()
}

#[test]
fn validate_accepts_every_example() {
    let examples: Vec<String> = std::fs::read_dir(repo().join("examples"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json")
            )
        })
        .map(|p| p.strip_prefix(repo()).unwrap_or(&p).display().to_string())
        .collect();
    assert!(examples.len() >= 4, "{examples:?}");
    let mut args = vec!["validate"];
    args.extend(examples.iter().map(String::as_str));
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("ok "))
            .count(),
        examples.len()
    );
}

#[test]
fn validate_lists_every_problem_with_file_and_path_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "id: bad\nstates:\n  - {id: a, action: transform, config: {template: '{}'}}\n  - {id: z, action: end, colour: red}\nxitions:\n  - id: [start, a]\n  - id: [a, nowhere]\n",
    )
    .unwrap();
    let out = run(&[
        "validate",
        "examples/code-review.yaml",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    let name = bad.display().to_string();
    assert!(
        stderr.contains(&format!(
            "{name}: $.states[1].colour: unknown field `colour`"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "{name}: $.xitions[1].id[1]: transition to unknown state `nowhere`"
        )),
        "{stderr}"
    );
    assert!(text(&out.stdout).contains("ok  examples/code-review.yaml"));

    let out = run(&["validate", "--json", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["valid"], false);
    let paths: Vec<&str> = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["path"].as_str())
        .collect();
    assert!(
        paths.contains(&"$.states[1].colour") && paths.contains(&"$.xitions[1].id[1]"),
        "{paths:?}"
    );
}

#[test]
fn validate_reports_syntax_errors_with_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("broken.json");
    std::fs::write(&bad, "{\n  \"id\": \"x\",\n  \"states\": [,]\n}\n").unwrap();
    let out = run(&["validate", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(&format!("{}:3:", bad.display())),
        "{}",
        text(&out.stderr)
    );
}

/// `claij validate` with no model configuration of the machine's (HOME and
/// XDG_CONFIG_HOME an empty directory, no configuration or key in the environment).
fn validate_alone(home: &Path, args: &[&str]) -> Output {
    let mut cmd = claij();
    cmd.env("HOME", home).env("XDG_CONFIG_HOME", home);
    for var in [
        "CLAIJ_CONFIG",
        "CLAIJ_MODEL",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "OPENROUTER_API_KEY",
    ] {
        cmd.env_remove(var);
    }
    cmd.arg("validate")
        .args(args)
        .output()
        .expect("claij starts")
}

/// A parent whose state `call` runs the child FSM `child` (a file, as written).
fn parent_of(child: &str) -> String {
    format!(
        "id: parent\nstates:\n  - id: call\n    action: fsm\n    config: {{fsm: {child}, success_to: done}}\n  - {{id: done, action: end}}\nxitions:\n  - id: [start, call]\n  - id: [call, done]\n"
    )
}

/// A valid document of one `transform` step.
const LEAF: &str = "id: leaf\nstates:\n  - {id: t, action: transform, config: {template: '{\"id\": [\"t\", \"done\"]}'}}\n  - {id: done, action: end}\nxitions:\n  - id: [start, t]\n  - id: [t, done]\n";

/// A document whose second state has an unknown field (`$.states[1].colour`).
const BROKEN: &str = "id: broken\nstates:\n  - {id: t, action: transform, config: {template: '{}'}}\n  - {id: done, action: end, colour: red}\nxitions:\n  - id: [start, t]\n  - id: [t, done]\n";

#[test]
fn validate_locates_a_childs_problem_in_the_child() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let parent = dir.path().join("parent.yaml");
    std::fs::write(&parent, parent_of("sub/child.yaml")).unwrap();
    std::fs::write(dir.path().join("sub/child.yaml"), BROKEN).unwrap();
    let out = validate_alone(dir.path(), &[parent.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    let child = dir.path().join("sub/child.yaml").display().to_string();
    assert!(
        stderr.contains(&format!(
            "{child}: $.states[1].colour: unknown field `colour`"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("the child of state `call`") && stderr.contains("$.states[0].config.fsm"),
        "{stderr}"
    );
}

#[test]
fn validate_names_the_state_and_the_path_of_a_missing_child() {
    let dir = tempfile::tempdir().unwrap();
    let parent = dir.path().join("parent.yaml");
    std::fs::write(&parent, parent_of("gone.yaml")).unwrap();
    let out = validate_alone(dir.path(), &["--json", parent.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["valid"], false);
    let problem = &report["problems"][0];
    assert_eq!(problem["path"], "$.states[0].config.fsm");
    let message = problem["message"].as_str().unwrap();
    let looked_for = dir.path().join("gone.yaml").display().to_string();
    assert!(
        message.contains("state `call`") && message.contains(&looked_for),
        "{message}"
    );
}

#[test]
fn validate_finds_a_grandchilds_problem_relative_to_its_parent() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("b/c")).unwrap();
    let top = dir.path().join("a.yaml");
    std::fs::write(&top, parent_of("b/b.yaml")).unwrap();
    std::fs::write(dir.path().join("b/b.yaml"), parent_of("c/c.yaml")).unwrap();
    std::fs::write(dir.path().join("b/c/c.yaml"), BROKEN).unwrap();
    let out = validate_alone(dir.path(), &[top.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let grandchild = dir.path().join("b/c/c.yaml").display().to_string();
    assert!(
        text(&out.stderr).contains(&format!("{grandchild}: $.states[1].colour")),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains(&dir.path().join("b/b.yaml").display().to_string()),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn validate_passes_a_valid_parent_and_reports_its_children() {
    let dir = tempfile::tempdir().unwrap();
    let parent = dir.path().join("parent.yaml");
    std::fs::write(&parent, parent_of("leaf.yaml")).unwrap();
    std::fs::write(dir.path().join("leaf.yaml"), LEAF).unwrap();
    let out = validate_alone(dir.path(), &["--json", parent.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let reports: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(reports.len(), 2, "{reports:?}");
    assert_eq!(reports[1]["id"], "leaf");
    assert_eq!(reports[1]["valid"], true);
    assert_eq!(reports[1]["parent"]["state"], "call");
    assert_eq!(reports[1]["parent"]["path"], "$.states[0].config.fsm");
}

#[test]
fn validate_reports_a_cycle_as_an_error_when_it_cannot_end_and_a_warning_when_it_can() {
    let dir = tempfile::tempdir().unwrap();
    // a → b → a, each calling the other on every path: endless.
    let a = dir.path().join("a.yaml");
    std::fs::write(&a, parent_of("b.yaml")).unwrap();
    std::fs::write(dir.path().join("b.yaml"), parent_of("a.yaml")).unwrap();
    let out = validate_alone(dir.path(), &[a.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("$.states[0].config.fsm: state `call` names")
            && stderr.contains("recurse without end"),
        "{stderr}"
    );

    // A document that calls itself on one path only: recursion that can end.
    let r = dir.path().join("r.yaml");
    std::fs::write(
        &r,
        "id: r\nstates:\n  - {id: pick, action: transform, config: {template: '{\"id\": [\"pick\", \"done\"]}'}}\n  - id: again\n    action: fsm\n    config: {fsm: r.yaml, success_to: done}\n  - {id: done, action: end}\nxitions:\n  - id: [start, pick]\n  - id: [pick, again]\n  - id: [pick, done]\n  - id: [again, done]\n",
    )
    .unwrap();
    let out = validate_alone(dir.path(), &[r.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("warning: ")
            && text(&out.stderr).contains("$.states[1].config.fsm: state `again` names"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn validate_locates_an_unknown_model_and_accepts_a_configured_one() {
    let dir = tempfile::tempdir().unwrap();
    let doc = |model: &str| {
        format!(
            "id: asks\nstates:\n  - {{id: ask, action: llm, config: {{model: {model}}}}}\n  - {{id: done, action: end}}\nxitions:\n  - id: [start, ask]\n  - id: [ask, done]\n"
        )
    };
    let unknown = dir.path().join("unknown.yaml");
    std::fs::write(&unknown, doc("nosuch/model")).unwrap();
    let out = validate_alone(dir.path(), &[unknown.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(&format!(
            "{}: $.states[0].config.model: unknown model `nosuch/model`",
            unknown.display()
        )),
        "{}",
        text(&out.stderr)
    );

    let config = dir.path().join("claij.toml");
    std::fs::write(
        &config,
        "[models.mine]\nprovider = \"embedded\"\npath = \"my-model.gguf\"\n",
    )
    .unwrap();
    let known = dir.path().join("known.yaml");
    std::fs::write(&known, doc("mine")).unwrap();
    let args = [
        known.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ];
    let out = validate_alone(dir.path(), &args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // Without the configuration, the same name is unknown.
    let out = validate_alone(dir.path(), &args[..1]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
}

#[test]
fn run_prints_the_final_event_and_writes_the_trail() {
    let dir = tempfile::tempdir().unwrap();
    let trail = dir.path().join("t.jsonl");
    let out = run(&[
        "run",
        "examples/template-pipeline.yaml",
        "--input",
        "@examples/inputs/big-order.json",
        "--trail",
        trail.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let result: Value = serde_json::from_slice(&out.stdout).expect("stdout is the final event");
    assert_eq!(result["id"], serde_json::json!(["invoice", "done"]));
    assert_eq!(result["invoice"]["total"], 1045.0);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("price (transform) attempt 1") && stderr.contains("✓ review → invoice"),
        "{stderr}"
    );
    let lines = trail_lines(&trail);
    let hops: Vec<String> = lines
        .iter()
        .map(|e| {
            format!(
                "{}>{}",
                e["from"].as_str().unwrap(),
                e["to"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        hops,
        [
            "start>price",
            "price>review",
            "review>invoice",
            "invoice>done"
        ]
    );
    assert!(
        lines
            .iter()
            .enumerate()
            .all(|(i, e)| e["seq"] == i && e["fsm"] == "template-pipeline" && e["at"].is_string())
    );
}

#[test]
fn a_failed_run_exits_1_and_still_writes_its_trail() {
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("fails.yaml");
    std::fs::write(
        &doc,
        "id: fails\nstates:\n  - {id: a, action: command, config: {argv: [sh, -c, 'echo nope >&2; exit 4']}}\n  - {id: z, action: end}\nxitions:\n  - id: [start, a]\n  - id: [a, z]\n",
    )
    .unwrap();
    let trail = dir.path().join("t.jsonl");
    let out = run(&[
        "run",
        doc.to_str().unwrap(),
        "--trail",
        trail.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(
        text(&out.stderr).contains("exited with status 4"),
        "{}",
        text(&out.stderr)
    );
    let lines = trail_lines(&trail);
    assert_eq!(lines.len(), 4, "input + 3 failed attempts");
    assert!(
        lines[1..]
            .iter()
            .all(|e| e["failure"]["kind"] == "action" && e.get("to").is_none())
    );
}

#[test]
fn bad_invocations_exit_2() {
    let out = run(&[
        "run",
        "examples/template-pipeline.yaml",
        "--input",
        "{not json",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("not valid JSON"),
        "{}",
        text(&out.stderr)
    );

    let out = run(&[
        "run",
        "examples/template-pipeline.yaml",
        "--input",
        r#"{"customer": "x", "items": []}"#,
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("[start, price]") && stderr.contains("/items"),
        "{stderr}"
    );

    let out = run(&["run", "tests/malformed/unknown-action.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("unknown action"),
        "{}",
        text(&out.stderr)
    );

    let out = run(&["run", "/no/such/file.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("cannot read the file"));

    let out = run(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn human_without_a_terminal_fails_clearly() {
    let out = run(&[
        "run",
        "examples/human-approval.yaml",
        "--input",
        r#"{"id": ["start", "summarise"], "service": "billing", "version": "2.4.1", "changes": 3}"#,
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("no terminal"), "{stderr}");
    assert_eq!(
        stderr.matches("✗ approve").count(),
        1,
        "not retried: {stderr}"
    );
}

#[test]
fn ctrl_c_interrupts_the_run_kills_its_programs_and_records_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pids");
    let doc = dir.path().join("slow.yaml");
    std::fs::write(
        &doc,
        format!(
            "id: slow\nstates:\n  - {{id: a, action: command, config: {{argv: [sh, -c, 'sleep 300 & echo $$ $! > {}; wait']}}}}\n  - {{id: z, action: end}}\nxitions:\n  - id: [start, a]\n  - id: [a, z]\n",
            pidfile.display()
        ),
    )
    .unwrap();
    let trail = dir.path().join("t.jsonl");
    let child = claij()
        .args([
            "run",
            doc.to_str().unwrap(),
            "--trail",
            trail.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let pids: Vec<i32> = loop {
        let pids: Vec<i32> = std::fs::read_to_string(&pidfile)
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if pids.len() == 2 {
            break pids;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the command never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("interrupted"));
    let lines = trail_lines(&trail);
    assert_eq!(lines.last().unwrap()["failure"]["kind"], "interrupted");
    let started = Instant::now();
    while pids.iter().any(|&p| alive(p)) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{pids:?} outlived the interrupt"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn graph_draws_dot_and_mermaid() {
    let out = run(&["graph", "examples/code-review.yaml"]);
    assert_eq!(out.status.code(), Some(0));
    let dot = text(&out.stdout);
    assert!(
        dot.starts_with("digraph") && dot.contains("chairman") && dot.contains("(llm)"),
        "{dot}"
    );
    let out = run(&["graph", "examples/code-review.yaml", "--format", "mermaid"]);
    let mermaid = text(&out.stdout);
    assert!(
        mermaid.contains("stateDiagram-v2") && mermaid.contains("[*]"),
        "{mermaid}"
    );
}

#[test]
fn graph_svg_uses_graphviz_and_without_it_says_how_to_get_it() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("g.svg");
    let out = run(&[
        "graph",
        "examples/build-test-fix.yaml",
        "--format",
        "svg",
        "-o",
        svg.to_str().unwrap(),
    ]);
    // Graphviz is required here (scripts/test installs it): no `dot`, no pass.
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    // Without `dot` on PATH the message says what to do.
    let out = claij()
        .env("PATH", "/nonexistent")
        .args(["graph", "examples/build-test-fix.yaml", "--format", "svg"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("install Graphviz"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn schema_prints_the_meta_schema() {
    let out = run(&["schema"]);
    assert_eq!(out.status.code(), Some(0));
    let schema: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(&schema, claij_core_meta());
}

fn claij_core_meta() -> &'static Value {
    static META: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    META.get_or_init(|| {
        serde_json::from_str(
            &std::fs::read_to_string(repo().join("crates/claij-core/src/metaschema.json")).unwrap(),
        )
        .unwrap()
    })
}

#[test]
fn help_shows_examples() {
    let out = run(&["--help"]);
    assert!(text(&out.stdout).contains("Examples:"));
    let out = run(&["run", "--help"]);
    assert!(text(&out.stdout).contains("--trail"));
}

/// Whether `needle` appears in any file under `dir`.
fn found_under(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(found_under(&path, needle));
        } else if std::fs::read(&path)
            .unwrap_or_default()
            .windows(needle.len())
            .any(|w| w == needle)
        {
            found.push(path);
        }
    }
    found
}

#[test]
fn an_http_states_secret_reaches_the_service_but_never_the_trail_the_store_or_the_output() {
    use claij_testkit::stub::{Reply, Stub};
    let secret = "tok-5f1e9a7c-never-written";
    // The service echoes what it was sent: the echo is redacted too.
    let stub = Stub::start(vec![Reply::json(
        200,
        &format!(r#"{{"order": 7, "echo": "Bearer {secret}"}}"#),
    )]);
    let dir = tempfile::tempdir().unwrap();
    let flow = dir.path().join("call.yaml");
    std::fs::write(
        &flow,
        format!(
            "id: call\nstates:\n  - id: call\n    action: http\n    config:\n      method: POST\n      url: {url}\n      secrets: [API_TOKEN]\n      headers: {{Authorization: \"Bearer {{{{ secret.API_TOKEN }}}}\"}}\n  - {{id: done, action: end}}\nxitions:\n  - id: [start, call]\n  - id: [call, done]\n",
            url = stub.url("/orders")
        ),
    )
    .unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let trail = dir.path().join("trail.jsonl");
    let out = claij()
        .env("API_TOKEN", secret)
        .args(["run", flow.to_str().unwrap(), "--input", r#"{"sku": "a1"}"#])
        .arg("--store")
        .arg(store.join("claij.db"))
        .arg("--trail")
        .arg(&trail)
        .output()
        .expect("claij starts");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let seen = stub.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].header("authorization"),
        Some(format!("Bearer {secret}").as_str())
    );
    let result: Value = serde_json::from_slice(&out.stdout).expect("stdout is the final event");
    assert_eq!(result["body"]["order"], 7);
    assert_eq!(result["body"]["echo"], "Bearer [secret API_TOKEN]");
    for output in [&out.stdout, &out.stderr] {
        assert!(!text(output).contains(secret), "{}", text(output));
    }
    assert!(trail.exists());
    assert_eq!(
        found_under(dir.path(), secret.as_bytes()),
        Vec::<PathBuf>::new()
    );
}
