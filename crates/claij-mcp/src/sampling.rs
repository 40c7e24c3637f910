//! A server's `sampling/createMessage` request read into what a model layer needs, and
//! the model's text written back as the spec's `CreateMessageResult`.

use claij_core::prompts::Message;
use serde_json::{Value, json};

/// What a server asks a model, read from the request's params.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SamplingRequest {
    /// The conversation: the server's `systemPrompt` first (as a system message), then
    /// its messages.
    pub messages: Vec<Message>,
    /// `maxTokens`.
    pub max_tokens: Option<u32>,
    /// `temperature`.
    pub temperature: Option<f32>,
    /// The names in `modelPreferences.hints`, in the server's order of preference.
    pub model_hints: Vec<String>,
}

impl SamplingRequest {
    /// Reads `params`. Only text content can be passed to a model here: image or audio
    /// content, or a message that is not `user` or `assistant`, is an error naming the
    /// message.
    pub fn from_params(params: &Value) -> Result<Self, String> {
        let mut messages = Vec::new();
        if let Some(system) = params["systemPrompt"].as_str().filter(|s| !s.is_empty()) {
            messages.push(Message::system(system));
        }
        let listed = params["messages"]
            .as_array()
            .ok_or("`messages` is missing or not an array")?;
        for (i, message) in listed.iter().enumerate() {
            let text = text_of(&message["content"])
                .map_err(|e| format!("`messages[{i}].content`: {e}"))?;
            messages.push(match message["role"].as_str() {
                Some("user") => Message::user(text),
                Some("assistant") => Message::assistant(text),
                other => {
                    return Err(format!(
                        "`messages[{i}].role` is {other:?}, not \"user\" or \"assistant\""
                    ));
                }
            });
        }
        Ok(Self {
            messages,
            max_tokens: params["maxTokens"]
                .as_u64()
                .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
            temperature: params["temperature"].as_f64().map(|t| t as f32),
            model_hints: params["modelPreferences"]["hints"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|h| h["name"].as_str().map(str::to_owned))
                .collect(),
        })
    }
}

/// The text of a content block, or of a list of them (joined by blank lines).
fn text_of(content: &Value) -> Result<String, String> {
    let block = |b: &Value| match b["type"].as_str() {
        Some("text") => b["text"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| "a text block without `text`".to_owned()),
        Some(kind) => Err(format!(
            "`{kind}` content cannot be passed to the model (only text)"
        )),
        None => Err("a content block without `type`".to_owned()),
    };
    match content {
        Value::Array(blocks) => Ok(blocks
            .iter()
            .map(block)
            .collect::<Result<Vec<_>, _>>()?
            .join("\n\n")),
        Value::Object(_) => block(content),
        _ => Err("missing".to_owned()),
    }
}

/// The spec's `CreateMessageResult` for `text` from `model`.
pub fn sampling_result(text: &str, model: &str) -> Value {
    json!({
        "role": "assistant",
        "content": {"type": "text", "text": text},
        "model": model,
        "stopReason": "endTurn",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use claij_core::prompts::Role;

    #[test]
    fn the_system_prompt_comes_first_and_text_blocks_are_read() {
        let request = SamplingRequest::from_params(&json!({
            "systemPrompt": "Be brief.",
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "Hello"}},
                {"role": "assistant", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}]}
            ],
            "maxTokens": 40,
            "temperature": 0.5,
            "modelPreferences": {"hints": [{"name": "claude-3-sonnet"}, {"name": "small"}]}
        }))
        .unwrap();
        let roles: Vec<Role> = request.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, [Role::System, Role::User, Role::Assistant]);
        assert_eq!(request.messages[2].content, "Hi\n\nthere");
        assert_eq!(request.max_tokens, Some(40));
        assert_eq!(request.temperature, Some(0.5));
        assert_eq!(request.model_hints, ["claude-3-sonnet", "small"]);
    }

    #[test]
    fn what_a_model_cannot_take_is_refused_with_its_place() {
        let image = json!({"messages": [{"role": "user", "content": {"type": "image", "data": "", "mimeType": "image/png"}}]});
        let e = SamplingRequest::from_params(&image).unwrap_err();
        assert!(
            e.contains("messages[0].content") && e.contains("image"),
            "{e}"
        );
        let role =
            json!({"messages": [{"role": "tool", "content": {"type": "text", "text": "x"}}]});
        let e = SamplingRequest::from_params(&role).unwrap_err();
        assert!(e.contains("messages[0].role"), "{e}");
        assert!(SamplingRequest::from_params(&json!({})).is_err());
    }

    #[test]
    fn the_result_has_the_spec_shape() {
        let r = sampling_result("ok", "embedded/smollm2-135m");
        assert_eq!(r["content"]["text"], "ok");
        assert_eq!(r["model"], "embedded/smollm2-135m");
        assert_eq!(r["role"], "assistant");
    }
}
