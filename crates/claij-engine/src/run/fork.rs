//! Forking a stored run (time travel): [`Engine::fork`] makes a new run whose trail is an
//! earlier run's up to one of its entries, that entry's event perhaps replaced, and drives
//! it on from there. Nothing before the fork point runs again, and the original run and
//! its trail are not changed.
//!
//! The fork is an ordinary run of the definition the original is pinned to, recording
//! where it came from ([`ForkPoint`]); it has no parent (a fork of a child run stands on
//! its own: its parent waits for the original), its own budget's spend starts at zero,
//! and its context is the original's (no built-in action changes a run's context). Child
//! runs are named after the run and the entry that started them, so the states after the
//! fork point start children of their own, never the original's.

use std::sync::Arc;
use std::time::SystemTime;

use claij_core::store::{ForkPoint, Lease, RunRecord, RunStore};
use claij_core::{Fsm, TrailEntry};
use serde_json::Value;

use super::{Engine, InputError, RunError, RunOptions, RunOutcome, RunStatus, new_run_id};
use crate::durable::{DEFAULT_LEASE, process_owner};

/// Where to fork a run, and with what.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ForkAt {
    /// The entry of the original's trail the fork takes over: it must record a transition
    /// (not a failed attempt) of the run's own FSM.
    pub seq: u64,
    /// An event to put in that entry's place, as if the state that made it had produced
    /// it: checked against the transition its `id` names, which must leave that state
    /// (without `id`: the entry's own). `None` keeps the original's event.
    pub event: Option<Value>,
}

impl Engine {
    /// Forks the stored run `run_id` of `fsm` (the definition it is pinned to) at
    /// `at.seq`: a new run (`options.run_id`, or a new id) whose trail is the original's
    /// entries before `at.seq`, then that entry (its event replaced by `at.event` when
    /// given), driven on from the state that entry leads to, as a resumed run is. The
    /// original is not changed; a refused fork (a sequence past the end, a failed attempt,
    /// an entry of an earlier FSM of a chain, an event its transition's schema refuses)
    /// stores nothing.
    pub async fn fork(
        &self,
        fsm: Arc<Fsm>,
        run_id: &str,
        at: ForkAt,
        options: RunOptions,
    ) -> Result<RunOutcome, RunError> {
        let owner = options.owner.clone().unwrap_or_else(process_owner);
        let lease = options.lease.unwrap_or(DEFAULT_LEASE);
        let (store, record) = self
            .create_fork(&fsm, run_id, at, &options, Some(&owner))
            .await?;
        let continued = self
            .continue_claimed_run(&fsm, &record, None, store.clone(), &owner, lease, &options)
            .await;
        super::claim::released_on_error(store.as_ref(), &record, &owner, continued).await
    }

    /// [`fork`](Self::fork), but the new run is left in the store's queue, held by no one,
    /// for a worker (or whoever continues runs) to drive: its record as stored.
    pub async fn fork_queued(
        &self,
        fsm: &Fsm,
        run_id: &str,
        at: ForkAt,
        options: &RunOptions,
    ) -> Result<RunRecord, RunError> {
        Ok(self.create_fork(fsm, run_id, at, options, None).await?.1)
    }

    /// Checks the fork point and stores the fork: held by `owner`, or queued.
    async fn create_fork(
        &self,
        fsm: &Fsm,
        run_id: &str,
        at: ForkAt,
        options: &RunOptions,
        owner: Option<&str>,
    ) -> Result<(Arc<dyn RunStore>, RunRecord), RunError> {
        let refuse = |reason: String| RunError::NotForkable {
            run: run_id.to_owned(),
            seq: at.seq,
            reason,
        };
        let Some(store) = options.store.clone() else {
            return Err(refuse(
                "a run is forked from its store, and none was given".into(),
            ));
        };
        let original = store.run(run_id).await?;
        super::claim::check_pinned(&original, fsm)?;
        let seq = at.seq;
        let end = usize::try_from(seq)
            .ok()
            .filter(|&n| (n as u64) < original.trail_len)
            .ok_or_else(|| {
                refuse(format!(
                    "it is past the end of the trail, which has {} entries (0 to {})",
                    original.trail_len,
                    original.trail_len.saturating_sub(1)
                ))
            })?;
        // Only the entries up to the fork point are read.
        let mut trail = store.trail_page(run_id, 0, seq + 1).await?;
        if trail.len() <= end {
            return Err(refuse(format!(
                "the store holds {} of the {} entries its record counts",
                trail.len(),
                original.trail_len
            )));
        }
        trail.truncate(end + 1);
        let Some(entry) = trail.pop() else {
            return Err(refuse("its trail is empty".into()));
        };
        if entry.failure.is_some() || entry.to.is_none() {
            return Err(refuse(format!(
                "it records a failed attempt of `{}`, not a transition taken: fork at an \
                 entry that took one",
                entry.from
            )));
        }
        if *entry.fsm != *fsm.id {
            return Err(refuse(format!(
                "it was made by `{}`, an earlier FSM of the run's chain: fork at an entry \
                 of `{}`",
                entry.fsm, fsm.id
            )));
        }
        let edited = at.event.is_some();
        let (to, entry) = match at.event {
            Some(event) => {
                let (t, event) = self.fork_event(fsm, &entry, event)?;
                let made = TrailEntry {
                    seq,
                    fsm: fsm.id.clone(),
                    version: fsm.version,
                    from: entry.from.clone(),
                    to: Some(fsm.transitions[t].to.clone()),
                    event,
                    at: SystemTime::now(),
                    attempt: entry.attempt,
                    model: None,
                    enforce: None,
                    summary: None,
                    votes: None,
                    usage: None,
                    duration_ms: None,
                    failure: None,
                };
                (fsm.transitions[t].to.to_string(), made)
            }
            None => {
                let to = entry.to.as_deref().unwrap_or_default().to_owned();
                if fsm.transition(&entry.from, &to).is_none() {
                    return Err(refuse(format!(
                        "its transition [{}, {to}] is not in v{} of `{}`, which the run is \
                         pinned to now",
                        entry.from, fsm.version, fsm.id
                    )));
                }
                (to, entry)
            }
        };
        trail.push(entry);
        let now = SystemTime::now();
        let record = RunRecord {
            id: options.run_id.clone().unwrap_or_else(new_run_id),
            fsm_id: original.fsm_id.clone(),
            version: original.version,
            hash: original.hash.clone(),
            parent: None,
            status: RunStatus::Running,
            state: to,
            context: original.context.clone(),
            trail_len: trail.len() as u64,
            wait: None,
            lease: owner.map(|owner| Lease {
                owner: owner.to_owned(),
                until: now + options.lease.unwrap_or(DEFAULT_LEASE),
            }),
            interrupt_requested: false,
            not_before: None,
            idempotency_key: options.idempotency_key.clone(),
            spend: claij_core::Spend::default(),
            budget: match (original.budget, options.budget) {
                (Some(had), Some(given)) => Some(had.overridden_by(&given)),
                (had, given) => given.or(had),
            },
            pending: None,
            forked_from: Some(ForkPoint {
                run: run_id.to_owned(),
                seq,
                edited,
            }),
            created_at: now,
            updated_at: now,
        };
        store.create_run(&record, &trail).await?;
        Ok((store, record))
    }

    /// The transition an event given in place of `entry`'s takes, and the event with its
    /// `id` (the entry's own when it has none), checked against that transition's schema.
    fn fork_event(
        &self,
        fsm: &Fsm,
        entry: &TrailEntry,
        mut event: Value,
    ) -> Result<(usize, Value), InputError> {
        if *entry.from == *claij_core::START {
            if let (Some(map), Some(id)) = (event.as_object_mut(), entry.event.get("id")) {
                map.entry("id").or_insert_with(|| id.clone());
            }
            return self.entry(fsm, event);
        }
        let own = entry
            .to
            .as_deref()
            .and_then(|to| fsm.transition(&entry.from, to));
        if let (Some(map), Some(own)) = (event.as_object_mut(), own) {
            map.entry("id").or_insert_with(|| own.id_value.clone());
        }
        let id = event.get("id");
        let taken = id
            .and_then(Value::as_array)
            .and_then(|pair| match pair.as_slice() {
                [Value::String(from), Value::String(to)] if *from == *entry.from => {
                    fsm.transition_idx(from, to)
                }
                _ => None,
            });
        let Some(t) = taken else {
            return Err(InputError::NotFromState {
                state: entry.from.to_string(),
                seq: entry.seq,
                id: id.map_or_else(|| "(none)".to_owned(), Value::to_string),
                routes: fsm
                    .transitions
                    .iter()
                    .filter(|t| t.from == entry.from)
                    .map(|t| t.id_value.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        self.check_event(fsm, &fsm.transitions[t], &event)?;
        Ok((t, event))
    }
}
