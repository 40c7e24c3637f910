//! The real embedded model (SmolLM2-135M-Instruct, fetched by `scripts/setup/model`)
//! answering in the states of `examples/triage.yaml` under schema constraints.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::path::{Path, PathBuf};

use claij_core::prompts::{Message, PromptOptions, system_message};
use claij_core::schema::compilable_effective;
use claij_core::{BuiltinNames, CompiledSchema, load_file};
use claij_embedded::{
    Constraint, EmbeddedModel, GenerateOptions, cache_root, model_path, unsupported_features,
};
use serde_json::{Value, json};

fn model() -> EmbeddedModel {
    let path = model_path(&cache_root());
    assert!(
        path.is_file(),
        "the embedded model is missing at {}: run scripts/setup/model (or `claij model fetch`)",
        path.display()
    );
    match EmbeddedModel::load(&path) {
        Ok(m) => m,
        Err(e) => panic!("{e}"),
    }
}

fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
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
    model: &mut EmbeddedModel,
    fsm: &claij_core::Fsm,
    state: &str,
    input: (&str, &str),
    event: &Value,
    seed: u64,
    checked: &mut Vec<Checked>,
) -> Value {
    let input_t = fsm.transition(input.0, input.1);
    let system = system_message(fsm, state, input_t, &PromptOptions::default());
    let messages = [Message::system(system), Message::user(event.to_string())];
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
    let fsm = match load_file(&repo_file("examples/triage.yaml"), &BuiltinNames) {
        Ok(f) => f,
        Err(e) => panic!("{e:?}"),
    };
    let mut model = model();
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

#[test]
fn same_seed_same_text_and_other_seeds_differ() {
    let mut model = model();
    let messages = [
        Message::system("You are a helpful assistant."),
        Message::user("Write one sentence about the sea."),
    ];
    let run = |model: &mut EmbeddedModel, seed| {
        let options = GenerateOptions {
            temperature: 0.9,
            top_p: 0.95,
            seed,
            max_tokens: 40,
        };
        match model.generate(&messages, &options, None, &mut |_| {}) {
            Ok(g) => g,
            Err(e) => panic!("{e}"),
        }
    };
    let a = run(&mut model, 7);
    let b = run(&mut model, 7);
    assert_eq!(a.text, b.text);
    assert!(a.completion_tokens > 0 && !a.text.trim().is_empty());
    let others: Vec<String> = (8..12).map(|s| run(&mut model, s).text).collect();
    assert!(others.iter().any(|t| *t != a.text), "{a:?} {others:?}");
}

#[test]
fn tokenizer_round_trips_and_the_template_is_chatml() {
    let model = model();
    let tok = model.tokenizer();
    for text in MESSAGES.iter().chain(&[
        "{\"id\":[\"a\",\"b\"],\"n\":12345}",
        "  spaces\n\n\ttabs ü €",
    ]) {
        let ids = tok.encode(text);
        assert_eq!(String::from_utf8_lossy(&tok.decode(&ids, true)), *text);
        assert!(ids.len() < text.len(), "{text}: {} tokens", ids.len());
    }
    let prompt = match model.render(&[Message::system("S"), Message::user("U")]) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(
        prompt,
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    );
    let ids = tok.encode_with_specials(&prompt);
    assert_eq!(Some(ids[0]), tok.special("<|im_start|>"));
}

#[test]
fn a_schema_with_unsupported_keywords_is_reported_before_any_generation() {
    let schema =
        json!({"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": true}}});
    let found = unsupported_features(&schema);
    assert!(found.iter().any(|f| f.contains("uniqueItems")), "{found:?}");
}
