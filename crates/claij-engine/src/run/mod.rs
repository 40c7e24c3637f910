//! Running FSMs: the [`Engine`], which [starts](Engine::run) runs, [resumes](Engine::resume)
//! them from their store (a suspended run given its input, a crashed run, an expired
//! wait), and [`interrupt`], which stops one from any process. The loop itself is in
//! `drive`; child runs are in `tree`.
//!
//! - `start`: a new run, from its input's entry transition;
//! - `resume`: a stored run continued;
//! - `claimed`: a run this process claimed, rebuilt from its store and driven on;
//! - `fork`: a new run from an earlier one's trail, at one of its entries (time travel);
//! - `claim`: claims of stored runs given back when what follows them fails;
//! - `interrupt`: a stored run stopped;
//! - `queue`: runs put in the store's queue for workers (submitted, answered);
//! - `options`: what a run is given (how it ends and why it could not run are the
//!   crate's `outcome` and `error`, which the loop and the actions share);
//! - `id`: run ids.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use claij_core::{Fsm, TrailEntry};
use serde_json::Value;

use crate::drive::{Clock, RunState};
use crate::durable::{DEFAULT_LEASE, Durable, process_owner};

mod claim;
mod claimed;
mod fork;
mod id;
mod interrupt;
mod options;
mod queue;
mod resume;
mod start;

pub use crate::engine::Engine;
pub use crate::error::{InputError, RunError};
pub use crate::outcome::RunOutcome;
pub use claij_core::store::RunStatus;
pub use fork::ForkAt;
pub use id::new_run_id;
pub use interrupt::interrupt;
pub use options::RunOptions;
pub use queue::{Submission, Submitted};

impl Engine {
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
            model: options.model.clone(),
            spend: claij_core::Spend::default(),
            taken_up: Instant::now(),
            budget_routed: false,
        }
    }
}
