//! What a model was sent and answered, as the GenAI semantic conventions record it on a
//! `chat` span when the user opts in (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`):
//! `gen_ai.system_instructions`, `gen_ai.input.messages` and `gen_ai.output.messages`,
//! each a JSON string (OTLP attributes hold no nested structures).

use claij_core::prompts::{Message, Role};
use claij_engine::ModelExchange;
use opentelemetry::KeyValue;
use serde_json::{Value, json};

/// The variable that opts in to recording prompts and answers on spans.
pub const CAPTURE_VAR: &str = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";

/// Whether the environment opts in to recording content: `CAPTURE_VAR` is `true` (or
/// `span_only` / `span_and_event`, the values of the conventions' newer instrumentations;
/// claij records content on spans).
pub fn capture_from_env() -> bool {
    std::env::var(CAPTURE_VAR).is_ok_and(|v| {
        let v = v.trim();
        ["true", "span_only", "span_and_event"]
            .iter()
            .any(|on| v.eq_ignore_ascii_case(on))
    })
}

/// One text part, as the conventions write it.
fn text_part(content: &str) -> Value {
    json!({"type": "text", "content": content})
}

/// An exchange's attributes: the leading system messages as the system instructions, the
/// rest as the input messages, and the answer (text, or a tool call) as the one output
/// message.
pub(crate) fn attributes(exchange: &ModelExchange<'_>) -> Vec<KeyValue> {
    let leading = exchange
        .messages
        .iter()
        .take_while(|m| m.role == Role::System)
        .count();
    let (system, rest): (&[Message], &[Message]) = exchange.messages.split_at(leading);
    let input: Vec<Value> = rest
        .iter()
        .map(|m| json!({"role": m.role.to_string(), "parts": [text_part(&m.content)]}))
        .collect();
    let mut parts = Vec::new();
    if !exchange.text.is_empty() {
        parts.push(text_part(exchange.text));
    }
    let finish = match exchange.tool_call {
        Some((name, arguments)) => {
            parts.push(json!({"type": "tool_call", "name": name, "arguments": arguments}));
            "tool_call"
        }
        None => "stop",
    };
    let output = json!([{"role": "assistant", "parts": parts, "finish_reason": finish}]);
    let mut out = Vec::with_capacity(3);
    if !system.is_empty() {
        let instructions: Vec<Value> = system.iter().map(|m| text_part(&m.content)).collect();
        out.push(KeyValue::new(
            "gen_ai.system_instructions",
            Value::Array(instructions).to_string(),
        ));
    }
    out.push(KeyValue::new(
        "gen_ai.input.messages",
        Value::Array(input).to_string(),
    ));
    out.push(KeyValue::new("gen_ai.output.messages", output.to_string()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value_of(attributes: &[KeyValue], key: &str) -> Option<Value> {
        attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| serde_json::from_str(&kv.value.as_str()).unwrap_or(Value::Null))
    }

    #[test]
    fn system_messages_are_the_instructions_and_the_rest_the_input() {
        let messages = [
            Message::system("be brief"),
            Message::user("DOCUMENT: {}"),
            Message::system("late rule"),
        ];
        let args = json!({"a": 1});
        let exchange = ModelExchange {
            messages: &messages,
            text: "",
            tool_call: Some(("add", &args)),
        };
        let attributes = attributes(&exchange);
        assert_eq!(
            value_of(&attributes, "gen_ai.system_instructions"),
            Some(json!([{"type": "text", "content": "be brief"}]))
        );
        assert_eq!(
            value_of(&attributes, "gen_ai.input.messages"),
            Some(json!([
                {"role": "user", "parts": [{"type": "text", "content": "DOCUMENT: {}"}]},
                {"role": "system", "parts": [{"type": "text", "content": "late rule"}]}
            ]))
        );
        assert_eq!(
            value_of(&attributes, "gen_ai.output.messages"),
            Some(json!([{"role": "assistant", "finish_reason": "tool_call",
                "parts": [{"type": "tool_call", "name": "add", "arguments": {"a": 1}}]}]))
        );
    }

    #[test]
    fn an_answer_in_text_finishes_with_stop_and_no_system_means_no_instructions() {
        let messages = [Message::user("hi")];
        let exchange = ModelExchange {
            messages: &messages,
            text: "{\"id\": [\"a\", \"b\"]}",
            tool_call: None,
        };
        let attributes = attributes(&exchange);
        assert_eq!(value_of(&attributes, "gen_ai.system_instructions"), None);
        assert_eq!(
            value_of(&attributes, "gen_ai.output.messages"),
            Some(json!([{"role": "assistant", "finish_reason": "stop",
                "parts": [{"type": "text", "content": "{\"id\": [\"a\", \"b\"]}"}]}]))
        );
    }
}
