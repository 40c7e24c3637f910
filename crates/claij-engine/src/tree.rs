//! The run tree: child runs (sub-FSMs, fork branches) started or continued by their
//! parent's action, parents woken when a child they wait for ends, definitions loaded
//! back from the store, and chains of FSMs continuing one another's trail.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use claij_core::store::{RunRecord, RunStore, StoreError};
use claij_core::trail::without_id;
use claij_core::{Fsm, KnownActions};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::action::{ActionHost, BoxFuture, RunScope};
use crate::capability::Policy;
use crate::durable::is_dead_local_owner;
use crate::run::{Engine, RunError, RunOptions, RunOutcome, RunStatus};

pub use crate::action::ChildRun;

/// How long a woken child waits for a parent that is still running (in its own process,
/// about to notice the child ended or to suspend) before leaving it be.
const WAKE_PATIENCE: Duration = Duration::from_secs(3);

/// How often a parent looks again at a child another process holds.
const HELD_CHILD_POLL: Duration = Duration::from_millis(100);

/// How many times a parent looks again at a child claimed by another process between
/// its look and its claim before it reports the conflict.
const MAX_CHILD_CONFLICTS: u32 = 5;

/// Whether `record` is a running run held by a live lease (its holder goes on with it).
fn held_elsewhere(record: &RunRecord) -> bool {
    record.status == RunStatus::Running
        && record
            .lease
            .as_ref()
            .is_some_and(|l| l.until > SystemTime::now() && !is_dead_local_owner(&l.owner))
}

impl Engine {
    /// The definition a stored run is pinned to, loaded (and checked) with this engine's
    /// registry; cached by content hash. Public for callers that resume stored runs, which
    /// must resume them with that definition.
    pub async fn stored_fsm(
        &self,
        store: &dyn RunStore,
        record: &RunRecord,
    ) -> Result<Arc<Fsm>, RunError> {
        self.stored_definition(store, &record.fsm_id, record.version, &record.hash)
            .await
            .map_err(|e| match e {
                RunError::NotResumable { reason, .. } => RunError::NotResumable {
                    run: record.id.clone(),
                    reason: format!("is pinned to {reason}"),
                },
                e => e,
            })
    }

    /// A stored definition by id, version and hash, loaded (and checked) with this
    /// engine's registry; cached by content hash.
    pub async fn stored_definition(
        &self,
        store: &dyn RunStore,
        fsm_id: &str,
        version: u32,
        hash: &str,
    ) -> Result<Arc<Fsm>, RunError> {
        if let Some(fsm) = self
            .loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(hash)
        {
            return Ok(fsm.clone());
        }
        let definition = store.definition(fsm_id, version, Some(hash)).await?;
        let fsm = claij_core::load_definition(&definition, self.registry()).map_err(|d| {
            RunError::NotResumable {
                run: String::new(),
                reason: format!("a definition that no longer loads: {d}"),
            }
        })?;
        let fsm = Arc::new(fsm);
        self.loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(hash.to_owned(), fsm.clone());
        Ok(fsm)
    }

    /// Starts a child run of the run `parent` — or, when the store already holds a run
    /// with the child's id (the parent's attempt is made again after a crash or a
    /// resume), takes it where it is: a finished or suspended child is reported as it
    /// stands, a crashed one is continued, one waiting for children of its own tries
    /// again.
    ///
    /// Public for actions that start runs of their own, as `fsm` and `fork` do (their
    /// [`RunScope`] gives the store, owner and lease the child shares).
    pub async fn run_child(
        &self,
        scope: &RunScope<'_>,
        parent: &str,
        child: ChildRun,
        cancel: CancellationToken,
    ) -> Result<RunOutcome, RunError> {
        let options = RunOptions {
            run_id: Some(child.run_id.clone()),
            context: child.context,
            deadline: child.deadline,
            cancel,
            observers: Vec::new(),
            store: scope.store.cloned(),
            owner: scope.owner.map(str::to_owned),
            lease: scope.lease,
            lease_keeper: scope.lease_keeper.cloned(),
            parent: Some(parent.to_owned()),
            prior_trail: child.prior_trail,
            budget: None,
            ledger: scope.ledger.cloned(),
            wait_seq: None,
            model: scope.model.map(str::to_owned),
            idempotency_key: None,
        };
        if let Some(store) = scope.store {
            match store.run(&child.run_id).await {
                Ok(record) => return self.continue_child(store, record, options).await,
                Err(StoreError::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let Some(fsm) = child.fsm else {
            return Err(RunError::NotResumable {
                run: child.run_id,
                reason: "is not in the store and its FSM was not given".into(),
            });
        };
        let found_later = options.clone();
        match self.run(fsm, child.input, options).await {
            // Created since it was looked for: by another process driving the same parent
            // (whose lease ran out while it went on). Taken up as if it had been found.
            Err(RunError::Store(conflict @ StoreError::Conflict { .. })) => {
                let Some(store) = scope.store else {
                    return Err(conflict.into());
                };
                match store.run(&child.run_id).await {
                    Ok(record) => self.continue_child(store, record, found_later).await,
                    Err(_) => Err(conflict.into()),
                }
            }
            outcome => outcome,
        }
    }

    /// Takes up a child found in the store: continues one that goes on, reports one that
    /// ended or waits for an input as it stands. A child another process holds — the
    /// parent's previous driver, whose lease on the parent ran out while it went on — is
    /// waited for until its holder lets it go (ends it, hands it back, or dies and its
    /// lease lapses), never counted a failure for being busy elsewhere.
    async fn continue_child(
        &self,
        store: &Arc<dyn RunStore>,
        mut record: RunRecord,
        options: RunOptions,
    ) -> Result<RunOutcome, RunError> {
        let mut conflicts = 0;
        loop {
            if held_elsewhere(&record) {
                tokio::select! {
                    // The parent's attempt is over (its join decided): the child is
                    // reported as it stands, still running.
                    _ = options.cancel.cancelled() => {
                        return Ok(RunOutcome::stored(store.as_ref(), record).await?);
                    }
                    _ = tokio::time::sleep(HELD_CHILD_POLL) => {}
                }
                record = store.run(&record.id).await?;
                continue;
            }
            // A child waiting for children of its own, or stopped for a budget (which its
            // parent's resume may have raised), tries again; one waiting for an input is
            // reported as it stands.
            let goes_on = record.wait.as_ref().is_some_and(|w| !w.takes_input());
            if record.status != RunStatus::Running
                && !(record.status == RunStatus::Suspended && goes_on)
            {
                return Ok(RunOutcome::stored(store.as_ref(), record).await?);
            }
            let fsm = self.stored_fsm(store.as_ref(), &record).await?;
            let options = RunOptions {
                prior_trail: Vec::new(),
                ..options.clone()
            };
            match self.resume_run(fsm, &record.id, None, options).await {
                // Claimed by another process between the look and the claim: looked at
                // again (and waited for, if it is held now).
                Err(RunError::Store(conflict @ StoreError::Conflict { .. })) => {
                    conflicts += 1;
                    if conflicts > MAX_CHILD_CONFLICTS {
                        return Err(conflict.into());
                    }
                    record = store.run(&record.id).await?;
                }
                outcome => return outcome,
            }
        }
    }

    /// Lets `parent` continue after one of its children ended: a parent suspended for
    /// its children is resumed (its action tries again); a parent whose process died is
    /// taken over; a parent still running in its own process is given a moment to
    /// suspend (it re-reads its children before it does) and otherwise left be.
    pub(crate) fn wake<'a>(
        &'a self,
        store: &'a Arc<dyn RunStore>,
        parent: &'a str,
        options: &'a RunOptions,
    ) -> BoxFuture<'a, Result<Option<RunOutcome>, RunError>> {
        Box::pin(async move {
            let give_up = Instant::now() + WAKE_PATIENCE;
            loop {
                let record = store.run(parent).await?;
                let waits = record.wait.as_ref().is_some_and(|w| !w.children.is_empty());
                let go = match record.status {
                    RunStatus::Suspended => waits,
                    RunStatus::Running if !held_elsewhere(&record) => true,
                    RunStatus::Running if Instant::now() < give_up => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                    _ => false,
                };
                if !go {
                    return Ok(None);
                }
                let fsm = self.stored_fsm(store.as_ref(), &record).await?;
                let options = RunOptions {
                    run_id: None,
                    parent: None,
                    prior_trail: Vec::new(),
                    cancel: CancellationToken::new(),
                    // The parent finds its budgets in the store.
                    budget: None,
                    ledger: None,
                    // The wait a child's answer was meant for is not the parent's.
                    wait_seq: None,
                    ..options.clone()
                };
                return match self.resume(fsm, parent, None, options).await {
                    Ok(outcome) => Ok(Some(outcome)),
                    // Another child's resume woke it first.
                    Err(RunError::Store(StoreError::Conflict { .. })) => Ok(None),
                    Err(e) => Err(e),
                };
            }
        })
    }

    /// Runs `fsms` one after the other, each continuing the previous one's trail (so the
    /// next FSM's prompts show the whole conversation) and taking the previous one's
    /// result (without its `id`) as its input. Stops at the first run that does not
    /// complete. Returns every run's outcome, in order; the last one's trail holds the
    /// whole chain.
    ///
    /// `options.run_id`, when given, names the first run; the next ones get `ID.2`,
    /// `ID.3`, ….
    pub async fn chain(
        &self,
        fsms: &[Arc<Fsm>],
        input: Value,
        options: RunOptions,
    ) -> Result<Vec<RunOutcome>, RunError> {
        let mut outcomes: Vec<RunOutcome> = Vec::with_capacity(fsms.len());
        let mut input = input;
        for (i, fsm) in fsms.iter().enumerate() {
            let prior_trail = outcomes.last().map(|o| o.trail.clone()).unwrap_or_default();
            let run_id = match (&options.run_id, i) {
                (Some(id), 0) => Some(id.clone()),
                (Some(id), i) => Some(format!("{id}.{}", i + 1)),
                (None, _) => None,
            };
            let outcome = self
                .run(
                    fsm.clone(),
                    input,
                    RunOptions {
                        run_id,
                        prior_trail,
                        idempotency_key: options.idempotency_key.clone().filter(|_| i == 0),
                        ..options.clone()
                    },
                )
                .await?;
            let done = outcome.status == RunStatus::Completed;
            input = outcome.result.as_ref().map(content).unwrap_or_default();
            outcomes.push(outcome);
            if !done {
                break;
            }
        }
        Ok(outcomes)
    }
}

/// A child's result as handed on: its content, without the route it took.
pub(crate) fn content(result: &Value) -> Value {
    without_id(result).into_owned()
}

/// What the actions an engine runs may ask of it.
impl ActionHost for Engine {
    fn policy(&self) -> &Policy {
        Engine::policy(self)
    }

    fn known_actions(&self) -> &(dyn KnownActions + Sync) {
        self.registry()
    }

    fn cassette(&self) -> Option<&Arc<dyn crate::cassette::Cassette>> {
        self.registry().cassette()
    }

    fn run_child<'a>(
        &'a self,
        scope: &'a RunScope<'a>,
        parent: &'a str,
        child: ChildRun,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<RunOutcome, RunError>> {
        Box::pin(Engine::run_child(self, scope, parent, child, cancel))
    }

    fn stored_fsm<'a>(
        &'a self,
        store: &'a dyn RunStore,
        record: &'a RunRecord,
    ) -> BoxFuture<'a, Result<Arc<Fsm>, RunError>> {
        Box::pin(Engine::stored_fsm(self, store, record))
    }
}
