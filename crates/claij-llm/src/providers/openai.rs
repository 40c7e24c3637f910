//! The OpenAI chat completions wire format (`POST {base}/chat/completions`), spoken by
//! OpenAI, OpenRouter, Ollama, vLLM, LM Studio and the llama.cpp servers.

use serde_json::{Map, Value, json};

use super::{HttpProvider, alternate, count, put};
use crate::config::JsonFlavour;
use crate::enforce::{Mode, unwrapped};
use crate::http::{HeaderValue, HttpCall};
use crate::lower::{Target, lower, nulls};
use crate::request::{ModelRequest, ModelResponse, Tokens};

/// The call for `request`.
pub fn build(p: &HttpProvider, request: &ModelRequest) -> HttpCall {
    let (system, messages) = alternate(&request.messages);
    let mut wire: Vec<Value> = Vec::with_capacity(messages.len() + 1);
    if let Some(s) = system {
        wire.push(json!({"role": "system", "content": s}));
    }
    wire.extend(
        messages
            .iter()
            .map(|m| json!({"role": m.role.to_string(), "content": m.content})),
    );
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert("messages".into(), Value::Array(wire));
    let s = &request.decoding;
    put(&mut body, "temperature", s.temperature);
    put(&mut body, "top_p", s.top_p);
    put(&mut body, "seed", s.seed);
    put(&mut body, "max_tokens", s.max_tokens);
    let e = &request.enforcement;
    match e.mode {
        Mode::JsonSchema => {
            let format = match p.json_flavour {
                JsonFlavour::JsonObject => json!({"type": "json_object",
                    "schema": lower(unwrapped(&e.schema), Target::JsonObject).schema}),
                _ => {
                    let lowered = lower(&e.schema, Target::OpenAiStrict);
                    json!({"type": "json_schema", "json_schema": {
                        "name": "event", "strict": lowered.complete(), "schema": lowered.schema}})
                }
            };
            body.insert("response_format".into(), format);
        }
        Mode::Tools => {
            let tools: Vec<Value> = e
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description,
                        "parameters": lower(&t.parameters, Target::Tools).schema}})
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
            body.insert("tool_choice".into(), json!("required"));
        }
        Mode::Prompt | Mode::Grammar => {}
    }
    let headers = p
        .key
        .iter()
        .map(|k| {
            (
                "authorization".to_owned(),
                HeaderValue::Secret("Bearer ", k.clone()),
            )
        })
        .collect();
    HttpCall {
        url: format!("{}/chat/completions", p.base_url),
        headers,
        body: Value::Object(body),
    }
}

/// The call for `request` with the answer streamed (`stream: true`, usage in the last
/// chunk).
pub fn build_streaming(p: &HttpProvider, request: &ModelRequest) -> HttpCall {
    let mut call = build(p, request);
    if let Value::Object(body) = &mut call.body {
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    call
}

/// A streamed chat completion, folded chunk by chunk into what [`parse`] reads.
#[derive(Debug, Default)]
pub struct Streamed {
    text: String,
    tool_name: Option<String>,
    tool_arguments: String,
    usage: Option<Value>,
}

impl Streamed {
    /// Adds one `chat.completion.chunk`; its content, if any, is returned (to stream on).
    pub fn add(&mut self, chunk: &Value) -> Option<String> {
        if let Some(usage) = chunk.get("usage").filter(|u| !u.is_null()) {
            self.usage = Some(usage.clone());
        }
        let delta = chunk.pointer("/choices/0/delta")?;
        if let Some(f) = delta.pointer("/tool_calls/0/function") {
            if let Some(name) = f.get("name").and_then(Value::as_str) {
                self.tool_name = Some(name.to_owned());
            }
            if let Some(args) = f.get("arguments").and_then(Value::as_str) {
                self.tool_arguments.push_str(args);
            }
        }
        let content = delta.get("content").and_then(Value::as_str)?;
        if content.is_empty() {
            return None;
        }
        self.text.push_str(content);
        Some(content.to_owned())
    }

    /// The whole answer, in the shape of a chat completion.
    pub fn body(self) -> Value {
        let mut message = json!({"role": "assistant", "content": self.text});
        if let Some(name) = self.tool_name {
            message["tool_calls"] = json!([{"type": "function", "function": {
                "name": name, "arguments": self.tool_arguments}}]);
        }
        let mut body = json!({"choices": [{"index": 0, "message": message}]});
        if let Some(usage) = self.usage {
            body["usage"] = usage;
        }
        body
    }
}

/// Parses a chat completion.
pub fn parse(body: &Value) -> Result<ModelResponse, String> {
    let message = body
        .pointer("/choices/0/message")
        .ok_or_else(|| "the answer has no choices[0].message".to_owned())?;
    let tool_call = match message.pointer("/tool_calls/0/function") {
        Some(f) => {
            let name = f
                .get("name")
                .and_then(Value::as_str)
                .ok_or("a tool call without a name")?;
            let args = match f.get("arguments") {
                Some(Value::String(s)) => {
                    serde_json::from_str(s).unwrap_or(Value::String(s.clone()))
                }
                Some(v) => v.clone(),
                None => json!({}),
            };
            Some((name.to_owned(), args))
        }
        None => None,
    };
    let text = message
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let tokens = body.get("usage").map(|u| Tokens {
        input: count(u, "/prompt_tokens").unwrap_or(0),
        output: count(u, "/completion_tokens").unwrap_or(0),
        cached: count(u, "/prompt_tokens_details/cached_tokens"),
    });
    Ok(ModelResponse {
        text,
        tool_call,
        tokens,
        retries: 0,
    })
}

/// The answer to `request` as the original schema reads it: with `json_schema` in strict
/// form, the `null`s written for optional properties (which strict mode makes required
/// and nullable) are taken out again ([`nulls::strip`]).
pub fn restore(
    p: &HttpProvider,
    request: &ModelRequest,
    mut response: ModelResponse,
) -> ModelResponse {
    let e = &request.enforcement;
    if e.mode != Mode::JsonSchema || p.json_flavour != JsonFlavour::JsonSchema {
        return response;
    }
    if let Ok(answer) = serde_json::from_str::<Value>(response.text.trim()) {
        let stripped = nulls::strip(&answer, &e.schema);
        if stripped != answer {
            response.text = stripped.to_string();
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_chunks_fold_into_a_completion() {
        let mut streamed = Streamed::default();
        let chunks = [
            json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
            json!({"choices": [{"index": 0, "delta": {"content": "{\"a\":"}}]}),
            json!({"choices": [{"index": 0, "delta": {"content": " 1}"}}]}),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}),
        ];
        let pieces: Vec<String> = chunks.iter().filter_map(|c| streamed.add(c)).collect();
        assert_eq!(pieces, ["{\"a\":", " 1}"]);
        let parsed = parse(&streamed.body()).ok();
        assert_eq!(parsed.as_ref().map(|r| r.text.as_str()), Some("{\"a\": 1}"));
        assert_eq!(
            parsed.and_then(|r| r.tokens).map(|t| (t.input, t.output)),
            Some((7, 3))
        );
    }

    #[test]
    fn streamed_tool_calls_are_put_together() {
        let mut streamed = Streamed::default();
        for c in [
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "route", "arguments": ""}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"x\""}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": ": 2}"}}]}}]}),
        ] {
            assert_eq!(streamed.add(&c), None);
        }
        let parsed = parse(&streamed.body()).ok();
        assert_eq!(
            parsed.and_then(|r| r.tool_call),
            Some(("route".to_owned(), json!({"x": 2})))
        );
    }
}
