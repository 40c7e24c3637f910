//! Starting a run: [`Engine::run`] picks the entry transition of the input, validates
//! it, creates the run (in its store, with the definition stored once) and drives it.

use crate::drive::{CallRecord, kind_of, run_deadline};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use claij_core::store::{Definition, RunRecord, RunStore, StoreError};
use claij_core::{Fsm, Spend};
use serde_json::Value;

use super::{
    Engine, InputError, RunError, RunOptions, RunOutcome, RunStatus, Submission, new_run_id,
};
use crate::drive::RunState;
use crate::spend::Ledger;

/// The trail entries a new run has room for before its trail first grows.
const INITIAL_TRAIL: usize = 4;

impl Engine {
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
        let (run, entry) = Box::pin(self.start(&fsm, input, options, None)).await?;
        Ok(run.drive(entry, 1).await?)
    }

    /// A new run of `fsm` with its input appended (and, with a store, created there),
    /// ready to be driven from the entry transition returned with it — or, `queued`, put
    /// in the store's queue for a worker (held by no one).
    pub(super) async fn start<'e>(
        &'e self,
        fsm: &'e Fsm,
        input: Value,
        options: RunOptions,
        queued: Option<&Submission>,
    ) -> Result<(RunState<'e>, usize), RunError> {
        let run_id = options.run_id.clone().unwrap_or_else(new_run_id);
        let (entry, input) = self.entry(fsm, input)?;
        let context = match &options.context {
            Value::Null => Value::Object(Default::default()),
            c => c.clone(),
        };
        let deadline = run_deadline(options.deadline, fsm).map(|d| (Instant::now() + d, d));
        // Room for the input and a few steps: a run's trail is held for as long as it lives
        // (about 200 bytes an entry), and grows by doubling past that.
        let mut trail = Vec::with_capacity(INITIAL_TRAIL + options.prior_trail.len());
        trail.extend(options.prior_trail.iter().cloned());
        for (seq, e) in trail.iter_mut().enumerate() {
            e.seq = seq as u64;
        }
        let mut run = self.run_state(fsm, run_id, trail, context, deadline, &options);
        // The run's own budget: the document's, its limits replaced by those it was given.
        let budget = match (fsm.settings.budget, options.budget) {
            (Some(doc), Some(given)) => Some(doc.overridden_by(&given)),
            (doc, given) => given.or(doc),
        };
        if let Some(limit) = budget {
            run.ledger = Some(Ledger::new(
                &run.run_id,
                limit,
                Spend::default(),
                true,
                options.ledger.clone(),
            ));
        }
        run.append_full(entry, input, 1, CallRecord::default(), None, None);
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
                lease: match queued {
                    Some(_) => None,
                    None => Some(claij_core::store::Lease {
                        owner: durable.owner.clone(),
                        until: durable.lease_until(),
                    }),
                },
                interrupt_requested: false,
                not_before: queued.and_then(|q| q.not_before),
                idempotency_key: queued
                    .and_then(|q| q.idempotency_key.clone())
                    .or_else(|| options.idempotency_key.clone()),
                spend: run.spend,
                budget,
                pending: None,
                forked_from: None,
                created_at: now,
                updated_at: now,
            };
            durable.store.create_run(&record, &run.trail).await?;
            run.committed = run.trail.len();
        }
        if queued.is_none() {
            let began = crate::observer::RunBegan {
                run_id: &run.run_id,
                fsm,
                parent: options.parent.as_deref(),
                resumed: false,
            };
            for o in &run.observers {
                o.run_began(&began);
                o.run_started(&run.run_id);
            }
        }
        Ok((run, entry))
    }

    /// Stores `fsm`'s definition once per store and process.
    pub(crate) async fn store_definition(
        &self,
        store: &dyn RunStore,
        fsm: &Fsm,
    ) -> Result<(), StoreError> {
        // By owner too: the operator's storing what a client stored makes it the operator's.
        let key = (store.describe(), format!("{}:{}", fsm.owner, fsm.hash));
        if self
            .stored
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&key)
        {
            return Ok(());
        }
        store.put_definition(&Definition::of(fsm)).await?;
        self.stored
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key);
        Ok(())
    }

    /// The entry transition of `input`, and the input with its `id` filled in.
    pub(super) fn entry(&self, fsm: &Fsm, mut input: Value) -> Result<(usize, Value), InputError> {
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
        self.check_event(fsm, &fsm.transitions[idx], &input)?;
        Ok((idx, input))
    }
}
