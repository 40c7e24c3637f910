//! `claij run` with models (replayed from the committed exchange file: no network) and
//! `claij prompt`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The binary from the repository root, runs in memory, no model configuration from the
/// machine (HOME and XDG_CONFIG_HOME point at an empty directory).
fn claij(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_claij"))
        .current_dir(repo())
        .stdin(Stdio::null())
        .env("CLAIJ_STORE", "memory")
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home)
        .env_remove("CLAIJ_CONFIG")
        .env_remove("CLAIJ_MODEL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("GEMINI_API_KEY")
        .env_remove("GOOGLE_API_KEY")
        .env_remove("OPENROUTER_API_KEY")
        .args(args)
        .output()
        .expect("claij starts")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_code_review_example_replays_and_prints_usage_totals() {
    let home = tempfile::tempdir().unwrap();
    let out = claij(
        home.path(),
        &[
            "run",
            "examples/code-review.yaml",
            "--config",
            "tests/llm/claij.toml",
            "--replay",
            "tests/llm/code-review.exchanges.json",
            "--input",
            "@tests/llm/code-review.input.json",
        ],
    );
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
fn an_llm_state_with_nothing_configured_says_how_to_configure_a_model() {
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
    // The chairman gives up at once (trying again cannot help) through its `on_failure`.
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["id"], serde_json::json!(["chairman", "failed"]));
    assert_eq!(result["failure"]["attempt"], 1);
    let message = result["failure"]["message"].as_str().unwrap();
    assert!(
        message.contains("claij.toml") && message.contains("--model"),
        "{message}"
    );
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
    assert!(stdout.contains("SHARED-SCHEMAS"), "{stdout}");
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
    assert!(!inlined.contains("SHARED-SCHEMAS"), "{inlined}");
    assert_ne!(total(&inlined), shared);
}
