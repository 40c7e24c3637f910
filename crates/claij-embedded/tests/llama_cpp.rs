//! The llama.cpp engine through its real code path: SmolLM2 (llama) and
//! Qwen2.5-Coder-0.5B (qwen2) loaded from their GGUF files, constrained generation in
//! `examples/triage.yaml`'s first state, seeded determinism, and prefix reuse.

#![cfg(feature = "llama-cpp")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

use std::path::{Path, PathBuf};

use claij_core::prompts::{Message, PromptOptions, system_message};
use claij_core::schema::compilable_effective;
use claij_core::{BuiltinNames, CompiledSchema, load_file};
use claij_embedded::{Constraint, GenerateOptions, LlamaCppModel, cache_root, model_path};
use serde_json::{Value, json};

fn smollm2() -> PathBuf {
    model_path(&cache_root())
}

/// Qwen2.5-Coder-0.5B-Instruct Q4_K_M, the qwen2 architecture the candle engine does
/// not run.
fn qwen() -> PathBuf {
    cache_root().join("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
}

fn load(path: &Path) -> LlamaCppModel {
    assert!(
        path.is_file(),
        "the model file {} is missing (SmolLM2: scripts/setup/model)",
        path.display()
    );
    LlamaCppModel::load(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

const CRASH: &str = "Hi, this is Maria Lopez. Since this morning the PhotoSync app crashes every time I open an album, and I have a client presentation at 3pm today. Please help!";

/// `extract`, the first state of the triage example, answers `CRASH` under its output
/// schema's constraint; the answer parses and validates against that schema and the
/// transition it names. Returns the answer.
fn extract(model: &mut LlamaCppModel) -> Value {
    let fsm = load_file(&repo_file("examples/triage.yaml"), &BuiltinNames).unwrap();
    let input = fsm.transition("start", "extract");
    let system = system_message(&fsm, "extract", input, &PromptOptions::default());
    let event = json!({"id": ["start", "extract"], "text": CRASH});
    let messages = [Message::system(system), Message::user(event.to_string())];
    let schema = compilable_effective(&fsm.output_schema("extract"), fsm.defs());
    let constraint = Constraint::from_schema(&schema).unwrap();
    let options = GenerateOptions {
        temperature: 0.7,
        top_p: 0.95,
        seed: 1000,
        max_tokens: 400,
    };
    let mut streamed = String::new();
    let out = model
        .generate(&messages, &options, Some(&constraint), &mut |t| {
            streamed.push_str(t)
        })
        .unwrap();
    assert_eq!(streamed, out.text, "streamed text differs from the result");
    eprintln!(
        "{}: {} prompt tokens ({} computed), {} generated: {}",
        model.path().display(),
        out.prompt_tokens,
        out.prefilled_tokens,
        out.completion_tokens,
        out.text
    );
    let value: Value = serde_json::from_str(&out.text)
        .unwrap_or_else(|e| panic!("output does not parse ({e}): {}", out.text));
    let compiled = CompiledSchema::compile(schema).unwrap();
    assert!(compiled.check(&value).is_ok(), "{}", out.text);
    let transition = fsm
        .transition("extract", value["id"][1].as_str().unwrap_or(""))
        .unwrap_or_else(|| panic!("unknown transition in {}", out.text));
    assert!(
        transition
            .compiled
            .as_ref()
            .is_some_and(|c| c.is_valid(&value)),
        "{}",
        out.text
    );
    value
}

#[test]
fn smollm2_answers_triage_extract_valid_under_the_constraint() {
    let mut model = load(&smollm2());
    let value = extract(&mut model);
    assert_eq!(value["id"][0], "extract");
    assert_eq!(model.compiled_constraints(), 1);
}

#[test]
fn qwen_answers_triage_extract_valid_under_the_constraint() {
    let mut model = load(&qwen());
    let rendered = model.render(&[Message::user("Hello")]).unwrap();
    assert!(
        rendered.contains("<|im_start|>user\nHello<|im_end|>"),
        "{rendered}"
    );
    let value = extract(&mut model);
    assert_eq!(value["id"][0], "extract");
    // The same schema again reuses the compiled matcher.
    extract(&mut model);
    assert_eq!(model.compiled_constraints(), 1);
}

#[test]
fn same_seed_same_text_warm_or_cold_and_other_seeds_differ() {
    let mut model = load(&smollm2());
    let messages = [
        Message::system("You are a helpful assistant."),
        Message::user("Write one sentence about the sea."),
    ];
    let run = |model: &mut LlamaCppModel, seed| {
        let options = GenerateOptions {
            temperature: 0.9,
            top_p: 0.95,
            seed,
            max_tokens: 40,
        };
        model
            .generate(&messages, &options, None, &mut |_| {})
            .unwrap()
    };
    let a = run(&mut model, 7);
    let b = run(&mut model, 7);
    model.clear_cache();
    let c = run(&mut model, 7);
    assert_eq!(a.text, b.text);
    assert_eq!(a.text, c.text);
    assert!(a.completion_tokens > 0 && !a.text.trim().is_empty());
    let others: Vec<String> = (8..12).map(|s| run(&mut model, s).text).collect();
    assert!(others.iter().any(|t| *t != a.text), "{a:?} {others:?}");
}

#[test]
fn a_second_prompt_computes_only_the_tokens_after_the_common_prefix() {
    let mut model = load(&qwen());
    let system = Message::system(
        "You route customer messages to the billing, technical or general team. \
         Billing handles invoices, payments, refunds and subscriptions. Technical handles \
         crashes, errors and bugs in our apps. General handles everything else. \
         Answer with the team's name only.",
    );
    let first = [system.clone(), Message::user(CRASH)];
    let second = [
        system,
        Message::user("I was charged twice for my CloudBox subscription this month."),
    ];
    let greedy = GenerateOptions {
        temperature: 0.0,
        top_p: 1.0,
        seed: 1,
        max_tokens: 8,
    };
    let a = model.generate(&first, &greedy, None, &mut |_| {}).unwrap();
    assert_eq!(
        a.prefilled_tokens, a.prompt_tokens,
        "a cold start computes all"
    );
    let first_tokens = model.tokenize(&model.render(&first).unwrap());
    let second_tokens = model.tokenize(&model.render(&second).unwrap());
    let common = first_tokens
        .iter()
        .zip(&second_tokens)
        .take_while(|(x, y)| x == y)
        .count();
    assert!(
        common > 40,
        "the system message is a common prefix: {common}"
    );

    let warm = model.generate(&second, &greedy, None, &mut |_| {}).unwrap();
    assert_eq!(warm.prompt_tokens, second_tokens.len());
    assert_eq!(warm.prefilled_tokens, second_tokens.len() - common);

    model.clear_cache();
    let cold = model.generate(&second, &greedy, None, &mut |_| {}).unwrap();
    assert_eq!(cold.prefilled_tokens, cold.prompt_tokens);
    assert_eq!(warm.text, cold.text);
    assert!(!cold.text.is_empty());
    eprintln!("first: {:?}; second: {:?}", a.text, cold.text);
}

#[test]
fn a_missing_file_is_an_error_naming_it() {
    let path = Path::new("/nonexistent/model.gguf");
    let err = LlamaCppModel::load(path).unwrap_err().to_string();
    assert!(err.contains("/nonexistent/model.gguf"), "{err}");
}
