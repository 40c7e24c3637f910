//! Observers: told of a run's start, each attempt, each trail entry as it is appended, and
//! its end (progress bars, live event streams).

use std::time::SystemTime;

use claij_core::{Fsm, Question, State, TrailEntry};

use crate::run::RunStatus;

/// Receives a run's events as they happen. Every method has a no-op default. Observers
/// are called on the run's task: keep them quick.
pub trait Observer: Send + Sync {
    /// The run is under way in this process: started (with a store, once it is created
    /// there), or claimed from its store to continue. Before this, a start or resume can
    /// still be refused with nothing changed; after it, the run has its own life.
    fn run_started(&self, _run_id: &str) {}

    /// What [`run_started`](Self::run_started) says, with what the run is (called just
    /// before it): for observers that place runs in their tree, as traces do.
    fn run_began(&self, _run: &RunBegan<'_>) {}

    /// An attempt of `state` is starting.
    fn attempt_started(&self, _run_id: &str, _state: &State, _attempt: u32) {}

    /// Whether this observer wants [`text_produced`](Self::text_produced): actions stream
    /// what they produce (a model's tokens) only when one does.
    fn wants_text(&self) -> bool {
        false
    }

    /// An action is producing text (a model's tokens, as they come) in `state`; called
    /// from whatever thread produces it.
    fn text_produced(&self, _run_id: &str, _state: &str, _text: &str) {}

    /// An entry was appended to the trail.
    fn entry_appended(&self, _run_id: &str, _entry: &TrailEntry) {}

    /// An MCP server asked `question`, and the run is suspended on it (stored so) while
    /// this process holds the server's request open, until `until` at most: an answer
    /// given meanwhile, from any process, goes straight back to the server.
    fn question_held(&self, _run_id: &str, _question: &Question, _until: SystemTime) {}

    /// The run ended.
    fn run_finished(&self, _run_id: &str, _status: RunStatus) {}

    /// The W3C trace context (a `traceparent` value) to send with `call`, for an observer
    /// that traces runs: the called service's spans then join the run's trace, under the
    /// span this observer makes of the call. `None` (the default) sends none.
    fn call_context(&self, _call: &CallSite<'_>) -> Option<String> {
        None
    }
}

/// A call an action is about to make during an attempt, as
/// [`Observer::call_context`] is asked about it.
#[derive(Debug, Clone, Copy)]
pub struct CallSite<'a> {
    /// The run.
    pub run_id: &'a str,
    /// The state whose attempt makes the call.
    pub state: &'a str,
    /// The attempt, from 1.
    pub attempt: u32,
    /// What the call is.
    pub call: Call,
}

/// What a call an attempt makes is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Call {
    /// The attempt's model call (every round of it, when it calls tools).
    Model,
    /// The attempt's `n`th MCP request (from 0, in the order of its event's `requests`).
    Request(usize),
}

/// A run under way in this process, as [`Observer::run_began`] is told of it.
#[derive(Debug, Clone, Copy)]
pub struct RunBegan<'a> {
    /// The run.
    pub run_id: &'a str,
    /// The definition it runs.
    pub fsm: &'a Fsm,
    /// Its parent, for a child run (a sub-FSM, a branch, a chain's link).
    pub parent: Option<&'a str>,
    /// Whether it was taken up again (resumed, continued after a crash, claimed by a
    /// worker) rather than started.
    pub resumed: bool,
}
