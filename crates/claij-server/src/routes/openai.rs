//! An OpenAI-compatible endpoint: `POST /v1/chat/completions` with `model: "fsm:ID"` runs
//! the workflow `ID` and answers with its result as the assistant's message, so any
//! OpenAI client calls a workflow as if it were a model; `GET /v1/models` lists them.
//!
//! The mapping (docs/SERVER.md, "OpenAI-compatible endpoint"):
//! - the run's input: when the last user message is a JSON object, that object; else
//!   `{"text": LAST_USER_MESSAGE, "messages": [{role, content}, …]}` (the entry's `id` added
//!   when the FSM has one entry);
//! - the answer: a completed run's result without its `id` — the string itself when the
//!   result has one field besides `id` and it is a string, else the result as JSON text;
//! - a run that waits for a person answers with what it waits for (and a resume link) as
//!   the message, `finish_reason: "stop"`, and `claij.status: "suspended"`; a run that
//!   fails or is interrupted is an error (500) naming its state;
//! - `stream: true` sends the answer as `chat.completion.chunk` events, then `[DONE]`.
//!
//! Errors use OpenAI's shape (`{"error": {"message", "type", "param", "code"}}`), which
//! its clients read; `param` names the place.

use std::convert::Infallible;
use std::time::SystemTime;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use claij_core::RunStatus;
use claij_core::source::{JsonErrorKind, parse_json};
use claij_engine::RunOptions;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use utoipa::ToSchema;

use crate::body::JsonBody;
use crate::problem::Problem;
use crate::routes::runs::{find_run, result_of};
use crate::runner::{MAX_WAIT, Work, launch, wait_for};
use crate::state::AppState;

/// The prefix of workflow model names.
const PREFIX: &str = "fsm:";

/// `POST /v1/chat/completions` (the members claij reads; others are ignored, as OpenAI's
/// optional parameters are).
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub(crate) struct ChatRequest {
    /// `fsm:ID` (or `fsm:ID@VERSION`).
    pub model: String,
    /// The conversation.
    #[schema(value_type = Vec<Object>)]
    pub messages: Vec<Value>,
    /// Send the answer as server-sent chunks.
    #[serde(default)]
    pub stream: bool,
}

/// An error in OpenAI's shape.
pub(crate) struct OpenAiError {
    status: StatusCode,
    message: String,
    kind: &'static str,
    param: Option<String>,
    code: Option<&'static str>,
}

impl OpenAiError {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        OpenAiError {
            status,
            message: message.into(),
            kind,
            param: None,
            code: None,
        }
    }

    fn at(mut self, param: impl Into<String>) -> Self {
        self.param = Some(param.into());
        self
    }

    fn code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }
}

impl From<Problem> for OpenAiError {
    fn from(p: Problem) -> Self {
        let status = StatusCode::from_u16(p.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let kind = if status.is_client_error() {
            "invalid_request_error"
        } else {
            "server_error"
        };
        let mut message = p.detail.clone();
        for e in &p.errors {
            message.push_str(&format!("\n{}: {}", e.place, e.message));
        }
        OpenAiError {
            status,
            message,
            kind,
            param: p.errors.first().map(|e| e.place.clone()),
            code: None,
        }
    }
}

impl IntoResponse for OpenAiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {
            "message": self.message,
            "type": self.kind,
            "param": self.param,
            "code": self.code,
        }});
        (self.status, Json(body)).into_response()
    }
}

/// The workflows as models.
#[utoipa::path(
    get, path = "/v1/models", tag = "openai",
    responses((status = 200, description = "`{\"object\": \"list\", \"data\": [{\"id\": \"fsm:ID\", \"object\": \"model\", …}]}`", body = Object))
)]
pub(crate) async fn models(State(state): State<AppState>) -> Json<Value> {
    let data: Vec<Value> = state
        .newest()
        .iter()
        .map(|s| {
            json!({
                "id": format!("{PREFIX}{}", s.fsm.id),
                "object": "model",
                "created": 0,
                "owned_by": "claij",
            })
        })
        .collect();
    Json(json!({"object": "list", "data": data}))
}

/// Runs the workflow named by `model` on the conversation and answers with its result.
#[utoipa::path(
    post, path = "/v1/chat/completions", tag = "openai",
    request_body = ChatRequest,
    responses(
        (status = 200, description = "A `chat.completion` (or, with `stream`, `chat.completion.chunk` events)", body = Object),
        (status = 400, description = "The input was refused (OpenAI's error shape)", body = Object),
        (status = 404, description = "No such workflow", body = Object),
        (status = 500, description = "The run failed", body = Object),
    )
)]
pub(crate) async fn chat_completions(
    State(state): State<AppState>,
    JsonBody(request): JsonBody<ChatRequest>,
) -> Result<Response, OpenAiError> {
    let name = request.model.strip_prefix(PREFIX).ok_or_else(|| {
        OpenAiError::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            format!(
                "`{}` is not a workflow: models here are `fsm:ID` (GET /v1/models lists them)",
                request.model
            ),
        )
        .at("model")
        .code("model_not_found")
    })?;
    let (id, version) = match name.split_once('@') {
        Some((id, v)) => {
            // A version named is that version, or nothing: never the newest instead.
            let version = v.parse::<u32>().map_err(|_| {
                OpenAiError::new(
                    StatusCode::NOT_FOUND,
                    "invalid_request_error",
                    format!("`{v}` is not a version: models here are `fsm:ID` or `fsm:ID@VERSION`"),
                )
                .at("model")
                .code("model_not_found")
            })?;
            (id, Some(version))
        }
        None => (name, None),
    };
    let served = state.find(id, version).ok_or_else(|| {
        OpenAiError::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            format!("no workflow `{id}` is served"),
        )
        .at("model")
        .code("model_not_found")
    })?;
    let input = input_of(&request.messages)?;
    let engine = state.engine();
    let mut launched = launch(
        &state,
        engine,
        served.fsm.clone(),
        Work::Start { input },
        RunOptions::default(),
        "$.messages",
    )
    .await?;
    if !wait_for(&mut launched, MAX_WAIT, &state.shutdown).await {
        return Err(OpenAiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            "server_error",
            format!(
                "run {} is still going after {} s; follow it at /runs/{}",
                launched.run_id,
                MAX_WAIT.as_secs(),
                launched.run_id
            ),
        ));
    }
    let record = find_run(&state, &launched.run_id).await?;
    let content = match record.status {
        RunStatus::Completed => answer_text(result_of(&state, &record).await?.as_ref()),
        RunStatus::Suspended => waiting_text(&state, &record).await,
        status => {
            return Err(OpenAiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                format!(
                    "the workflow's run {} {status} in state `{}` (its trail: /runs/{}/trail)",
                    record.id, record.state, record.id
                ),
            ));
        }
    };
    // The run's own model calls, as its record keeps them.
    let usage = record.spend;
    let created = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let completion_id = format!("chatcmpl-{}", record.id);
    let claij = json!({"run": record.id, "status": record.status.as_str(), "url": format!("/runs/{}", record.id)});
    if request.stream {
        let chunk = |delta: Value, finish: Value| {
            json!({
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": request.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            })
        };
        let mut events = vec![chunk(
            json!({"role": "assistant", "content": ""}),
            Value::Null,
        )];
        // The answer in pieces of a few words, as a model's tokens come.
        let words: Vec<&str> = content.split_inclusive(' ').collect();
        for piece in words.chunks(4) {
            events.push(chunk(json!({"content": piece.concat()}), Value::Null));
        }
        let mut last = chunk(json!({}), json!("stop"));
        last["claij"] = claij;
        events.push(last);
        let stream = futures_util::stream::iter(
            events
                .into_iter()
                .map(|e| Ok::<_, Infallible>(Event::default().data(e.to_string())))
                .chain(std::iter::once(Ok(Event::default().data("[DONE]")))),
        );
        return Ok(Sse::new(stream).into_response());
    }
    Ok(Json(json!({
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": request.model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop",
        }],
        "usage": {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.input_tokens + usage.output_tokens,
        },
        "claij": claij,
    }))
    .into_response())
}

/// The run's input from the conversation.
fn input_of(messages: &[Value]) -> Result<Value, OpenAiError> {
    let text_of = |m: &Value| -> Option<String> {
        match m.get("content") {
            Some(Value::String(s)) => Some(s.clone()),
            // Content parts: the text ones, joined.
            Some(Value::Array(parts)) => Some(
                parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            _ => None,
        }
    };
    let last_user = messages
        .iter()
        .rposition(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .ok_or_else(|| {
            OpenAiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "the conversation has no user message to give the workflow",
            )
            .at("messages")
        })?;
    let text = text_of(&messages[last_user]).ok_or_else(|| {
        OpenAiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "the last user message has no text content",
        )
        .at(format!("messages[{last_user}].content"))
    })?;
    // The message's JSON is held to the same rule as a body's (no key twice, nesting
    // bounded): a run's input is stored, and must read back.
    match parse_json(text.trim().as_bytes()) {
        Ok(Value::Object(object)) => return Ok(Value::Object(object)),
        Ok(_) => {}
        Err(e) if e.kind == JsonErrorKind::Syntax => {}
        Err(e) => {
            let place = format!("$.messages[{last_user}].content");
            let problem = crate::body::refused(&e, "the message's JSON", &place);
            let at = problem
                .errors
                .first()
                .map_or(place.clone(), |e| e.place.clone());
            return Err(OpenAiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                format!("{} (at {at})", problem.detail),
            )
            .at(place));
        }
    }
    let conversation: Vec<Value> = messages
        .iter()
        .map(|m| {
            json!({
                "role": m.get("role").and_then(Value::as_str).unwrap_or("user"),
                "content": text_of(m).unwrap_or_default(),
            })
        })
        .collect();
    let mut input = Map::new();
    input.insert("text".into(), Value::String(text));
    input.insert("messages".into(), Value::Array(conversation));
    Ok(Value::Object(input))
}

/// A result as the assistant's message: its one string, or its JSON without `id`.
fn answer_text(result: Option<&Value>) -> String {
    let Some(Value::Object(map)) = result else {
        return result.map(Value::to_string).unwrap_or_default();
    };
    let rest: Map<String, Value> = map
        .iter()
        .filter(|(k, _)| k.as_str() != "id")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    match rest.values().collect::<Vec<_>>().as_slice() {
        [Value::String(only)] => only.clone(),
        _ => Value::Object(rest).to_string(),
    }
}

/// What a waiting run asks, with a link to answer it.
async fn waiting_text(state: &AppState, record: &claij_core::store::RunRecord) -> String {
    let Some(wait) = &record.wait else {
        return format!("run {} is waiting", record.id);
    };
    let mut text = format!(
        "The workflow waits in `{}`{}",
        wait.state,
        wait.prompt
            .as_deref()
            .map(|p| format!(": {p}"))
            .unwrap_or_default()
    );
    if let Ok(hook) = crate::links::mint(state, record).await {
        text.push_str(&format!(
            "\nAnswer at {}{} (POST the answer as JSON).",
            state.public_url(),
            hook.url
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversation_becomes_an_input() {
        let plain = input_of(&[
            json!({"role": "system", "content": "be brief"}),
            json!({"role": "user", "content": "hello"}),
        ]);
        let plain = plain.ok().unwrap_or_default();
        assert_eq!(plain["text"], "hello");
        assert_eq!(plain["messages"][0]["role"], "system");
        let object = input_of(&[
            json!({"role": "user", "content": "{\"id\": [\"start\", \"a\"], \"n\": 1}"}),
        ]);
        assert_eq!(object.ok(), Some(json!({"id": ["start", "a"], "n": 1})));
        let parts = input_of(&[
            json!({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}),
        ]);
        assert_eq!(parts.ok().map(|v| v["text"].clone()), Some(json!("a\nb")));
        assert!(input_of(&[json!({"role": "assistant", "content": "x"})]).is_err());
        let deep = format!("{}1{}", "[".repeat(65), "]".repeat(65));
        let refused = input_of(&[json!({"role": "user", "content": format!("{{\"a\": {deep}}}")})]);
        assert!(refused.is_err_and(|e| e.param.as_deref() == Some("$.messages[0].content")));
        let twice = input_of(&[json!({"role": "user", "content": r#"{"a": 1, "a": 2}"#})]);
        assert!(twice.is_err_and(|e| e.message.contains("duplicate key `a`")));
    }

    #[test]
    fn a_result_reads_as_one_string_or_its_json() {
        assert_eq!(
            answer_text(Some(&json!({"id": ["a", "b"], "reply": "Hi"}))),
            "Hi"
        );
        assert_eq!(
            answer_text(Some(&json!({"id": ["a", "b"], "n": 1, "m": "x"}))),
            r#"{"n":1,"m":"x"}"#
        );
        assert_eq!(answer_text(None), "");
    }
}
