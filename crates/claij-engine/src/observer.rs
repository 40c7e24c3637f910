//! Observers: told of a run's start, each attempt, each trail entry as it is appended, and
//! its end (progress bars, live event streams, telemetry).
//!
//! Runs only: what happens around them — a server's callback deliveries, a worker's queue
//! — is reported by those surfaces through `tracing`, where telemetry's layer sees it.

use std::time::{Duration, SystemTime};

use claij_core::prompts::Message;
use claij_core::{Fsm, Question, State, TrailEntry};

use claij_core::store::RunStatus;

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

    /// Whether this observer wants [`model_exchanged`](Self::model_exchanged): what a
    /// model was sent and answered is handed over only when one does (a prompt may hold
    /// what its users would not send to a telemetry backend, so tracing asks for it only
    /// when told to).
    fn wants_content(&self) -> bool {
        false
    }

    /// A model call of an attempt (`call.call` is [`Call::Model`]) answered: the messages
    /// it was sent and what it answered. Called before the attempt's trail entry is
    /// appended.
    fn model_exchanged(&self, _call: &CallSite<'_>, _exchange: &ModelExchange<'_>) {}

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

    /// The run's position and the entries since the last were written to its store (a
    /// checkpoint; or the attempt to write them failed, `commit.error` says why).
    fn committed(&self, _run_id: &str, _commit: &Commit<'_>) {}
}

/// What a model call was sent and answered, as [`Observer::model_exchanged`] is told.
#[derive(Debug, Clone, Copy)]
pub struct ModelExchange<'a> {
    /// The messages the model was sent (the trail's projection, as fitted to the model).
    pub messages: &'a [Message],
    /// The text it answered (empty when it answered with a tool call only).
    pub text: &'a str,
    /// The tool it called and the arguments it gave, when it answered so.
    pub tool_call: Option<(&'a str, &'a serde_json::Value)>,
}

/// A checkpoint of a run, as [`Observer::committed`] is told of it.
#[derive(Debug, Clone, Copy)]
pub struct Commit<'a> {
    /// The entries it wrote.
    pub entries: usize,
    /// The run's status it wrote.
    pub status: RunStatus,
    /// When the write began.
    pub began: SystemTime,
    /// How long it took.
    pub took: Duration,
    /// Why it failed, when it did.
    pub error: Option<&'a str>,
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
    /// The attempt itself: its span, which the log lines written while it runs name (the
    /// engine's `attempt` tracing span carries it as its `traceparent` field).
    Attempt,
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
