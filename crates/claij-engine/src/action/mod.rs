//! The `Action` trait: what runs inside a state, what it sees of the run
//! ([`ActionInput`]) and of the engine running it ([`RunScope`], [`ActionHost`]).

use std::future::Future;
use std::pin::Pin;

use std::sync::Arc;
use std::time::Duration;

use claij_core::known_actions::ConfigRoute;
use claij_core::schema::{DynamicSchemas, SchemaError, effective_schema};
use claij_core::{
    ConfigIssue, FailureKind, Fsm, State, TrailEntry, Transition, TransitionSchema, Usage,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::observer::Observer;

mod scope;

pub use scope::{ActionHost, ChildRun, RunScope};

/// How long one attempt of an action may run unless someone says otherwise (the action
/// itself, through [`Action::default_timeout`], included): ten minutes.
pub const DEFAULT_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// How long a child FSM's attempt (`fsm`, `fork`) may run by default: an hour, since
/// the child's own states are bounded each.
pub const CHILD_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// A boxed, sendable future borrowing from `'a`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where an action sends the text it is producing as it comes (a model's tokens): to the
/// run's observers. Callable from any thread.
pub type TextSink = Arc<dyn Fn(&str) + Send + Sync>;

/// What an action sees: the run, the FSM, the state, the transition that led here, the
/// input event, the trail so far and the context.
#[derive(Clone, Copy)]
pub struct ActionInput<'a> {
    /// The run's id.
    pub run_id: &'a str,
    /// The FSM being run.
    pub fsm: &'a Fsm,
    /// The state whose action this is.
    pub state: &'a State,
    /// The transition that led into the state.
    pub input_transition: &'a Transition,
    /// The event that came with it.
    pub event: &'a Value,
    /// Everything appended so far (failures of earlier attempts included).
    pub trail: &'a [TrailEntry],
    /// The run's context.
    pub context: &'a Value,
    /// Which attempt this is, from 1.
    pub attempt: u32,
    /// The attempt's sequence number: the number of trail entries before it, pauses (for
    /// a budget, or calls lost in a crash) at the trail's end not counted — the sequence
    /// number its entry gets unless it was paused before.
    pub seq: u64,
    /// Cancelled when the run is interrupted; long-running actions should watch it.
    pub cancel: &'a CancellationToken,
    /// Resolves dynamic (string-named) transition schemas: the providers registered in
    /// the engine's [`ActionRegistry`](crate::ActionRegistry).
    pub schemas: &'a dyn DynamicSchemas,
    /// What the action may use to start runs of its own (sub-FSMs, branches).
    pub scope: RunScope<'a>,
    /// The run's observers (told of text an action produces as it comes).
    pub observers: &'a [Arc<dyn Observer>],
    /// Where the attempt's model calls go through: checked against the run tree's budget
    /// before they are made, recorded as in flight, charged once they answered (the
    /// attempt's trail entry records what they cost).
    pub meter: &'a crate::spend::Meter,
    /// The questions MCP servers put to a person during the attempt: answered from the
    /// run's answers at this state, or (durable runs) stopping the run until one is given.
    pub questions: &'a crate::questions::Questions,
}

impl<'a> ActionInput<'a> {
    /// Where to send text this action produces as it comes (a model's tokens), when an
    /// observer of the run wants it: each piece reaches them as `Observer::text_produced`.
    pub fn text_sink(&self) -> Option<TextSink> {
        let observers: Vec<Arc<dyn Observer>> = self
            .observers
            .iter()
            .filter(|o| o.wants_text())
            .cloned()
            .collect();
        if observers.is_empty() {
            return None;
        }
        let run_id = self.run_id.to_owned();
        let state = self.state.id.to_string();
        Some(Arc::new(move |text: &str| {
            for o in &observers {
                o.text_produced(&run_id, &state, text);
            }
        }))
    }

    /// The `traceparent` to send with `call` when the run is traced (see
    /// [`Observer::call_context`]): the first an observer gives.
    pub fn trace_context(&self, call: crate::Call) -> Option<String> {
        let site = self.call_site(call);
        self.observers.iter().find_map(|o| o.call_context(&site))
    }

    /// Where `call` is made: this attempt.
    fn call_site(&self, call: crate::Call) -> crate::CallSite<'_> {
        crate::CallSite {
            run_id: self.run_id,
            state: &self.state.id,
            attempt: self.attempt,
            call,
        }
    }

    /// Tells the observers that want it (see [`Observer::wants_content`]) what this
    /// attempt's model call was sent and answered.
    pub fn report_exchange(&self, exchange: &crate::ModelExchange<'_>) {
        let site = self.call_site(crate::Call::Model);
        for o in self.observers.iter().filter(|o| o.wants_content()) {
            o.model_exchanged(&site, exchange);
        }
    }

    /// A key that is the same every time this attempt is made again (after a crash, say):
    /// `RUN_ID:SEQ`. Actions with side effects use it to avoid doing them twice.
    pub fn idempotency_key(&self) -> String {
        format!("{}:{}", self.run_id, self.seq)
    }

    /// The key of this attempt's `n`th call of several (an `mcp` state's requests, counted
    /// from 0): `RUN_ID:SEQ:N`, the same every time the attempt is made again.
    pub fn call_key(&self, n: usize) -> String {
        format!("{}:{}:{n}", self.run_id, self.seq)
    }

    /// The effective schema of transition `t` (the engine's `id` const added; `$ref`s
    /// into the document's `schemas` left as they are), with a dynamic schema resolved
    /// through [`schemas`](Self::schemas).
    pub fn transition_schema(&self, t: &Transition) -> Result<Value, SchemaError> {
        if let Some(effective) = &t.effective {
            return Ok(effective.clone());
        }
        Ok(match &t.schema {
            TransitionSchema::Dynamic(name) => {
                let schema = self.schemas.resolve(name)?;
                effective_schema(&t.from, &t.to, Some(&schema))
            }
            TransitionSchema::Static(schema) => effective_schema(&t.from, &t.to, Some(schema)),
            TransitionSchema::Any => effective_schema(&t.from, &t.to, None),
        })
    }

    /// The transitions leaving the state, each with its effective schema
    /// ([`transition_schema`](Self::transition_schema)), in document order.
    pub fn outgoing_schemas(&self) -> Result<Vec<(&'a Transition, Value)>, SchemaError> {
        self.fsm
            .outgoing(&self.state.id)
            .map(|t| Ok((t, self.transition_schema(t)?)))
            .collect()
    }

    /// The failure entries of this state since it was entered, oldest first (pauses for a
    /// budget are not failures of the state).
    pub fn failures_here(&self) -> impl Iterator<Item = &TrailEntry> {
        let entered = self
            .trail
            .iter()
            .rposition(TrailEntry::is_transition)
            .map_or(0, |i| i + 1);
        self.trail[entered..]
            .iter()
            .filter(|e| e.failure.is_some() && !claij_core::budget::is_pause(e))
    }
}

/// What an action produced.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionOutput {
    /// The output event; its `id` names the transition it wants.
    pub event: Value,
    /// A replacement context, when the action changed it.
    pub context: Option<Value>,
    /// The model that produced the event, when one did.
    pub model: Option<String>,
    /// Tokens and cost, when a model was called (boxed, as in the trail entry: most
    /// outputs have none).
    pub usage: Option<Box<Usage>>,
    /// How the model's answer was held to the schemas, when a model was called
    /// (recorded in the trail entry).
    pub enforce: Option<String>,
    /// What the model wrote about the state's visit as it left it (`keep: {summary:
    /// PROMPT}`; recorded in the trail entry, read by later prompts in place of the
    /// visit).
    pub summary: Option<String>,
    /// The routes the answers voted for, when the state asked for a vote (`vote: k`;
    /// recorded in the trail entry).
    pub votes: Option<Vec<Value>>,
    /// Events to publish (a `publish` state): committed with the transition this output
    /// takes, in the same transaction, and dispatched by workers to the FSMs whose
    /// triggers subscribe to their topics.
    pub published: Vec<claij_core::store::Published>,
}

impl ActionOutput {
    /// An output that is just an event.
    pub fn event(event: Value) -> Self {
        Self {
            event,
            context: None,
            model: None,
            usage: None,
            enforce: None,
            summary: None,
            votes: None,
            published: Vec::new(),
        }
    }
}

/// What an attempt produced: an event, or a request to suspend the run until an event
/// arrives from outside (a person, a webhook).
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The output event.
    Emit(ActionOutput),
    /// Suspend the run: it waits (durably, in the store) for an input event taking one of
    /// the state's outgoing transitions.
    Suspend(Suspension),
}

impl From<ActionOutput> for Outcome {
    fn from(output: ActionOutput) -> Self {
        Outcome::Emit(output)
    }
}

/// How a suspended run waits.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Suspension {
    /// What the person is asked.
    pub prompt: Option<String>,
    /// How long the wait lasts, if it expires.
    pub expires_in: Option<std::time::Duration>,
    /// Where the run goes when the wait expires (needs a transition `[state, target]`);
    /// without it an expired wait fails the run.
    pub on_expiry: Option<String>,
    /// The child runs the run waits for (sub-FSMs, fork branches suspended for a
    /// person): resuming the run without input makes the state's action try again,
    /// and resuming one of these children continues the run once the child is done.
    pub children: Vec<String>,
}

/// An attempt that did not produce an event.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct ActionError {
    /// The failure kind recorded in the trail (`action`, `parse`, `timeout`, …).
    pub kind: FailureKind,
    /// The reason, in words (for a program: with the tail of its stderr).
    pub message: String,
    /// What was produced, if anything (kept in the trail for inspection and feedback).
    pub output: Value,
    /// false: trying again cannot help (no terminal to ask, say); the state gives up at once.
    pub retryable: bool,
    /// The model asked and what the call cost, when a model was called (recorded in
    /// the failure's trail entry). Boxed to keep errors small.
    pub model_call: Option<Box<ModelCall>>,
}

/// The model behind a failed attempt, and its usage.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCall {
    /// The model.
    pub model: String,
    /// Tokens and cost, when reported.
    pub usage: Option<Usage>,
    /// How the answer was held to the schemas, when the call was made.
    pub enforce: Option<String>,
}

impl ActionError {
    /// The action failed; trying again may help.
    pub fn failed(message: impl Into<String>) -> Self {
        Self {
            kind: FailureKind::Action,
            message: message.into(),
            output: Value::Null,
            retryable: true,
            model_call: None,
        }
    }

    /// The same error, recording the model that was asked and what the call cost.
    pub fn with_model(mut self, model: impl Into<String>, usage: Option<Usage>) -> Self {
        self.model_call = Some(Box::new(ModelCall {
            model: model.into(),
            usage,
            enforce: None,
        }));
        self
    }

    /// The same error, recording how the model's answer was held to the schemas (after
    /// [`with_model`](Self::with_model)).
    pub fn enforced(mut self, mode: impl Into<String>) -> Self {
        if let Some(call) = &mut self.model_call {
            call.enforce = Some(mode.into());
        }
        self
    }

    /// The output could not be parsed into an event.
    pub fn parse(message: impl Into<String>, output: impl Into<Value>) -> Self {
        Self {
            kind: FailureKind::Parse,
            message: message.into(),
            output: output.into(),
            retryable: true,
            model_call: None,
        }
    }

    /// The action cannot work in this setting; trying again cannot help.
    pub fn fatal(message: impl Into<String>) -> Self {
        Self {
            kind: FailureKind::Action,
            message: message.into(),
            output: Value::Null,
            retryable: false,
            model_call: None,
        }
    }
}

/// What runs inside a state. Implement it to add an action of your own and register it in
/// an [`ActionRegistry`](crate::ActionRegistry).
///
/// Non-serialisable resources (HTTP clients, connections) belong in the action value
/// itself or a registry it holds, never in the run's context. Cleanups run by `Drop`: when
/// a run is interrupted or an attempt times out, the action's future is dropped.
pub trait Action: Send + Sync + 'static {
    /// The JSON Schema of this action's `config` (the engine's keys `max_attempts`,
    /// `timeout` and `on_failure` removed). Checked when documents load.
    fn config_schema(&self) -> Value {
        serde_json::json!({"type": "object"})
    }

    /// Checks beyond the schema (a template that does not parse, say).
    fn check_config(&self, _config: &Value) -> Vec<ConfigIssue> {
        Vec::new()
    }

    /// The states this action may send a run to by itself, as `config` names them (see
    /// [`ConfigRoute`]); the loader checks that a transition [state, target] exists for
    /// each. None by default.
    fn routes(&self, _config: &Value) -> Vec<ConfigRoute> {
        Vec::new()
    }

    /// What each field of this action's `config` touches outside the run: files,
    /// programs, hosts, environment variables, models, MCP servers — or nothing.
    /// Required, so that no action is added without saying; a test fails for any field
    /// of a registered action's [`config_schema`](Self::config_schema) that no
    /// [`Field`](crate::capability::Field) covers (see [`crate::capability`]).
    fn touches(&self) -> &'static [crate::capability::Field];

    /// What one state's config would touch, each need where the document writes it: by
    /// default, the values at the fields [`touches`](Self::touches) names. Registration
    /// checks these against the operator's [`Policy`](crate::capability::Policy); the
    /// action asks the policy again when it runs.
    fn needs(&self, of: crate::capability::NeedsOf<'_>) -> Vec<crate::capability::Need> {
        of.from_fields(self.touches())
    }

    /// How long one attempt may run when neither the state, the document nor the
    /// operator says ([`ActionRegistry::attempt_limit`](crate::ActionRegistry::attempt_limit)):
    /// [`DEFAULT_ATTEMPT_TIMEOUT`] unless the action says otherwise; `None` only for an
    /// action whose attempts do not run (a person's wait, bounded by its own expiry).
    fn default_timeout(&self) -> Option<Duration> {
        Some(DEFAULT_ATTEMPT_TIMEOUT)
    }

    /// Runs one attempt.
    fn run<'a>(&'a self, input: ActionInput<'a>) -> BoxFuture<'a, Result<Outcome, ActionError>>;
}

/// The fields of `action`'s config schema that no [`Field`](crate::capability::Field) of
/// its [`touches`](Action::touches) covers, as JSON Pointers with `*` for members and
/// items: what a test fails on, so that no field is added without saying what it touches.
pub fn unclassified(action: &dyn Action) -> Vec<String> {
    crate::capability::unclassified_in(&action.config_schema(), action.touches())
}
