//! Trail to prompts: the pure projection of a run's trail into the messages a model is
//! sent, as described below (`claij prompt` shows it: docs/MODELS.md, "Seeing the
//! prompt"). Nothing here is stored: the prompt is recomputed from the FSM and the trail
//! each time a model is asked.
//!
//! The conversation is:
//!
//! 1. one **system** message ([`system_message`]), the same for every state of the FSM:
//!    the FSM's prompts (or one line asking for a JSON object), and a note on example
//!    turns when there are any;
//! 2. the example answers of every `llm` state that has any, in state order, as earlier
//!    turns: a **user** message `` EXAMPLE for `STATE` `` with the document answered (when
//!    given, as `Input:`), then the answer as the **assistant**'s, its `id` last. Like the
//!    system message, they are the same for every state, so they stay in the common
//!    prefix (measured: as turns they cost a third of the answers they cost inside the
//!    request, docs/EMBEDDED-MODEL.md);
//! 3. the run so far, visit by visit ([`project`]; a visit is what one state did from
//!    entering it to leaving it: its attempts, the rounds of its tool-use loop — an `mcp`
//!    state it calls and that answers back to it, [`Fsm::tool_loop`] — and the
//!    transition that left it). Within a visit, one message per trail entry:
//!    - a transition whose `[from, to]` is marked `omit` is skipped;
//!    - a transition produced by an `llm` state is an **assistant** message: the event as
//!      compact JSON; a model's visit starts with the request it answered (the state's
//!      request as it was then), said once however many attempts and tool rounds follow;
//!    - a transition from a state no model answers (the run's input, a program's result,
//!      a person's answer) into an `llm` state is shown **inside that state's request**,
//!      as its `Input:`, after what the state is asked to do, as a person asking a model
//!      plainly would write it;
//!    - an answer of another `llm` state that leads into an `llm` state stays the
//!      assistant's where it was written, and is shown again inside the request it leads
//!      into, as its `Input:`, so that the values a state works on sit next to its
//!      instruction (a small model otherwise copies numbers from its instruction over
//!      the ones an earlier step extracted; docs/EMBEDDED-MODEL.md, "Asked plainly");
//!    - a tool result inside the loop is a **user** message `Result:` and a line asking
//!      to go on with the request above (or, once the loop's
//!      [`max_tool_rounds`](PromptOptions::max_tool_rounds) are used up, to answer now);
//!    - any other transition is a **user** message: the document, headed `Input:` (from
//!      `start`) or `` Result of `STATE`: ``;
//!    - a failure is a **user** message with `FAILURE:`, its `ERRORS:` (each located) and
//!      the `REJECTED-OUTPUT:` (when there was one); a model's failure ends with a request
//!      to answer again to the request above it — the JSON Schema is stated once, in that
//!      request, not by every failure.
//!
//!    Documents never show their routing `id` (the route into a state was already taken;
//!    to a model it is noise) nor the schema they satisfy.
//!
//!    A finished visit shows as its state's [`Keep`](crate::fsm::Keep) says: in full, as
//!    a one-line summary of its tool calls and failed attempts then its result, or as
//!    its result alone (history.rs). The trail keeps everything; only what later steps
//!    read changes.
//! 4. for an `llm` state, one more **user** message, the request ([`task_message`]): the
//!    state's prompts, its input transition's prompts, its `Input:` (above), then the JSON
//!    Schema the answer must satisfy — alone when the answer is
//!    [`constrained`](PromptOptions::constrained) by a grammar or a provider's structured
//!    output (which write the `id`s themselves) and no route is described; otherwise after the `id` values the answer may
//!    carry, each with its transition's description, and followed by what such an answer
//!    looks like (a template: its fields in order, each a placeholder, its `id` last;
//!    `prompts/shape.rs`; not when constrained). Left out while the state's visit is under
//!    way (after its failure or its tool result), since the request above still stands.
//!
//! So a one-step question under a grammar is asked exactly as the plain baseline asks
//! it; what claij adds is the run's history, turn by turn, the routes' descriptions, and
//! failures fed back (measured against the plain baseline on held-out cases:
//! docs/EMBEDDED-MODEL.md, "Asked plainly").
//!
//! The conversation is a [`Projection`]: a caller with a token budget
//! (`max_prompt_tokens`) [shrinks](Projection::shrink) it, oldest history first —
//! finished visits to their summary then their result, old tool rounds to their calls,
//! then whole parts left out — never the system message, the state's input, its request,
//! its latest tool round or its failures.
//!
//! What a state is asked comes last, next to the answer it asks for: small models answer
//! the question at the end of a conversation (measured: routing after extraction at
//! chance while the state's prompts were in the system message, docs/EMBEDDED-MODEL.md).
//! And since the system message and every earlier message are rendered alike at every
//! step, each step's conversation extends the previous one's (unless a visit just left
//! collapses, or a budget shrinks the history), so an engine that keeps a prompt's
//! prefix computed computes only what is new.
//!
//! Schemas are written as compact JSON, whole: an answer's JSON Schema carries the shared
//! schemas it refers to (`{"$ref": "#/$defs/NAME"}`) as its own `$defs`, as a person
//! asking plainly would paste it (measured against a system message holding every shared
//! schema once: docs/EMBEDDED-MODEL.md, "Asked plainly").
//!
//! `omit` means "never shown in prompts": besides skipping omitted transitions in the
//! history, the routing rules and every answer's JSON Schema leave out omitted transitions
//! (an `on_failure` route the engine takes by itself, say), unless every transition
//! leaving the state is omitted, in which case all of them are shown so that a valid
//! answer remains possible.
//!
//! Adjacent messages may share a role (a failure followed by the next input, say);
//! provider clients that require alternating roles merge them.
//!
//! # Extension points
//!
//! Each entry is rendered by one private function per kind of entry (`transition_message`,
//! `failure_message`, `foreign_message`), chosen by `entry_message`. Composition is
//! done there:
//! - the event of a `fsm` state (a sub-FSM's result) and of a `fork` state (parallel
//!   branches' results) is shown as an "I asked, I got" summary ([`crate::synthesis`])
//!   in place of its document, so the model need not know it is
//!   inside an FSM;
//! - entries of another FSM heading the trail (a chain: the run continues an earlier
//!   run's trail; they come before this FSM's first entry) are shown
//!   as that conversation was: an entry a model produced (it names its `model`) as the
//!   assistant's, anything else as a user `Input:` document (failures with their reason), with
//!   no schemas, which belong to the other FSM.
//!
//! Visits, their forms and the tool loop's rounds are history.rs; the shrinkable
//! conversation is projection.rs; the plain baseline claij's projection is measured
//! against ([`Prompting::Plain`], `claij eval --baseline plain`) is plain.rs.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::{self, Write as _};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::fsm::{Fsm, Transition, TransitionSchema};
use crate::schema::{DynamicSchemas, effective_schema};
use crate::trail::{Failure, TrailEntry, without_id};

/// The action whose states are answered by a model: their events are the assistant's.
const LLM_ACTION: &str = "llm";

/// Who a message is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions: the FSM's prompts (and what EXAMPLE messages are).
    System,
    /// Everything the model did not produce: inputs, other actions' results, failures.
    User,
    /// What an `llm` state produced.
    Assistant,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        })
    }
}

/// One message of the conversation sent to a model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who it is from.
    pub role: Role,
    /// The text.
    pub content: String,
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self {
            role: Role::System,
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: content.into(),
        }
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: content.into(),
        }
    }
}

/// How to project a trail into prompts.
#[derive(Clone, Copy, Default)]
pub struct PromptOptions<'a> {
    /// Resolves dynamic (string-named) transition schemas. Without it, or when it fails,
    /// a dynamic schema is shown as `{"x-dynamic-schema": NAME}` with the `id` const.
    pub dynamic: Option<&'a dyn DynamicSchemas>,
    /// Whether the answer's shape is written by the decoder, not by the model reading a
    /// template: held to its schema token by token (the embedded model's `grammar` mode)
    /// or by the provider's structured output (`json_schema`). The request then leaves
    /// out the answer's template: the decoder writes that shape itself, and on the embedded 1.5B model the template cost answers
    /// (measured on the labelled set: expense 6/12 instead of 12/12, the model copying the
    /// first of an enum's listed values; docs/EMBEDDED-MODEL.md).
    pub constrained: bool,
    /// How many rounds a state's tool-use loop may make in one visit (the llm action's
    /// `max_tool_rounds`): after the last, its result says to answer now instead of
    /// asking to go on.
    pub max_tool_rounds: Option<usize>,
    /// How the model is asked: claij's projection (the default), or the plain baseline
    /// `claij eval --baseline plain` measures it against ([`Prompting`]).
    pub prompting: Prompting,
}

impl fmt::Debug for PromptOptions<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PromptOptions")
            .field("dynamic", &self.dynamic.map(|_| "<provider>"))
            .field("constrained", &self.constrained)
            .field("max_tool_rounds", &self.max_tool_rounds)
            .field("prompting", &self.prompting)
            .finish()
    }
}

/// The system message: the FSM's prompts (or, without any, "Answer with one JSON
/// object."), and what EXAMPLE messages are when the FSM has examples.
///
/// It is the same for every state of the FSM, and every earlier message of a run is
/// rendered the same way at every step, so each step's conversation begins with the
/// previous one's: an engine that keeps a prompt's prefix computed (llama.cpp, a
/// provider's prompt cache) computes only what is new. What a state is asked comes last,
/// in its [`task_message`].
pub fn system_message(fsm: &Fsm) -> String {
    let mut out = String::new();
    push_prompts(&mut out, &fsm.prompts);
    if out.is_empty() {
        out.push_str("Answer with one JSON object.");
    }
    if has_examples(fsm) {
        paragraph(&mut out);
        out.push_str(
            "Messages starting EXAMPLE show good answers of the named state to other \
             documents; they are not part of this conversation's case.",
        );
    }
    out
}

/// The request to a model answering in `state`, entered through `input` (the transition
/// that led into `state`, if known): the state's prompts, `input`'s prompts, then the JSON
/// Schema the answer must satisfy — under a grammar with no route described, alone;
/// otherwise after the `id` values the answer may carry, each with its transition's
/// description, and (without a grammar) followed by the answer's template. The input
/// document is not part of it (the conversation shows it inside the request:
/// [`project`]); nor are the state's example answers, earlier turns of the conversation
/// ([`trail_to_prompts`]).
pub fn task_message(
    fsm: &Fsm,
    state: &str,
    input: Option<&Transition>,
    opts: &PromptOptions,
) -> String {
    let output = render_output(fsm, state, opts);
    write_task_message(fsm, state, input, None, output.as_ref(), opts.constrained)
}

/// [`task_message`] with the state's output schema and answer template already rendered.
fn write_task_message(
    fsm: &Fsm,
    state: &str,
    input: Option<&Transition>,
    document: Option<&Value>,
    output: Option<&Output>,
    constrained: bool,
) -> String {
    let mut out = String::new();
    if let Some(s) = fsm.state(state) {
        push_prompts(&mut out, &s.prompts);
    }
    if let Some(t) = input {
        push_prompts(&mut out, &t.prompts);
    }
    if let Some(document) = document {
        paragraph(&mut out);
        out.push_str("Input:\n");
        push_json(&mut out, &without_id(document));
    }
    let routes = shown_outgoing(fsm, state);
    paragraph(&mut out);
    let Some(output) = output.filter(|_| !routes.is_empty()) else {
        let _ = write!(
            out,
            "No transition leaves `{state}`: no answer is expected."
        );
        return out;
    };
    let described = routes.iter().any(|t| {
        t.description
            .as_deref()
            .is_some_and(|d| !d.trim().is_empty())
    });
    if constrained && !described {
        out.push_str("Answer with one JSON object that satisfies this JSON Schema:\n");
        out.push_str(&output.schema);
        return out;
    }
    out.push_str(
        "Answer with one JSON object. Its `id` picks what happens next and must be one of:",
    );
    for t in &routes {
        out.push_str("\n- ");
        push_json(&mut out, &t.id_value);
        if let Some(d) = t
            .description
            .as_deref()
            .map(str::trim)
            .filter(|d| !d.is_empty())
        {
            out.push_str(": ");
            out.push_str(d);
        }
    }
    out.push_str("\n\nIt must satisfy this JSON Schema:\n");
    out.push_str(&output.schema);
    if !output.shape.is_empty() {
        out.push_str("\nAn answer looks like this, each <…> replaced by a value:");
        out.push_str(&output.shape);
    }
    out
}

/// The messages for a model answering in `state`: [`project`]'s conversation, every part
/// in the form it starts in.
pub fn trail_to_prompts(
    fsm: &Fsm,
    trail: &[TrailEntry],
    state: &str,
    opts: &PromptOptions,
) -> Vec<Message> {
    project(fsm, trail, state, opts).messages()
}

/// The conversation for a model answering in `state`, as the module documentation
/// describes: the [`system_message`], the states' example answers as earlier turns, the
/// run's history visit by visit (each finished visit as its state's [`Keep`](crate::fsm::Keep) says, the
/// older rounds of the current tool-use loop collapsed to their calls), and the
/// [`task_message`] of `state` (said once per visit, at its start; left out when the
/// visit is under way, since its failures and tool results answer to the request
/// above).
///
/// The [`Projection`] can [`shrink`](Projection::shrink) to fit a token budget.
///
/// Cheap: entries are read in place, never cloned; each state's schema is rendered once
/// per call however often it recurs.
pub fn project(fsm: &Fsm, trail: &[TrailEntry], state: &str, opts: &PromptOptions) -> Projection {
    // Pauses (for a budget, or calls lost in a crash) are not attempts: a run that went
    // on after one reads as if it had not stopped.
    if trail.iter().any(crate::budget::is_pause) {
        let attempts: Vec<TrailEntry> = trail
            .iter()
            .filter(|e| !crate::budget::is_pause(e))
            .cloned()
            .collect();
        return project(fsm, &attempts, state, opts);
    }
    if opts.prompting == Prompting::Plain {
        return plain::project(fsm, trail, state, opts);
    }
    let mut projector = Projector {
        fsm,
        opts,
        outputs: HashMap::new(),
        absorbed: Vec::new(),
        echoed: Vec::new(),
    };
    let mut head = vec![Message::system(system_message(fsm))];
    push_example_turns(&mut head, fsm);
    let mut parts = vec![Part::new(head)];
    let earlier = chain_prefix(fsm, trail);
    parts.extend(
        trail[..earlier]
            .iter()
            .filter_map(foreign_message)
            .map(|m| Part::new(vec![m]).droppable(Vec::new())),
    );
    let visits = history::visits(fsm, &trail[earlier..]);
    for pair in visits.windows(2) {
        projector.absorb(pair[0].last(), pair[1].state);
    }
    if is_llm(fsm, state)
        && let Some(last) = visits.last().filter(|v| v.left || v.state != state)
    {
        projector.absorb(last.last(), state);
    }
    let under_way = visits.last().is_some_and(|v| !v.left && v.state == state);
    // The visit whose result leads into `state`'s (current or next) visit: `state`'s
    // input, which may collapse but never goes.
    let input_visit = visits
        .len()
        .checked_sub(if under_way { 2 } else { 1 })
        .filter(|&i| visits[i].last().to.as_deref() == Some(state));
    let mut previous: Option<&TrailEntry> = None;
    for (i, visit) in visits.iter().enumerate() {
        let input = previous.and_then(|p| entered_through(fsm, p, visit.state));
        if visit.left {
            parts.push(projector.finished_visit(visit, input, previous, input_visit == Some(i)));
        } else {
            parts.extend(projector.visit_under_way(visit, input, previous));
        }
        previous = Some(visit.last());
    }
    if is_llm(fsm, state) && !under_way {
        let input = previous.and_then(|p| entered_through(fsm, p, state));
        let request = projector.task(state, input, previous);
        parts.push(Part::new(vec![Message::user(request)]));
    }
    Projection::new(parts)
}

/// How many entries head `trail` before `fsm`'s first: a chain's earlier runs' entries,
/// shown as that conversation was.
fn chain_prefix(fsm: &Fsm, trail: &[TrailEntry]) -> usize {
    trail
        .iter()
        .position(|e| e.fsm == fsm.id)
        .unwrap_or_default()
}

/// Whether `state` is answered by a model.
fn is_llm(fsm: &Fsm, state: &str) -> bool {
    fsm.state(state).is_some_and(|s| &*s.action == LLM_ACTION)
}

/// The transition `entry` took, when it led into `state`.
fn entered_through<'f>(fsm: &'f Fsm, entry: &TrailEntry, state: &str) -> Option<&'f Transition> {
    entry
        .to
        .as_deref()
        .filter(|to| *to == state)
        .and_then(|to| fsm.transition(&entry.from, to))
}

/// Whether `entries` holds `entry` itself (not an equal one).
fn holds(entries: &[*const TrailEntry], entry: &TrailEntry) -> bool {
    entries.iter().any(|e| std::ptr::eq(*e, entry))
}

/// Renders entries, remembering the schemas it has rendered.
struct Projector<'f, 'o> {
    fsm: &'f Fsm,
    opts: &'o PromptOptions<'o>,
    /// The entries shown inside the request of the `llm` state they lead into (as its
    /// `Input:`), not as messages of their own.
    absorbed: Vec<*const TrailEntry>,
    /// Another model state's answers that led into an `llm` state: shown as the
    /// assistant's where they were written, and again inside the request they lead into
    /// (as its `Input:`), so that the values a state is to work on sit next to its
    /// instruction.
    echoed: Vec<*const TrailEntry>,
    /// Rendered output schema and answer template per state (`None`: terminal or
    /// unknown).
    outputs: HashMap<String, Option<Output>>,
}

impl Projector<'_, '_> {
    /// The message for one entry, `None` when the entry is not shown. The place where
    /// composition ("I asked, I got") and collapsing a left state's traffic will hook in.
    fn entry_message(&mut self, entry: &TrailEntry) -> Option<Message> {
        if self.is_absorbed(entry) {
            return None;
        }
        match (&entry.failure, entry.to.as_deref()) {
            (Some(failure), _) => Some(self.failure_message(entry, failure)),
            (None, Some(to)) => self.transition_message(entry, to),
            // Neither a transition nor a failure: nothing to show.
            (None, None) => None,
        }
    }

    /// A transition taken: skipped when omitted; the assistant's event when an `llm`
    /// state produced it; otherwise a user message with schemas and document.
    fn transition_message(&mut self, entry: &TrailEntry, to: &str) -> Option<Message> {
        let fsm = self.fsm;
        let idx = fsm.transition_idx(&entry.from, to);
        let transition = idx.map(|i| &fsm.transitions[i]);
        if transition.is_some_and(|t| t.omit) {
            return None;
        }
        let from_llm = fsm
            .state(&entry.from)
            .is_some_and(|s| &*s.action == LLM_ACTION);
        if from_llm {
            return Some(Message::assistant(entry.event.to_string()));
        }
        let mut out = String::new();
        let composed = match fsm.state(&entry.from).map(|s| &*s.action) {
            Some(crate::synthesis::FSM_ACTION) => {
                Some(crate::synthesis::sub_fsm_text(&entry.event))
            }
            Some(crate::synthesis::FORK_ACTION) => Some(crate::synthesis::fork_text(&entry.event)),
            _ => None,
        };
        if let Some(text) = composed {
            out.push_str(text.trim_end());
            return Some(Message::user(out));
        }
        out.push_str(&document_text(entry));
        Some(Message::user(out))
    }

    /// A failed attempt: what went wrong, every error and the rejected output; for a
    /// model's failure, a request to answer again to the request above (which states the
    /// JSON Schema once, however many attempts fail).
    fn failure_message(&mut self, entry: &TrailEntry, failure: &Failure) -> Message {
        let mut out = String::new();
        let _ = write!(
            out,
            "FAILURE ({}, attempt {})",
            failure.kind, failure.attempt
        );
        let reason = failure.message.trim();
        if !reason.is_empty() {
            out.push_str(": ");
            out.push_str(reason);
        }
        if !failure.errors.is_empty() {
            out.push_str("\nERRORS:");
            for issue in &failure.errors {
                let at = if issue.instance_path.is_empty() {
                    "/"
                } else {
                    &issue.instance_path
                };
                let _ = write!(out, "\n- at {at}: {}", issue.message);
            }
        }
        if !entry.event.is_null() {
            out.push_str("\nREJECTED-OUTPUT: ");
            push_json(&mut out, &entry.event);
        }
        // A model's failure: its request (with the JSON Schema) is above, said once.
        if is_llm(self.fsm, &entry.from) {
            out.push_str(
                "\nAnswer again with exactly one JSON object that satisfies the JSON Schema of \
                 the request above.",
            );
        }
        Message::user(out)
    }

    /// The [`task_message`] of `state`, entered through `input`.
    fn task(
        &mut self,
        state: &str,
        input: Option<&Transition>,
        document: Option<&TrailEntry>,
    ) -> String {
        let fsm = self.fsm;
        let constrained = self.opts.constrained;
        let document = document
            .filter(|e| self.is_absorbed(e) || holds(&self.echoed, e))
            .map(|e| &e.event);
        write_task_message(fsm, state, input, document, self.output(state), constrained)
    }

    /// Shows `entry` inside the request of `state` when it is the input a non-model state
    /// (the run's start, a program, a person) handed to the model state `state`; when
    /// another model state answered it, shows it there too, keeping the answer where it
    /// was written.
    fn absorb(&mut self, entry: &TrailEntry, state: &str) {
        let fsm = self.fsm;
        let from = fsm.state(&entry.from).map(|s| &*s.action);
        let composed = matches!(
            from,
            Some(crate::synthesis::FSM_ACTION | crate::synthesis::FORK_ACTION)
        );
        let omitted = fsm.transition(&entry.from, state).is_some_and(|t| t.omit);
        if entry.failure.is_some()
            || entry.to.as_deref() != Some(state)
            || !is_llm(fsm, state)
            || composed
            || omitted
            || fsm.tool_loop(state).is_some_and(|h| *h.id == *entry.from)
        {
            return;
        }
        if !is_llm(fsm, &entry.from) {
            self.absorbed.push(entry as *const TrailEntry);
        } else if *entry.from != *state {
            self.echoed.push(entry as *const TrailEntry);
        }
    }

    /// Whether `entry` is shown inside the request it leads into.
    fn is_absorbed(&self, entry: &TrailEntry) -> bool {
        holds(&self.absorbed, entry)
    }

    /// What an answer from `state` must satisfy, rendered once per state (see
    /// [`render_output`]). `None` for terminal or unknown states.
    fn output(&mut self, state: &str) -> Option<&Output> {
        if !self.outputs.contains_key(state) {
            let rendered = render_output(self.fsm, state, self.opts);
            self.outputs.insert(state.to_owned(), rendered);
        }
        self.outputs.get(state).and_then(Option::as_ref)
    }
}

/// An entry of another FSM (one an earlier run of a chain made): the assistant's when a
/// model produced it, else a user message with the document, or the failure's reason.
fn foreign_message(entry: &TrailEntry) -> Option<Message> {
    if let Some(failure) = &entry.failure {
        let mut out = format!("FAILURE ({}, attempt {})", failure.kind, failure.attempt);
        if !failure.message.trim().is_empty() {
            out.push_str(": ");
            out.push_str(failure.message.trim());
        }
        return Some(Message::user(out));
    }
    entry.to.as_ref()?;
    if entry.model.is_some() {
        return Some(Message::assistant(entry.event.to_string()));
    }
    let mut out = String::from("Input:\n");
    push_json(&mut out, &without_id(&entry.event));
    Some(Message::user(out))
}

/// What an answer from a state must satisfy, rendered for its request.
struct Output {
    /// The answer's JSON Schema: the one shown outgoing transition's schema, or a `oneOf` of them.
    schema: String,
    /// What an answer looks like ([`shape::answer_shape`]): one template, with its `id`'s
    /// alternatives (`["a","b"] | ["a","c"]`) when the routes differ only by their `id`;
    /// else one line per route. Each line starts with a newline. Empty when the answer is
    /// [`constrained`](PromptOptions::constrained).
    shape: String,
}

/// See [`Output`]; `None` for terminal or unknown states.
fn render_output(fsm: &Fsm, state: &str, opts: &PromptOptions) -> Option<Output> {
    let routes = shown_outgoing(fsm, state);
    let schemas: Vec<Cow<Value>> = routes.iter().map(|t| transition_schema(t, opts)).collect();
    let mut whole = match schemas.as_slice() {
        [] => return None,
        [only] => only.clone().into_owned(),
        many => json!({"oneOf": many}),
    };
    let defs = referenced_defs(&whole, &fsm.schemas);
    if let (Value::Object(map), false) = (&mut whole, defs.is_empty()) {
        map.insert("$defs".into(), Value::Object(defs));
    }
    let schema = whole.to_string();
    if opts.constrained {
        return Some(Output {
            schema,
            shape: String::new(),
        });
    }
    // The `id`'s alternatives written as an `enum`'s are ("a" | "b"): a model without a
    // grammar copies a placeholder ("<one of the ids above>") or a route's last word.
    let placeholder = routes
        .iter()
        .map(|t| t.id_value.to_string())
        .collect::<Vec<_>>()
        .join(" | ");
    let anonymous: Vec<String> = schemas
        .iter()
        .map(|s| shape::answer_shape(s, &fsm.schemas, Some(&placeholder)))
        .collect();
    let shape = if schemas.len() > 1 && anonymous.iter().all(|a| *a == anonymous[0]) {
        format!("\n{}", anonymous[0])
    } else {
        schemas
            .iter()
            .map(|s| format!("\n{}", shape::answer_shape(s, &fsm.schemas, None)))
            .collect()
    };
    Some(Output { schema, shape })
}

/// The transitions leaving `state` that prompts show: those not marked `omit`, or all of
/// them when every one is (so that a valid answer remains possible).
fn shown_outgoing<'f>(fsm: &'f Fsm, state: &str) -> Vec<&'f Transition> {
    let shown: Vec<&Transition> = fsm.outgoing(state).filter(|t| !t.omit).collect();
    if shown.is_empty() {
        fsm.outgoing(state).collect()
    } else {
        shown
    }
}

/// A transition's schema as shown to a model: its effective schema, or for a dynamic
/// schema the provider's current schema with `id` added, or a placeholder naming it.
pub fn transition_schema<'t>(t: &'t Transition, opts: &PromptOptions) -> Cow<'t, Value> {
    if let Some(effective) = &t.effective {
        return Cow::Borrowed(effective);
    }
    match &t.schema {
        TransitionSchema::Dynamic(name) => {
            match opts.dynamic.map(|provider| provider.resolve(name)) {
                Some(Ok(schema)) => Cow::Owned(effective_schema(&t.from, &t.to, Some(&schema))),
                _ => Cow::Owned(json!({
                    "x-dynamic-schema": name,
                    "properties": {"id": {"const": t.id_value}},
                })),
            }
        }
        TransitionSchema::Static(schema) => {
            Cow::Owned(effective_schema(&t.from, &t.to, Some(schema)))
        }
        TransitionSchema::Any => Cow::Owned(effective_schema(&t.from, &t.to, None)),
    }
}

/// Whether any `llm` state of `fsm` carries example answers.
fn has_examples(fsm: &Fsm) -> bool {
    fsm.states
        .iter()
        .any(|s| &*s.action == LLM_ACTION && !s.examples.is_empty())
}

/// Appends the example answers of every `llm` state, in state order, as earlier turns of
/// the conversation: a user message `` EXAMPLE for `STATE` `` with the document answered
/// (when given), then the answer as the assistant's, its `id` last as an answer writes it.
/// They are the same for every state, so they stay in the prompt's common prefix.
fn push_example_turns(messages: &mut Vec<Message>, fsm: &Fsm) {
    for state in fsm.states.iter().filter(|s| &*s.action == LLM_ACTION) {
        for example in &state.examples {
            let mut request = format!("EXAMPLE for `{}`", state.id);
            if let Some(input) = &example.input {
                request.push_str("\nInput:\n");
                push_json(&mut request, &without_id(input));
            }
            messages.push(Message::user(request));
            let mut answer = example.output.clone();
            if let Value::Object(map) = &mut answer
                && let Some(id) = map.shift_remove("id")
            {
                map.insert("id".into(), id);
            }
            messages.push(Message::assistant(answer.to_string()));
        }
    }
}

/// The shared schemas `schema` refers to by `$ref`, and those they refer to in turn, in
/// the FSM's order: attached to the answer's JSON Schema as its `$defs`, so that the
/// schema a model reads is whole, as a person asking plainly would paste it.
fn referenced_defs(
    schema: &Value,
    defs: &serde_json::Map<String, Value>,
) -> serde_json::Map<String, Value> {
    fn refs<'v>(value: &'v Value, out: &mut Vec<&'v str>) {
        match value {
            Value::Object(map) => {
                if let Some(name) = map
                    .get("$ref")
                    .and_then(Value::as_str)
                    .and_then(|r| r.strip_prefix("#/$defs/"))
                {
                    out.push(name);
                }
                map.values().for_each(|v| refs(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }
    let mut pending = Vec::new();
    refs(schema, &mut pending);
    let mut seen: Vec<&str> = Vec::new();
    while let Some(name) = pending.pop() {
        if seen.contains(&name) {
            continue;
        }
        seen.push(name);
        if let Some(def) = defs.get(name) {
            refs(def, &mut pending);
        }
    }
    defs.iter()
        .filter(|(name, _)| seen.contains(&name.as_str()))
        .map(|(name, def)| (name.clone(), def.clone()))
        .collect()
}

/// A document a state no model answers handed on, as a user message shows it: `Input:`
/// (the run's input) or `` Result of `STATE`: ``, then the document without its `id`.
fn document_text(entry: &TrailEntry) -> String {
    let mut out = if *entry.from == *crate::fsm::START {
        String::from("Input:\n")
    } else {
        format!("Result of `{}`:\n", entry.from)
    };
    push_json(&mut out, &without_id(&entry.event));
    out
}

/// Appends each non-blank prompt as a paragraph.
fn push_prompts(out: &mut String, prompts: &[String]) {
    for prompt in prompts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
        paragraph(out);
        out.push_str(prompt);
    }
}

/// Starts a new paragraph unless `out` is empty.
fn paragraph(out: &mut String) {
    if !out.is_empty() {
        out.push_str("\n\n");
    }
}

/// Appends `value` as compact JSON.
fn push_json(out: &mut String, value: &impl Serialize) {
    // Serialising JSON values (string keys only) cannot fail.
    if let Ok(text) = serde_json::to_string(value) {
        out.push_str(&text);
    }
}

mod history;
mod plain;
mod projection;
mod shape;

pub use history::tool_rounds;
pub use plain::Prompting;
use projection::Part;
pub use projection::Projection;
#[cfg(test)]
mod tests;
