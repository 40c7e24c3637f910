//! The summary a state's model writes as it leaves the state (`keep: {summary: PROMPT}`):
//! later prompts read it in place of the state's visit (its request, its attempts, its
//! tool rounds). It is asked right after the answer that leaves, in the same
//! conversation, as free text; the trail entry of that answer records it, and its call's
//! tokens are added to the entry's usage (through the attempt's meter, as an optional call:
//! a budget that refuses it leaves claij's own summary line). The call goes through the layer like any
//! other, so `--record` and `--replay` hold it too.

use claij_core::prompts::Message;
use claij_core::{Fsm, State, Usage};
use serde_json::Value;

use claij_engine::Meter;

use crate::layer::{LlmLayer, ResolvedModel};
use crate::request::Decoding;
use crate::text::TextRequest;

/// The most tokens a summary may take.
const SUMMARY_MAX_TOKENS: u32 = 300;

/// The summary of the visit `event` ends, written by `model` after `conversation` (the
/// messages its answer answered): `None` when the state asks for none, when `event`
/// stays in the visit (a call to the state's tool-use loop), or when the call fails —
/// the answer stands then, and later prompts read claij's own summary line (a warning
/// is logged).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn write(
    layer: &LlmLayer,
    model: &ResolvedModel,
    fsm: &Fsm,
    state: &State,
    conversation: &[Message],
    event: &Value,
    decoding: Decoding,
    meter: &Meter,
) -> Option<(String, Usage)> {
    let prompt = state.summary_prompt.as_deref()?;
    let to = event
        .get("id")
        .and_then(|id| id.get(1))
        .and_then(Value::as_str);
    if to.is_some() && to == fsm.tool_loop(&state.id).map(|h| &*h.id) {
        return None;
    }
    let mut messages = conversation.to_vec();
    messages.push(Message::assistant(event.to_string()));
    messages.push(Message::user(format!(
        "SUMMARY REQUEST: {}\nWrite it as plain text, not JSON, in a few sentences: it stands \
         for this step in the rest of the conversation.",
        prompt.trim()
    )));
    let request = TextRequest {
        model: Some(model.name.clone()),
        run_model: None,
        messages,
        decoding: Decoding {
            max_tokens: Some(
                decoding
                    .max_tokens
                    .map_or(SUMMARY_MAX_TOKENS, |m| m.min(SUMMARY_MAX_TOKENS)),
            ),
            ..decoding
        },
    };
    // Optional: a budget that refuses it leaves claij's own line, not a stopped run.
    match layer.complete_text(request, &state.id, meter, true).await {
        Ok(answer) if !answer.text.trim().is_empty() => {
            Some((answer.text.trim().to_owned(), answer.usage))
        }
        Ok(_) => {
            tracing::warn!(state = %state.id, "the model wrote an empty summary");
            None
        }
        Err(e) => {
            tracing::warn!(state = %state.id, error = %e, "the summary could not be written");
            None
        }
    }
}
