//! The trail: a run's append-only audit log, one entry per attempt. The current state,
//! the last event and the run's cost are derived from it; prompts are projected from it.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::schema::ValidationIssue;

/// One entry: a transition taken (it has `to`) or a failed attempt (it has `failure`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrailEntry {
    /// Position in the trail, from 0.
    pub seq: u64,
    /// The FSM's id.
    pub fsm: Arc<str>,
    /// The FSM's version.
    pub version: u32,
    /// The state that produced the event (`start` for the input).
    pub from: Arc<str>,
    /// The state the event went to; absent on failures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Arc<str>>,
    /// The event (for failures: what was produced, if anything).
    #[serde(default)]
    pub event: Value,
    /// When the entry was appended (RFC 3339, UTC).
    #[serde(with = "rfc3339")]
    pub at: SystemTime,
    /// Which attempt of the state this was, from 1.
    pub attempt: u32,
    /// The model that produced the event, when a model did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// How the model's answer was held to the schemas (`prompt`, `json_schema`, `tools`,
    /// `grammar`), when a model was called: a model that keeps failing in a weak mode is
    /// asked again in a stronger one, and each attempt says which it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforce: Option<String>,
    /// What the model wrote about its visit of the state as it left it, when the state's
    /// `keep` asks it to (`keep: {summary: PROMPT}`): later prompts read it in place of
    /// the visit. Its call's tokens are in `usage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The routes a state's answers voted for, when its `vote: k` asked for several
    /// (each answer's `id` in the order they were sampled, `null` for one that did not
    /// parse); the event is the first answer for the route most voted for. Their calls'
    /// tokens are in `usage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub votes: Option<Vec<Value>>,
    /// Tokens and cost, when a model was called.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Box<Usage>>,
    /// How long the attempt took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Why the attempt failed; absent on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Box<Failure>>,
}

impl TrailEntry {
    /// Whether this entry records a transition taken.
    pub fn is_transition(&self) -> bool {
        self.to.is_some()
    }
}

/// Tokens and cost of one model call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Prompt tokens served from a provider's cache, where reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// Cost in US dollars, where a price is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Transient failures (429, 5xx, connection errors, timeouts) retried within this
    /// attempt before the model answered; they cost no validation attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_retries: Option<u32>,
    /// How many model calls this usage adds up when more than one (a state's answer and
    /// the summary its model wrote, or the sampling calls an MCP server made during a tool
    /// call); absent: one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<u32>,
}

impl Usage {
    /// Adds another call's (or calls') usage to this one.
    pub fn add(&mut self, u: &Usage) {
        let calls = self.calls.unwrap_or(1) + u.calls.unwrap_or(1);
        self.input_tokens += u.input_tokens;
        self.output_tokens += u.output_tokens;
        if let Some(c) = u.cached_tokens {
            *self.cached_tokens.get_or_insert(0) += c;
        }
        if let Some(c) = u.cost_usd {
            *self.cost_usd.get_or_insert(0.0) += c;
        }
        if let Some(r) = u.http_retries {
            *self.http_retries.get_or_insert(0) += r;
        }
        self.calls = Some(calls);
    }
}

/// The kinds of failure an attempt can end in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// The event did not satisfy its transition's schema.
    Validation,
    /// The event named a transition that does not leave this state.
    UnknownTransition,
    /// The output could not be parsed as a JSON event.
    Parse,
    /// The action itself failed (a program exited non-zero, a call errored).
    Action,
    /// The attempt (or the run) ran out of time.
    Timeout,
    /// The run was interrupted.
    Interrupted,
    /// The run stopped for its budget (tokens, cost, calls, time) before a model call
    /// that could go past it: a pause, not an attempt (see `budget::is_pause`).
    Budget,
    /// The run stopped for a question an MCP server asked a person (the entry's event is
    /// the [`Question`](crate::Question)): a pause, not an attempt.
    Question,
    /// The answer the run was given to its question (the entry's event is
    /// `{"question", "answer"}`, the answer as MCP's `ElicitResult`): a pause, not an
    /// attempt; the state's attempt made again after it is answered from it.
    Answer,
    /// The run was moved to another version of its FSM (the entry's event is the
    /// [`MigrationEvent`](crate::migration::MigrationEvent)): a pause, not an attempt.
    Migrated,
    /// The run took the most steps it may (`config.max_steps`,
    /// [`Fsm::max_steps`](crate::Fsm::max_steps)): it ends `failed` in the state it
    /// entered, with no attempt made there.
    Steps,
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FailureKind::Validation => "validation",
            FailureKind::UnknownTransition => "unknown-transition",
            FailureKind::Parse => "parse",
            FailureKind::Action => "action",
            FailureKind::Timeout => "timeout",
            FailureKind::Interrupted => "interrupted",
            FailureKind::Budget => "budget",
            FailureKind::Question => "question",
            FailureKind::Answer => "answer",
            FailureKind::Migrated => "migrated",
            FailureKind::Steps => "steps",
        })
    }
}

/// Why an attempt failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    /// What kind of failure.
    pub kind: FailureKind,
    /// The reason, in words.
    pub message: String,
    /// Every validation error, for `validation` failures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<ValidationIssue>,
    /// Which attempt failed, from 1.
    pub attempt: u32,
}

mod rfc3339 {
    use std::time::SystemTime;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(at: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&humantime::format_rfc3339_micros(*at))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_rfc3339_weak(&text).map_err(serde::de::Error::custom)
    }
}

/// `event` without its routing `id` (the route it took, which a reader of its content has
/// no use for), its other fields in their order.
pub fn without_id(event: &Value) -> Cow<'_, Value> {
    match event {
        Value::Object(map) if map.contains_key("id") => {
            let mut map = map.clone();
            map.shift_remove("id");
            Cow::Owned(Value::Object(map))
        }
        other => Cow::Borrowed(other),
    }
}

/// The event of the last transition taken, if any.
pub fn last_event(trail: &[TrailEntry]) -> Option<&Value> {
    trail
        .iter()
        .rev()
        .find(|e| e.is_transition())
        .map(|e| &e.event)
}

/// The run's total usage: the sum over every entry that reports one.
pub fn total_usage(trail: &[TrailEntry]) -> Usage {
    let mut sum: Option<Usage> = None;
    for u in trail.iter().filter_map(|e| e.usage.as_deref()) {
        match &mut sum {
            Some(sum) => sum.add(u),
            None => sum = Some(u.clone()),
        }
    }
    sum.unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_event_without_its_id_keeps_its_fields_in_their_order() {
        let event = json!({"id": ["a", "b"], "x": 1, "y": 2, "z": 3});
        assert_eq!(without_id(&event).to_string(), r#"{"x":1,"y":2,"z":3}"#);
        // Nothing to take out: the event itself, not a copy.
        let plain = json!({"x": 1});
        assert!(matches!(without_id(&plain), Cow::Borrowed(_)));
        assert!(matches!(without_id(&json!("text")), Cow::Borrowed(_)));
    }

    #[test]
    fn entries_round_trip_in_the_documented_shape() {
        let e = TrailEntry {
            seq: 8,
            fsm: "code-review".into(),
            version: 3,
            from: "reviewer".into(),
            to: None,
            event: json!({"id": ["reviewer", "chairman"]}),
            at: SystemTime::UNIX_EPOCH,
            attempt: 1,
            model: None,
            usage: None,
            enforce: None,
            summary: None,
            votes: None,
            duration_ms: Some(3),
            failure: Some(Box::new(Failure {
                kind: FailureKind::UnknownTransition,
                message: "no".into(),
                errors: vec![],
                attempt: 1,
            })),
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["failure"]["kind"], "unknown-transition");
        assert_eq!(v["at"], "1970-01-01T00:00:00.000000Z");
        assert!(v.get("to").is_none());
        let back: TrailEntry = serde_json::from_value(v).unwrap();
        assert_eq!(back, e);
    }
}
