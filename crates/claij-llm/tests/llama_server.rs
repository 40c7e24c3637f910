//! The OpenAI-compatible provider against a real OpenAI-compatible server:
//! llama-cpp-python's server with the SmolLM2 model, started here on a free port and
//! killed at the end. Installed by `scripts/setup/llama-server`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

mod common;

use std::time::Duration;

use claij_core::prompts::Message;
use claij_engine::{RunOptions, RunStatus};
use claij_llm::config::{JsonFlavour, ProviderKind};
use claij_llm::enforce::{self, Mode, Route};
use claij_llm::http::Http;
use claij_llm::providers::HttpProvider;
use claij_llm::{Decoding, LlmConfig, LlmLayer, ModelRequest, Provider};
use serde_json::{Map, Value, json};

use claij_testkit::llama_server::LlamaServer;

fn provider(base_url: &str) -> HttpProvider {
    HttpProvider {
        name: "llama".into(),
        kind: ProviderKind::Openai,
        base_url: base_url.into(),
        key: None,
        json_flavour: JsonFlavour::JsonObject,
        tools: false,
        stream: true,
        http: Http::new(Duration::from_secs(300)).unwrap(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_compatible_provider_talks_to_a_real_llama_cpp_server() {
    let server = LlamaServer::start();
    let p = provider(&server.base_url);

    // A plain answer, with usage.
    let plain = ModelRequest {
        traceparent: None,
        model: "smollm2".into(),
        messages: vec![Message::user("Say hello.")],
        enforcement: enforce::build(Mode::Prompt, &[], &Map::new()),
        decoding: Decoding {
            temperature: Some(0.0),
            seed: Some(1),
            max_tokens: Some(16),
            top_p: None,
        },
    };
    let r = p.complete(&plain).await.expect("a plain completion");
    assert!(!r.text.trim().is_empty());
    let tokens = r.tokens.expect("usage is reported");
    assert!(tokens.input > 0 && tokens.output > 0 && tokens.output <= 16);

    // A JSON-constrained answer: response_format json_object with the union (unwrapped:
    // llama.cpp's grammar takes a root union).
    let id = json!(["ask", "done"]);
    let routes = [Route {
        id: &id,
        to: "done",
        description: None,
        schema: json!({"type": "object", "required": ["id", "answer"], "properties": {
            "id": {"const": ["ask", "done"]},
            "answer": {"type": "string", "maxLength": 40}},
            "additionalProperties": false}),
    }];
    let constrained = ModelRequest {
        traceparent: None,
        messages: vec![
            Message::system("Answer with a JSON object."),
            Message::user("What colour is the sky?"),
        ],
        enforcement: enforce::build(Mode::JsonSchema, &routes, &Map::new()),
        decoding: Decoding {
            max_tokens: Some(120),
            ..plain.decoding
        },
        ..plain.clone()
    };
    let r = p
        .complete(&constrained)
        .await
        .expect("a constrained completion");
    let answer: Value = serde_json::from_str(r.text.trim())
        .unwrap_or_else(|e| panic!("constrained output parses ({e}): {}", r.text));
    let event = enforce::unwrap_answer(Mode::JsonSchema, answer);
    assert_eq!(event["id"], json!(["ask", "done"]), "{event}");
    assert!(event["answer"].is_string(), "{event}");

    // The same through the engine: the `llm` action, auto-chosen `json_schema` mode.
    let config = LlmConfig::parse(
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
temperature = 0.0
seed = 1
max_tokens = 120
"#,
            server.base_url
        ),
        std::path::Path::new("llama.toml"),
    )
    .unwrap();
    let layer = LlmLayer::with_env(config, &|_| None).unwrap();
    let engine = common::engine(layer);
    let fsm = common::ask_fsm(&engine, "{max_attempts: 3}");
    let out = engine
        .run(
            fsm,
            json!({"question": "What colour is the sky?"}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Completed, "{:#?}", out.trail);
    assert!(out.result.unwrap()["answer"].is_string());
    let took = out
        .trail
        .iter()
        .find(|e| e.from.as_ref() == "ask" && e.to.is_some())
        .unwrap();
    assert_eq!(took.model.as_deref(), Some("smol"));
    assert!(took.usage.as_ref().unwrap().input_tokens > 0);
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openai_compatible_answer_streams_piece_by_piece_from_a_real_llama_cpp_server() {
    let server = LlamaServer::start();
    let p = provider(&server.base_url);
    let request = ModelRequest {
        traceparent: None,
        model: "smollm2".into(),
        messages: vec![Message::user("Count from one to five in words.")],
        enforcement: enforce::build(Mode::Prompt, &[], &Map::new()),
        decoding: Decoding {
            temperature: Some(0.0),
            seed: Some(1),
            max_tokens: Some(24),
            top_p: None,
        },
    };
    let pieces = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink_pieces = pieces.clone();
    let sink: claij_engine::TextSink = std::sync::Arc::new(move |text: &str| {
        sink_pieces.lock().unwrap().push(text.to_owned());
    });
    let streamed = p
        .complete_streaming(&request, sink)
        .await
        .expect("a streamed completion");
    let pieces = pieces.lock().unwrap().clone();
    assert!(pieces.len() > 1, "the answer came in pieces: {pieces:?}");
    assert_eq!(pieces.concat(), streamed.text, "the pieces are the answer");
    // llama-cpp-python sends no usage with a streamed answer (`stream_options` is
    // OpenAI's): the step has no token counts; `stream = false` keeps them.
    assert_eq!(streamed.tokens, None);
    let mut not_streaming = p.clone();
    not_streaming.stream = false;
    let counted = not_streaming
        .complete_streaming(&request, std::sync::Arc::new(|_: &str| {}))
        .await
        .expect("a whole completion");
    assert!(
        counted.tokens.is_some_and(|t| t.output > 0),
        "usage of a whole answer"
    );
    assert_eq!(counted.text, streamed.text);
    // The same request answered whole says the same (greedy, same seed).
    let whole = p.complete(&request).await.expect("a plain completion");
    assert_eq!(whole.text, streamed.text);
}
