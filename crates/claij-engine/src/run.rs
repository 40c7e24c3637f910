//! Running FSMs: [`Engine::run`] starts a run, [`Engine::resume`] continues one from its
//! store (a suspended run given its input, a crashed run, an expired wait), and
//! [`interrupt`] stops one from any process. The loop itself is in `drive`.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use claij_core::store::{ClaimFrom, Definition, RunRecord, RunStore, StoreError, Wait};
use claij_core::{
    CompiledSchema, Failure, FailureKind, Fsm, TrailEntry, Transition, TransitionSchema,
    ValidationIssue,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::drive::{Clock, RunState};
use crate::durable::{DEFAULT_LEASE, Durable, is_dead_local_owner, process_owner};
use crate::observer::Observer;
use crate::registry::ActionRegistry;

pub use claij_core::store::RunStatus;

/// The trail entries a new run has room for before its trail first grows.
const INITIAL_TRAIL: usize = 4;

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
    /// Where the run is kept: with a store, every transition is committed before the next
    /// state starts, `human` states may suspend the run, and the run can be resumed after
    /// a crash. Without one, the run lives in memory only.
    pub store: Option<Arc<dyn RunStore>>,
    /// The lease owner (default: this process, `host:pid:nonce`).
    pub owner: Option<String>,
    /// How long a lease lasts unless renewed (default 30 s).
    pub lease: Option<Duration>,
    /// The parent run, for child runs.
    pub parent: Option<String>,
    /// Entries of earlier runs this run continues (a chain: the next FSM sees the whole
    /// conversation). They head the run's trail, renumbered from 0, and keep the `fsm`
    /// and `version` of the run that made them.
    pub prior_trail: Vec<TrailEntry>,
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
    /// The state the run ended in (for failures, the state that gave up; for suspended
    /// runs, the state that waits).
    pub state: String,
    /// What a suspended run waits for.
    pub wait: Option<Wait>,
    /// When resuming this run (a child) let its parent continue: how the parent's own
    /// resume ended.
    pub parent: Option<Box<RunOutcome>>,
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
    /// The input does not satisfy its transition's schema.
    #[error("the input does not satisfy the schema of [{from}, {to}]:\n{}", render_issues(.issues))]
    Invalid {
        /// The transition's source (`start` for entries).
        from: String,
        /// The transition's target.
        to: String,
        /// Every validation error.
        issues: Vec<ValidationIssue>,
    },
    /// The transition's dynamic schema could not be resolved.
    #[error("the schema of [{from}, {to}] could not be resolved: {message}")]
    Schema {
        /// The transition's source.
        from: String,
        /// The transition's target.
        to: String,
        /// Why.
        message: String,
    },
    /// A resumed run's input names a transition the run does not wait on.
    #[error(
        "the input's `id` {id} is not what run `{run}` waits for; it waits for one of: {waiting}"
    )]
    NotWaitedFor {
        /// The run.
        run: String,
        /// The input's id.
        id: String,
        /// The transitions it waits on.
        waiting: String,
    },
}

/// A run could not be started or continued.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RunError {
    /// The input was refused; nothing changed.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The store failed or refused (another process won a race, say).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run cannot be continued this way.
    #[error("run `{run}` {reason}")]
    NotResumable {
        /// The run.
        run: String,
        /// Why, in words.
        reason: String,
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
    /// Definitions already stored, by (store, hash): stored once per process.
    stored: Mutex<HashSet<(String, String)>>,
    /// Definitions loaded back from a store, by content hash.
    pub(crate) loaded: Mutex<HashMap<String, Arc<Fsm>>>,
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
            stored: Mutex::new(HashSet::new()),
            loaded: Mutex::new(HashMap::new()),
        }
    }

    /// The registry (also the catalog documents are loaded against).
    pub fn registry(&self) -> &ActionRegistry {
        &self.registry
    }

    /// Runs `fsm` from `input` until it completes, fails, is interrupted or (with a
    /// store) suspends.
    ///
    /// The input's `id` picks the entry transition; with exactly one entry an input
    /// without `id` gets it added. The input is validated before anything runs.
    pub async fn run(
        &self,
        fsm: Arc<Fsm>,
        input: Value,
        options: RunOptions,
    ) -> Result<RunOutcome, RunError> {
        // Boxed: starting needs its records and store calls once, not for the run's whole
        // life (a run's future is held for as long as the run lives).
        let (run, entry) = Box::pin(self.start(&fsm, input, options)).await?;
        Ok(run.drive(entry, 1).await?)
    }

    /// A new run of `fsm` with its input appended (and, with a store, created there),
    /// ready to be driven from the entry transition returned with it.
    async fn start<'e>(
        &'e self,
        fsm: &'e Fsm,
        input: Value,
        options: RunOptions,
    ) -> Result<(RunState<'e>, usize), RunError> {
        let run_id = options.run_id.clone().unwrap_or_else(new_run_id);
        let (entry, input) = self.entry(fsm, input)?;
        let context = match &options.context {
            Value::Null => Value::Object(Default::default()),
            c => c.clone(),
        };
        let deadline = options
            .deadline
            .or(fsm.settings.deadline)
            .map(|d| (Instant::now() + d, d));
        // Room for the input and a few steps: a run's trail is held for as long as it lives
        // (about 200 bytes an entry), and grows by doubling past that.
        let mut trail = Vec::with_capacity(INITIAL_TRAIL + options.prior_trail.len());
        trail.extend(options.prior_trail.iter().cloned());
        for (seq, e) in trail.iter_mut().enumerate() {
            e.seq = seq as u64;
        }
        let mut run = self.run_state(fsm, run_id, trail, context, deadline, &options);
        run.append_full(entry, input, 1, None, None, None, None);
        if let Some(durable) = &run.durable {
            self.store_definition(durable.store.as_ref(), fsm).await?;
            let now = SystemTime::now();
            let record = RunRecord {
                id: run.run_id.clone(),
                fsm_id: fsm.id.to_string(),
                version: fsm.version,
                hash: fsm.hash.clone(),
                parent: options.parent.clone(),
                status: RunStatus::Running,
                state: fsm.transitions[entry].to.to_string(),
                context: run.context.clone(),
                trail_len: run.trail.len() as u64,
                wait: None,
                lease: Some(claij_core::store::Lease {
                    owner: durable.owner.clone(),
                    until: durable.lease_until(),
                }),
                interrupt_requested: false,
                created_at: now,
                updated_at: now,
            };
            durable.store.create_run(&record, &run.trail).await?;
            run.committed = run.trail.len();
        }
        Ok((run, entry))
    }

    /// Continues a stored run of `fsm` (the definition it is pinned to):
    ///
    /// - a **suspended** run with `input`: the input must take one of the transitions the
    ///   run waits on and satisfy its schema (else nothing changes); of concurrent
    ///   resumes exactly one wins, the others get [`StoreError::Conflict`];
    /// - a suspended run whose wait **expired**, without input: follows the wait's
    ///   `on_expiry` route, or fails;
    /// - a **running** run whose process died (or whose lease expired): continues from
    ///   its last committed transition; the action that was in flight runs again, with
    ///   the same idempotency key.
    ///
    /// A run suspended while it waits for its child runs takes no input: resumed without
    /// one, its state's action tries again (finding its children where they are). When
    /// the resumed run is itself a child and it ends, its parent continues if it waited
    /// for it (see [`RunOutcome::parent`]).
    pub async fn resume(
        &self,
        fsm: Arc<Fsm>,
        run_id: &str,
        input: Option<Value>,
        options: RunOptions,
    ) -> Result<RunOutcome, RunError> {
        let mut outcome = self.resume_run(fsm, run_id, input, options.clone()).await?;
        if outcome.status.is_final()
            && let Some(store) = &options.store
            && let Some(parent) = store.run(run_id).await?.parent
        {
            outcome.parent = self.wake(store, &parent, &options).await?.map(Box::new);
        }
        Ok(outcome)
    }

    /// [`resume`](Self::resume) without waking the parent.
    pub(crate) async fn resume_run(
        &self,
        fsm: Arc<Fsm>,
        run_id: &str,
        input: Option<Value>,
        options: RunOptions,
    ) -> Result<RunOutcome, RunError> {
        let not_resumable = |reason: String| RunError::NotResumable {
            run: run_id.to_owned(),
            reason,
        };
        let Some(store) = options.store.clone() else {
            return Err(not_resumable("cannot be resumed without a store".into()));
        };
        let record = store.run(run_id).await?;
        if record.hash != fsm.hash {
            return Err(not_resumable(format!(
                "is pinned to definition {} v{} ({}), not to the one given ({})",
                record.fsm_id,
                record.version,
                short(&record.hash),
                short(&fsm.hash)
            )));
        }
        let owner = options.owner.clone().unwrap_or_else(process_owner);
        let lease = options.lease.unwrap_or(DEFAULT_LEASE);
        match record.status {
            RunStatus::Suspended => {
                let wait = record
                    .wait
                    .clone()
                    .ok_or_else(|| not_resumable("is suspended but its wait is missing".into()))?;
                if !wait.children.is_empty() {
                    if input.is_some() {
                        return Err(not_resumable(format!(
                            "waits for its child runs ({}), not for an input: resume those",
                            wait.children.join(", ")
                        )));
                    }
                    return self
                        .claim_and_continue(
                            &fsm,
                            run_id,
                            ClaimFrom::Suspended,
                            store,
                            &owner,
                            lease,
                            &options,
                        )
                        .await;
                }
                let expired = wait.expires_at.is_some_and(|at| at <= SystemTime::now());
                let taking = match (&input, expired) {
                    (Some(input), _) => Some(self.waited_transition(&fsm, run_id, &wait, input)?),
                    (None, true) => None,
                    (None, false) => {
                        return Err(not_resumable(format!(
                            "is suspended in `{}` and waits for an input taking one of: {}",
                            wait.state,
                            pairs(&wait.transitions)
                        )));
                    }
                };
                let claimed = store
                    .claim(
                        run_id,
                        ClaimFrom::Suspended,
                        &owner,
                        SystemTime::now() + lease,
                    )
                    .await?;
                let mut run = self
                    .resumed_state(&fsm, &claimed, store, &owner, lease, &options)
                    .await?;
                let state = fsm.state(&wait.state).ok_or_else(|| {
                    not_resumable(format!("waits in unknown state `{}`", wait.state))
                })?;
                let attempt = run.attempts_here() + 1;
                match (taking, input) {
                    (Some(t), Some(input)) => {
                        run.append_full(t, input, attempt, None, None, None, None);
                        Ok(run.drive(t, 1).await?)
                    }
                    _ => {
                        let failure = Failure {
                            kind: FailureKind::Timeout,
                            message: "the wait for input expired".into(),
                            errors: Vec::new(),
                            attempt,
                        };
                        run.append_failure(state, Value::Null, failure.clone(), None, None);
                        let route = wait
                            .on_expiry
                            .as_deref()
                            .and_then(|target| fsm.transition_idx(&state.id, target));
                        match route {
                            Some(t) => {
                                let event = json!({
                                    "id": fsm.transitions[t].id_value,
                                    "failure": failure,
                                    "state": &*state.id,
                                });
                                run.append_full(t, event, attempt, None, None, None, None);
                                Ok(run.drive(t, 1).await?)
                            }
                            None => Ok(run.fail_here(state).await?),
                        }
                    }
                }
            }
            // Running with an input: another resume may have just won the race, or the
            // run never waited; either way the input cannot be used.
            RunStatus::Running if input.is_some() => Err(StoreError::Conflict {
                run: run_id.to_owned(),
                reason: "is running, not suspended: only a suspended run takes an input".into(),
            }
            .into()),
            RunStatus::Running => {
                let dead_owners = record
                    .lease
                    .iter()
                    .map(|l| l.owner.clone())
                    .filter(|o| is_dead_local_owner(o))
                    .collect();
                self.claim_and_continue(
                    &fsm,
                    run_id,
                    ClaimFrom::Stale { dead_owners },
                    store,
                    &owner,
                    lease,
                    &options,
                )
                .await
            }
            // A finished run: for an input, another resume may just have won the race;
            // either way it is a conflict with the run's state, not a bad request.
            status => Err(StoreError::Conflict {
                run: run_id.to_owned(),
                reason: format!("is {status}, not suspended or running: only those can be resumed"),
            }
            .into()),
        }
    }

    /// The transition a resume input takes, checked against the run's wait and the
    /// transition's schema.
    fn waited_transition(
        &self,
        fsm: &Fsm,
        run_id: &str,
        wait: &Wait,
        input: &Value,
    ) -> Result<usize, InputError> {
        let id = input.get("id");
        let target = id
            .and_then(Value::as_array)
            .and_then(|pair| match pair.as_slice() {
                [Value::String(from), Value::String(to)] => wait
                    .transitions
                    .iter()
                    .find(|(f, t)| f == from && t == to)
                    .and_then(|(f, t)| fsm.transition_idx(f, t)),
                _ => None,
            });
        let Some(t) = target else {
            return Err(InputError::NotWaitedFor {
                run: run_id.to_owned(),
                id: id.map_or_else(|| "(none)".to_owned(), Value::to_string),
                waiting: pairs(&wait.transitions),
            });
        };
        let transition = &fsm.transitions[t];
        let schema =
            self.compiled_schema(fsm, transition)
                .map_err(|message| InputError::Schema {
                    from: transition.from.to_string(),
                    to: transition.to.to_string(),
                    message,
                })?;
        schema.check(input).map_err(|issues| InputError::Invalid {
            from: transition.from.to_string(),
            to: transition.to.to_string(),
            issues,
        })?;
        Ok(t)
    }

    /// The in-memory state of a claimed run, rebuilt from its stored trail.
    /// Claims the run (from `from`), rebuilds its state from the store and continues it
    /// from the last transition of its trail, with the next attempt of that state.
    #[allow(clippy::too_many_arguments)]
    async fn claim_and_continue(
        &self,
        fsm: &Fsm,
        run_id: &str,
        from: ClaimFrom,
        store: Arc<dyn RunStore>,
        owner: &str,
        lease: Duration,
        options: &RunOptions,
    ) -> Result<RunOutcome, RunError> {
        let claimed = store
            .claim(run_id, from, owner, SystemTime::now() + lease)
            .await?;
        let run = self
            .resumed_state(fsm, &claimed, store, owner, lease, options)
            .await?;
        let Some(into) = run.current_transition() else {
            return Err(RunError::NotResumable {
                run: run_id.to_owned(),
                reason: "has no transition in its trail".into(),
            });
        };
        let attempt = run.attempts_here() + 1;
        Ok(run.drive(into, attempt).await?)
    }

    async fn resumed_state<'e>(
        &'e self,
        fsm: &'e Fsm,
        record: &RunRecord,
        store: Arc<dyn RunStore>,
        owner: &str,
        lease: Duration,
        options: &RunOptions,
    ) -> Result<RunState<'e>, RunError> {
        let trail = store.trail(&record.id, 0).await?;
        if trail.len() as u64 != record.trail_len {
            return Err(StoreError::Corrupt {
                what: format!("run {}", record.id),
                message: format!(
                    "the record counts {} trail entries but {} are stored",
                    record.trail_len,
                    trail.len()
                ),
            }
            .into());
        }
        let deadline = options.deadline.or(fsm.settings.deadline).map(|d| {
            let ends = record.created_at + d;
            let left = ends.duration_since(SystemTime::now()).unwrap_or_default();
            (Instant::now() + left, d)
        });
        let options = RunOptions {
            store: Some(store),
            owner: Some(owner.to_owned()),
            lease: Some(lease),
            ..options.clone()
        };
        let mut run = self.run_state(
            fsm,
            record.id.clone(),
            trail,
            record.context.clone(),
            deadline,
            &options,
        );
        run.committed = run.trail.len();
        Ok(run)
    }

    fn run_state<'e>(
        &'e self,
        fsm: &'e Fsm,
        run_id: String,
        trail: Vec<TrailEntry>,
        context: Value,
        deadline: Option<(Instant, Duration)>,
        options: &RunOptions,
    ) -> RunState<'e> {
        RunState {
            engine: self,
            fsm,
            run_id,
            trail,
            context,
            deadline,
            cancel: options.cancel.clone(),
            observers: options.observers.clone(),
            clock: Clock::start(),
            deadline_routed: false,
            durable: options.store.clone().map(|store| Durable {
                store,
                owner: options.owner.clone().unwrap_or_else(process_owner),
                lease: options.lease.unwrap_or(DEFAULT_LEASE),
                lost: Arc::new(AtomicBool::new(false)),
            }),
            committed: 0,
            context_dirty: false,
        }
    }

    /// Stores `fsm`'s definition once per store and process.
    async fn store_definition(&self, store: &dyn RunStore, fsm: &Fsm) -> Result<(), StoreError> {
        let key = (store.describe(), fsm.hash.clone());
        if self
            .stored
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&key)
        {
            return Ok(());
        }
        store
            .put_definition(&Definition {
                fsm_id: fsm.id.to_string(),
                version: fsm.version,
                hash: fsm.hash.clone(),
                document: fsm.document.clone(),
                created_at: SystemTime::now(),
            })
            .await?;
        self.stored
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key);
        Ok(())
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
                from: t.from.to_string(),
                to: t.to.to_string(),
                message,
            })?;
        schema.check(&input).map_err(|issues| InputError::Invalid {
            from: t.from.to_string(),
            to: t.to.to_string(),
            issues,
        })?;
        Ok((idx, input))
    }

    /// The compiled effective schema of `t`: static ones were compiled on load; dynamic
    /// ones are resolved now and recompiled only when their provider's value changed.
    pub(crate) fn compiled_schema(
        &self,
        fsm: &Fsm,
        t: &Transition,
    ) -> Result<Arc<CompiledSchema>, String> {
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

pub(crate) fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `[a, b], [a, c]` for messages.
fn pairs(transitions: &[(String, String)]) -> String {
    transitions
        .iter()
        .map(|(f, t)| format!("[{f}, {t}]"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// Stops a stored run from any process: a running run's process notices within its
/// heartbeat (about a quarter of a second) and records `interrupted` itself; a suspended
/// run, or a running one whose process is gone, is finished here with an `interrupted`
/// entry. Returns the run's record as it now stands.
pub fn interrupt<'a>(
    store: &'a dyn RunStore,
    run_id: &'a str,
) -> crate::action::BoxFuture<'a, Result<RunRecord, RunError>> {
    Box::pin(interrupt_one(store, run_id))
}

async fn interrupt_one(store: &dyn RunStore, run_id: &str) -> Result<RunRecord, RunError> {
    let record = store.request_interrupt(run_id).await?;
    // A run waiting for its children: they are interrupted too.
    if let Some(wait) = &record.wait {
        for child in &wait.children {
            match interrupt(store, child).await {
                Ok(_) | Err(RunError::Store(StoreError::Conflict { .. })) => {}
                Err(e) => return Err(e),
            }
        }
    }
    let owner_dead = record
        .lease
        .as_ref()
        .is_none_or(|l| l.until <= SystemTime::now() || is_dead_local_owner(&l.owner));
    let from = match record.status {
        RunStatus::Suspended => ClaimFrom::Suspended,
        RunStatus::Running if owner_dead => ClaimFrom::Stale {
            dead_owners: record.lease.iter().map(|l| l.owner.clone()).collect(),
        },
        _ => return Ok(record),
    };
    let owner = process_owner();
    let claimed = store
        .claim(run_id, from, &owner, SystemTime::now() + DEFAULT_LEASE)
        .await?;
    let trail = store
        .trail(run_id, claimed.trail_len.saturating_sub(1))
        .await?;
    let attempt = trail
        .last()
        .map_or(1, |e| if e.is_transition() { 1 } else { e.attempt + 1 });
    let entry = TrailEntry {
        seq: claimed.trail_len,
        fsm: Arc::from(claimed.fsm_id.as_str()),
        version: claimed.version,
        from: Arc::from(claimed.state.as_str()),
        to: None,
        event: Value::Null,
        at: crate::drive::to_micros(SystemTime::now()),
        attempt,
        model: None,
        usage: None,
        duration_ms: None,
        failure: Some(Box::new(Failure {
            kind: FailureKind::Interrupted,
            message: "the run was interrupted".into(),
            errors: Vec::new(),
            attempt,
        })),
    };
    store
        .commit(claij_core::store::Checkpoint {
            run_id: run_id.to_owned(),
            owner,
            entries: vec![entry],
            status: RunStatus::Interrupted,
            state: claimed.state.clone(),
            context: None,
            wait: None,
            lease_until: None,
        })
        .await?;
    Ok(store.run(run_id).await?)
}
