//! Request building and response parsing of each provider, checked against exchanges in
//! the vendors' documented wire formats (OpenAI chat completions, Anthropic Messages,
//! Google Gemini generateContent). The remote APIs themselves are out of reach from the
//! test machines; the OpenAI-compatible client also runs against a real llama.cpp server
//! in `llama_server.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::time::Duration;

use claij_core::prompts::Message;
use claij_llm::config::{JsonFlavour, ProviderKind};
use claij_llm::enforce::{self, Mode, Route};
use claij_llm::http::{HeaderValue, Http};
use claij_llm::providers::HttpProvider;
use claij_llm::{Decoding, ModelRequest, Secret, Tokens};
use serde_json::{Map, Value, json};

fn provider(kind: ProviderKind, flavour: JsonFlavour) -> HttpProvider {
    HttpProvider {
        name: "p".into(),
        kind,
        base_url: "https://api.example/v1".into(),
        key: Some(Secret::new("sk-wire-KEY")),
        json_flavour: flavour,
        tools: true,
        stream: true,
        http: Http::new(Duration::from_secs(5)).unwrap(),
    }
}

fn request(mode: Mode) -> ModelRequest {
    let id = Box::leak(Box::new(json!(["ask", "done"])));
    let routes = [Route {
        id,
        to: "done",
        description: Some("The answer."),
        schema: json!({"type": "object", "required": ["id", "answer"], "properties": {
            "id": {"const": ["ask", "done"]}, "answer": {"$ref": "#/$defs/text"}}}),
    }];
    let defs: Map<String, Value> =
        serde_json::from_value(json!({"text": {"type": "string"}})).unwrap();
    ModelRequest {
        traceparent: None,
        model: "the-model".into(),
        messages: vec![
            Message::system("SYS"),
            Message::user("U1"),
            Message::user("U2"),
            Message::assistant("A1"),
        ],
        enforcement: enforce::build(mode, &routes, &defs),
        decoding: Decoding {
            temperature: Some(0.5),
            top_p: None,
            seed: Some(3),
            max_tokens: Some(256),
        },
    }
}

fn secret_header(call: &claij_llm::http::HttpCall, name: &str) -> String {
    call.headers
        .iter()
        .find_map(|(k, v)| match v {
            HeaderValue::Secret(prefix, s) if k == name => Some(format!("{prefix}{}", s.expose())),
            _ => None,
        })
        .unwrap_or_default()
}

#[test]
fn openai_chat_completions_request_and_response() {
    let p = provider(ProviderKind::Openai, JsonFlavour::JsonSchema);
    let call = p.build_call(&request(Mode::JsonSchema));
    assert_eq!(call.url, "https://api.example/v1/chat/completions");
    assert_eq!(secret_header(&call, "authorization"), "Bearer sk-wire-KEY");
    assert!(
        !format!("{call:?}").contains("sk-wire-KEY"),
        "printing a call hides the key"
    );
    let b = &call.body;
    assert_eq!(b["model"], "the-model");
    assert_eq!(
        b["messages"],
        json!([
            {"role": "system", "content": "SYS"},
            {"role": "user", "content": "U1\n\nU2"},
            {"role": "assistant", "content": "A1"},
            {"role": "user", "content": "Answer now with exactly one JSON object that satisfies the JSON Schema of the request."}
        ])
    );
    assert_eq!(b["temperature"], 0.5);
    assert_eq!(b["seed"], 3);
    assert_eq!(b["max_tokens"], 256);
    assert_eq!(b["response_format"]["type"], "json_schema");
    assert_eq!(b["response_format"]["json_schema"]["name"], "event");
    let inner = &b["response_format"]["json_schema"]["schema"]["properties"]["event"]["anyOf"][0];
    assert_eq!(inner["properties"]["answer"], json!({"type": "string"}));

    // llama.cpp's flavour: its grammar takes a root union, so the union goes unwrapped.
    let p = provider(ProviderKind::Openai, JsonFlavour::JsonObject);
    let b = p.build_call(&request(Mode::JsonSchema)).body;
    assert_eq!(b["response_format"]["type"], "json_object");
    let union = &b["response_format"]["schema"];
    assert!(union.get("required").is_none(), "{union}");
    assert_eq!(
        union["anyOf"][0]["properties"]["answer"],
        json!({"type": "string"})
    );

    // A documented chat completion (https://platform.openai.com/docs/api-reference/chat/object).
    let answer = json!({
      "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG", "object": "chat.completion",
      "created": 1741570283, "model": "gpt-4o-2024-08-06",
      "choices": [{"index": 0, "message": {"role": "assistant",
          "content": "{\"event\": {\"id\": [\"ask\", \"done\"], \"answer\": \"42\"}}",
          "refusal": null, "annotations": []}, "logprobs": null, "finish_reason": "stop"}],
      "usage": {"prompt_tokens": 1117, "completion_tokens": 46, "total_tokens": 1163,
        "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0}},
      "service_tier": "default", "system_fingerprint": "fp_fc9f1d7035"
    });
    let r = p.parse(&answer).unwrap();
    assert!(r.text.contains("\"answer\": \"42\""));
    assert_eq!(
        r.tokens,
        Some(Tokens {
            input: 1117,
            output: 46,
            cached: Some(1024)
        })
    );
    assert!(
        p.parse(&json!({"error": "x"}))
            .unwrap_err()
            .contains("choices")
    );
}

#[test]
fn openai_tools_request_and_tool_call_response() {
    let p = provider(ProviderKind::Openai, JsonFlavour::JsonSchema);
    let b = p.build_call(&request(Mode::Tools)).body;
    assert_eq!(b["tool_choice"], "required");
    assert_eq!(b["tools"][0]["type"], "function");
    assert_eq!(b["tools"][0]["function"]["name"], "to_done");
    assert_eq!(b["tools"][0]["function"]["description"], "The answer.");
    assert!(
        b["tools"][0]["function"]["parameters"]["properties"]
            .get("id")
            .is_none()
    );
    let answer = json!({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
      "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant",
        "content": null, "tool_calls": [{"id": "call_abc", "type": "function",
          "function": {"name": "to_done", "arguments": "{\"answer\":\"x\"}"}}]}}],
      "usage": {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99}});
    let r = p.parse(&answer).unwrap();
    assert_eq!(
        r.tool_call,
        Some(("to_done".into(), json!({"answer": "x"})))
    );
}

#[test]
fn anthropic_messages_request_and_response() {
    let p = provider(ProviderKind::Anthropic, JsonFlavour::None);
    let call = p.build_call(&request(Mode::Tools));
    assert_eq!(call.url, "https://api.example/v1/messages");
    assert_eq!(secret_header(&call, "x-api-key"), "sk-wire-KEY");
    assert!(call.headers.iter().any(|(k, v)| k == "anthropic-version"
        && *v == HeaderValue::Plain("2023-06-01".into())));
    let b = &call.body;
    assert_eq!(b["system"], "SYS");
    assert_eq!(b["max_tokens"], 256);
    assert_eq!(
        b["messages"][0],
        json!({"role": "user", "content": "U1\n\nU2"})
    );
    assert_eq!(b["messages"][1]["role"], "assistant");
    assert_eq!(b["messages"][2]["role"], "user", "ends with a user turn");
    assert!(b.get("seed").is_none(), "Messages takes no seed");
    assert_eq!(b["tool_choice"], json!({"type": "any"}));
    assert_eq!(b["tools"][0]["name"], "to_done");
    assert_eq!(b["tools"][0]["input_schema"]["type"], "object");
    // Capabilities: no json_schema; tools is the best mode.
    use claij_llm::Provider;
    assert_eq!(p.capabilities().best(), Mode::Tools);

    // Documented answers (https://docs.anthropic.com/en/api/messages).
    let answer = json!({
      "id": "msg_01Aq9w938a90dw8q", "type": "message", "role": "assistant",
      "model": "claude-sonnet-4-5",
      "content": [
        {"type": "text", "text": "I'll answer with the tool."},
        {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "to_done",
         "input": {"answer": "42"}}],
      "stop_reason": "tool_use", "stop_sequence": null,
      "usage": {"input_tokens": 2095, "output_tokens": 503,
        "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 0}
    });
    let r = p.parse(&answer).unwrap();
    assert_eq!(
        r.tool_call,
        Some(("to_done".into(), json!({"answer": "42"})))
    );
    assert_eq!(
        r.tokens,
        Some(Tokens {
            input: 3095,
            output: 503,
            cached: Some(1000)
        })
    );
    let text = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
      "content": [{"type": "text", "text": "{\"id\": [\"ask\", \"done\"], \"answer\": \"hi\"}"}],
      "stop_reason": "end_turn", "usage": {"input_tokens": 10, "output_tokens": 5}});
    assert!(p.parse(&text).unwrap().text.contains("\"hi\""));
    let err =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    assert!(p.parse(&err).is_err());
}

#[test]
fn gemini_generate_content_request_and_response() {
    let p = provider(ProviderKind::Gemini, JsonFlavour::None);
    let call = p.build_call(&request(Mode::JsonSchema));
    assert_eq!(
        call.url,
        "https://api.example/v1/models/the-model:generateContent"
    );
    assert!(
        !call.url.contains("KEY"),
        "the key goes in a header, not the URL"
    );
    assert_eq!(secret_header(&call, "x-goog-api-key"), "sk-wire-KEY");
    let b = &call.body;
    assert_eq!(b["systemInstruction"], json!({"parts": [{"text": "SYS"}]}));
    assert_eq!(
        b["contents"][0],
        json!({"role": "user", "parts": [{"text": "U1\n\nU2"}]})
    );
    assert_eq!(b["contents"][1]["role"], "model");
    let g = &b["generationConfig"];
    assert_eq!(g["responseMimeType"], "application/json");
    assert_eq!(g["maxOutputTokens"], 256);
    assert_eq!(g["temperature"], 0.5);
    let schema = &g["responseJsonSchema"];
    assert!(
        schema.get("additionalProperties").is_none(),
        "adapted to Gemini's subset"
    );
    assert_eq!(
        schema["properties"]["event"]["anyOf"][0]["properties"]["id"],
        json!({"enum": [["ask", "done"]]})
    );
    let tools = p.build_call(&request(Mode::Tools)).body;
    assert_eq!(tools["toolConfig"]["functionCallingConfig"]["mode"], "ANY");
    assert_eq!(
        tools["tools"][0]["functionDeclarations"][0]["name"],
        "to_done"
    );

    // Documented answers (https://ai.google.dev/api/generate-content#v1beta.GenerateContentResponse).
    let answer = json!({
      "candidates": [{"content": {"parts": [{"text": "{\"event\": {\"id\": [\"ask\", \"done\"], \"answer\": \"ok\"}}"}],
        "role": "model"}, "finishReason": "STOP", "index": 0}],
      "usageMetadata": {"promptTokenCount": 120, "candidatesTokenCount": 16,
        "totalTokenCount": 136, "cachedContentTokenCount": 64},
      "modelVersion": "gemini-2.5-flash"
    });
    let r = p.parse(&answer).unwrap();
    assert!(r.text.contains("\"ok\""));
    assert_eq!(
        r.tokens,
        Some(Tokens {
            input: 120,
            output: 16,
            cached: Some(64)
        })
    );
    let call = json!({"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "to_done", "args": {"answer": "f"}}}]}, "finishReason": "STOP"}]});
    assert_eq!(
        p.parse(&call).unwrap().tool_call,
        Some(("to_done".into(), json!({"answer": "f"})))
    );
    let blocked = json!({"promptFeedback": {"blockReason": "SAFETY"}});
    assert!(p.parse(&blocked).unwrap_err().contains("SAFETY"));
}
