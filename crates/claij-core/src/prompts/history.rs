//! A run's history as visits: what a state did from entering it to leaving it (its
//! attempts, its tool-use loop's rounds, the transition that left it), each projected as
//! a [`Part`] whose forms are the visit in full, summarised, or as its result.

use std::borrow::Cow;
use std::fmt::Write as _;

use serde_json::Value;

use super::{Message, Part, Projector, document_text, is_llm, push_json, without_id};
use crate::fsm::{Fsm, Keep, Transition};
use crate::trail::TrailEntry;

/// How many characters of a call's arguments a summary quotes.
const ARGUMENTS_QUOTED: usize = 80;

/// One visit of a state: contiguous entries from it and from its tool-use loop's state.
pub(super) struct Visit<'t> {
    /// The state visited.
    pub(super) state: &'t str,
    /// The `mcp` state of its tool-use loop, if it has one.
    pub(super) tool_loop: Option<&'t str>,
    /// Its entries, in trail order (never empty).
    pub(super) entries: &'t [TrailEntry],
    /// Whether the visit is over: its last entry left the state (or a later entry belongs
    /// to another state).
    pub(super) left: bool,
}

impl<'t> Visit<'t> {
    /// The visit's last entry.
    pub(super) fn last(&self) -> &'t TrailEntry {
        // Visits are never empty (see `visits`).
        &self.entries[self.entries.len() - 1]
    }
}

/// Splits `trail` into visits. An entry continues the current visit when it comes from
/// the visited state or its tool-use loop and the entry before it did not leave: a
/// transition from the state to its loop, or from the loop back to the state, keeps the
/// visit going; any other transition ends it.
pub(super) fn visits<'t>(fsm: &'t Fsm, trail: &'t [TrailEntry]) -> Vec<Visit<'t>> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=trail.len() {
        let owner = &*trail[start].from;
        let tool_loop = fsm.tool_loop(owner).map(|h| &*h.id);
        let ends = |e: &TrailEntry| match e.to.as_deref() {
            Some(to) if e.failure.is_none() => {
                let inside = if *e.from == *owner {
                    Some(to) == tool_loop
                } else {
                    to == owner
                };
                !inside
            }
            _ => false,
        };
        let previous = &trail[i - 1];
        let continues = trail
            .get(i)
            .is_some_and(|e| (*e.from == *owner || Some(&*e.from) == tool_loop) && !ends(previous));
        if !continues {
            out.push(Visit {
                state: owner,
                tool_loop,
                entries: &trail[start..i],
                left: ends(previous) || i < trail.len(),
            });
            start = i;
        }
    }
    out
}

/// How many rounds `state`'s tool-use loop has made in the visit of `state` under way at
/// the end of `trail` (0 when `state` is not being visited, or has no loop).
pub fn tool_rounds(fsm: &Fsm, trail: &[TrailEntry], state: &str) -> usize {
    if trail.iter().any(crate::budget::is_pause) {
        let attempts: Vec<TrailEntry> = trail
            .iter()
            .filter(|e| !crate::budget::is_pause(e))
            .cloned()
            .collect();
        return tool_rounds(fsm, &attempts, state);
    }
    visits(fsm, &trail[super::chain_prefix(fsm, trail)..])
        .last()
        .filter(|v| !v.left && v.state == state)
        .map_or(0, |v| rounds(v).0.len())
}

/// A tool-use loop's rounds: each ends with the loop state's answer back to the visited
/// state; the entries after the last round (the state's own failed attempts, or its
/// result) are the rest.
fn rounds<'t>(visit: &Visit<'t>) -> (Vec<&'t [TrailEntry]>, &'t [TrailEntry]) {
    let mut rounds = Vec::new();
    let mut start = 0;
    if let Some(h) = visit.tool_loop {
        for (i, e) in visit.entries.iter().enumerate() {
            if *e.from == *h && e.failure.is_none() && e.to.as_deref() == Some(visit.state) {
                rounds.push(&visit.entries[start..=i]);
                start = i + 1;
            }
        }
    }
    (rounds, &visit.entries[start..])
}

impl Projector<'_, '_> {
    /// A finished visit: in full (its request, every attempt and round, its result),
    /// summarised (a [`summary`] then the result) or as its result alone, shown as the
    /// state's [`Keep`] says; it may collapse further, and be dropped unless it is
    /// `is_input` (its result leads into the state asked), when the result stays.
    pub(super) fn finished_visit(
        &mut self,
        visit: &Visit<'_>,
        input: Option<&Transition>,
        entered: Option<&TrailEntry>,
        is_input: bool,
    ) -> Part {
        let mut full: Vec<Message> = visit
            .entries
            .iter()
            .filter_map(|e| self.visit_message(visit, e, false))
            .collect();
        // The document the visit's request showed as its `Input:`: when the visit shows
        // smaller than in full (or shows nothing, its answer omitted), it stays as a
        // message of its own, so that later states still read it.
        let absorbed: Vec<Message> = entered
            .filter(|e| self.is_absorbed(e))
            .map(|e| Message::user(document_text(e)))
            .into_iter()
            .collect();
        // A model's visit shows the request it answered first (unless nothing of the
        // visit is shown: an omitted transition).
        if is_llm(self.fsm, visit.state) {
            if full.is_empty() {
                full.clone_from(&absorbed);
            } else {
                full.insert(0, Message::user(self.task(visit.state, input, entered)));
            }
        }
        let result: Vec<Message> = absorbed
            .iter()
            .cloned()
            .chain(self.visit_message(visit, visit.last(), false))
            .collect();
        let summarised: Vec<Message> = absorbed
            .iter()
            .cloned()
            .chain(summary(self.fsm, visit).map(Message::user))
            .chain(self.visit_message(visit, visit.last(), false))
            .collect();
        let shown = match self.fsm.keep(visit.state) {
            Keep::Full => full.clone(),
            Keep::Summary => summarised.clone(),
            Keep::Result => result.clone(),
        };
        let remnant = if is_input { result.clone() } else { Vec::new() };
        Part::new(full)
            .or(summarised)
            .or(result)
            .droppable(remnant)
            .showing_form(&shown)
    }

    /// The visit under way: its request (when the state is a model's), its tool rounds
    /// in full (all but the latest may shrink to their calls, then go: what fills a long
    /// loop's prompt is its results, and the model may still need them, so they give way
    /// only to a budget), then its latest attempts.
    pub(super) fn visit_under_way(
        &mut self,
        visit: &Visit<'_>,
        input: Option<&Transition>,
        entered: Option<&TrailEntry>,
    ) -> Vec<Part> {
        let mut parts = Vec::new();
        if is_llm(self.fsm, visit.state) {
            let request = self.task(visit.state, input, entered);
            parts.push(Part::new(vec![Message::user(request)]));
        }
        let (rounds, rest) = rounds(visit);
        let count = rounds.len();
        let used_up = self.opts.max_tool_rounds.is_some_and(|max| count >= max);
        for (i, round) in rounds.into_iter().enumerate() {
            let latest = i + 1 == count;
            let full: Vec<Message> = round
                .iter()
                .filter_map(|e| self.visit_message(visit, e, latest && used_up))
                .collect();
            if latest {
                parts.push(Part::new(full));
                continue;
            }
            let calls = round
                .iter()
                .filter(|e| *e.from == *visit.state && e.failure.is_none())
                .filter_map(|e| self.visit_message(visit, e, false))
                .chain(std::iter::once(results_left_out(round)))
                .collect();
            parts.push(Part::new(full).or(calls).droppable(Vec::new()));
        }
        let rest: Vec<Message> = rest
            .iter()
            .filter_map(|e| self.visit_message(visit, e, false))
            .collect();
        if !rest.is_empty() {
            parts.push(Part::new(rest));
        }
        parts
    }

    /// An entry of `visit`: a tool result inside its loop is the `Result:` alone (it
    /// answers the calls above it) and asks to go on, or (`last_call`: the loop's rounds
    /// are used up) to answer now; any other entry as [`Projector::entry_message`]
    /// renders it.
    fn visit_message(
        &mut self,
        visit: &Visit<'_>,
        entry: &TrailEntry,
        last_call: bool,
    ) -> Option<Message> {
        let in_loop = visit.tool_loop == Some(&*entry.from)
            && entry.failure.is_none()
            && entry.to.as_deref() == Some(visit.state);
        if !in_loop {
            return self.entry_message(entry);
        }
        let mut out = String::from("Result:\n");
        push_json(&mut out, &without_id(&said_once(&entry.event)));
        if last_call {
            let _ = write!(
                out,
                "\nThat was the last call `{}` may make: answer the request above now, with an \
                 `id` other than [\"{}\",\"{}\"].",
                visit.state, visit.state, entry.from
            );
        } else {
            // Answering named first, and further calls only for what the results lack:
            // told "make further calls, or answer", the default model, once it had called
            // a tool, called it again round after round until its last (measured on the
            // labelled set's doc-lookup; docs/EMBEDDED-MODEL.md, "The tool-use loop").
            out.push_str(
                "\nGo on with the request above: answer it from these results, or make \
                 further calls if they do not hold what it asks for.",
            );
        }
        Some(Message::user(out))
    }
}

/// A tool-use loop's results with each MCP tool result's `structuredContent` left out
/// where its `content` is there too: servers send the same data twice (the spec asks
/// for the structured result serialised as text as well), and a model needs it once.
fn said_once(event: &Value) -> Cow<'_, Value> {
    let duplicated = |r: &Value| {
        r.get("result").is_some_and(|res| {
            res.get("structuredContent").is_some()
                && res
                    .get("content")
                    .and_then(Value::as_array)
                    .is_some_and(|c| !c.is_empty())
        })
    };
    let Some(results) = event.get("results").and_then(Value::as_array) else {
        return Cow::Borrowed(event);
    };
    if !results.iter().any(duplicated) {
        return Cow::Borrowed(event);
    }
    let mut event = event.clone();
    if let Some(Value::Array(results)) = event.get_mut("results") {
        for r in results.iter_mut() {
            if duplicated(r)
                && let Some(Value::Object(res)) = r.get_mut("result")
            {
                res.shift_remove("structuredContent");
            }
        }
    }
    Cow::Owned(event)
}

/// The note standing for a collapsed round's results.
fn results_left_out(round: &[TrailEntry]) -> Message {
    let size: usize = round
        .iter()
        .filter(|e| e.failure.is_none())
        .map(|e| e.event.to_string().len())
        .max()
        .unwrap_or_default();
    Message::user(format!(
        "Result: (the results of the calls above, {size} characters, are no longer shown; \
         call again if you need them)"
    ))
}

/// What happened inside a visit: what the state's model wrote as it left the state (the
/// last entry's `summary`, `keep: {summary: PROMPT}`), else one line claij writes — the
/// calls its tool-use loop made (each named with its arguments, shortened) and its
/// failed attempts. `None` when there is nothing to say (a single attempt, no tool calls
/// and no summary written).
pub(super) fn summary(fsm: &Fsm, visit: &Visit<'_>) -> Option<String> {
    if let Some(written) = visit.last().summary.as_deref().map(str::trim) {
        return Some(format!("SUMMARY of `{}`: {written}", visit.state));
    }
    let calls: Vec<String> = visit
        .entries
        .iter()
        .filter(|e| {
            *e.from == *visit.state && e.failure.is_none() && e.to.as_deref() == visit.tool_loop
        })
        .flat_map(|e| requests(&e.event))
        .map(describe_call)
        .collect();
    let failures = visit.entries.iter().filter(|e| e.failure.is_some()).count();
    if calls.is_empty() && failures == 0 {
        return None;
    }
    let mut out = format!("SUMMARY of `{}`:", visit.state);
    if !calls.is_empty() {
        out.push_str(&format!(
            " {} tool call{} ({}).",
            calls.len(),
            if calls.len() == 1 { "" } else { "s" },
            calls.join("; ")
        ));
    }
    if failures > 0 {
        out.push_str(&format!(
            " {failures} failed attempt{}.",
            if failures == 1 { "" } else { "s" }
        ));
    }
    let what = if is_llm(fsm, visit.state) {
        "answer"
    } else {
        "result"
    };
    out.push_str(&format!(" Its {what} follows; the details are not shown."));
    Some(out)
}

/// The requests of a tool-use loop's call event: its `requests` batch, or the event
/// itself when it is a single request.
fn requests(event: &Value) -> Vec<&Value> {
    match event.get("requests").and_then(Value::as_array) {
        Some(batch) => batch.iter().collect(),
        None => vec![event],
    }
}

/// `NAME ARGUMENTS` for a request: the tool's name (or the resource's URI, or the method)
/// and its arguments as compact JSON, shortened.
fn describe_call(request: &Value) -> String {
    let params = request.get("params").unwrap_or(&Value::Null);
    let name = params
        .get("name")
        .or_else(|| params.get("uri"))
        .or_else(|| request.get("method"))
        .and_then(Value::as_str)
        .unwrap_or("call");
    let Some(arguments) = params.get("arguments").filter(|a| !a.is_null()) else {
        return name.to_owned();
    };
    let mut text = arguments.to_string();
    if text.chars().count() > ARGUMENTS_QUOTED {
        text = text.chars().take(ARGUMENTS_QUOTED).collect::<String>() + "…";
    }
    format!("{name} {text}")
}

#[cfg(test)]
mod tests;
