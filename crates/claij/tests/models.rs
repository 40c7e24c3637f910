//! `claij run` with models (replayed from the committed exchange file: no network) and
//! `claij prompt`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The binary from the repository root, runs in memory, no model configuration from the
/// machine (HOME and XDG_CONFIG_HOME point at an empty directory).
fn command(home: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_claij"));
    command
        .current_dir(repo())
        .stdin(Stdio::null())
        .env("CLAIJ_STORE", "memory")
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home)
        .env_remove("CLAIJ_CONFIG")
        .env_remove("CLAIJ_MODEL")
        .env_remove("CLAIJ_CACHE_DIR")
        .env_remove("CLAIJ_EMBEDDED_MODEL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("GEMINI_API_KEY")
        .env_remove("GOOGLE_API_KEY")
        .env_remove("OPENROUTER_API_KEY");
    command
}

/// `claij ARGS`, as [`command`] sets it up.
fn claij(home: &Path, args: &[&str]) -> Output {
    command(home).args(args).output().expect("claij starts")
}

/// `claij ARGS` on the embedded model `model` (the file named by CLAIJ_EMBEDDED_MODEL).
fn claij_embedded(home: &Path, model: &Path, args: &[&str]) -> Output {
    command(home)
        .env("CLAIJ_EMBEDDED_MODEL", model)
        .args(args)
        .output()
        .expect("claij starts")
}

/// A trail written by `claij run --trail`, one JSON value per entry.
fn read_trail(path: impl AsRef<Path>) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// SmolLM2-135M's GGUF in the cache (fetched by `scripts/setup/model`).
fn smollm2() -> PathBuf {
    let cache = std::env::var_os("CLAIJ_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/claij")))
        .unwrap();
    let model = cache.join("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(
        model.exists(),
        "{} is missing: run scripts/setup/model",
        model.display()
    );
    model
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `claij run` of the code-review example from its recorded exchanges (tests/llm).
const REPLAY_CODE_REVIEW: [&str; 8] = [
    "run",
    "examples/code-review.yaml",
    "--config",
    "tests/llm/claij.toml",
    "--replay",
    "tests/llm/code-review.exchanges.json",
    "--input",
    "@tests/llm/code-review.input.json",
];

#[test]
fn the_code_review_example_replays_and_prints_usage_totals() {
    let home = tempfile::tempdir().unwrap();
    let out = claij(home.path(), &REPLAY_CODE_REVIEW);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(result.get("id").is_some(), "{result}");
    assert!(
        stderr.contains("claij: models: ") && stderr.contains("$"),
        "{stderr}"
    );
}

#[test]
fn an_llm_state_with_nothing_configured_uses_the_embedded_model_and_says_how_to_get_it() {
    // HOME is empty, so the embedded model's file is not in its cache.
    let home = tempfile::tempdir().unwrap();
    let out = claij(
        home.path(),
        &[
            "run",
            "examples/code-review.yaml",
            "--input",
            "@tests/llm/code-review.input.json",
        ],
    );
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("no model is configured")
            && stderr.contains("embedded model embedded/qwen2.5-coder-1.5b"),
        "{stderr}"
    );
    // The chairman ends through its `on_failure`, told how to get the model.
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["id"], serde_json::json!(["chairman", "failed"]));
    let message = result["failure"]["message"].as_str().unwrap();
    assert!(message.contains("claij model fetch"), "{message}");
}

/// The README's example on the real embedded model (fetched by `scripts/setup/model`):
/// no key, no network, every answer constrained to its state's schemas, so the run
/// completes with no failed attempt.
#[test]
fn the_triage_example_runs_on_the_embedded_model() {
    let model = smollm2();
    let home = tempfile::tempdir().unwrap();
    let out = claij_embedded(
        home.path(),
        &model,
        &[
            "run",
            "examples/triage.yaml",
            "--input",
            "@examples/inputs/complaint.json",
        ],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("embedded model"), "{stderr}");
    assert!(stderr.contains("0 failed attempt(s)"), "{stderr}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["id"][1], "done", "{result}");
}

#[test]
fn prompt_prints_the_messages_and_their_token_counts() {
    let home = tempfile::tempdir().unwrap();
    let args = [
        "prompt",
        "examples/code-review.yaml",
        "--state",
        "chairman",
        "--input",
        "@tests/llm/code-review.input.json",
    ];
    let out = claij(home.path(), &args);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(stdout.contains("── system ("), "{stdout}");
    // The answer's JSON Schema carries the shared definitions it refers to as its own.
    assert!(stdout.contains(r##"{"$ref":"#/$defs/code"}"##), "{stdout}");
    assert!(stdout.contains(r#""$defs":{"code""#), "{stdout}");
    assert!(stdout.contains("a - b"), "the input is shown: {stdout}");
    let total = |s: &str| -> u64 {
        let line = s.lines().find(|l| l.starts_with("total: ")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    let shared = total(&stdout);
    assert!(shared > 100, "{stdout}");

    let mut inlined_args = args.to_vec();
    inlined_args.push("--inline-schemas");
    let out = claij(home.path(), &inlined_args);
    let inlined = text(&out.stdout);
    assert!(!inlined.contains("$ref"), "{inlined}");
    assert!(!inlined.contains("$defs"), "{inlined}");
    assert_ne!(total(&inlined), shared);
}

/// `--trail` tables a recorded run's model steps; `--step N` prints one step's messages,
/// which end with what that step asked.
#[test]
fn prompt_shows_one_step_of_a_recorded_run() {
    let home = tempfile::tempdir().unwrap();
    let trail = home.path().join("run.jsonl");
    let trail_arg = trail.to_str().unwrap();
    let out = claij(
        home.path(),
        &[
            &REPLAY_CODE_REVIEW[..],
            &["--store", "memory", "--trail", trail_arg],
        ]
        .concat(),
    );
    assert!(trail.exists(), "{}", text(&out.stderr));
    let table = claij(
        home.path(),
        &["prompt", "examples/code-review.yaml", "--trail", trail_arg],
    );
    let table = text(&table.stdout);
    let steps = table
        .lines()
        .filter(|l| l.trim_start().starts_with(char::is_numeric))
        .count();
    assert!(steps >= 2, "{table}");
    let step = |n: usize| {
        claij(
            home.path(),
            &[
                "prompt",
                "examples/code-review.yaml",
                "--trail",
                trail_arg,
                "--step",
                &n.to_string(),
            ],
        )
    };
    let first = step(1);
    let first_text = text(&first.stdout);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    assert!(first_text.starts_with("── system ("), "{first_text}");
    let last_message = first_text.rsplit("── ").next().unwrap();
    assert!(
        last_message.starts_with("user") && last_message.contains("You chair the review"),
        "the first step ends with the chairman's request: {first_text}"
    );
    // The second step holds the first's failure; a step past the last is refused.
    assert!(text(&step(2).stdout).contains("FAILURE ("));
    let past = step(steps + 1);
    assert_ne!(past.status.code(), Some(0));
    assert!(
        text(&past.stderr).contains(&format!("has {steps} model step(s)")),
        "{}",
        text(&past.stderr)
    );
}

/// `--model embedded/NAME` runs that catalog model (fetched by scripts/setup/model), not
/// the default under another name: two models with different tokenizers count the same
/// prompt differently. So does a claij.toml entry whose `name` is a catalog model. A
/// name that is not in the catalog is refused, naming what is.
#[test]
fn each_fetched_model_runs_on_the_embedded_model_by_name() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("claij.toml");
    std::fs::write(
        &config,
        "[models.tiny]\nprovider = \"embedded\"\nname = \"smollm2-135m\"\n",
    )
    .unwrap();
    let input_tokens = |model: &str| -> (Option<i32>, u64, String) {
        let trail = home
            .path()
            .join(format!("{}.jsonl", model.replace('/', "-")));
        // No configuration from the machine, but the models the setup scripts fetched.
        let out = Command::new(env!("CARGO_BIN_EXE_claij"))
            .current_dir(repo())
            .stdin(Stdio::null())
            .env("HOME", home.path())
            .env("XDG_CONFIG_HOME", home.path())
            .env("CLAIJ_CACHE_DIR", claij_testkit::cache::dir())
            .env("CLAIJ_CONFIG", &config)
            .env_remove("CLAIJ_MODEL")
            .env_remove("CLAIJ_EMBEDDED_MODEL")
            .args([
                "run",
                "examples/sentiment.yaml",
                "--store",
                "memory",
                "--model",
                model,
            ])
            .args(["--input", r#"{"text": "I love it"}"#, "--trail"])
            .arg(&trail)
            .output()
            .unwrap();
        let stderr = text(&out.stderr);
        let step = std::fs::read_to_string(&trail)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| e["model"].is_string());
        let tokens = step
            .as_ref()
            .and_then(|e| e["usage"]["input_tokens"].as_u64())
            .unwrap_or_default();
        if let Some(step) = &step {
            assert_eq!(step["model"], model, "{step}");
        }
        (out.status.code(), tokens, stderr)
    };
    let (code, smol, stderr) = input_tokens("embedded/smollm2-135m");
    assert_eq!(code, Some(0), "{stderr}");
    let (code, qwen, stderr) = input_tokens("embedded/qwen2.5-coder-0.5b");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(smol > 0 && qwen > 0);
    assert_ne!(smol, qwen, "the same model answered both");
    // The default (Qwen2.5-Coder-1.5B) counts as the 0.5B does: `tiny` is SmolLM2.
    let (code, tiny, stderr) = input_tokens("tiny");
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(tiny, smol, "the entry's `name` chose the model");
    let (code, _, stderr) = input_tokens("embedded/no-such-model");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("`no-such-model` is not an embedded catalog model")
            && stderr.contains("smollm2-135m"),
        "{stderr}"
    );
}

#[test]
fn model_list_shows_the_catalog_with_engines_and_what_is_fetched() {
    let home = tempfile::tempdir().unwrap();
    let cache = home.path().join("cache");
    std::fs::create_dir_all(cache.join("models")).unwrap();
    // A fetched-looking default: its pinned size is what counts (the hash is checked by a
    // fetch). A sparse file, so nothing is written.
    std::fs::File::create(cache.join("models/SmolLM2-135M-Instruct.Q4_1.gguf"))
        .unwrap()
        .set_len(98_362_432)
        .unwrap();
    // The Qwen 0.5B's file with the wrong size does not look fetched.
    std::fs::write(
        cache.join("models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
        b"x",
    )
    .unwrap();
    let dir = cache.to_str().unwrap();
    let out = claij(home.path(), &["model", "list", "--cache-dir", dir]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let line = |name: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name}: {stdout}"))
            .to_owned()
    };
    let smol = line("smollm2-135m");
    assert!(
        !smol.contains("(default)") && smol.contains("llama.cpp") && smol.contains("Q4_1 "),
        "{smol}"
    );
    assert!(smol.contains("SmolLM2-135M-Instruct.Q4_1.gguf"), "{smol}");
    let qwen = line("qwen2.5-coder-0.5b");
    assert!(
        qwen.contains("qwen2") && qwen.contains("Q4_K_M") && qwen.contains("491 MB"),
        "{qwen}"
    );
    // The engine, and whether this build has it.
    assert!(qwen.contains("llama.cpp"), "{qwen}");
    assert_eq!(
        qwen.contains("(not built in)"),
        !cfg!(feature = "llama-cpp"),
        "{qwen}"
    );
    assert!(qwen.trim_end().ends_with("no"), "{qwen}");
    let default = line("qwen2.5-coder-1.5b");
    assert!(
        default.contains("1.5B") && default.contains("(default)"),
        "{stdout}"
    );

    let out = claij(
        home.path(),
        &["model", "list", "--json", "--cache-dir", dir],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 3);
    let by = |name: &str| rows.iter().find(|r| r["name"] == name).unwrap();
    assert_eq!(by("smollm2-135m")["default"], false);
    assert_eq!(by("qwen2.5-coder-1.5b")["default"], true);
    assert_eq!(by("smollm2-135m")["fetched"], true);
    let q = by("qwen2.5-coder-1.5b");
    assert_eq!(q["fetched"], false);
    assert_eq!(q["size"], 1_117_320_768u64);
    assert_eq!(q["engine"], "llama.cpp");
    assert_eq!(q["engine_available"], cfg!(feature = "llama-cpp"));
    assert_eq!(by("qwen2.5-coder-0.5b")["fetched"], false);
    assert_eq!(q["wheels"].as_array().unwrap().len(), 22);
    assert!(q["path"].as_str().unwrap().starts_with(dir), "{q}");
}

#[test]
fn model_fetch_refuses_an_unknown_name_listing_the_known_ones() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("cache");
    let out = claij(
        home.path(),
        &[
            "model",
            "fetch",
            "llama-70b",
            "--cache-dir",
            dir.to_str().unwrap(),
        ],
    );
    let stderr = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(
        stderr.contains("unknown model `llama-70b`")
            && stderr.contains("smollm2-135m, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b"),
        "{stderr}"
    );
    assert!(!dir.exists(), "nothing is written for an unknown name");
}

/// A `[models]` entry with provider `embedded` and a `path` runs that file (here a
/// missing one, so the run says which file it looked for).
#[test]
fn an_embedded_model_in_claij_toml_uses_its_path() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("claij.toml");
    std::fs::write(
        &config,
        "default_model = \"mine\"\n[models.mine]\nprovider = \"embedded\"\npath = \"gguf/my-model.gguf\"\n",
    )
    .unwrap();
    let out = claij(
        home.path(),
        &[
            "run",
            "examples/code-review.yaml",
            "--config",
            config.to_str().unwrap(),
            "--input",
            "@tests/llm/code-review.input.json",
        ],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["id"], serde_json::json!(["chairman", "failed"]));
    let message = result["failure"]["message"].as_str().unwrap();
    let expected = home.path().join("gguf/my-model.gguf");
    assert!(
        message.contains(&format!("{} is missing", expected.display())),
        "{message}"
    );
}

/// The triage example as Qwen2.5-Coder-1.5B behind llama-cpp-python's server answered it
/// in `prompt` and in `json_schema` mode (recorded by default_model.rs on the real server;
/// replayed here with no server): each request the projection makes now is one the
/// recording holds, and the run routes the crash to the technical team on every first
/// try.
#[test]
fn the_triage_replays_its_llama_cpp_server_recordings_in_both_modes() {
    for (model, mode) in [("qwen-prompt", "prompt"), ("qwen-json", "json_schema")] {
        let home = tempfile::tempdir().unwrap();
        let trail = home.path().join("trail.jsonl");
        let tape = format!("tests/llm/triage.{model}.exchanges.json");
        let out = claij(
            home.path(),
            &[
                "run",
                "examples/triage.yaml",
                "--config",
                "tests/llm/qwen-server.toml",
                "--model",
                model,
                "--replay",
                &tape,
                "--trail",
                trail.to_str().unwrap(),
                "--input",
                "@examples/inputs/complaint.json",
            ],
        );
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{model}: {stderr}");
        let result: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(result["id"], serde_json::json!(["technical", "done"]));
        let entries: Vec<Value> = read_trail(&trail);
        assert!(
            entries.iter().all(|e| e.get("failure").is_none()),
            "{entries:#?}"
        );
        let steps: Vec<&Value> = entries
            .iter()
            .filter(|e| e.get("model").is_some())
            .collect();
        assert_eq!(steps.len(), 3);
        assert!(steps.iter().all(|e| e["enforce"] == mode), "{steps:#?}");
    }
}

/// `claij prompt` counts an embedded model's prompt with the model's own tokenizer and
/// chat template, and shows each state as the grammar-constrained model reads it (no
/// answer template): every model step of a run on SmolLM2 counts exactly the prompt tokens
/// the model itself reported for it (the trail's `usage`). A model behind an HTTP API is
/// counted with tiktoken and shown with the template its `prompt` mode needs.
#[test]
fn prompt_counts_an_embedded_model_s_tokens_as_the_model_does() {
    let model = claij_testkit::cache::embedded_model();
    let home = tempfile::tempdir().unwrap();
    let trail = home.path().join("run.jsonl");
    let run = |args: &[&str]| claij_embedded(home.path(), &model, args);
    let out = run(&[
        "run",
        "examples/triage.yaml",
        "--trail",
        trail.to_str().unwrap(),
        "--input",
        "@examples/inputs/complaint.json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let reported: Vec<u64> = std::fs::read_to_string(&trail)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e.get("model").is_some())
        .map(|e| e["usage"]["input_tokens"].as_u64().unwrap())
        .collect();
    assert_eq!(reported.len(), 3, "extract, route, summary");

    let out = run(&[
        "prompt",
        "examples/triage.yaml",
        "--trail",
        trail.to_str().unwrap(),
    ]);
    let table = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let counted: Vec<u64> = table
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("total"))
        .map(|l| l.split_whitespace().last().unwrap().parse().unwrap())
        .collect();
    assert_eq!(counted, reported, "{table}");
    assert!(
        table.contains("embedded/smollm2-135m's own tokenizer and chat template"),
        "{table}"
    );

    // One state's messages: no template for the grammar; per-message counts add up.
    let out = run(&["prompt", "examples/triage.yaml", "--state", "route"]);
    let shown = text(&out.stdout);
    assert!(!shown.contains("An answer looks like this"), "{shown}");
    let per_message: u64 = shown
        .lines()
        .filter_map(|l| l.strip_prefix("── "))
        .map(|l| {
            let n = l
                .split('(')
                .nth(1)
                .unwrap()
                .split_whitespace()
                .next()
                .unwrap();
            n.parse::<u64>().unwrap()
        })
        .sum();
    let total_line = shown.lines().find(|l| l.starts_with("total: ")).unwrap();
    let total: u64 = total_line
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(per_message, total, "{shown}");

    // The same state for a model behind an OpenAI-compatible server in `prompt` mode.
    let out = run(&[
        "prompt",
        "examples/triage.yaml",
        "--state",
        "route",
        "--config",
        "tests/llm/qwen-server.toml",
    ]);
    let served = text(&out.stdout);
    assert!(served.contains("An answer looks like this"), "{served}");
    assert!(served.contains("(tiktoken o200k_base"), "{served}");
}

/// The step table of `claij prompt --trail`: (state, prompt tokens) per model step, and
/// the total.
fn step_table(home: &Path, args: &[&str]) -> (Vec<(String, usize)>, usize) {
    let out = claij(home, args);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let steps = stdout
        .lines()
        .skip(1)
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            match cols.as_slice() {
                [_, _, state, _, tokens] => Some((state.to_string(), tokens.parse().ok()?)),
                _ => None,
            }
        })
        .collect();
    let total = stdout
        .lines()
        .find_map(|l| l.strip_prefix("total prompt tokens over "))
        .and_then(|l| l.split(": ").nth(1))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no total in {stdout}"));
    (steps, total)
}

/// The notes-survey example — a tool-use loop of twelve MCP calls, then a step after it —
/// as Qwen2.5-Coder-1.5B behind llama-cpp-python's server answered it in `json_schema`
/// mode (recorded by hand against the real server, as tests/llm/qwen-server.toml says;
/// replayed here with no model server, against the real filesystem server, whose results
/// are part of each request). Every request the projection makes now is one the
/// recording holds; the loop reads the notes in order until its `max_tool_rounds` are
/// used up, when it is told to answer; and the step after it reads the loop as a
/// one-line summary (`keep: summary`, the default for a tool-use loop), not its rounds.
#[test]
fn the_notes_survey_replays_its_tool_loop_and_the_next_step_reads_a_summary_of_it() {
    let home = tempfile::tempdir().unwrap();
    // The installed filesystem server rather than npx (same version, same results).
    let mut doc: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(repo().join("examples/notes-survey.yaml")).unwrap(),
    )
    .unwrap();
    let files = &mut doc["servers"]["files"];
    assert_eq!(
        files["args"].as_array().unwrap().last().unwrap(),
        "examples/notes"
    );
    files["command"] = Value::from(claij_testkit::cache::mcp_server_bin(
        "mcp-server-filesystem",
    ));
    files["args"] = serde_json::json!(["examples/notes"]);
    let file = home.path().join("notes-survey.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    let file = file.to_str().unwrap();
    let trail = home.path().join("trail.jsonl");
    let trail = trail.to_str().unwrap();
    let out = claij(
        home.path(),
        &[
            "run",
            file,
            "--config",
            "tests/llm/qwen-server.toml",
            "--model",
            "qwen-json",
            "--replay",
            "tests/llm/notes-survey.qwen-json.exchanges.json",
            "--trail",
            trail,
            "--input",
            r#"{"topic": "the database migration"}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["id"], serde_json::json!(["report", "end"]));
    let entries: Vec<Value> = read_trail(trail);
    assert!(
        entries.iter().all(|e| e.get("failure").is_none()),
        "{entries:#?}"
    );
    let read: Vec<&str> = entries
        .iter()
        .filter(|e| e["to"] == "read")
        .map(|e| e["event"]["params"]["arguments"]["path"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = (1..=12).map(|i| format!("note-{i:02}.md")).collect();
    assert_eq!(read, expected);
    assert!(
        entries
            .iter()
            .any(|e| e["from"] == "survey" && e["to"] == "report")
    );

    // What each step read: the loop's prompts grow by a round each; the report's is a
    // summary of the loop and its findings (the survey's answer, a finding a note), smaller
    // than the loop's last step, whose rounds it does not repeat.
    let measure = [
        "prompt",
        file,
        "--trail",
        trail,
        "--config",
        "tests/llm/qwen-server.toml",
    ];
    let (steps, total) = step_table(home.path(), &measure);
    assert_eq!(steps.len(), 14, "{steps:?}");
    assert!(steps[..13].iter().all(|(s, _)| s == "survey"));
    assert!(steps[..13].windows(2).all(|w| w[1].1 > w[0].1), "{steps:?}");
    assert_eq!(steps[13].0, "report");
    assert!(steps[13].1 < steps[12].1, "{steps:?}");
    let (_, seed_total) = step_table(
        home.path(),
        &[&measure[..], &["--projection", "seed"]].concat(),
    );
    assert!(
        2 * total < seed_total,
        "claij {total}, seed-style {seed_total}"
    );

    // With a budget on the survey state, none of its steps reads more than it, and the
    // loop's last step less than half of what it reads without one.
    let uncapped_last = steps[12].1;
    let mut capped = doc.clone();
    let survey = capped["states"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|s| s["id"] == "survey")
        .unwrap();
    survey["config"]["max_prompt_tokens"] = Value::from(1000);
    let capped_file = home.path().join("capped.json");
    std::fs::write(&capped_file, capped.to_string()).unwrap();
    let (steps, _) = step_table(
        home.path(),
        &[&["prompt", capped_file.to_str().unwrap()], &measure[2..]].concat(),
    );
    assert!(
        steps[..13].iter().all(|(s, n)| s == "survey" && *n <= 1000),
        "{steps:?}"
    );
    assert!(
        steps[12].1 < uncapped_last / 2,
        "the loop's last step shrunk: {steps:?} against {uncapped_last}"
    );

    let step = |n: &str| {
        let out = claij(home.path(), &[&measure[..], &["--step", n]].concat());
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let report = step("14");
    assert!(
        report.contains(
            "SUMMARY of `survey`: 12 tool calls (read_text_file {\"path\":\"note-01.md\"}; \
             read_text_file {\"path\":\"note-02.md\"};"
        ),
        "{report}"
    );
    assert!(!report.contains("# Week"), "no note's text: {report}");
    let last_call = step("13");
    assert!(
        last_call.contains("That was the last call `survey` may make"),
        "{last_call}"
    );
    assert_eq!(
        last_call.matches("Make one call per file").count(),
        1,
        "the request said once"
    );
}

/// `vote: 3` on the real embedded model (SmolLM2): the state asks three answers of the same
/// request, the trail entry records each one's route (`votes`), the event is the first
/// answer for the route most voted for (a tie: the route voted for first), and the usage
/// adds up the three calls.
#[test]
fn a_vote_asks_k_answers_and_takes_the_first_answer_for_the_majority_route() {
    let model = smollm2();
    let home = tempfile::tempdir().unwrap();
    let fsm = home.path().join("vote.yaml");
    std::fs::write(
        &fsm,
        r#"
id: vote
states:
  - id: route
    action: llm
    prompts: ["Send the customer's message to the team that handles it."]
    config: {vote: 3, max_tokens: 80}
  - {id: billing, action: end}
  - {id: technical, action: end}
  - {id: general, action: end}
xitions:
  - id: [start, route]
    schema: {type: object, required: [message], properties: {message: {type: string}}}
  - {id: [route, billing], description: "payments, invoices, refunds"}
  - {id: [route, technical], description: "errors, crashes, bugs"}
  - {id: [route, general], description: "anything else"}
"#,
    )
    .unwrap();
    let trail = home.path().join("trail.jsonl");
    let out = claij_embedded(
        home.path(),
        &model,
        &[
            "run",
            fsm.to_str().unwrap(),
            "--trail",
            trail.to_str().unwrap(),
            "--input",
            r#"{"message": "I was charged twice for my March invoice."}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let entries = read_trail(&trail);
    let step = entries
        .iter()
        .find(|e| e["from"] == "route" && e.get("to").is_some())
        .unwrap_or_else(|| panic!("no step from `route`: {entries:#?}"));
    let votes = step["votes"]
        .as_array()
        .unwrap_or_else(|| panic!("{step:#}"));
    assert_eq!(votes.len(), 3, "{step:#}");
    let routes = ["billing", "technical", "general"];
    for vote in votes {
        // Under the grammar every answer parses, so every answer votes for a route.
        assert!(
            vote[0] == "route" && routes.iter().any(|r| vote[1] == *r),
            "{step:#}"
        );
    }
    let count = |v: &Value| votes.iter().filter(|w| *w == v).count();
    let most = votes.iter().map(count).max().unwrap_or_default();
    let winner = votes.iter().find(|v| count(v) == most).unwrap();
    assert_eq!(&step["event"]["id"], winner, "{step:#}");
    assert_eq!(step["to"], winner[1], "{step:#}");
    assert_eq!(step["usage"]["calls"], 3, "{step:#}");
}
