//! The conversation claij sends a grammar-constrained model, for the embedded model's test
//! (tests/model.rs) and benchmark (benches/generate.rs), which include this file.

use claij_core::prompts::{PromptOptions, Role, trail_to_prompts};
use claij_embedded::Message;
use serde_json::Value;

/// The conversation claij sends a grammar-constrained model answering `state`, entered
/// through `input` by `event` (claij's own projection of a one-entry trail).
pub(crate) fn conversation(
    fsm: &claij_core::Fsm,
    state: &str,
    input: (&str, &str),
    event: &Value,
) -> Vec<Message> {
    let entry = claij_core::TrailEntry {
        seq: 0,
        fsm: fsm.id.clone(),
        version: fsm.version,
        from: input.0.into(),
        to: Some(input.1.into()),
        event: event.clone(),
        at: std::time::SystemTime::UNIX_EPOCH,
        attempt: 1,
        model: None,
        enforce: None,
        summary: None,
        votes: None,
        usage: None,
        duration_ms: None,
        failure: None,
    };
    let opts = PromptOptions {
        constrained: true,
        ..PromptOptions::default()
    };
    trail_to_prompts(fsm, &[entry], state, &opts)
        .into_iter()
        .map(|m| match m.role {
            Role::System => Message::system(m.content),
            Role::User => Message::user(m.content),
            Role::Assistant => Message::assistant(m.content),
        })
        .collect()
}
