//! The Anthropic Messages wire format (`POST {base}/messages`, `x-api-key`,
//! `anthropic-version: 2023-06-01`).

use serde_json::{Map, Value, json};

use super::{HttpProvider, alternate, count, put};
use crate::enforce::Mode;
use crate::http::{HeaderValue, HttpCall};
use crate::lower::{Target, lower};
use crate::request::{ModelRequest, ModelResponse, Tokens};

/// The API version sent.
pub const API_VERSION: &str = "2023-06-01";
/// `max_tokens` is required by the API; this is used when the request sets none.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The call for `request`.
pub fn build(p: &HttpProvider, request: &ModelRequest) -> HttpCall {
    let (system, messages) = alternate(&request.messages);
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert(
        "max_tokens".into(),
        json!(request.decoding.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    put(&mut body, "system", system);
    body.insert(
        "messages".into(),
        Value::Array(
            messages
                .iter()
                .map(|m| json!({"role": m.role.to_string(), "content": m.content}))
                .collect(),
        ),
    );
    put(&mut body, "temperature", request.decoding.temperature);
    put(&mut body, "top_p", request.decoding.top_p);
    let e = &request.enforcement;
    if e.mode == Mode::Tools {
        let tools: Vec<Value> = e
            .tools
            .iter()
            .map(|t| {
                json!({"name": t.name, "description": t.description,
                    "input_schema": lower(&t.parameters, Target::Tools).schema})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        body.insert("tool_choice".into(), json!({"type": "any"}));
    }
    let mut headers = vec![(
        "anthropic-version".to_owned(),
        HeaderValue::Plain(API_VERSION.to_owned()),
    )];
    if let Some(k) = &p.key {
        headers.push(("x-api-key".to_owned(), HeaderValue::Secret("", k.clone())));
    }
    HttpCall {
        url: format!("{}/messages", p.base_url),
        headers,
        body: Value::Object(body),
    }
}

/// Parses a Messages answer.
pub fn parse(body: &Value) -> Result<ModelResponse, String> {
    let content = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| "the answer has no `content` array".to_owned())?;
    let mut text = String::new();
    let mut tool_call = None;
    for block in content {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(block.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("tool_use") if tool_call.is_none() => {
                let name = block
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or("a tool_use block without a name")?;
                tool_call = Some((
                    name.to_owned(),
                    block.get("input").cloned().unwrap_or(json!({})),
                ));
            }
            _ => {}
        }
    }
    let tokens = body.get("usage").map(|u| Tokens {
        input: count(u, "/input_tokens").unwrap_or(0)
            + count(u, "/cache_read_input_tokens").unwrap_or(0)
            + count(u, "/cache_creation_input_tokens").unwrap_or(0),
        output: count(u, "/output_tokens").unwrap_or(0),
        cached: count(u, "/cache_read_input_tokens"),
    });
    Ok(ModelResponse {
        text,
        tool_call,
        tokens,
        retries: 0,
    })
}
