//! The run loop: routing by the event's `id`, validation, failures kept in the trail and
//! fed back, bounded attempts, `on_failure` routes, timeouts, a run deadline and
//! interruption. A run never hangs: every attempt is bounded by its timeout, the run's
//! deadline or its cancellation handle, and attempts are bounded by `max_attempts`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use claij_core::{
    CompiledSchema, Failure, FailureKind, Fsm, START, State, TrailEntry, Transition,
    TransitionSchema, ValidationIssue,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::action::{ActionError, ActionInput, ActionOutput};
use crate::observer::Observer;
use crate::registry::ActionRegistry;

pub use claij_core::store::RunStatus;

/// How to run.
#[derive(Clone, Default)]
pub struct RunOptions {
    /// The run's id; generated when absent.
    pub run_id: Option<String>,
    /// The initial context (an empty object when `null`).
    pub context: Value,
    /// A deadline for the whole run; overrides the FSM's `config.deadline`.
    pub deadline: Option<Duration>,
    /// Cancel it to interrupt the run.
    pub cancel: CancellationToken,
    /// Told of every entry as it is appended.
    pub observers: Vec<Arc<dyn Observer>>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// The run's id.
    pub run_id: String,
    /// Completed, failed or interrupted.
    pub status: RunStatus,
    /// Every entry, in order.
    pub trail: Vec<TrailEntry>,
    /// The final context.
    pub context: Value,
    /// The last event, when the run completed: its result.
    pub result: Option<Value>,
    /// The state the run ended in (for failures, the state that gave up).
    pub state: String,
}

/// The input event cannot start a run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InputError {
    /// The input's `id` names no entry transition, or is missing with several entries.
    #[error("the input {problem}; entries are: {entries}")]
    UnknownEntry {
        /// What is wrong with it.
        problem: String,
        /// The valid entry ids.
        entries: String,
    },
    /// The input does not satisfy its entry transition's schema.
    #[error("the input does not satisfy the schema of [start, {to}]:\n{}", render_issues(.issues))]
    Invalid {
        /// The entry state.
        to: String,
        /// Every validation error.
        issues: Vec<ValidationIssue>,
    },
    /// The entry transition's dynamic schema could not be resolved.
    #[error("the schema of [start, {to}] could not be resolved: {message}")]
    Schema {
        /// The entry state.
        to: String,
        /// Why.
        message: String,
    },
}

fn render_issues(issues: &[ValidationIssue]) -> String {
    issues
        .iter()
        .map(|i| format!("  {i}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Compiled dynamic schemas by (schema name, from, to), with the provider value each was
/// compiled from (recompiled when the provider hands out a new value).
type DynamicCache = HashMap<(String, String, String), (Arc<Value>, Arc<CompiledSchema>)>;

/// Runs FSMs with a registry of actions. Share one engine across runs.
pub struct Engine {
    registry: Arc<ActionRegistry>,
    dynamic: Mutex<DynamicCache>,
}

impl Default for Engine {
    fn default() -> Self {
        Self::new(Arc::new(ActionRegistry::with_builtins()))
    }
}

impl Engine {
    /// An engine running the actions of `registry`.
    pub fn new(registry: Arc<ActionRegistry>) -> Self {
        Self {
            registry,
            dynamic: Mutex::new(HashMap::new()),
        }
    }

    /// The registry (also the catalog documents are loaded against).
    pub fn registry(&self) -> &ActionRegistry {
        &self.registry
    }

    /// Runs `fsm` from `input` to the end: completed, failed or interrupted.
    ///
    /// The input's `id` picks the entry transition; with exactly one entry an input
    /// without `id` gets it added. The input is validated before anything runs.
    pub async fn run(
        &self,
        fsm: Arc<Fsm>,
        input: Value,
        options: RunOptions,
    ) -> Result<RunOutcome, InputError> {
        let run_id = options.run_id.clone().unwrap_or_else(new_run_id);
        let (entry, input) = self.entry(&fsm, input)?;
        let context = match options.context {
            Value::Null => Value::Object(Default::default()),
            ref c => c.clone(),
        };
        let mut run = RunState {
            engine: self,
            fsm: &fsm,
            run_id,
            trail: Vec::with_capacity(16),
            context,
            deadline: options
                .deadline
                .or(fsm.settings.deadline)
                .map(|d| (Instant::now() + d, d)),
            cancel: options.cancel,
            observers: options.observers,
            clock: Clock::start(),
            deadline_routed: false,
        };
        run.append_full(entry, input, 1, None, None, None, None);
        Ok(run.drive(entry).await)
    }

    /// The entry transition of `input`, and the input with its `id` filled in.
    fn entry(&self, fsm: &Fsm, mut input: Value) -> Result<(usize, Value), InputError> {
        let entries = || {
            fsm.entries
                .iter()
                .map(|&t| fsm.transitions[t].id_value.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let idx = match input.get("id") {
            Some(id) => {
                let found = fsm
                    .entries
                    .iter()
                    .copied()
                    .find(|&t| fsm.transitions[t].id_value == *id);
                found.ok_or_else(|| InputError::UnknownEntry {
                    problem: format!("`id` {id} names no entry transition"),
                    entries: entries(),
                })?
            }
            None => match (fsm.entries.as_slice(), input.as_object_mut()) {
                ([only], Some(map)) => {
                    map.insert("id".into(), fsm.transitions[*only].id_value.clone());
                    *only
                }
                ([_], None) => {
                    return Err(InputError::UnknownEntry {
                        problem: format!("is not a JSON object (got {})", kind_of(&input)),
                        entries: entries(),
                    });
                }
                _ => {
                    return Err(InputError::UnknownEntry {
                        problem: "has no `id`, and this FSM has several entries".into(),
                        entries: entries(),
                    });
                }
            },
        };
        let t = &fsm.transitions[idx];
        let schema = self
            .compiled_schema(fsm, t)
            .map_err(|message| InputError::Schema {
                to: t.to.to_string(),
                message,
            })?;
        schema.check(&input).map_err(|issues| InputError::Invalid {
            to: t.to.to_string(),
            issues,
        })?;
        Ok((idx, input))
    }

    /// The compiled effective schema of `t`: static ones were compiled on load; dynamic
    /// ones are resolved now and recompiled only when their provider's value changed.
    fn compiled_schema(&self, fsm: &Fsm, t: &Transition) -> Result<Arc<CompiledSchema>, String> {
        if let Some(compiled) = &t.compiled {
            return Ok(compiled.clone());
        }
        let TransitionSchema::Dynamic(name) = &t.schema else {
            return Err("the transition's schema was not compiled".into());
        };
        let provider = self
            .registry
            .schema_provider(name)
            .ok_or_else(|| format!("no provider serves the dynamic schema `{name}`"))?;
        let value = provider.resolve(name).map_err(|e| e.message)?;
        let key = (name.clone(), t.from.to_string(), t.to.to_string());
        let mut cache = self.dynamic.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((source, compiled)) = cache.get(&key)
            && Arc::ptr_eq(source, &value)
        {
            return Ok(compiled.clone());
        }
        let effective = claij_core::schema::effective_schema(&t.from, &t.to, Some(&value));
        let compiled = Arc::new(
            CompiledSchema::compile(claij_core::schema::compilable_effective(
                &effective,
                &fsm.schemas,
            ))
            .map_err(|e| format!("dynamic schema `{name}` does not compile: {e}"))?,
        );
        cache.insert(key, (value, compiled.clone()));
        Ok(compiled)
    }
}

/// A new run id: time-ordered, unique enough for one store (`r-` + 12 hex digits of
/// milliseconds + 8 random hex digits).
pub fn new_run_id() -> String {
    use std::hash::{BuildHasher, RandomState};
    let millis = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let random = RandomState::new().hash_one(millis) as u32;
    format!("r-{millis:012x}{random:08x}")
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// One attempt's result, before it is recorded.
enum Attempt {
    Took {
        transition: usize,
        output: ActionOutput,
    },
    Failed {
        failure: Failure,
        output: Value,
        retryable: bool,
        model: Option<String>,
    },
    Interrupted,
    DeadlineExceeded,
}

struct RunState<'e> {
    engine: &'e Engine,
    fsm: &'e Fsm,
    run_id: String,
    trail: Vec<TrailEntry>,
    context: Value,
    deadline: Option<(Instant, Duration)>,
    cancel: CancellationToken,
    observers: Vec<Arc<dyn Observer>>,
    clock: Clock,
    /// Whether an `on_failure` route was already taken because the deadline passed.
    deadline_routed: bool,
}

/// Wall-clock times for trail entries from one reading of the monotonic clock per
/// attempt: the wall time at the run's start plus the monotonic time elapsed since.
struct Clock {
    base: Instant,
    base_wall: SystemTime,
    /// When the last attempt ended (or the run started).
    stamp: Instant,
}

impl Clock {
    fn start() -> Self {
        let base = Instant::now();
        Self {
            base,
            base_wall: SystemTime::now(),
            stamp: base,
        }
    }

    /// The wall time of the last stamp.
    fn wall(&self) -> SystemTime {
        self.base_wall + self.stamp.saturating_duration_since(self.base)
    }
}

impl RunState<'_> {
    /// Drives the run from the state `transition` entered until it ends.
    async fn drive(mut self, mut transition: usize) -> RunOutcome {
        loop {
            let fsm = self.fsm;
            let state_idx = match fsm.transitions[transition].to_idx {
                Some(s) => s,
                None => return self.finish(RunStatus::Failed, &fsm.transitions[transition].to),
            };
            let state = &fsm.states[state_idx];
            if state.is_terminal() {
                return self.finish(RunStatus::Completed, &state.id);
            }
            let max_attempts = fsm.max_attempts(state);
            let mut last_failure = None;
            let mut next = None;
            for attempt in 1..=max_attempts {
                let started = self.clock.stamp;
                let result = self.attempt(state, transition, attempt).await;
                self.clock.stamp = Instant::now();
                let duration = self.clock.stamp.saturating_duration_since(started);
                match result {
                    Attempt::Took {
                        transition: t,
                        output,
                    } => {
                        let ActionOutput {
                            event,
                            context,
                            model,
                            usage,
                        } = output;
                        if let Some(context) = context {
                            self.context = context;
                        }
                        self.append_full(t, event, attempt, model, usage, Some(duration), None);
                        next = Some(t);
                        break;
                    }
                    Attempt::Failed {
                        failure,
                        output,
                        retryable,
                        model,
                    } => {
                        self.append_failure(state, output, failure.clone(), model, Some(duration));
                        last_failure = Some(failure);
                        if !retryable {
                            break;
                        }
                    }
                    Attempt::Interrupted => {
                        self.append_failure(
                            state,
                            Value::Null,
                            Failure {
                                kind: FailureKind::Interrupted,
                                message: "the run was interrupted".into(),
                                errors: Vec::new(),
                                attempt,
                            },
                            None,
                            Some(duration),
                        );
                        return self.finish(RunStatus::Interrupted, &state.id);
                    }
                    Attempt::DeadlineExceeded => {
                        let limit = self.deadline.map(|(_, d)| d).unwrap_or_default();
                        let failure = Failure {
                            kind: FailureKind::Timeout,
                            message: format!(
                                "the run's deadline of {} passed",
                                humantime::format_duration(limit)
                            ),
                            errors: Vec::new(),
                            attempt,
                        };
                        self.append_failure(
                            state,
                            Value::Null,
                            failure.clone(),
                            None,
                            Some(duration),
                        );
                        // The deadline is a failure like any other: its `on_failure` route
                        // is followed, but only once, so a run past its deadline ends.
                        if std::mem::replace(&mut self.deadline_routed, true) {
                            return self.finish(RunStatus::Failed, &state.id);
                        }
                        last_failure = Some(failure);
                        break;
                    }
                }
            }
            match next {
                Some(t) => transition = t,
                None => match self.on_failure_route(state, last_failure) {
                    Some(t) => transition = t,
                    None => return self.finish(RunStatus::Failed, &state.id),
                },
            }
        }
    }

    /// Attempts ran out: follow `on_failure` with an event carrying the failure.
    fn on_failure_route(&mut self, state: &State, failure: Option<Failure>) -> Option<usize> {
        let target = state.settings.on_failure.as_ref()?;
        self.clock.stamp = Instant::now();
        let t = self.fsm.transition_idx(&state.id, target)?;
        let attempts = failure.as_ref().map_or(0, |f| f.attempt);
        let event = json!({
            "id": self.fsm.transitions[t].id_value,
            "failure": failure,
            "state": &*state.id,
        });
        self.append_full(t, event, attempts, None, None, None, None);
        Some(t)
    }

    /// One attempt: run the action (bounded by timeout, deadline and cancellation), then
    /// route and validate its output.
    async fn attempt(&mut self, state: &State, input_transition: usize, attempt: u32) -> Attempt {
        let fsm = self.fsm;
        if self.cancel.is_cancelled() {
            return Attempt::Interrupted;
        }
        for o in &self.observers {
            o.attempt_started(&self.run_id, state, attempt);
        }
        let Some(action) = self.engine.registry.action(&state.action) else {
            return failed(
                FailureKind::Action,
                format!("no action `{}` is registered", state.action),
                attempt,
                false,
            );
        };
        let event = self
            .trail
            .iter()
            .rev()
            .find(|e| e.is_transition())
            .map(|e| &e.event)
            .unwrap_or(&Value::Null);
        let input = ActionInput {
            run_id: &self.run_id,
            fsm,
            state,
            input_transition: &fsm.transitions[input_transition],
            event,
            trail: &self.trail,
            context: &self.context,
            attempt,
            seq: self.trail.len() as u64,
            cancel: &self.cancel,
        };
        let state_timeout = fsm.timeout(state);
        let now = Instant::now();
        let deadline_left = self
            .deadline
            .map(|(at, _)| at.saturating_duration_since(now));
        let (limit, limit_is_deadline) = match (state_timeout, deadline_left) {
            (Some(t), Some(d)) if d < t => (Some(d), true),
            (None, Some(d)) => (Some(d), true),
            (t, _) => (t, false),
        };
        let run = action.run(input);
        let result = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => return Attempt::Interrupted,
            r = async {
                match limit {
                    Some(limit) => tokio::time::timeout(limit, run).await.ok(),
                    None => Some(run.await),
                }
            } => r,
        };
        let output = match result {
            None if limit_is_deadline => return Attempt::DeadlineExceeded,
            None => {
                let limit = limit.unwrap_or_default();
                return failed(
                    FailureKind::Timeout,
                    format!(
                        "state `{}` did not finish within its timeout of {}",
                        state.id,
                        humantime::format_duration(limit)
                    ),
                    attempt,
                    true,
                );
            }
            Some(Err(ActionError {
                kind,
                message,
                output,
                retryable,
            })) => {
                return Attempt::Failed {
                    failure: Failure {
                        kind,
                        message,
                        errors: Vec::new(),
                        attempt,
                    },
                    output,
                    retryable,
                    model: None,
                };
            }
            Some(Ok(output)) => output,
        };
        self.route(state, output, attempt)
    }

    /// Finds the transition the output names and validates the output against it.
    fn route(&self, state: &State, output: ActionOutput, attempt: u32) -> Attempt {
        let fsm = self.fsm;
        let valid_ids = || {
            state
                .outgoing
                .iter()
                .map(|&t| fsm.transitions[t].id_value.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let reject = |kind, message: String, errors, output: ActionOutput| Attempt::Failed {
            failure: Failure {
                kind,
                message,
                errors,
                attempt,
            },
            output: output.event,
            retryable: true,
            model: output.model,
        };
        let target = match output
            .event
            .get("id")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
        {
            Some([Value::String(from), Value::String(to)]) if **from == *state.id => state
                .outgoing
                .iter()
                .copied()
                .find(|&t| *fsm.transitions[t].to == **to),
            _ => None,
        };
        let Some(t) = target else {
            let message = match output.event.get("id") {
                None if output.event.is_object() => "the event has no `id`".to_owned(),
                None => format!(
                    "the output is {}, not a JSON object event",
                    kind_of(&output.event)
                ),
                Some(id) => format!("`id` {id} is not a transition out of `{}`", state.id),
            };
            return reject(
                FailureKind::UnknownTransition,
                format!("{message}; valid ids: {}", valid_ids()),
                Vec::new(),
                output,
            );
        };
        let schema = match self.engine.compiled_schema(fsm, &fsm.transitions[t]) {
            Ok(s) => s,
            Err(message) => return reject(FailureKind::Validation, message, Vec::new(), output),
        };
        if schema.is_valid(&output.event) {
            Attempt::Took {
                transition: t,
                output,
            }
        } else {
            let issues = schema.issues(&output.event);
            let transition = &fsm.transitions[t];
            reject(
                FailureKind::Validation,
                format!(
                    "the event does not satisfy the schema of [{}, {}] ({} error(s))",
                    transition.from,
                    transition.to,
                    issues.len()
                ),
                issues,
                output,
            )
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn append_full(
        &mut self,
        transition: usize,
        event: Value,
        attempt: u32,
        model: Option<String>,
        usage: Option<claij_core::Usage>,
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
            model,
            usage: usage.map(Box::new),
            duration_ms: duration.map(|d| d.as_millis() as u64),
            failure: failure.map(Box::new),
        };
        self.push(entry);
    }

    fn append_failure(
        &mut self,
        state: &State,
        output: Value,
        failure: Failure,
        model: Option<String>,
        duration: Option<Duration>,
    ) {
        let entry = TrailEntry {
            seq: self.trail.len() as u64,
            fsm: self.fsm.id.clone(),
            version: self.fsm.version,
            from: state.id.clone(),
            to: None,
            event: output,
            at: self.clock.wall(),
            attempt: failure.attempt,
            model,
            usage: None,
            duration_ms: duration.map(|d| d.as_millis() as u64),
            failure: Some(Box::new(failure)),
        };
        self.push(entry);
    }

    fn push(&mut self, entry: TrailEntry) {
        self.trail.push(entry);
        if !self.observers.is_empty()
            && let Some(entry) = self.trail.last()
        {
            for o in &self.observers {
                o.entry_appended(&self.run_id, entry);
            }
        }
    }

    fn finish(self, status: RunStatus, state: &str) -> RunOutcome {
        for o in &self.observers {
            o.run_finished(&self.run_id, status);
        }
        let result = (status == RunStatus::Completed)
            .then(|| claij_core::trail::last_event(&self.trail).cloned())
            .flatten();
        RunOutcome {
            run_id: self.run_id,
            status,
            trail: self.trail,
            context: self.context,
            result,
            state: if state == START {
                START.into()
            } else {
                state.into()
            },
        }
    }
}

fn failed(kind: FailureKind, message: String, attempt: u32, retryable: bool) -> Attempt {
    Attempt::Failed {
        failure: Failure {
            kind,
            message,
            errors: Vec::new(),
            attempt,
        },
        output: Value::Null,
        retryable,
        model: None,
    }
}
