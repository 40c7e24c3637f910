//! What an action sees of the engine running it: the [`ActionHost`] (the operator's
//! policy, the actions documents load against, child runs), with the durable settings of
//! its run that child runs share ([`RunScope`]), and the [`ChildRun`]s it may start.

use std::sync::Arc;
use std::time::Duration;

use claij_core::store::{RunRecord, RunStore};
use claij_core::{Fsm, KnownActions, TrailEntry};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::BoxFuture;
use crate::capability::Policy;
use crate::cassette::Cassette;
use crate::error::RunError;
use crate::outcome::RunOutcome;

/// What an action may ask of the engine running it; the [`Engine`](crate::Engine) is it.
pub trait ActionHost: Send + Sync {
    /// What API clients' documents may touch (see
    /// [`Engine::governed_by`](crate::Engine::governed_by)).
    fn policy(&self) -> &Policy;

    /// The actions documents are checked against when they load (the engine's registry).
    fn known_actions(&self) -> &(dyn KnownActions + Sync);

    /// Where the exchanges of the programs and MCP servers actions call are recorded or
    /// replayed from (see [`crate::cassette`]); none by default.
    fn cassette(&self) -> Option<&Arc<dyn Cassette>> {
        None
    }

    /// Starts the child run `child` of `parent` within `scope`, or continues it where the
    /// store has it (see [`Engine::run_child`](crate::Engine::run_child)).
    fn run_child<'a>(
        &'a self,
        scope: &'a RunScope<'a>,
        parent: &'a str,
        child: ChildRun,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<RunOutcome, RunError>>;

    /// The definition a stored run is pinned to (see
    /// [`Engine::stored_fsm`](crate::Engine::stored_fsm)).
    fn stored_fsm<'a>(
        &'a self,
        store: &'a dyn RunStore,
        record: &'a RunRecord,
    ) -> BoxFuture<'a, Result<Arc<Fsm>, RunError>>;
}

/// What an action may use to start runs of its own (sub-FSMs, fork branches): the
/// engine, and the durable settings of the run it belongs to, which child runs share.
#[derive(Clone, Copy)]
pub struct RunScope<'a> {
    /// The engine running the run, as actions see it.
    pub engine: &'a dyn ActionHost,
    /// The run's store, for durable runs.
    pub store: Option<&'a Arc<dyn RunStore>>,
    /// The run's lease owner, for durable runs.
    pub owner: Option<&'a str>,
    /// The run's lease length, for durable runs.
    pub lease: Option<Duration>,
    /// Who keeps the run's lease, when not its own heartbeat (a worker's keeper).
    pub lease_keeper: Option<&'a crate::durable::LeaseKeeper>,
    /// The budget the run's tree shares, which its children share too.
    pub ledger: Option<&'a crate::spend::Ledger>,
    /// The run's model ([`RunOptions::model`](crate::RunOptions::model)), which its
    /// children share too.
    pub model: Option<&'a str>,
}

/// A child run to start (or, with a store, to continue where it is).
#[derive(Debug, Clone)]
pub struct ChildRun {
    /// The child's run id: derived from the parent's, so an attempt made again (after a
    /// crash or a resume) finds the same child.
    pub run_id: String,
    /// The child's FSM, to start it (a child found in the store runs the definition it is
    /// pinned to; `None`: the child must be in the store).
    pub fsm: Option<Arc<Fsm>>,
    /// Its input event.
    pub input: Value,
    /// Its initial context.
    pub context: Value,
    /// Its deadline.
    pub deadline: Option<Duration>,
    /// Entries it continues (chains).
    pub prior_trail: Vec<TrailEntry>,
}
