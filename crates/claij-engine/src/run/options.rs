//! [`RunOptions`]: how a run is started or resumed (its id, context, deadline,
//! cancellation, observers, store, lease and its keeper, parent and prior trail, the wait
//! an answer is meant for, its model).

use std::sync::Arc;
use std::time::Duration;

use claij_core::TrailEntry;
use claij_core::store::RunStore;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::durable::LeaseKeeper;
use crate::observer::Observer;

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
    /// The lease owner (default: this process, `host:pid:started`, see
    /// [`process_owner`](crate::process_owner)).
    pub owner: Option<String>,
    /// How long a lease lasts unless renewed (default 30 s).
    pub lease: Option<Duration>,
    /// Who renews the lease: by default each run renews its own (and checks for
    /// interrupts) from a heartbeat task; a worker driving many runs keeps all of them in
    /// one [`LeaseKeeper`] instead, renewed together. Child runs share their parent's.
    pub lease_keeper: Option<LeaseKeeper>,
    /// The parent run, for child runs.
    pub parent: Option<String>,
    /// Entries of earlier runs this run continues (a chain: the next FSM sees the whole
    /// conversation). They head the run's trail, renumbered from 0, and keep the `fsm`
    /// and `version` of the run that made them.
    pub prior_trail: Vec<TrailEntry>,
    /// What the run and its children may spend together (`claij run --budget`): its
    /// limits take the place of the same ones in the FSM's `config.budget`.
    pub budget: Option<claij_core::Budget>,
    /// The budget of the run's ancestors, which a child run shares (the engine sets it
    /// for the children it starts; a child resumed on its own finds its ancestors'
    /// budgets in the store).
    pub ledger: Option<crate::spend::Ledger>,
    /// For a resume or an answer: the wait it is meant for, as the run's trail length when
    /// that wait began (a resume link's `wait_seq`, or the `trail_len` of the record the
    /// answer was made from). A run found in another wait — answered meanwhile, even if it
    /// waits again since — refuses it with a conflict and nothing changes, so an answer
    /// never answers a later wait than its own. `None`: the wait the run is found in.
    pub wait_seq: Option<u64>,
    /// The run's model: what its `llm` states use when neither the state nor the event
    /// names one (a server request's `model`); its child runs share it. `None`: the
    /// model layer's choice (the command's `--model`, else the default).
    pub model: Option<String>,
    /// The key a new run is stored under (an API client's `Idempotency-Key`): a second
    /// start with the same key is refused with a conflict, and the store finds the first
    /// run by it. Only a start uses it; a chain gives it to its first run.
    pub idempotency_key: Option<String>,
}
