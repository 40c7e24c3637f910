//! "I asked, I got": how the results of composed runs read in a parent's prompts.
//!
//! A model in the parent need not know that a sub-FSM or a fork of parallel branches
//! did the work: the event a `fsm` state emitted is shown as a question and its answer
//! (shaped by the trail mode: the result only, the question and the number of steps,
//! or every step), and the event a `fork` state emitted as one batch, a line per branch
//! in branch order. The events' layout is the one the engine's `fsm` and `fork` actions
//! write (`result` or `error`, `status`, `child` with `fsm`, `steps`, `first`, `last`,
//! `trail`; `branches`, `winner`).

use std::fmt::Write as _;

use serde_json::Value;

use crate::trail::without_id;

/// The action whose events are shown as a sub-FSM's result.
pub(crate) const FSM_ACTION: &str = "fsm";
/// The action whose events are shown as a batch of branch results.
pub(crate) const FORK_ACTION: &str = "fork";

/// What a `fsm` state's event reads as in its parent's prompts.
pub(crate) fn sub_fsm_text(event: &Value) -> String {
    let mut out = String::new();
    let child = event.get("child");
    asked(&mut out, child);
    if let Some(steps) = child.and_then(|c| c.get("trail")).and_then(Value::as_array) {
        out.push_str("Its steps:\n");
        for step in steps
            .iter()
            .filter(|s| s.get("to").is_some_and(|t| !t.is_null()))
        {
            let from = step.get("from").and_then(Value::as_str).unwrap_or("?");
            let to = step.get("to").and_then(Value::as_str).unwrap_or("?");
            let _ = write!(out, "- {from} -> {to}: ");
            match step.get("event") {
                Some(event) => push_json(&mut out, &without_id(event)),
                None => push_json(&mut out, &Value::Null),
            }
            out.push('\n');
        }
    }
    answer(&mut out, event);
    out
}

/// What a `fork` state's event reads as in its parent's prompts: one batch.
pub(crate) fn fork_text(event: &Value) -> String {
    let branches = event
        .get("branches")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "I asked {} {} in parallel and got:",
        branches.len(),
        if branches.len() == 1 {
            "question"
        } else {
            "questions"
        }
    );
    for (i, b) in branches.iter().enumerate() {
        let _ = write!(out, "{}.", i + 1);
        if let Some(fsm) = b.get("fsm").and_then(Value::as_str) {
            let _ = write!(out, " ({fsm})");
        }
        if let Some(first) = b
            .get("child")
            .and_then(|c| c.get("first"))
            .filter(|f| !f.is_null())
        {
            out.push_str(" asked ");
            push_json(&mut out, first);
            out.push(';');
        }
        match b.get("status").and_then(Value::as_str) {
            Some("completed") => {
                out.push_str(" got ");
                push_json(&mut out, b.get("result").unwrap_or(&Value::Null));
            }
            Some("cancelled") => out.push_str(" not needed (cancelled)"),
            status => {
                let _ = write!(out, " no answer ({})", status.unwrap_or("unknown"));
                if let Some(error) = b.get("error").and_then(Value::as_str) {
                    let _ = write!(out, ": {error}");
                }
            }
        }
        out.push('\n');
    }
    if let Some(w) = event.get("winner").and_then(Value::as_u64) {
        let _ = writeln!(out, "The first answer came from {}.", w + 1);
    }
    out
}

fn asked(out: &mut String, child: Option<&Value>) {
    let Some(child) = child else {
        return;
    };
    let name = child
        .get("fsm")
        .and_then(Value::as_str)
        .unwrap_or("a helper");
    let _ = write!(out, "I asked {name}");
    if let Some(steps) = child.get("steps").and_then(Value::as_u64) {
        let _ = write!(out, " ({steps} step{})", if steps == 1 { "" } else { "s" });
    }
    if let Some(first) = child.get("first").filter(|f| !f.is_null()) {
        out.push_str(": ");
        push_json(out, first);
    }
    out.push('\n');
}

fn answer(out: &mut String, event: &Value) {
    match event.get("result") {
        Some(result) => {
            out.push_str("I got: ");
            push_json(out, result);
        }
        None => {
            let status = event
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or("failed");
            let _ = write!(out, "I got no answer ({status})");
            if let Some(error) = event.get("error").and_then(Value::as_str) {
                let _ = write!(out, ": {error}");
            }
        }
    }
}

fn push_json(out: &mut String, value: &Value) {
    out.push_str(&value.to_string());
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn omit_shows_the_result_only() {
        let text = sub_fsm_text(&json!({"id": ["a", "b"], "result": {"n": 42}}));
        assert_eq!(text, "I got: {\"n\":42}");
    }

    #[test]
    fn a_failed_child_reads_as_no_answer() {
        let text = sub_fsm_text(&json!({
            "id": ["a", "b"], "status": "timeout", "error": "too slow",
            "child": {"fsm": "calc", "steps": 1, "first": {"x": 1}}
        }));
        assert_eq!(
            text,
            "I asked calc (1 step): {\"x\":1}\nI got no answer (timeout): too slow"
        );
    }
}
