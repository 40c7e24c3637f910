//! The providers: one HTTP provider speaking one of three wire formats, and the embedded
//! local model (`embedded`).
//! Each format is a pair of pure functions (build the call, parse the answer), tested
//! against recorded exchanges in the vendor's documented wire format.

pub mod anthropic;
pub mod embedded;
pub mod gemini;
pub mod openai;

use claij_core::prompts::{Message, Role};
use claij_engine::{BoxFuture, TextSink};
use serde_json::Value;

use crate::config::{JsonFlavour, ProviderKind};
use crate::http::{HeaderValue, Http, HttpCall};
use crate::provider::{Capabilities, Provider, ProviderError, sent_whole};
use crate::request::{ModelRequest, ModelResponse};
use crate::secret::Secret;

/// A provider reached over HTTP.
#[derive(Debug, Clone)]
pub struct HttpProvider {
    /// Its configured name.
    pub name: String,
    /// Its wire format.
    pub kind: ProviderKind,
    /// The API's base URL, without a trailing `/`.
    pub base_url: String,
    /// The key, if any (local servers need none).
    pub key: Option<Secret>,
    /// OpenAI-compatible: how structured output is asked for.
    pub json_flavour: JsonFlavour,
    /// Whether it takes tools.
    pub tools: bool,
    /// OpenAI-compatible: whether answers are streamed when a text sink is given.
    pub stream: bool,
    /// The client.
    pub http: Http,
}

impl HttpProvider {
    /// The HTTP call for `request`.
    pub fn build_call(&self, request: &ModelRequest) -> HttpCall {
        let mut call = match self.kind {
            ProviderKind::Openai => openai::build(self, request),
            ProviderKind::Anthropic => anthropic::build(self, request),
            ProviderKind::Gemini => gemini::build(self, request),
        };
        if let Some(traceparent) = &request.traceparent {
            call.headers.push((
                "traceparent".to_owned(),
                HeaderValue::Plain(traceparent.clone()),
            ));
        }
        call
    }

    /// Parses an answer in this provider's wire format.
    pub fn parse(&self, body: &Value) -> Result<ModelResponse, String> {
        match self.kind {
            ProviderKind::Openai => openai::parse(body),
            ProviderKind::Anthropic => anthropic::parse(body),
            ProviderKind::Gemini => gemini::parse(body),
        }
    }
}

/// `call` with the request's `traceparent` header, when the run is traced.
fn traced(mut call: HttpCall, request: &ModelRequest) -> HttpCall {
    if let Some(traceparent) = &request.traceparent {
        call.headers.push((
            "traceparent".to_owned(),
            HeaderValue::Plain(traceparent.clone()),
        ));
    }
    call
}

impl Provider for HttpProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            json_schema: match self.kind {
                ProviderKind::Openai => self.json_flavour != JsonFlavour::None,
                ProviderKind::Gemini => true,
                // Anthropic's answers are constrained through tools.
                ProviderKind::Anthropic => false,
            },
            tools: self.tools,
            grammar: false,
        }
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ProviderError>> {
        Box::pin(async move {
            let call = self.build_call(request);
            let body = self.http.post(&self.name, &call).await?;
            let response = self.parse(&body).map_err(|message| {
                let message = match &self.key {
                    Some(k) => k.scrub(&message),
                    None => message,
                };
                ProviderError::Permanent {
                    provider: self.name.clone(),
                    message,
                }
            })?;
            Ok(match self.kind {
                ProviderKind::Openai => openai::restore(self, request, response),
                _ => response,
            })
        })
    }

    /// OpenAI's wire format streams (`stream: true`, unless the provider is configured
    /// `stream = false`): each piece of content goes to `on_text` as it arrives. The
    /// others answer whole, sent on at once.
    fn complete_streaming<'a>(
        &'a self,
        request: &'a ModelRequest,
        on_text: TextSink,
    ) -> BoxFuture<'a, Result<ModelResponse, ProviderError>> {
        if self.kind != ProviderKind::Openai || !self.stream {
            return Box::pin(sent_whole(self.complete(request), on_text));
        }
        Box::pin(async move {
            let call = traced(openai::build_streaming(self, request), request);
            let mut streamed = openai::Streamed::default();
            self.http
                .post_stream(&self.name, &call, &mut |chunk| {
                    if let Some(text) = streamed.add(&chunk) {
                        on_text(&text);
                    }
                })
                .await?;
            let response =
                openai::parse(&streamed.body()).map_err(|message| ProviderError::Permanent {
                    provider: self.name.clone(),
                    message,
                })?;
            Ok(openai::restore(self, request, response))
        })
    }
}

/// The conversation made acceptable to APIs that want alternating roles, starting with
/// a user message and ending with one: adjacent messages of one role are merged (blank
/// line between), a leading assistant message gets a user message before it, and a
/// trailing assistant message (another model's request, in a panel) gets a user message
/// asking for the answer. The system message, if any, is returned apart.
pub fn alternate(messages: &[Message]) -> (Option<String>, Vec<Message>) {
    let mut system: Option<String> = None;
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    for m in messages {
        if m.role == Role::System {
            match &mut system {
                Some(s) => {
                    s.push_str("\n\n");
                    s.push_str(&m.content);
                }
                None => system = Some(m.content.clone()),
            }
            continue;
        }
        match out.last_mut() {
            Some(last) if last.role == m.role => {
                last.content.push_str("\n\n");
                last.content.push_str(&m.content);
            }
            _ => out.push(m.clone()),
        }
    }
    if out.first().is_none_or(|m| m.role != Role::User) {
        out.insert(0, Message::user("(The conversation so far follows.)"));
    }
    if out.last().is_some_and(|m| m.role != Role::User) {
        out.push(Message::user(
            "Answer now with exactly one JSON object that satisfies the JSON Schema of the request.",
        ));
    }
    (system, out)
}

/// Inserts `value` under `key` when it is present.
pub(crate) fn put<T: serde::Serialize>(
    body: &mut serde_json::Map<String, Value>,
    key: &str,
    value: Option<T>,
) {
    if let Some(v) = value.and_then(|v| serde_json::to_value(v).ok()) {
        body.insert(key.to_owned(), v);
    }
}

/// A token count in an answer (`u64`, absent when missing).
pub(crate) fn count(v: &Value, pointer: &str) -> Option<u64> {
    v.pointer(pointer).and_then(Value::as_u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alternation_merges_and_bookends_with_user_messages() {
        let (system, out) = alternate(&[
            Message::system("S"),
            Message::assistant("a1"),
            Message::user("u1"),
            Message::user("u2"),
            Message::assistant("a2"),
        ]);
        assert_eq!(system.as_deref(), Some("S"));
        let roles: Vec<Role> = out.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [
                Role::User,
                Role::Assistant,
                Role::User,
                Role::Assistant,
                Role::User
            ]
        );
        assert_eq!(out[2].content, "u1\n\nu2");
    }
}
