//! The [`Engine`]: the registry of actions runs use, the operator's policy, the observers
//! of every run, and the caches runs share (compiled dynamic schemas, stored and loaded
//! definitions). What it does with runs is in `run` (starting, resuming, queueing),
//! `drive` (the loop) and `tree` (child runs).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use claij_core::{CompiledSchema, Fsm, Transition, TransitionSchema};
use serde_json::Value;

use crate::capability::Policy;
use crate::observer::Observer;
use crate::registry::ActionRegistry;

/// Compiled dynamic schemas by (schema name, from, to), with the provider value each was
/// compiled from (recompiled when the provider hands out a new value).
type DynamicCache = HashMap<(String, String, String), (Arc<Value>, Arc<CompiledSchema>)>;

/// Runs FSMs with a registry of actions. Share one engine across runs.
pub struct Engine {
    registry: Arc<ActionRegistry>,
    dynamic: Mutex<DynamicCache>,
    /// Definitions already stored, by (store, hash): stored once per process.
    pub(crate) stored: Mutex<HashSet<(String, String)>>,
    /// Definitions loaded back from a store, by content hash.
    pub(crate) loaded: Mutex<HashMap<String, Arc<Fsm>>>,
    /// Observers of every run this engine drives (child runs included), besides each
    /// run's own.
    pub(crate) observers: Vec<Arc<dyn Observer>>,
    /// What API clients' documents may touch outside their runs.
    policy: Arc<Policy>,
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
            policy: Arc::new(Policy::nothing()),
        }
    }

    /// This engine, with `policy` deciding what API clients' documents may touch outside
    /// their runs (by default, nothing): asked at registration and by the actions as they
    /// run.
    pub fn governed_by(mut self, policy: Arc<Policy>) -> Self {
        self.policy = policy;
        self
    }

    /// What API clients' documents may touch ([`governed_by`](Self::governed_by)).
    pub fn policy(&self) -> &Policy {
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

    /// Checks an event given from outside (a run's input, a resume's answer, a fork's
    /// event) against the schema of `t`, the transition its `id` names: every problem, or
    /// why the schema could not be had.
    pub(crate) fn check_event(
        &self,
        fsm: &Fsm,
        t: &Transition,
        event: &serde_json::Value,
    ) -> Result<(), crate::InputError> {
        let schema = self
            .compiled_schema(fsm, t)
            .map_err(|message| crate::InputError::Schema {
                from: t.from.to_string(),
                to: t.to.to_string(),
                message,
            })?;
        schema
            .check(event)
            .map_err(|issues| crate::InputError::Invalid {
                from: t.from.to_string(),
                to: t.to.to_string(),
                issues,
            })
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
