//! Lowering transition schemas to what each provider's structured output enforces:
//! faithful on every transition of every example (checked on sample instances with
//! `jsonschema`), and what each provider's request carries.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

mod common;

use claij_testkit::llama_server::LlamaServer;

use std::path::{Path, PathBuf};
use std::time::Duration;

use claij_core::prompts::Message;
use claij_core::{BuiltinNames, ConfigIssue, Fsm, KnownActions, load_file};
use claij_llm::config::{JsonFlavour, ProviderKind};
use claij_llm::enforce::{self, Mode, Route};
use claij_llm::http::Http;
use claij_llm::lower::{Lowered, Note, Target, faithful, lower};
use claij_llm::providers::{HttpProvider, openai};
use claij_llm::{Decoding, Enforcement, ModelRequest, ModelResponse};
use serde_json::{Value, json};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The built-in action names, and any dynamic schema (the MCP tools' are resolved at
/// transition time; those transitions are not lowered here).
struct Names;

impl KnownActions for Names {
    fn has_action(&self, action: &str) -> bool {
        BuiltinNames.has_action(action)
    }
    fn action_names(&self) -> Vec<String> {
        BuiltinNames.action_names()
    }
    fn check_config(&self, action: &str, config: &Value) -> Vec<ConfigIssue> {
        BuiltinNames.check_config(action, config)
    }
    fn has_dynamic_schema(&self, _name: &str) -> bool {
        true
    }
}

/// Every example document.
fn examples() -> Vec<Fsm> {
    let mut out = Vec::new();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(repo().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    paths.sort();
    for p in paths {
        match load_file(&p, &Names) {
            Ok(f) => out.push(f),
            Err(e) => panic!("{} does not load: {e:?}", p.display()),
        }
    }
    out
}

/// The routes a model in `state` is offered, when every one has a static schema.
fn routes<'a>(fsm: &'a Fsm, state: &str) -> Option<Vec<Route<'a>>> {
    let all: Vec<_> = fsm.outgoing(state).collect();
    let any_shown = all.iter().any(|t| !t.omit);
    all.into_iter()
        .filter(|t| !any_shown || !t.omit)
        .map(|t| {
            Some(Route {
                id: &t.id_value,
                to: &t.to,
                description: t.description.as_deref(),
                schema: t.effective.clone()?,
            })
        })
        .collect()
}

fn contains_key(v: &Value, key: &str) -> bool {
    match v {
        Value::Object(m) => m.iter().any(|(k, v)| k == key || contains_key(v, key)),
        Value::Array(a) => a.iter().any(|v| contains_key(v, key)),
        _ => false,
    }
}

fn check(original: &Value, lowered: &Lowered, what: &str, stats: &mut Stats) {
    let samples = faithful::samples(original);
    let report = faithful::check(original, lowered, &samples)
        .unwrap_or_else(|e| panic!("{what}: a schema does not compile: {e}"));
    assert!(
        report.disagreements.is_empty(),
        "{what} ({:?}): {:#?}\nlowered: {}",
        lowered.target,
        &report.disagreements[..report.disagreements.len().min(3)],
        lowered.schema
    );
    if report.admitted == 0 {
        // The sample builder writes "a" for every string: a `pattern` can refuse them all.
        stats
            .unsatisfied
            .push(format!("{what} ({:?})", lowered.target));
    }
    stats.lowerings += 1;
    stats.instances += report.checked;
    stats.exact += usize::from(lowered.exact());
    stats.complete += usize::from(lowered.complete());
    if lowered.target != Target::Gemini {
        assert!(
            !contains_key(&lowered.schema, "allOf") || !lowered.complete(),
            "{what}: `allOf` left in a complete lowering"
        );
    }
}

#[derive(Default, Debug)]
struct Stats {
    documents: usize,
    states: usize,
    lowerings: usize,
    exact: usize,
    complete: usize,
    instances: usize,
    /// Lowerings where no sample satisfied the original (only the reverse direction was
    /// checked).
    unsatisfied: Vec<String>,
}

#[test]
fn lowering_is_faithful_on_every_transition_of_every_example() {
    let mut stats = Stats::default();
    for fsm in examples() {
        stats.documents += 1;
        let states =
            std::iter::once("start".to_owned()).chain(fsm.states.iter().map(|s| s.id.to_string()));
        for state in states {
            let Some(routes) = routes(&fsm, &state) else {
                continue;
            };
            if routes.is_empty() {
                continue;
            }
            stats.states += 1;
            let what = format!("{} state `{state}`", fsm.source);
            let wrapped = enforce::build(Mode::JsonSchema, &routes, &fsm.schemas);
            for target in [Target::OpenAiStrict, Target::JsonObject, Target::Gemini] {
                check(
                    &wrapped.schema,
                    &lower(&wrapped.schema, target),
                    &what,
                    &mut stats,
                );
            }
            let tools = enforce::build(Mode::Tools, &routes, &fsm.schemas);
            for t in &tools.tools {
                check(
                    &t.parameters,
                    &lower(&t.parameters, Target::Tools),
                    &what,
                    &mut stats,
                );
            }
        }
    }
    eprintln!("{stats:?}");
    assert!(stats.documents >= 9, "{stats:?}");
    assert!(stats.states >= 30, "{stats:?}");
    assert!(stats.complete > stats.lowerings / 2, "{stats:?}");
    assert!(
        stats.unsatisfied.len() * 10 < stats.lowerings,
        "most lowerings are checked on instances the original admits: {stats:?}"
    );
}

fn triage() -> Fsm {
    load_file(&repo().join("examples/triage.yaml"), &BuiltinNames).unwrap()
}

#[test]
fn triage_lowers_exactly_to_one_object_per_transition_with_the_id_as_a_const() {
    let fsm = triage();
    let routes = routes(&fsm, "extract").unwrap();
    let wrapped = enforce::build(Mode::JsonSchema, &routes, &fsm.schemas);
    assert!(
        !contains_key(&wrapped.schema, "allOf"),
        "enforce merges the shared schema's `allOf`, so that `id` can come last"
    );
    let l = lower(&wrapped.schema, Target::JsonObject);
    assert!(l.exact(), "{:?}", l.notes);
    let event = &l.schema["properties"]["event"]["anyOf"][0];
    assert_eq!(
        event["properties"]["id"],
        json!({"const": ["extract", "route"]})
    );
    assert_eq!(
        event["required"],
        json!(["customer", "product", "problem", "urgency", "id"])
    );
    assert_eq!(event["additionalProperties"], false);

    // The summary's integer bounds are not in llama.cpp's grammar: relaxed, and said.
    let routes = routes_of(&fsm, "billing");
    let wrapped = enforce::build(Mode::JsonSchema, &routes, &fsm.schemas);
    let l = lower(&wrapped.schema, Target::JsonObject);
    let relaxed: Vec<String> = l
        .notes
        .iter()
        .filter_map(|n| match n {
            Note::Relaxed { keyword, .. } => Some(keyword.clone()),
            Note::Kept { .. } => None,
        })
        .collect();
    assert_eq!(relaxed, ["minimum", "maximum"]);
    assert!(l.complete());
}

fn routes_of<'a>(fsm: &'a Fsm, state: &str) -> Vec<Route<'a>> {
    routes(fsm, state).unwrap()
}

fn provider(kind: ProviderKind, flavour: JsonFlavour) -> HttpProvider {
    HttpProvider {
        name: "p".into(),
        kind,
        base_url: "https://api.example/v1".into(),
        key: None,
        json_flavour: flavour,
        tools: true,
        stream: true,
        http: Http::new(Duration::from_secs(5)).unwrap(),
    }
}

fn request(enforcement: Enforcement) -> ModelRequest {
    ModelRequest {
        traceparent: None,
        model: "m".into(),
        messages: vec![Message::user("U")],
        enforcement,
        decoding: Decoding::default(),
    }
}

#[test]
fn each_provider_s_request_carries_its_lowered_schema() {
    let fsm = triage();
    let routes = routes_of(&fsm, "extract");
    let e = enforce::build(Mode::JsonSchema, &routes, &fsm.schemas);

    // OpenAI: strict, closed, every property required.
    let b = provider(ProviderKind::Openai, JsonFlavour::JsonSchema)
        .build_call(&request(e.clone()))
        .body;
    let format = &b["response_format"]["json_schema"];
    assert_eq!(format["strict"], true);
    assert!(!contains_key(&format["schema"], "allOf"));
    assert!(!contains_key(&format["schema"], "maxLength"), "relaxed");
    let event = &format["schema"]["properties"]["event"]["anyOf"][0];
    assert_eq!(event["additionalProperties"], false);
    assert_eq!(
        event["required"],
        json!(["customer", "product", "problem", "urgency", "id"])
    );

    // llama.cpp's json_object: the union unwrapped, merged, no allOf, lengths kept.
    let b = provider(ProviderKind::Openai, JsonFlavour::JsonObject)
        .build_call(&request(e.clone()))
        .body;
    assert_eq!(b["response_format"]["type"], "json_object");
    let schema = &b["response_format"]["schema"];
    assert!(!contains_key(schema, "allOf"));
    assert!(!contains_key(schema, "event"), "{schema}");
    let event = &schema["anyOf"][0];
    assert_eq!(event["properties"]["customer"]["maxLength"], 60);
    assert_eq!(
        event["properties"]["id"]["const"],
        json!(["extract", "route"])
    );

    // Gemini: merged, its subset.
    let b = provider(ProviderKind::Gemini, JsonFlavour::None)
        .build_call(&request(e))
        .body;
    let schema = &b["generationConfig"]["responseJsonSchema"];
    assert!(!contains_key(schema, "allOf") && !contains_key(schema, "additionalProperties"));
    assert_eq!(
        schema["properties"]["event"]["anyOf"][0]["properties"]["urgency"]["enum"],
        json!(["low", "normal", "high"])
    );

    // Anthropic tools: merged input schemas without `id`.
    let tools = enforce::build(Mode::Tools, &routes, &fsm.schemas);
    // enforce merges the effective schema's `allOf` already (to put `id` last).
    assert!(!contains_key(&tools.tools[0].parameters, "allOf"));
    assert!(tools.tools[0].parameters["properties"]["urgency"].is_object());
    let b = provider(ProviderKind::Anthropic, JsonFlavour::None)
        .build_call(&request(tools))
        .body;
    let input = &b["tools"][0]["input_schema"];
    assert!(!contains_key(input, "allOf"));
    assert_eq!(
        input["required"],
        json!(["customer", "product", "problem", "urgency"])
    );
}

#[test]
fn openai_strict_mode_sends_optionals_nullable_and_its_nulls_are_taken_out_of_the_answer() {
    let id = json!(["ask", "done"]);
    let routes = [Route {
        id: &id,
        to: "done",
        description: None,
        schema: json!({"type": "object", "required": ["id", "answer"], "properties": {
            "id": {"const": ["ask", "done"]}, "answer": {"type": "string"},
            "note": {"type": "string"}}}),
    }];
    let e = enforce::build(Mode::JsonSchema, &routes, &serde_json::Map::new());
    let p = provider(ProviderKind::Openai, JsonFlavour::JsonSchema);
    let req = request(e);
    let b = p.build_call(&req).body;
    let event = &b["response_format"]["json_schema"]["schema"]["properties"]["event"]["anyOf"][0];
    assert_eq!(
        event["properties"]["note"]["type"],
        json!(["string", "null"])
    );
    assert_eq!(event["required"], json!(["answer", "note", "id"]));
    let answer = |text: &str| ModelResponse {
        text: text.into(),
        tool_call: None,
        tokens: None,
        retries: 0,
    };
    let r = openai::restore(
        &p,
        &req,
        answer(r#"{"event": {"id": ["ask", "done"], "answer": "4", "note": null}}"#),
    );
    assert_eq!(
        serde_json::from_str::<Value>(&r.text).unwrap(),
        json!({"event": {"id": ["ask", "done"], "answer": "4"}})
    );
    let kept = r#"{"event": {"id": ["ask", "done"], "answer": null}}"#;
    assert_eq!(
        openai::restore(&p, &req, answer(kept)).text,
        kept,
        "a required null stays (and fails validation)"
    );
    let json_object = provider(ProviderKind::Openai, JsonFlavour::JsonObject);
    let text = r#"{"event": {"id": ["ask", "done"], "answer": "4", "note": null}}"#;
    assert_eq!(
        openai::restore(&json_object, &req, answer(text)).text,
        text,
        "only strict mode adds nulls"
    );
}

/// The triage example's first state against a real grammar-enforcing server in
/// `json_schema` mode (`json_flavour = "json_object"`): with `allOf` merged, the grammar
/// holds the answer to the facts' schema, so it validates on the first attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn triage_extracts_on_the_first_attempt_against_llama_cpp_python() {
    let server = LlamaServer::start();
    let config = claij_llm::LlmConfig::parse(
        &format!(
            r#"
default_model = "smol"
[providers.llama]
kind = "openai"
base_url = "{}"
json_flavour = "json_object"
tools = false
[models.smol]
provider = "llama"
name = "smollm2"
enforce = "json_schema"
temperature = 0.0
seed = 1
max_tokens = 200
"#,
            server.base_url
        ),
        Path::new("llama.toml"),
    )
    .unwrap();
    let layer = claij_llm::LlmLayer::with_env(config, &|_| None).unwrap();
    let engine = common::engine(layer);
    let fsm = std::sync::Arc::new(
        load_file(&repo().join("examples/triage.yaml"), engine.registry()).unwrap(),
    );
    let input: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("examples/inputs/complaint.json")).unwrap(),
    )
    .unwrap();
    let out = engine
        .run(fsm.clone(), input, claij_engine::RunOptions::default())
        .await
        .unwrap();
    let extract: Vec<_> = out
        .trail
        .iter()
        .filter(|e| e.from.as_ref() == "extract")
        .collect();
    let first = extract.first().expect("the extract state answered");
    assert_eq!(first.attempt, 1);
    assert!(first.failure.is_none(), "{:#?}", first.failure);
    assert_eq!(first.to.as_deref(), Some("route"), "{:#?}", first);
    assert_eq!(first.model.as_deref(), Some("smol"));
    let schema = fsm
        .transition("extract", "route")
        .unwrap()
        .compiled
        .clone()
        .unwrap();
    assert!(schema.is_valid(&first.event), "{}", first.event);
    for field in ["customer", "product", "problem", "urgency"] {
        assert!(first.event.get(field).is_some(), "{field}: {}", first.event);
    }
    eprintln!("extract's first answer: {}", first.event);
    drop(server);
}
