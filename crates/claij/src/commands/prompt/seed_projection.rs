//! The seed-style projection (`claij prompt --projection seed`), to measure what claij's
//! own projection saves: the conversation as claij's design seeds built it. One system
//! message holds the full primer (the FSM's prompts, every state with its prompts, every
//! transition with its schema) and the routing rules; every later message carries its
//! schemas whole, shared definitions inlined: a document as the triple INPUT-SCHEMA,
//! DOCUMENT, OUTPUT-SCHEMA (of the state it goes to, when a model answers there), a
//! failure with the OUTPUT-SCHEMA again. Nothing is collapsed and nothing is said once.

use std::fmt::Write as _;

use claij_core::prompts::{Message, PromptOptions, transition_schema};
use claij_core::{DynamicSchemas, Fsm, TrailEntry, Transition};
use serde_json::{Value, json};

/// The seed-style conversation for a model answering in `state` after `trail`.
pub(super) fn seed_style(
    fsm: &Fsm,
    trail: &[TrailEntry],
    state: &str,
    dynamic: &dyn DynamicSchemas,
) -> Vec<Message> {
    let opts = PromptOptions {
        dynamic: Some(dynamic),
        ..PromptOptions::default()
    };
    let schema = |t: &Transition| inlined(fsm, &transition_schema(t, &opts));
    let output = |s: &str| {
        let routes: Vec<Value> = fsm.outgoing(s).filter(|t| !t.omit).map(&schema).collect();
        json!({ "oneOf": routes }).to_string()
    };
    let is_llm = |s: &str| fsm.state(s).is_some_and(|s| &*s.action == "llm");
    let mut messages = vec![Message::system(primer(fsm, &schema))];
    let mut asked = false;
    for entry in trail {
        if let Some(failure) = &entry.failure {
            let mut text = format!(
                "FAILURE ({}, attempt {}): {}",
                failure.kind, failure.attempt, failure.message
            );
            for issue in &failure.errors {
                let _ = write!(text, "\n- at {}: {}", issue.instance_path, issue.message);
            }
            if !entry.event.is_null() {
                let _ = write!(text, "\nREJECTED-OUTPUT: {}", entry.event);
            }
            if is_llm(&entry.from) {
                let _ = write!(text, "\nOUTPUT-SCHEMA: {}", output(&entry.from));
            }
            messages.push(Message::user(text));
            asked = is_llm(&entry.from);
            continue;
        }
        let Some(to) = entry.to.as_deref() else {
            continue;
        };
        let Some(t) = fsm.transition(&entry.from, to) else {
            continue;
        };
        if t.omit {
            continue;
        }
        if is_llm(&entry.from) {
            messages.push(Message::assistant(entry.event.to_string()));
            asked = false;
            continue;
        }
        let mut text = format!("INPUT-SCHEMA: {}\nDOCUMENT: {}", schema(t), entry.event);
        if is_llm(to) {
            let _ = write!(text, "\nOUTPUT-SCHEMA: {}", output(to));
        }
        messages.push(Message::user(text));
        asked = is_llm(to);
    }
    if is_llm(state) && !asked {
        messages.push(Message::user(format!("OUTPUT-SCHEMA: {}", output(state))));
    }
    messages
}

/// The system message: the FSM's prompts, every state and transition, the rules.
fn primer(fsm: &Fsm, schema: &dyn Fn(&Transition) -> Value) -> String {
    let mut out = fsm.prompts.join("\n\n");
    out.push_str("\n\nSTATES:");
    for s in &fsm.states {
        let _ = write!(out, "\n- {} ({})", s.id, s.action);
        if let Some(d) = &s.description {
            let _ = write!(out, ": {d}");
        }
        for p in &s.prompts {
            let _ = write!(out, "\n  {p}");
        }
    }
    out.push_str("\n\nTRANSITIONS:");
    for t in &fsm.transitions {
        let _ = write!(out, "\n- {}", t.id_value);
        if let Some(d) = &t.description {
            let _ = write!(out, ": {d}");
        }
        for p in &t.prompts {
            let _ = write!(out, "\n  {p}");
        }
        let _ = write!(out, "\n  SCHEMA: {}", schema(t));
    }
    out.push_str(
        "\n\nCRITICAL - The \"id\" field is a UNIQUE DISCRIMINATOR that determines routing:\n\
         - The \"id\" MUST be an array of exactly two strings, [from, to]\n\
         - The \"id\" value MUST match EXACTLY one of the const values specified in the \
         OUTPUT-SCHEMA options\n\
         IMPORTANT: The OUTPUT-SCHEMA is a oneOf with multiple options. Choose based on what \
         you need to do. Answer with exactly one JSON object that satisfies it.",
    );
    out
}

/// `schema` with the shared definitions inlined.
fn inlined(fsm: &Fsm, schema: &Value) -> Value {
    claij_llm::enforce::inline_refs(schema, &fsm.schemas, 0)
}
