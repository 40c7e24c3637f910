//! The Google Gemini wire format (`POST {base}/models/{model}:generateContent`,
//! `x-goog-api-key`). Structured output uses `responseJsonSchema`; schemas are adapted to
//! Gemini's subset ([`crate::lower::Target::Gemini`]).

use serde_json::{Map, Value, json};

use super::{HttpProvider, alternate, count, put};
use crate::enforce::Mode;
use crate::http::{HeaderValue, HttpCall};
use crate::lower::{Target, lower};
use crate::request::{ModelRequest, ModelResponse, Tokens};
use claij_core::prompts::Role;

/// The call for `request`.
pub fn build(p: &HttpProvider, request: &ModelRequest) -> HttpCall {
    let (system, messages) = alternate(&request.messages);
    let mut body = Map::new();
    if let Some(s) = system {
        body.insert("systemInstruction".into(), json!({"parts": [{"text": s}]}));
    }
    body.insert(
        "contents".into(),
        Value::Array(
            messages
                .iter()
                .map(|m| {
                    let role = if m.role == Role::Assistant {
                        "model"
                    } else {
                        "user"
                    };
                    json!({"role": role, "parts": [{"text": m.content}]})
                })
                .collect(),
        ),
    );
    let s = &request.decoding;
    let mut generation = Map::new();
    put(&mut generation, "temperature", s.temperature);
    put(&mut generation, "topP", s.top_p);
    put(&mut generation, "seed", s.seed);
    put(&mut generation, "maxOutputTokens", s.max_tokens);
    let e = &request.enforcement;
    match e.mode {
        Mode::JsonSchema => {
            generation.insert("responseMimeType".into(), json!("application/json"));
            generation.insert(
                "responseJsonSchema".into(),
                lower(&e.schema, Target::Gemini).schema,
            );
        }
        Mode::Tools => {
            let declarations: Vec<Value> = e
                .tools
                .iter()
                .map(|t| {
                    json!({"name": t.name, "description": t.description,
                    "parametersJsonSchema": lower(&t.parameters, Target::Gemini).schema})
                })
                .collect();
            body.insert(
                "tools".into(),
                json!([{"functionDeclarations": declarations}]),
            );
            body.insert(
                "toolConfig".into(),
                json!({"functionCallingConfig": {"mode": "ANY"}}),
            );
        }
        Mode::Prompt | Mode::Grammar => {}
    }
    if !generation.is_empty() {
        body.insert("generationConfig".into(), Value::Object(generation));
    }
    let headers = p
        .key
        .iter()
        .map(|k| {
            (
                "x-goog-api-key".to_owned(),
                HeaderValue::Secret("", k.clone()),
            )
        })
        .collect();
    HttpCall {
        url: format!("{}/models/{}:generateContent", p.base_url, request.model),
        headers,
        body: Value::Object(body),
    }
}

/// Parses a `generateContent` answer.
pub fn parse(body: &Value) -> Result<ModelResponse, String> {
    let parts = body
        .pointer("/candidates/0/content/parts")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            let reason = body
                .pointer("/promptFeedback/blockReason")
                .or_else(|| body.pointer("/candidates/0/finishReason"))
                .and_then(Value::as_str)
                .unwrap_or("no candidates[0].content.parts");
            format!("the answer holds no content ({reason})")
        })?;
    let mut text = String::new();
    let mut tool_call = None;
    for part in parts {
        if let Some(t) = part.get("text").and_then(Value::as_str) {
            text.push_str(t);
        } else if let Some(f) = part.get("functionCall")
            && tool_call.is_none()
        {
            let name = f
                .get("name")
                .and_then(Value::as_str)
                .ok_or("a functionCall without a name")?;
            tool_call = Some((name.to_owned(), f.get("args").cloned().unwrap_or(json!({}))));
        }
    }
    let tokens = body.get("usageMetadata").map(|u| Tokens {
        input: count(u, "/promptTokenCount").unwrap_or(0),
        output: count(u, "/candidatesTokenCount").unwrap_or(0),
        cached: count(u, "/cachedContentTokenCount"),
    });
    Ok(ModelResponse {
        text,
        tool_call,
        tokens,
        retries: 0,
    })
}
