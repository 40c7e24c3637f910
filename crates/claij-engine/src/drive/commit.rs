//! Checkpoints and ends: what is not committed yet written to the store (the trail's
//! delta, the position, the context, the wait and the lease) before every attempt, and
//! the run's end (or suspension) written, then told to the observers.

use std::sync::atomic::Ordering;
use std::time::{Instant, SystemTime};

use claij_core::store::{Checkpoint, RunStatus, StoreError, Wait};
use claij_core::{START, State};

use super::RunState;
use crate::durable::Durable;
use crate::observer::Commit;
use crate::outcome::RunOutcome;

impl RunState<'_> {
    /// Commits what is not committed yet and hands the run back to the queue, running and
    /// held by no one, in `state` (an answered wait, for a worker to continue).
    pub(crate) async fn hand_back(mut self, state: &str) -> Result<(), StoreError> {
        self.commit(RunStatus::Running, state, None, None).await
    }

    /// Commits the answer just appended (and clears the wait), still running in `state`.
    pub(crate) async fn commit_answer(&mut self, state: &str) -> Result<(), StoreError> {
        let lease_until = self.durable.as_ref().map(Durable::lease_until);
        self.commit(RunStatus::Running, state, None, lease_until)
            .await
    }

    /// Suspends the run again in `state` with the wait it had (a claim that was not used).
    pub(crate) async fn suspend_again(
        self,
        state: &State,
        wait: Wait,
    ) -> Result<RunOutcome, StoreError> {
        Box::pin(self.finish(RunStatus::Suspended, &state.id, Some(wait))).await
    }

    /// Ends the run `failed` in `state` (an expired wait with nowhere to go).
    pub(crate) async fn fail_here(self, state: &State) -> Result<RunOutcome, StoreError> {
        let _heartbeat = self
            .durable
            .as_ref()
            .map(|d| d.heartbeat(&self.run_id, &self.cancel));
        Box::pin(self.finish(RunStatus::Failed, &state.id, None)).await
    }

    /// Commits what is not committed yet (no-op without a store, or when nothing
    /// changed), renewing the lease.
    pub(super) async fn checkpoint(
        &mut self,
        status: RunStatus,
        state: &str,
    ) -> Result<(), StoreError> {
        if self.committed == self.trail.len() && !self.context_dirty {
            return Ok(());
        }
        let lease_until = self.durable.as_ref().map(Durable::lease_until);
        self.commit(status, state, None, lease_until).await
    }

    /// Writes the uncommitted trail delta, the position, the context if it changed, the
    /// wait and the lease (`None` releases it) — nothing without a store.
    pub(super) async fn commit(
        &mut self,
        status: RunStatus,
        state: &str,
        wait: Option<Wait>,
        lease_until: Option<SystemTime>,
    ) -> Result<(), StoreError> {
        let Some(durable) = &self.durable else {
            return Ok(());
        };
        let (began, clock) = (SystemTime::now(), Instant::now());
        let entries = self.trail.len() - self.committed;
        let written = durable
            .store
            .commit(Checkpoint {
                run_id: self.run_id.clone(),
                owner: durable.owner.clone(),
                entries: self.trail[self.committed..].to_vec(),
                status,
                state: state.to_owned(),
                context: self.context_dirty.then(|| self.context.clone()),
                wait,
                lease_until,
                published: std::mem::take(&mut self.published),
                spend: self.spend_now(),
            })
            .await;
        let error = written.as_ref().err().map(ToString::to_string);
        let commit = Commit {
            entries,
            status,
            began,
            took: clock.elapsed(),
            error: error.as_deref(),
        };
        for o in &self.observers {
            o.committed(&self.run_id, &commit);
        }
        written?;
        self.committed = self.trail.len();
        self.context_dirty = false;
        Ok(())
    }

    /// Ends (or suspends) the run: commits the rest of the trail with the final status,
    /// releasing the lease, then tells the observers.
    ///
    /// Its callers box it: a run's future lives as long as the run, and this one's 1.4 KB
    /// is needed only once, at the end (it would otherwise be part of every run's size).
    pub(super) async fn finish(
        mut self,
        status: RunStatus,
        state: &str,
        wait: Option<Wait>,
    ) -> Result<RunOutcome, StoreError> {
        if self
            .durable
            .as_ref()
            .is_some_and(|d| d.lost.load(Ordering::SeqCst))
        {
            return Err(StoreError::LostLease {
                run: self.run_id.clone(),
            });
        }
        self.commit(status, state, wait.clone(), None).await?;
        self.end_as_written(status, state, wait)
    }

    /// The run as its store has it, taken elsewhere while this process held its question's
    /// request open: its end told to the observers when it has ended.
    pub(super) async fn taken_elsewhere(self) -> Result<RunOutcome, StoreError> {
        let Some(durable) = &self.durable else {
            return Err(StoreError::LostLease {
                run: self.run_id.clone(),
            });
        };
        let record = durable.store.run(&self.run_id).await?;
        if record.status.is_final() {
            for o in &self.observers {
                o.run_finished(&self.run_id, record.status);
            }
        }
        RunOutcome::stored(durable.store.as_ref(), record).await
    }

    /// Ends (or suspends) a run whose end is written already: tells the observers.
    pub(super) fn end_as_written(
        self,
        status: RunStatus,
        state: &str,
        wait: Option<Wait>,
    ) -> Result<RunOutcome, StoreError> {
        for o in &self.observers {
            o.run_finished(&self.run_id, status);
        }
        let result = (status == RunStatus::Completed)
            .then(|| claij_core::trail::last_event(&self.trail).cloned())
            .flatten();
        let spend = self.spend_now();
        Ok(RunOutcome {
            spend,
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
            wait,
            parent: None,
        })
    }
}
