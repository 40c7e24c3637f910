//! The embedded model through its real code path (llama.cpp): SmolLM2-135M-Instruct (the
//! llama architecture, fetched by `scripts/setup/model`: the smallest, where only the
//! promises matter, not the answers) answering in the states of `examples/triage.yaml`
//! under schema constraints, seeded determinism, the chat template and control tokens,
//! and the errors for bad files and budgets; Qwen2.5-Coder-0.5B (qwen2) under the
//! constraint, and prefix reuse.

#![cfg(feature = "llama-cpp")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

#[path = "support/conversation.rs"]
mod conversation;
use conversation::conversation;

use std::path::{Path, PathBuf};

use claij_core::schema::compilable_effective;
use claij_core::{BuiltinNames, CompiledSchema, load_file};
use claij_embedded::{
    Constraint, GenerateError, GenerateOptions, LoadError, LocalModel, Message, cache_root, known,
    ready_path, unsupported_features,
};
use serde_json::{Value, json};

/// SmolLM2-135M-Instruct, the tests' fast model (Q4_1, llama). Named, not the default:
/// the default is the 1.5B model now, and these tests ran it (ten times slower).
fn smollm2() -> PathBuf {
    ready_path(&cache_root(), known("smollm2-135m").unwrap())
}

/// Qwen2.5-Coder-0.5B-Instruct (Q4_K_M, qwen2).
fn qwen() -> PathBuf {
    ready_path(&cache_root(), known("qwen2.5-coder-0.5b").unwrap())
}

fn load(path: &Path) -> LocalModel {
    assert!(
        path.is_file(),
        "the model file {} is missing: run scripts/setup/model (or `claij model fetch NAME`)",
        path.display()
    );
    LocalModel::load(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

fn triage() -> claij_core::Fsm {
    load_file(&repo_file("examples/triage.yaml"), &BuiltinNames).unwrap_or_else(|e| panic!("{e:?}"))
}

const MESSAGES: [&str; 7] = [
    "Hi, this is Maria Lopez. Since this morning the PhotoSync app crashes every time I open an album, and I have a client presentation at 3pm today. Please help!",
    "Hello, I was charged twice for my CloudBox subscription this month. Please refund one of the payments. Thanks, Tom Becker",
    "Do you have a student discount for the Notely editor? Just curious. - Priya",
    "URGENT: invoice 4411 for our TeamChat plan shows the wrong company address and our accountant needs it fixed today. Regards, Jan Novak, ACME Ltd",
    "The export button in ReportPro gives 'Error 500' since the last update. Not urgent, we can wait. Kim",
    "Where can I find the user manual for the MapMaker desktop app? Thanks, Oliver",
    "My credit card expired, how do I update the payment method for StreamPlus? Regards, Sofia",
];

/// One generation that was checked: the state that produced it, and the schemas its
/// answer was validated against.
#[derive(Debug)]
struct Checked {
    state: String,
    /// Validated against the state's output schema (the union of its transitions).
    output_schema: bool,
    /// Validated against the schema of the transition it names.
    transition_schema: bool,
}

/// Runs `state` on `event` (which entered it through `input`), constrained by the state's
/// output schema; returns the parsed answer and notes in `checked` whether it validated
/// first time.
fn answer(
    model: &mut LocalModel,
    fsm: &claij_core::Fsm,
    state: &str,
    input: (&str, &str),
    event: &Value,
    seed: u64,
    checked: &mut Vec<Checked>,
) -> Value {
    let messages = conversation(fsm, state, input, event);
    let schema = compilable_effective(&fsm.output_schema(state), fsm.defs());
    assert!(
        unsupported_features(&schema).is_empty(),
        "state {state}: {:?}",
        unsupported_features(&schema)
    );
    let constraint = match Constraint::from_schema(&schema) {
        Ok(c) => c,
        Err(e) => panic!("state {state}: {e}"),
    };
    let options = GenerateOptions {
        temperature: 0.7,
        top_p: 0.95,
        seed,
        max_tokens: 400,
    };
    let mut streamed = String::new();
    let out = match model.generate(&messages, &options, Some(&constraint), &mut |t| {
        streamed.push_str(t)
    }) {
        Ok(o) => o,
        Err(e) => panic!("state {state}: {e}"),
    };
    assert_eq!(streamed, out.text, "streamed text differs from the result");
    eprintln!(
        "{state}: {} prompt + {} generated tokens: {}",
        out.prompt_tokens, out.completion_tokens, out.text
    );
    let value: Value = match serde_json::from_str(&out.text) {
        Ok(v) => v,
        Err(e) => panic!("state {state}: output does not parse ({e}): {}", out.text),
    };
    let compiled = match CompiledSchema::compile(schema) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    let output_schema = match compiled.check(&value) {
        Ok(()) => true,
        Err(issues) => {
            eprintln!("state {state}: {} does not validate: {issues:?}", out.text);
            false
        }
    };
    // It also satisfies the transition it names, as the engine will check.
    let id = value["id"].as_array().cloned().unwrap_or_default();
    let (from, to) = (
        id.first().and_then(Value::as_str).unwrap_or(""),
        id.get(1).and_then(Value::as_str).unwrap_or(""),
    );
    assert_eq!(from, state, "{}", out.text);
    let transition = match fsm.transition(from, to) {
        Some(t) => t,
        None => panic!("state {state}: unknown transition in {}", out.text),
    };
    let transition_schema = transition
        .compiled
        .as_ref()
        .is_some_and(|c| c.is_valid(&value));
    checked.push(Checked {
        state: state.to_owned(),
        output_schema,
        transition_schema,
    });
    value
}

#[test]
fn triage_states_answer_valid_json_first_time_over_21_generations() {
    let fsm = triage();
    let mut model = load(&smollm2());
    let mut checked = Vec::new();
    let mut teams = Vec::new();
    for (i, text) in MESSAGES.iter().enumerate() {
        let seed = 1000 + i as u64;
        let start = json!({"id": ["start", "extract"], "text": text});
        let facts = answer(
            &mut model,
            &fsm,
            "extract",
            ("start", "extract"),
            &start,
            seed,
            &mut checked,
        );
        assert!(["low", "normal", "high"].contains(&facts["urgency"].as_str().unwrap_or("")));
        let routed = answer(
            &mut model,
            &fsm,
            "route",
            ("extract", "route"),
            &facts,
            seed,
            &mut checked,
        );
        let team = routed["id"][1].as_str().unwrap_or("").to_owned();
        let summary = answer(
            &mut model,
            &fsm,
            &team,
            ("route", &team),
            &routed,
            seed,
            &mut checked,
        );
        assert_eq!(summary["id"], json!([team, "done"]));
        teams.push(team);
    }
    // Every message went through extract, route and a team, and each of those answers
    // validated first time against its state's output schema and its transition's.
    let states: Vec<&str> = checked.iter().map(|c| c.state.as_str()).collect();
    let expected: Vec<&str> = teams
        .iter()
        .flat_map(|team| ["extract", "route", team.as_str()])
        .collect();
    assert_eq!(states, expected);
    assert_eq!(checked.len(), 3 * MESSAGES.len());
    assert!(
        checked
            .iter()
            .all(|c| c.output_schema && c.transition_schema),
        "{checked:?}"
    );
    // One compiled constraint per distinct output schema, reused across generations.
    assert!(
        model.compiled_constraints() <= 5,
        "{} constraints compiled",
        model.compiled_constraints()
    );
    eprintln!("teams chosen: {teams:?}");
}

/// Qwen2.5-Coder-0.5B, a qwen2 model, answers triage's first state valid under the same
/// constraint, and a second generation with the same schema reuses the compiled matcher.
#[test]
fn qwen_answers_triage_extract_valid_under_the_constraint() {
    let fsm = triage();
    let mut model = load(&qwen());
    let rendered = model.render(&[Message::user("Hello")]).unwrap();
    assert!(
        rendered.contains("<|im_start|>user\nHello<|im_end|>"),
        "{rendered}"
    );
    let event = json!({"id": ["start", "extract"], "text": MESSAGES[0]});
    let mut checked = Vec::new();
    for seed in [1000, 1001] {
        let value = answer(
            &mut model,
            &fsm,
            "extract",
            ("start", "extract"),
            &event,
            seed,
            &mut checked,
        );
        assert_eq!(value["id"][0], "extract");
    }
    assert!(
        checked
            .iter()
            .all(|c| c.output_schema && c.transition_schema),
        "{checked:?}"
    );
    assert_eq!(model.compiled_constraints(), 1);
}

#[test]
fn same_seed_same_text_and_other_seeds_differ() {
    let mut model = load(&smollm2());
    let messages = [
        Message::system("You are a helpful assistant."),
        Message::user("Write one sentence about the sea."),
    ];
    let run = |model: &mut LocalModel, seed| {
        let options = GenerateOptions {
            temperature: 0.9,
            top_p: 0.95,
            seed,
            max_tokens: 40,
        };
        let mut streamed = String::new();
        let g = model
            .generate(&messages, &options, None, &mut |t| streamed.push_str(t))
            .unwrap();
        assert_eq!(streamed, g.text, "streamed text differs from the result");
        g
    };
    // Same seed, same cache state, same text. (A cold prompt and a warm one, whose prefix
    // is kept, are computed in batches of other sizes; their logits may differ in the last
    // bits, enough to change a token sampled at 0.9, so each is compared with its like.)
    model.clear_cache();
    let a = run(&mut model, 7);
    let b = run(&mut model, 7);
    model.clear_cache();
    let c = run(&mut model, 7);
    let d = run(&mut model, 7);
    assert_eq!(a.text, c.text, "cold");
    assert_eq!(b.text, d.text, "warm");
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
    let first = [system.clone(), Message::user(MESSAGES[0])];
    let second = [system, Message::user(MESSAGES[1])];
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

/// SmolLM2's template is ChatML, and the control tokens written in a rendered prompt are
/// read as the tokens themselves, not as their characters.
#[test]
fn the_template_is_chatml_and_control_tokens_are_read_whole() {
    let model = load(&smollm2());
    let prompt = model
        .render(&[Message::system("S"), Message::user("U")])
        .unwrap();
    assert_eq!(
        prompt,
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    );
    let im_start = model.tokenize("<|im_start|>");
    assert_eq!(im_start.len(), 1, "{im_start:?}");
    let ids = model.tokenize(&prompt);
    assert_eq!(ids[0], im_start[0]);
    assert_eq!(ids.iter().filter(|&&t| t == im_start[0]).count(), 3);
    for text in MESSAGES {
        let n = model.tokenize(text).len();
        assert!(n > 0 && n < text.len(), "{text}: {n} tokens");
    }
}

/// A constrained answer that `max_tokens` cuts short is an error, never a partial JSON
/// text; without a constraint the text stops at `max_tokens`.
#[test]
fn max_tokens_cuts_free_text_and_refuses_an_unfinished_constrained_answer() {
    let mut model = load(&smollm2());
    let messages = [Message::user("Describe the sea in one long paragraph.")];
    let options = GenerateOptions {
        temperature: 0.0,
        top_p: 1.0,
        seed: 1,
        max_tokens: 12,
    };
    let free = model
        .generate(&messages, &options, None, &mut |_| {})
        .unwrap();
    assert_eq!(free.completion_tokens, 12, "{free:?}");
    // 12 tokens cannot hold 500 characters.
    let schema = json!({
        "type": "object",
        "properties": {"description": {"type": "string", "minLength": 500}},
        "required": ["description"]
    });
    let constraint = Constraint::from_schema(&schema).unwrap();
    let mut streamed = String::new();
    let err = model
        .generate(&messages, &options, Some(&constraint), &mut |t| {
            streamed.push_str(t)
        })
        .unwrap_err();
    assert!(matches!(err, GenerateError::Truncated(12)), "{err}");
    assert!(err.to_string().contains("max_tokens (12)"), "{err}");
    assert!(streamed.starts_with("{\"description\":\""), "{streamed}");
}

#[test]
fn a_prompt_that_does_not_fit_the_context_is_refused_before_computing() {
    let mut model = load(&smollm2());
    let long = "the sea ".repeat(6000);
    let options = GenerateOptions {
        max_tokens: 512,
        ..GenerateOptions::default()
    };
    let err = model
        .generate(&[Message::user(long)], &options, None, &mut |_| {})
        .unwrap_err();
    match &err {
        GenerateError::ContextFull {
            prompt_tokens,
            max_tokens,
            context,
        } => {
            assert_eq!(*max_tokens, 512);
            assert_eq!(*context, claij_embedded::llama_cpp::CONTEXT_TOKENS as usize);
            assert!(*prompt_tokens > 8000, "{err}");
        }
        other => panic!("{other}"),
    }
    // The model is still usable.
    let ok = model
        .generate(&[Message::user("Hi")], &options, None, &mut |_| {})
        .unwrap();
    assert!(ok.completion_tokens > 0);
}

#[test]
fn bad_files_are_errors_naming_them() {
    let missing = Path::new("/nonexistent/model.gguf");
    let err = LocalModel::load(missing).unwrap_err();
    assert!(matches!(err, LoadError::Io { .. }), "{err}");
    assert!(err.to_string().contains("/nonexistent/model.gguf"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.gguf");
    std::fs::write(&text, "not a model at all").unwrap();
    let err = LocalModel::load(&text).unwrap_err().to_string();
    assert!(
        err.contains("notes.gguf") && err.contains("not a GGUF file"),
        "{err}"
    );

    // A GGUF header and then nothing that llama.cpp can read: its refusal, named.
    let truncated = dir.path().join("truncated.gguf");
    let mut head = vec![0u8; 4096];
    std::io::Read::read_exact(&mut std::fs::File::open(smollm2()).unwrap(), &mut head).unwrap();
    std::fs::write(&truncated, head).unwrap();
    let err = LocalModel::load(&truncated).unwrap_err();
    assert!(matches!(err, LoadError::Model { .. }), "{err}");
    assert!(err.to_string().contains("truncated.gguf"), "{err}");
}
