//! Running FSMs: the [`Engine`], which [starts](Engine::run) runs, [resumes](Engine::resume)
//! them from their store (a suspended run given its input, a crashed run, an expired
//! wait), and [`interrupt`], which stops one from any process. The loop itself is in
//! `drive`; child runs are in `tree`.
//!
//! - `start`: a new run, from its input's entry transition;
//! - `resume`: a stored run continued;
//! - `claim`: claims of stored runs given back when what follows them fails;
//! - `interrupt`: a stored run stopped;
//! - `queue`: runs put in the store's queue for workers (submitted, answered);
//! - `options`, `outcome`, `error`: what a run is given, how it ends, why it could not run;
//! - `id`: run ids.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use claij_core::{CompiledSchema, Fsm, TrailEntry, Transition, TransitionSchema};
use serde_json::Value;

use crate::drive::{Clock, RunState};
use crate::durable::{DEFAULT_LEASE, Durable, process_owner};
use crate::observer::Observer;
use crate::registry::ActionRegistry;

mod claim;
mod error;
mod id;
mod interrupt;
mod options;
mod outcome;
mod queue;
mod resume;
mod start;

pub use claij_core::store::RunStatus;
pub use error::{InputError, RunError};
pub use id::new_run_id;
pub use interrupt::interrupt;
pub use options::RunOptions;
pub use outcome::RunOutcome;
pub use queue::{Submission, Submitted};

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
    /// Observers of every run this engine drives (child runs included), besides each
    /// run's own.
    observers: Vec<Arc<dyn Observer>>,
    /// What API clients' documents may touch outside their runs.
    policy: Arc<crate::capability::Policy>,
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
            observers: Vec::new(),
            policy: Arc::new(crate::capability::Policy::nothing()),
        }
    }

    /// This engine, with `policy` deciding what API clients' documents may touch outside
    /// their runs (by default, nothing): asked at registration and by the actions as they
    /// run.
    pub fn governed_by(mut self, policy: Arc<crate::capability::Policy>) -> Self {
        self.policy = policy;
        self
    }

    /// What API clients' documents may touch ([`governed_by`](Self::governed_by)).
    pub fn policy(&self) -> &crate::capability::Policy {
        &self.policy
    }

    /// This engine, with `observer` told of every run it drives (child runs included):
    /// telemetry, say, installed once where the engine is assembled.
    pub fn observed_by(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observers.push(observer);
        self
    }

    /// The registry: the actions runs use, and the [`KnownActions`](claij_core::KnownActions)
    /// documents are loaded against.
    pub fn registry(&self) -> &ActionRegistry {
        &self.registry
    }

    /// A run's in-memory state, for starting or resuming it (durable when `options`
    /// has a store).
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
            steps: trail.iter().filter(|e| e.is_transition()).count() as u64,
            trail,
            context,
            deadline,
            cancel: options.cancel.clone(),
            observers: self
                .observers
                .iter()
                .chain(&options.observers)
                .cloned()
                .collect(),
            clock: Clock::start(),
            deadline_routed: false,
            published: Vec::new(),
            durable: options.store.clone().map(|store| Durable {
                store,
                owner: options.owner.clone().unwrap_or_else(process_owner),
                lease: options.lease.unwrap_or(DEFAULT_LEASE),
                lost: Arc::new(AtomicBool::new(false)),
                holds: Arc::default(),
                keeper: options.lease_keeper.clone(),
            }),
            committed: 0,
            context_dirty: false,
            ledger: options.ledger.clone(),
            spend: claij_core::Spend::default(),
            taken_up: Instant::now(),
            budget_routed: false,
        }
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
