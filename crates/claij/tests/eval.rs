//! `claij eval` through the real binary: on the real embedded model (SmolLM2, fetched by
//! scripts/setup/model) with the table's figures recounted from the stored runs and the
//! same table regenerated offline from the recording; on the code-review panel's recorded
//! providers (replayed); a provider that cannot be reached; bad cases files; and the HTML
//! report opened in headless Chromium (scripts/setup/chromium), its screenshot kept in
//! target/artifacts/.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use claij_core::{RunStore, TrailEntry};
use serde_json::{Value, json};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The binary in the repository's root, with no model configuration from the machine
/// (HOME and XDG_CONFIG_HOME at `home`): the default model is the embedded one, at
/// `model`.
fn claij(home: &Path, model: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_claij"));
    command
        .current_dir(root())
        .stdin(Stdio::null())
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home)
        .env("CLAIJ_EMBEDDED_MODEL", model)
        .env_remove("CLAIJ_STORE")
        .env_remove("CLAIJ_CONFIG")
        .env_remove("CLAIJ_MODEL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENROUTER_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("GEMINI_API_KEY")
        .env_remove("GOOGLE_API_KEY");
    command
}

fn run(mut command: Command) -> (Output, String, String) {
    let out = command.output().expect("claij starts");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stdout, stderr)
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

async fn open_store(path: &Path) -> std::sync::Arc<dyn RunStore> {
    claij_store::open(
        &path.display().to_string(),
        claij_core::store::Durability::Normal,
    )
    .await
    .unwrap()
}

/// Model steps of a stored trail, recounted here: entries of the given `llm` states
/// (on_failure routes, made by the engine, have no duration), first attempts, those that
/// validated, and the tokens.
fn recount(trail: &[TrailEntry], llm_states: &[&str]) -> (u64, u64, u64, u64, u64) {
    let model: Vec<&TrailEntry> = trail
        .iter()
        .filter(|e| llm_states.contains(&&*e.from))
        .filter(|e| e.duration_ms.is_some() || e.failure.is_some())
        .collect();
    let steps = model.iter().filter(|e| e.attempt == 1).count() as u64;
    let first = model
        .iter()
        .filter(|e| e.attempt == 1 && e.failure.is_none())
        .count() as u64;
    let tokens_in = trail
        .iter()
        .filter_map(|e| e.usage.as_ref())
        .map(|u| u.input_tokens)
        .sum();
    let tokens_out = trail
        .iter()
        .filter_map(|e| e.usage.as_ref())
        .map(|u| u.output_tokens)
        .sum();
    (steps, first, model.len() as u64, tokens_in, tokens_out)
}

/// Checks every figure of the JSON report against the stored runs, and returns the runs'
/// trails by run id.
async fn check_report_against_store(report: &Value, store: &dyn RunStore, llm_states: &[&str]) {
    for summary in report["models"].as_array().unwrap() {
        let model = summary["model"].as_str().unwrap();
        let results: Vec<&Value> = report["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["model"] == model)
            .collect();
        let (mut steps, mut first, mut attempts, mut tin, mut tout, mut passed) =
            (0, 0, 0, 0, 0, 0);
        for r in &results {
            let id = r["run_id"].as_str().unwrap();
            let record = store.run(id).await.unwrap();
            assert_eq!(r["status"], record.status.as_str(), "{id}");
            assert_eq!(r["state"], record.state, "{id}");
            let trail = store.trail(id, 0).await.unwrap();
            let (s, f, a, i, o) = recount(&trail, llm_states);
            assert_eq!(r["model_steps"], s, "{id}");
            assert_eq!(r["first_try_valid"], f, "{id}");
            assert_eq!(r["model_attempts"], a, "{id}");
            assert_eq!(r["input_tokens"], i, "{id}");
            assert_eq!(r["output_tokens"], o, "{id}");
            // Every model step of the run was made by the model under test.
            for e in trail.iter().filter(|e| e.usage.is_some()) {
                assert_eq!(e.model.as_deref(), Some(model), "{id}: {e:?}");
            }
            steps += s;
            first += f;
            attempts += a;
            tin += i;
            tout += o;
            passed += u64::from(r["passed"] == true);
        }
        assert_eq!(summary["runs"], results.len() as u64, "{model}");
        assert_eq!(summary["passed"], passed, "{model}");
        assert_eq!(summary["model_steps"], steps, "{model}");
        assert_eq!(summary["first_try_valid"], first, "{model}");
        assert_eq!(summary["model_attempts"], attempts, "{model}");
        assert_eq!(summary["input_tokens"], tin, "{model}");
        assert_eq!(summary["output_tokens"], tout, "{model}");
        let failed: u64 = summary["failures"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(failed + passed, results.len() as u64, "{model}");
    }
}

/// Two triage cases on the real embedded model; the table's figures recounted from the
/// stored runs, each pass re-derived from the stored final event; then the same table
/// regenerated from the recording with no model file at all.
#[test]
fn triage_eval_runs_on_the_embedded_model() {
    let dir = tempfile::tempdir().unwrap();
    let cases = dir.path().join("cases.jsonl");
    let all = std::fs::read_to_string(root().join("examples/evals/triage.jsonl")).unwrap();
    let picked: Vec<&str> = all
        .lines()
        .filter(|l| l.contains("\"double-charge\"") || l.contains("\"crash-on-export\""))
        .collect();
    assert_eq!(picked.len(), 2);
    std::fs::write(&cases, picked.join("\n")).unwrap();
    let (db, tape, report) = (
        dir.path().join("eval.db"),
        dir.path().join("tape.json"),
        dir.path().join("report.json"),
    );
    let mut command = claij(dir.path(), &claij_testkit::cache::embedded_model());
    command
        .args(["eval", "examples/triage.yaml", "--id", "t", "--cases"])
        .arg(&cases)
        .arg("--store")
        .arg(&db)
        .arg("--record")
        .arg(&tape)
        .arg("--json")
        .arg(&report);
    let (out, stdout, stderr) = run(command);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // Progress: one line per run (stderr is not a terminal here).
    assert!(stderr.contains("[  2/2]"), "{stderr}");
    assert!(stdout.contains("embedded/smollm2-135m"), "{stdout}");
    let report = read_json(&report);
    assert_eq!(report["models"][0]["model"], "embedded/smollm2-135m");
    assert_eq!(report["models"][0]["provider"], "embedded");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = open_store(&db).await;
        let llm = ["extract", "route", "billing", "technical", "general"];
        check_report_against_store(&report, store.as_ref(), &llm).await;
        // A pass is a pass: the stored run ended in `done` through the expected team.
        for (case, team) in [
            ("double-charge", "billing"),
            ("crash-on-export", "technical"),
        ] {
            let r = report["results"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["case"] == case)
                .unwrap();
            let id = r["run_id"].as_str().unwrap();
            assert_eq!(id, format!("t.embedded-smollm2-135m.{case}.1"));
            let trail = store.trail(id, 0).await.unwrap();
            let last = claij_core::trail::last_event(&trail).unwrap();
            let right = last["id"] == json!([team, "done"]);
            assert_eq!(r["passed"] == true, right, "{case}: {last}");
            if !right {
                assert!(r["failure"].is_string(), "{r}");
            }
            // The table points at the run.
            if r["passed"] == false {
                assert!(
                    stdout.contains(&format!("claij runs trail {id}")),
                    "{stdout}"
                );
            }
        }
    });
    // Offline: no model file, the recording answers; the same results.
    let replay_db = dir.path().join("replay.db");
    let replay_report = dir.path().join("replay.json");
    let mut command = claij(
        dir.path(),
        &dir.path().join("SmolLM2-135M-Instruct.Q4_1.gguf"),
    );
    command
        .args([
            "eval",
            "examples/triage.yaml",
            "--id",
            "t",
            "--quiet",
            "--cases",
        ])
        .arg(&cases)
        .arg("--store")
        .arg(&replay_db)
        .arg("--replay")
        .arg(&tape)
        .arg("--json")
        .arg(&replay_report);
    let (out, _, stderr) = run(command);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let again = read_json(&replay_report);
    let strip = |v: &Value| -> Vec<Value> {
        v["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                json!([
                    r["case"],
                    r["passed"],
                    r["failure"],
                    r["state"],
                    r["model_steps"],
                    r["first_try_valid"],
                    r["input_tokens"],
                    r["output_tokens"]
                ])
            })
            .collect()
    };
    assert_eq!(strip(&again), strip(&report));
}

/// `--baseline plain`: each case also runs on the same model asked plainly, as a row of
/// its own; the recording shows what each row sent — claij's conversation, and the plain
/// one (one system and one user message: the instruction, the input without its `id`,
/// the JSON Schema) — under the same constraint and decoding.
#[test]
fn the_plain_baseline_runs_beside_claij_on_the_same_model() {
    let dir = tempfile::tempdir().unwrap();
    let cases = dir.path().join("cases.jsonl");
    std::fs::write(
        &cases,
        r#"{"name": "oslo", "input": {"text": "Tom Berg is 12 and lives in Oslo."}, "expect": {"state": "minor"}}"#,
    )
    .unwrap();
    let (tape, report) = (dir.path().join("tape.json"), dir.path().join("report.json"));
    let mut command = claij(dir.path(), &claij_testkit::cache::embedded_model());
    command
        .args([
            "eval",
            "examples/person.yaml",
            "--baseline",
            "plain",
            "--cases",
        ])
        .arg(&cases)
        .args(["--store", "memory", "--record"])
        .arg(&tape)
        .arg("--json")
        .arg(&report);
    let (out, stdout, stderr) = run(command);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains("embedded/smollm2-135m (plain)"), "{stdout}");
    let report = read_json(&report);
    let rows: Vec<(&str, u64)> = report["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["model"].as_str().unwrap(), m["runs"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        rows,
        [
            ("embedded/smollm2-135m", 1),
            ("embedded/smollm2-135m (plain)", 1)
        ]
    );
    // One exchange per row (a first answer is always valid under the grammar).
    let tape = read_json(&tape);
    let exchanges = tape["exchanges"].as_array().unwrap();
    let requests: Vec<&Value> = exchanges.iter().map(|e| &e["request"]).collect();
    let user = |r: &Value| -> String {
        r["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| m["content"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
            .join("\n")
    };
    // claij's request lists the routes with the descriptions person.yaml gives them;
    // the plain one has only the JSON Schema. Both show the instruction, then the input
    // without its routing `id`, and no INPUT-SCHEMA.
    assert_eq!(requests.len(), 2, "{requests:?}");
    let (claij, plain): (Vec<&Value>, Vec<&Value>) = requests
        .iter()
        .partition(|r| user(r).contains("Its `id` picks what happens next"));
    assert_eq!((plain.len(), claij.len()), (1, 1), "{requests:?}");
    let (plain, claij) = (plain[0], claij[0]);
    for r in [claij, plain] {
        assert_eq!(r["messages"].as_array().unwrap().len(), 2, "{r}");
        let asked = user(r);
        assert!(
            asked.starts_with("Read the sentence and give the person's full name")
                && asked.contains("Input:\n{\"text\":\"Tom Berg is 12 and lives in Oslo.\"}")
                && asked.contains("JSON Schema:\n{\"oneOf\":[")
                && !asked.contains("DOCUMENT")
                && !asked.contains("INPUT-SCHEMA")
                && !asked.contains("\"start\""),
            "{asked}"
        );
    }
    assert!(
        user(claij).contains("- [\"extract\",\"minor\"]: The person is 17 or younger."),
        "{}",
        user(claij)
    );
    // The same model, constraint and decoding.
    assert_eq!(plain["model"], claij["model"]);
    assert_eq!(plain["enforcement"], claij["enforcement"]);
    assert_eq!(plain["sampling"], claij["sampling"]);
}

/// The code-review panel's recorded providers, replayed: `smol` (SmolLM2 behind
/// llama-cpp-python, prompt mode) answered prose (each answer a `parse` failure; the
/// chairman has three attempts, then its `on_failure` route): invalid output — or, if the
/// recording holds fewer than three answers, the replay's miss, a provider error. The
/// embedded model's recording never ends the review (see below). What is expected is read from the
/// recordings; the figures are checked against the store.
#[test]
fn code_review_eval_replays_the_recorded_providers() {
    let dir = tempfile::tempdir().unwrap();
    let (db, report, html, md) = (
        dir.path().join("eval.db"),
        dir.path().join("report.json"),
        dir.path().join("report.html"),
        dir.path().join("report.md"),
    );
    let tape = merged_code_review_tape(dir.path());
    let input = read_json(&root().join("tests/llm/code-review.input.json"));
    let cases = dir.path().join("cases.yaml");
    std::fs::write(
        &cases,
        format!(
            "- name: subtraction bug\n  input: {input}\n  expect:\n    state: end\n    max_attempts: 6\n"
        ),
    )
    .unwrap();
    let mut command = claij(
        dir.path(),
        &dir.path().join("SmolLM2-135M-Instruct.Q4_1.gguf"),
    );
    command
        .args([
            "eval",
            "examples/code-review.yaml",
            "--id",
            "cr",
            "--config",
            "tests/llm/claij.toml",
        ])
        .args([
            "--model",
            "smol",
            "--model",
            "embedded/smollm2-135m",
            "--cases",
        ])
        .arg(&cases)
        .arg("--store")
        .arg(&db)
        .arg("--replay")
        .arg(&tape)
        .arg("--json")
        .arg(&report)
        .arg("--html")
        .arg(&html)
        .arg("--markdown")
        .arg(&md);
    let (out, stdout, stderr) = run(command);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report = read_json(&report);
    let result = |model: &str| {
        report["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["model"] == model)
            .cloned()
            .unwrap()
    };
    // What smol's recording holds: answers that are not a valid event (prose, or an
    // object naming no transition of `chairman`), at most three used; each fails as its
    // text says.
    let recorded = read_json(&root().join("tests/llm/code-review.exchanges.json"));
    let answers = recorded["exchanges"].as_array().unwrap();
    let mut kinds_expected: Vec<&str> = answers
        .iter()
        .take(3)
        .map(|a| {
            let text = a["response"]["text"].as_str().unwrap_or_default();
            match claij_llm::extract::extract_object(text) {
                Err(_) => "parse",
                // An object: without an `id` leaving `chairman`, no transition it names;
                // with one, it failed its schema (the recording holds no valid answer).
                Ok(event) if event["id"][0] == "chairman" => "validation",
                Ok(_) => "unknown-transition",
            }
        })
        .collect();
    let (failure, says) = if kinds_expected.len() == 3 {
        let last = format!(
            "last failure: {} in `chairman` (attempt 3)",
            kinds_expected[2]
        );
        ("invalid-output", last)
    } else {
        kinds_expected.push("action");
        ("provider-error", "holds no answer".to_owned())
    };
    let smol = result("smol");
    assert_eq!(smol["passed"], false);
    assert_eq!(smol["failure"], failure, "{smol}");
    assert!(smol["detail"].as_str().unwrap().contains(&says), "{smol}");
    assert_eq!(smol["state"], "failed");
    // SmolLM2, greedy, never ends the review: the panel goes round by round. The
    // recording ends with the embedded provider's refusal of a request (the conversation
    // outgrew the context, or an answer did not close within `max_tokens`), or it was
    // stopped while the rounds went on, and replay refuses the next request; the run
    // ends where it was refused: through the chairman's `on_failure` in `failed`, or
    // failed in the reviewer, which has none (crates/claij-llm/tests/code_review.rs). A
    // refused call is the provider's failure, not a wrong answer.
    let tape = read_json(&root().join("tests/llm/code-review.embedded.exchanges.json"));
    let last = tape["exchanges"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let (refused_in, refusal_message) = match last["error"]["message"].as_str() {
        Some(message) => (last["state"].clone(), message.to_owned()),
        None => {
            let answer: Value =
                serde_json::from_str(last["response"]["text"].as_str().unwrap()).unwrap();
            (answer["id"][1].clone(), "holds no answer".to_owned())
        }
    };
    let (status, state) = if refused_in == "chairman" {
        ("completed", "failed")
    } else {
        ("failed", "reviewer")
    };
    let embedded = result("embedded/smollm2-135m");
    assert_eq!(embedded["passed"], false, "{embedded}");
    assert_eq!(embedded["status"], status, "{embedded}");
    assert_eq!(embedded["state"], state, "{embedded}");
    assert_eq!(embedded["failure"], "provider-error", "{embedded}");
    assert!(
        embedded["detail"]
            .as_str()
            .unwrap()
            .contains(&refusal_message),
        "{embedded}"
    );
    let embedded_failure = embedded["failure"].as_str().unwrap().to_owned();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = open_store(&db).await;
        check_report_against_store(&report, store.as_ref(), &["chairman", "reviewer"]).await;
        // smol's stored trail: the parse failures (and the replay's miss, if any).
        let trail = store.trail("cr.smol.subtraction-bug.1", 0).await.unwrap();
        let kinds: Vec<String> = trail
            .iter()
            .filter_map(|e| e.failure.as_ref().map(|f| f.kind.to_string()))
            .collect();
        assert_eq!(kinds, kinds_expected, "{trail:?}");
    });
    let s = &report["models"][0];
    assert_eq!(s["model"], "smol");
    assert_eq!(
        (s["model_steps"].as_u64(), s["first_try_valid"].as_u64()),
        (Some(1), Some(0))
    );
    assert_eq!(s["mean_attempts"], 3.0);
    // The matrix, in every format.
    assert!(
        stdout.contains(&format!(
            "subtraction bug  ✗ {failure}  ✗ {embedded_failure}"
        )),
        "{stdout}"
    );
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(
        md.contains(&format!(
            "| subtraction bug | ✗ {failure} | ✗ {embedded_failure} |"
        )),
        "{md}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg") && page.contains("cr.smol.subtraction-bug.1"));
    // Self-contained: no script, nothing fetched (the only URL is SVG's namespace).
    assert!(!page.contains("<script"), "{page}");
    assert!(
        !page
            .replace("http://www.w3.org/2000/svg", "")
            .contains("http"),
        "{page}"
    );
}

/// Both recordings of the code-review example in one tape.
fn merged_code_review_tape(dir: &Path) -> PathBuf {
    let mut exchanges = Vec::new();
    for file in [
        "code-review.exchanges.json",
        "code-review.embedded.exchanges.json",
    ] {
        let tape = read_json(&root().join("tests/llm").join(file));
        exchanges.extend(tape["exchanges"].as_array().unwrap().iter().cloned());
    }
    let path = dir.join("tape.json");
    std::fs::write(
        &path,
        json!({"claij_exchanges": 1, "exchanges": exchanges}).to_string(),
    )
    .unwrap();
    path
}

/// A provider nobody answers at is a provider error, not a wrong answer.
#[test]
fn an_unreachable_provider_is_reported_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let config = dir.path().join("claij.toml");
    std::fs::write(
        &config,
        format!(
            "[providers.gone]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmax_retries = 0\n\n[models.ghost]\nprovider = \"gone\"\nname = \"ghost-1\"\n"
        ),
    )
    .unwrap();
    let cases = dir.path().join("cases.jsonl");
    let line = std::fs::read_to_string(root().join("examples/evals/triage.jsonl"))
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_owned();
    std::fs::write(&cases, line).unwrap();
    let report = dir.path().join("report.json");
    let mut command = claij(
        dir.path(),
        &dir.path().join("SmolLM2-135M-Instruct.Q4_1.gguf"),
    );
    command
        .args([
            "eval",
            "examples/triage.yaml",
            "--model",
            "ghost",
            "--store",
            "memory",
            "--config",
        ])
        .arg(&config)
        .arg("--cases")
        .arg(&cases)
        .arg("--json")
        .arg(&report)
        .args(["--fail-under", "0.5"]);
    let (out, stdout, stderr) = run(command);
    // Under the pass rate asked for: exit 1, saying so.
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("under the pass rate of 50%: ghost (0%)"),
        "{stderr}"
    );
    let report = read_json(&report);
    let r = &report["results"][0];
    assert_eq!(r["failure"], "provider-error", "{r}");
    assert!(
        r["detail"].as_str().unwrap().contains("model `ghost`"),
        "{r}"
    );
    assert_eq!(report["models"][0]["failures"]["provider-error"], 1);
    assert_eq!(report["models"][0]["failures"]["wrong-answer"], 0);
    assert!(stdout.contains("✗ provider-error"), "{stdout}");
}

/// A bad cases file is refused before anything runs, naming the line, the case and the
/// field.
#[test]
fn a_bad_cases_file_names_the_line_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let cases = dir.path().join("cases.jsonl");
    std::fs::write(
        &cases,
        "{\"name\": \"ok\", \"input\": {\"text\": \"hi\"}, \"expect\": {\"state\": \"done\"}}\n{\"name\": \"bad\", \"input\": {\"text\": \"hi\"}, \"expect\": {\"values\": [{\"path\": \"$.id[0]\", \"one_of\": \"billing\"}]}}\n",
    )
    .unwrap();
    let mut command = claij(
        dir.path(),
        &dir.path().join("SmolLM2-135M-Instruct.Q4_1.gguf"),
    );
    command
        .args([
            "eval",
            "examples/triage.yaml",
            "--store",
            "memory",
            "--cases",
        ])
        .arg(&cases);
    let (out, _, stderr) = run(command);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("line 2 (case `bad`): expect.values[0].one_of: must be a non-empty list"),
        "{stderr}"
    );
}

/// The HTML report of a replayed eval, opened in headless Chromium: the screenshot is a
/// real PNG of the window's size, kept as target/artifacts/eval-report.png.
#[test]
fn the_html_report_opens_in_headless_chromium() {
    let chromium = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .expect(
            "Chromium is missing: run scripts/setup/chromium (Debian: apt-get install chromium)",
        );
    let dir = tempfile::tempdir().unwrap();
    let tape = merged_code_review_tape(dir.path());
    let input = read_json(&root().join("tests/llm/code-review.input.json"));
    let cases = dir.path().join("cases.jsonl");
    std::fs::write(
        &cases,
        json!({"name": "subtraction bug", "input": input, "expect": {"state": "end"}}).to_string(),
    )
    .unwrap();
    let html = dir.path().join("report.html");
    let mut command = claij(
        dir.path(),
        &dir.path().join("SmolLM2-135M-Instruct.Q4_1.gguf"),
    );
    command
        .args([
            "eval",
            "examples/code-review.yaml",
            "--config",
            "tests/llm/claij.toml",
            "--quiet",
        ])
        .args([
            "--model",
            "smol",
            "--model",
            "embedded/smollm2-135m",
            "--repeat",
            "2",
        ])
        .args(["--store", "memory", "--cases"])
        .arg(&cases)
        .arg("--replay")
        .arg(&tape)
        .arg("--html")
        .arg(&html);
    let (out, _, stderr) = run(command);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let artifacts = root().join("target/artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let png = artifacts.join("eval-report.png");
    let _ = std::fs::remove_file(&png);
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=1200,1600")
        .arg(format!("file://{}", html.canonicalize().unwrap().display()))
        .stdin(Stdio::null())
        .output()
        .expect("chromium starts");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes =
        std::fs::read(&png).unwrap_or_else(|e| panic!("no screenshot {}: {e}", png.display()));
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    assert_eq!(&bytes[12..16], b"IHDR");
    let width = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    assert_eq!((width, height), (1200, 1600));
    // A blank page compresses to a few hundred bytes; charts and tables do not.
    assert!(
        bytes.len() > 20_000,
        "a suspiciously small screenshot: {} bytes",
        bytes.len()
    );
}
