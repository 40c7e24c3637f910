//! The run's trail in memory: entries appended (transitions, failed attempts, pauses,
//! answers) and told to the observers, and what the trail says of the current state
//! (its attempts, its last failure, the transition that entered it, what it waits for).

use std::time::{Duration, Instant, SystemTime};

use claij_core::budget::{Spend, is_pause};
use claij_core::store::Wait;
use claij_core::{Answer, Failure, FailureKind, Question, State, TrailEntry};
use serde_json::Value;

use super::{CallRecord, RunState, to_micros};
use crate::action::Suspension;

impl RunState<'_> {
    /// The sequence number an attempt's key is made of: the trail's length, pauses at its
    /// end not counted, so that an attempt made again after a pause (for a budget, or a
    /// call lost in a crash) has the key it had — and a state that starts child runs
    /// finds the children it started.
    pub(super) fn attempt_seq(&self) -> u64 {
        let pauses = self.trail.iter().rev().take_while(|e| is_pause(e)).count();
        (self.trail.len() - pauses) as u64
    }

    /// How many attempts were recorded since the current state was entered (pauses for
    /// a budget are not attempts).
    pub(crate) fn attempts_here(&self) -> u32 {
        self.trail
            .iter()
            .rev()
            .take_while(|e| !e.is_transition())
            .filter(|e| !is_pause(e))
            .count() as u32
    }

    /// The transition of the last transition entry: the one that led into the current
    /// state (its states renamed by the migrations since, if the run moved).
    pub(crate) fn current_transition(&self) -> Option<usize> {
        let (from, to) = claij_core::migration::entered_by(&self.trail)?;
        self.fsm.transition_idx(&from, &to)
    }

    /// Records a pause of the attempt `attempt` of `state` (what it is: its kind, message
    /// and event), with what its calls cost: an entry that is not an attempt.
    pub(super) fn append_pause(
        &mut self,
        state: &State,
        (kind, message, event): (FailureKind, String, Value),
        attempt: u32,
        usage: Option<Box<claij_core::Usage>>,
        duration: Duration,
    ) {
        let failure = Failure {
            kind,
            message,
            errors: Vec::new(),
            attempt,
        };
        let call = CallRecord {
            usage,
            ..CallRecord::default()
        };
        self.append_failure(state, event, failure, call, Some(duration));
    }

    /// Records `answer` to the `question` the run stopped for in `state` (a pause entry,
    /// not an attempt: the attempt made next is answered from it).
    pub(crate) fn append_answer(&mut self, state: &State, question: &Question, answer: &Answer) {
        let attempt = self.attempts_here() + 1;
        self.append_failure(
            state,
            crate::questions::answer_event(question, answer),
            Failure {
                kind: FailureKind::Answer,
                message: format!("answered the MCP server `{}`", question.server),
                errors: Vec::new(),
                attempt,
            },
            CallRecord::default(),
            None,
        );
    }

    /// The last failure recorded since the current state was entered (a resumed run
    /// that had already failed there).
    pub(super) fn last_failure_here(&self) -> Option<Failure> {
        self.trail
            .iter()
            .rev()
            .take_while(|e| !e.is_transition())
            .filter(|e| !is_pause(e))
            .find_map(|e| e.failure.as_deref().cloned())
    }

    /// What a suspended run waits for: an event taking one of the state's transitions.
    pub(super) fn wait_for(&self, state: &State, suspension: Suspension) -> Wait {
        let fsm = self.fsm;
        Wait {
            state: state.id.to_string(),
            transitions: fsm.outgoing_pairs(&state.id),
            schema: fsm.output_schema(&state.id),
            // To the microsecond, as stores keep times (the wait's timer is `wake_at` too).
            expires_at: suspension
                .expires_in
                .map(|d| to_micros(SystemTime::now() + d)),
            on_expiry: suspension.on_expiry,
            prompt: suspension.prompt,
            children: suspension.children,
            deadline_at: self.deadline.map(|(at, _)| {
                to_micros(SystemTime::now() + at.saturating_duration_since(Instant::now()))
            }),
            budget: None,
            question: None,
            held: None,
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn append_full(
        &mut self,
        transition: usize,
        event: Value,
        attempt: u32,
        call: CallRecord,
        duration: Option<Duration>,
        failure: Option<Failure>,
    ) {
        let t = &self.fsm.transitions[transition];
        let entry = TrailEntry {
            seq: self.trail.len() as u64,
            fsm: self.fsm.id.clone(),
            version: self.fsm.version,
            from: t.from.clone(),
            to: Some(t.to.clone()),
            event,
            at: self.clock.wall(),
            attempt,
            model: call.model,
            enforce: call.enforce,
            summary: call.summary,
            votes: call.votes,
            usage: call.usage,
            duration_ms: duration.map(|d| d.as_millis() as u64),
            failure: failure.map(Box::new),
        };
        self.steps += 1;
        self.push(entry);
    }

    /// Appends a failed attempt of `state`, with the model call behind it (if any).
    pub(crate) fn append_failure(
        &mut self,
        state: &State,
        output: Value,
        failure: Failure,
        call: CallRecord,
        duration: Option<Duration>,
    ) {
        let at = self.clock.wall();
        let entry = self.failure_entry(state, output, failure, call, duration, at);
        self.push(entry);
    }

    /// The entry of a failed attempt of `state` (or a pause there), made at `at`, to
    /// follow the trail as it stands.
    pub(super) fn failure_entry(
        &self,
        state: &State,
        output: Value,
        failure: Failure,
        call: CallRecord,
        duration: Option<Duration>,
        at: SystemTime,
    ) -> TrailEntry {
        TrailEntry {
            seq: self.trail.len() as u64,
            fsm: self.fsm.id.clone(),
            version: self.fsm.version,
            from: state.id.clone(),
            to: None,
            event: output,
            at,
            attempt: failure.attempt,
            model: call.model,
            enforce: call.enforce,
            summary: None,
            votes: call.votes,
            usage: call.usage,
            duration_ms: duration.map(|d| d.as_millis() as u64),
            failure: Some(Box::new(failure)),
        }
    }

    pub(super) fn push(&mut self, entry: TrailEntry) {
        self.spend.add_calls(&Spend::of_entry(&entry));
        self.trail.push(entry);
        if !self.observers.is_empty()
            && let Some(entry) = self.trail.last()
        {
            for o in &self.observers {
                o.entry_appended(&self.run_id, entry);
            }
        }
    }
}
