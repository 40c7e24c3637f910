//! The plain baseline ([`Prompting::Plain`]): each model step asked the way a person asks
//! a model directly, with none of claij's conversation. `claij eval --baseline plain`
//! runs every case this way beside claij's own projection, with the same model file, the
//! same constraint and the same decoding, so that what claij's prompts add (or cost) is
//! measured in the same run (docs/EVAL.md, "The plain baseline").
//!
//! The conversation is:
//! 1. one **system** message: the FSM's prompts (or one line asking for a JSON object
//!    when it has none);
//! 2. one **user** message: the state's prompts and its input transition's, then
//!    `Input:` and the run's input, then (when the state reads something else) `Previous
//!    result:` and the document it was entered with, then the JSON Schema its answer
//!    must satisfy — the one the answer is held to, shared schemas attached — and
//!    nothing else: no history, no routing paragraph, no `id` on the documents;
//! 3. within the state's visit, what happened since: a tool call as the assistant's, its
//!    result as `Result:` and the line asking for a JSON answer, a rejected answer as the assistant's followed by why it was
//!    rejected and a request to answer again.

use serde_json::Value;

use super::history::{Visit, visits};
use super::projection::{Part, Projection};
use super::{Message, PromptOptions, chain_prefix, is_llm, push_json, push_prompts};
use crate::fsm::Fsm;
use crate::schema::with_defs;
use crate::trail::TrailEntry;

/// How the model is asked, one of the two ways `claij eval --baseline plain` compares.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Prompting {
    /// claij's projection of the trail (the module documentation of [`super`]).
    #[default]
    Claij,
    /// The plain baseline: one system message, one user message with the instruction,
    /// the input and the answer's JSON Schema (`claij eval --baseline plain`).
    Plain,
}

/// The plain conversation for a model answering in `state` (the module documentation).
/// `trail` holds no pauses (the caller filtered them).
pub(super) fn project(
    fsm: &Fsm,
    trail: &[TrailEntry],
    state: &str,
    opts: &PromptOptions,
) -> Projection {
    let trail = &trail[chain_prefix(fsm, trail)..];
    let mut system = String::new();
    push_prompts(&mut system, &fsm.prompts);
    if system.is_empty() {
        system.push_str("Answer with one JSON object.");
    }
    let visits = visits(fsm, trail);
    let under_way = visits.last().filter(|v| !v.left && v.state == state);
    let before = visits.len() - usize::from(under_way.is_some());
    let entered = visits[..before]
        .last()
        .map(Visit::last)
        .filter(|e| e.to.as_deref() == Some(state));
    let mut request = String::new();
    if let Some(s) = fsm.state(state) {
        push_prompts(&mut request, &s.prompts);
    }
    if let Some(t) = entered.and_then(|e| fsm.transition(&e.from, state)) {
        push_prompts(&mut request, &t.prompts);
    }
    let input = trail.first().filter(|e| e.failure.is_none());
    if let Some(input) = input {
        section(&mut request, "Input:", &input.event);
    }
    if let Some(entered) = entered.filter(|e| input.is_none_or(|i| !std::ptr::eq(*e, i))) {
        section(&mut request, "Previous result:", &entered.event);
    }
    if let Some(output) = super::render_output(fsm, state, opts) {
        let schema: Value = serde_json::from_str(&output.schema).unwrap_or(Value::Null);
        let schema = if output.schema.contains("#/$defs/") {
            with_defs(&schema, &fsm.schemas)
        } else {
            schema
        };
        section_text(
            &mut request,
            "Answer with one JSON object that satisfies this JSON Schema:",
            &schema,
        );
    }
    let mut messages = vec![Message::system(system), Message::user(request)];
    if let Some(visit) = under_way {
        for entry in visit.entries {
            messages.extend(visit_message(fsm, visit, entry));
        }
    }
    Projection::new(vec![Part::new(messages)])
}

/// What one entry of the visit under way adds: a tool call or a rejected answer as the
/// assistant's, a tool result or a rejection's reasons as the user's.
fn visit_message(fsm: &Fsm, visit: &Visit<'_>, entry: &TrailEntry) -> Vec<Message> {
    let from_model = is_llm(fsm, &entry.from);
    if let Some(failure) = &entry.failure {
        let mut out = Vec::new();
        if from_model && !entry.event.is_null() {
            out.push(Message::assistant(answer_text(&entry.event)));
        }
        let mut why = String::from("That answer was rejected");
        if !failure.message.trim().is_empty() {
            why.push_str(": ");
            why.push_str(failure.message.trim());
        }
        for issue in &failure.errors {
            why.push_str("\n- ");
            if !issue.instance_path.is_empty() {
                why.push_str(&issue.instance_path);
                why.push_str(": ");
            }
            why.push_str(&issue.message);
        }
        why.push_str("\nAnswer again with one JSON object that satisfies the schema.");
        out.push(Message::user(why));
        return out;
    }
    if *entry.from == *visit.state {
        return vec![Message::assistant(answer_text(&entry.event))];
    }
    let mut result = String::new();
    section(&mut result, "Result:", &entry.event);
    // The one line a person adds when pasting a result back: what the answer must be,
    // as after a rejection. Neither answering nor calling again is suggested: that choice
    // is claij's follow-up's craft, measured against this (docs/EVAL.md, "The plain
    // baseline"). Made to call first (`tool_choice: first`), the default model asked
    // this way calls again round after round, with this line or without it
    // (docs/EMBEDDED-MODEL.md, "The tool-use loop").
    result.push_str("\nAnswer with one JSON object that satisfies the schema.");
    vec![Message::user(result)]
}

/// An answer as the model wrote it.
fn answer_text(event: &Value) -> String {
    match event {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Appends a paragraph: `title`, then `document` as compact JSON without its `id`.
fn section(out: &mut String, title: &str, document: &Value) {
    let mut shown = document.clone();
    if let Value::Object(map) = &mut shown {
        map.shift_remove("id");
    }
    section_text(out, title, &shown);
}

/// Appends a paragraph: `title`, then `value` as compact JSON on the next line.
fn section_text(out: &mut String, title: &str, value: &Value) {
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str(title);
    out.push('\n');
    push_json(out, value);
}
