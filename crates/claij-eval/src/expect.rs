//! Checking a run against a case's expectations, and what its trail says: model steps,
//! attempts, tools called, and why a failed case failed.

use claij_core::{FailureKind as AttemptFailure, Fsm, RunStatus, TrailEntry};
use serde_json::Value;

use crate::cases::{Expect, ValueTest};
use crate::report::FailureKind;

/// What a run came to, as the expectations see it.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// The FSM that ran.
    pub fsm: &'a Fsm,
    /// How the run ended.
    pub status: RunStatus,
    /// The state it ended in.
    pub state: &'a str,
    /// Its trail.
    pub trail: &'a [TrailEntry],
}

impl Observed<'_> {
    /// The final event: the event of the last transition taken.
    pub fn final_event(&self) -> Option<&Value> {
        claij_core::trail::last_event(self.trail)
    }
}

/// An expectation that did not hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Miss {
    /// A tool that was not called (refused tool use) or anything else (a wrong answer).
    pub tool: bool,
    /// What was expected and what was found.
    pub message: String,
}

/// Every expectation (but the judge) that does not hold of `run`.
pub fn check(expect: &Expect, run: &Observed<'_>) -> Vec<Miss> {
    let mut misses = Vec::new();
    let mut miss = |message: String| {
        misses.push(Miss {
            tool: false,
            message,
        })
    };
    if let Some(status) = expect.status
        && status != run.status
    {
        miss(format!("status: expected {status}, got {}", run.status));
    }
    if let Some(state) = &expect.state
        && state != run.state
    {
        miss(format!("state: expected `{state}`, got `{}`", run.state));
    }
    let event = run.final_event().unwrap_or(&Value::Null);
    for check in &expect.values {
        match check.path.find(event) {
            None => miss(format!(
                "{}: no value there (expected it {})",
                check.path, check.test
            )),
            Some(found) if !holds(&check.test, found) => miss(format!(
                "{}: expected it {}, got {found}",
                check.path, check.test
            )),
            Some(_) => {}
        }
    }
    if let Some(max) = expect.max_attempts {
        let n = attempts(run.fsm, run.trail);
        if n > u64::from(max) {
            miss(format!(
                "attempts: expected at most {max}, the run made {n}"
            ));
        }
    }
    let calls = tools_called(run.fsm, run.trail);
    for tool in &expect.tool_called {
        if calls.answered.contains(tool) {
            continue;
        }
        let failed: Vec<&str> = calls
            .failed
            .iter()
            .filter(|(t, _)| t == tool)
            .map(|(_, why)| why.as_str())
            .collect();
        let message = if !failed.is_empty() {
            format!(
                "tool `{tool}` was called but never answered with a result ({})",
                failed.join("; ")
            )
        } else if calls.answered.is_empty() {
            format!("tool `{tool}` was not called (no tool was called)")
        } else {
            format!(
                "tool `{tool}` was not called (called: {})",
                calls.answered.join(", ")
            )
        };
        misses.push(Miss {
            tool: true,
            message,
        });
    }
    misses
}

fn holds(test: &ValueTest, found: &Value) -> bool {
    match test {
        ValueTest::Equals(v) => json_equal(v, found),
        ValueTest::OneOf(vs) => vs.iter().any(|v| json_equal(v, found)),
        ValueTest::Pattern(re) => found.as_str().is_some_and(|s| re.is_match(s)),
        ValueTest::Number { number, tolerance } => found
            .as_f64()
            .is_some_and(|n| (n - number).abs() <= *tolerance),
    }
}

/// Equality where `1` and `1.0` are the same number.
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

/// Whether an entry is the engine's own: the input, or the event of an `on_failure`
/// route (attempts ran out).
fn by_engine(e: &TrailEntry) -> bool {
    &*e.from == claij_core::START || gave_up(e).is_some()
}

/// The failure carried by an `on_failure` route's event, when `e` is one.
fn gave_up(e: &TrailEntry) -> Option<AttemptFailure> {
    if e.to.is_none() || e.model.is_some() || e.duration_ms.is_some() {
        return None;
    }
    if e.event.get("state").and_then(Value::as_str) != Some(&*e.from) {
        return None;
    }
    serde_json::from_value(e.event.get("failure")?.get("kind")?.clone()).ok()
}

/// Attempts in the run: every entry an action produced (transitions and failures).
pub fn attempts(_fsm: &Fsm, trail: &[TrailEntry]) -> u64 {
    trail.iter().filter(|e| !by_engine(e)).count() as u64
}

/// Whether `e` was produced by a model (an `llm` state's attempt).
fn by_model(fsm: &Fsm, e: &TrailEntry) -> bool {
    if by_engine(e) {
        return false;
    }
    match fsm.state(&e.from) {
        Some(s) => &*s.action == "llm",
        None => e.model.is_some(),
    }
}

/// Model steps, the steps whose first attempt validated, and the attempts of all of them.
pub fn model_steps(fsm: &Fsm, trail: &[TrailEntry]) -> (u64, u64, u64) {
    let (mut steps, mut first_try, mut attempts) = (0, 0, 0);
    for e in trail.iter().filter(|e| by_model(fsm, e)) {
        attempts += 1;
        if e.attempt == 1 {
            steps += 1;
            if e.is_transition() {
                first_try += 1;
            }
        }
    }
    (steps, first_try, attempts)
}

/// The tools a run called: those that answered with a result, and the calls that failed
/// (tool, error message).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolCalls {
    /// Tools that answered with a result (each once, in call order).
    pub answered: Vec<String>,
    /// Calls answered with an error: the tool and the message.
    pub failed: Vec<(String, String)>,
}

/// The tools the run called: `tools/call` requests taken into an `mcp` state, and the
/// state's answer to each (its results, in request order).
pub fn tools_called(fsm: &Fsm, trail: &[TrailEntry]) -> ToolCalls {
    let mcp = |state: &str| fsm.state(state).is_some_and(|s| &*s.action == "mcp");
    let mut calls = ToolCalls::default();
    for (i, e) in trail.iter().enumerate() {
        let Some(to) = e.to.as_deref().filter(|t| mcp(t)) else {
            continue;
        };
        let requests: Vec<&Value> = match e.event.get("requests") {
            Some(Value::Array(rs)) => rs.iter().collect(),
            _ => vec![&e.event],
        };
        let answer = trail[i + 1..]
            .iter()
            .find(|a| &*a.from == to && a.is_transition());
        let results = answer.and_then(|a| a.event.get("results").and_then(Value::as_array));
        for (k, request) in requests.iter().enumerate() {
            if request.get("method").and_then(Value::as_str) != Some("tools/call") {
                continue;
            }
            let Some(name) = request.pointer("/params/name").and_then(Value::as_str) else {
                continue;
            };
            let result = results.and_then(|r| r.get(k));
            match result {
                Some(r) if r.get("error").is_none() && r.get("result").is_some() => {
                    if !calls.answered.iter().any(|c| c == name) {
                        calls.answered.push(name.to_owned());
                    }
                }
                _ => {
                    let why = result
                        .and_then(|r| r.pointer("/error/message"))
                        .and_then(Value::as_str)
                        .unwrap_or("no answer")
                        .to_owned();
                    calls.failed.push((name.to_owned(), why));
                }
            }
        }
    }
    calls
}

/// Why a case whose expectations did not hold failed: the run gave up (its last failure
/// says how: out of time, the provider failed, or the output never validated), else a
/// tool that was not called, else a wrong answer.
pub fn classify(run: &Observed<'_>, misses: &[Miss]) -> FailureKind {
    let gave_up = match run.status {
        RunStatus::Completed => run
            .trail
            .iter()
            .rev()
            .find_map(|e| gave_up(e).map(|k| (k, last_failure_before(run.trail, e.seq)))),
        _ => run
            .trail
            .iter()
            .rev()
            .find(|e| e.failure.is_some())
            .and_then(|e| e.failure.as_ref().map(|f| (f.kind, Some(e)))),
    };
    if let Some((kind, entry)) = gave_up {
        return match kind {
            AttemptFailure::Timeout => FailureKind::Timeout,
            AttemptFailure::Validation
            | AttemptFailure::Parse
            | AttemptFailure::UnknownTransition => FailureKind::InvalidOutput,
            // A model call that failed before the model answered: the provider failed.
            AttemptFailure::Action
                if entry.is_some_and(|e| e.model.is_some() && e.usage.is_none()) =>
            {
                FailureKind::ProviderError
            }
            _ => FailureKind::Error,
        };
    }
    if run.status != RunStatus::Completed {
        return FailureKind::Error;
    }
    if misses.iter().any(|m| m.tool) {
        FailureKind::RefusedToolUse
    } else {
        FailureKind::WrongAnswer
    }
}

fn last_failure_before(trail: &[TrailEntry], seq: u64) -> Option<&TrailEntry> {
    trail
        .iter()
        .rev()
        .filter(|e| e.seq < seq)
        .find(|e| e.failure.is_some())
}

/// The run's last failure in words (for the report's detail), if it has one.
pub fn last_failure_message(trail: &[TrailEntry]) -> Option<String> {
    trail.iter().rev().find_map(|e| {
        e.failure.as_ref().map(|f| {
            format!(
                "{} in `{}` (attempt {}): {}",
                f.kind, e.from, f.attempt, f.message
            )
        })
    })
}
