//! Other workers found dead — on this host with their process gone, or on any host with
//! no renewal for three leases — whose runs can be taken over at once instead of when
//! their leases expire. Looked for when the worker starts and every three leases after.

use std::time::{Duration, Instant, SystemTime};

use claij_engine::is_dead_local_owner;
use claij_store::roles::WorkQueue;

/// The dead workers known, and when to look again.
pub(crate) struct DeadOwners {
    lease: Duration,
    owners: Vec<String>,
    next_look: Instant,
}

impl DeadOwners {
    pub(crate) fn new(lease: Duration) -> Self {
        DeadOwners {
            lease,
            owners: Vec::new(),
            next_look: Instant::now(),
        }
    }

    /// The dead owners' ids, for claims.
    pub(crate) fn owners(&self) -> &[String] {
        &self.owners
    }

    /// Looks at the recorded workers when it is time: the dead ones are forgotten (their
    /// runs stay claimable by their ids until their leases would have ended anyway).
    /// Returns whether this look found any.
    pub(crate) async fn refresh(&mut self, store: &dyn WorkQueue, me: &str) -> bool {
        if Instant::now() < self.next_look {
            return false;
        }
        // Leases end by themselves meanwhile; a look is only a faster way to find them.
        self.next_look = Instant::now() + self.lease * 3;
        let workers = match store.workers().await {
            Ok(workers) => workers,
            Err(e) => {
                tracing::warn!(error = %e, "listing workers failed");
                return false;
            }
        };
        let now = SystemTime::now();
        // Owners found in an earlier look: their leases have ended by now.
        self.owners.clear();
        for worker in workers.into_iter().filter(|w| w.id != me) {
            let silent = worker.renewed_at + self.lease * 3 < now;
            if silent || is_dead_local_owner(&worker.id) {
                tracing::info!(worker = %worker.id, "found a dead worker; taking over its runs");
                let _ = store.remove_worker(&worker.id).await;
                self.owners.push(worker.id);
            }
        }
        !self.owners.is_empty()
    }
}
