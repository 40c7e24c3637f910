//! The queue `claij worker` processes share: the runs that need a worker, when the next
//! one will, the workers' leases and records, the queue's depth, and the doorbell.

use std::time::SystemTime;

use claij_core::store::{HeldLease, Notice, RunRecord, StoreFuture};
use serde::{Deserialize, Serialize};

/// The queue, the workers' leases and the workers themselves. There is no broker: the
/// store is the queue (locked rows skipped), the timer wheel (each run's wake time) and
/// the doorbell (PostgreSQL's `LISTEN`; SQLite's workers poll). Every method is atomic.
pub trait WorkQueue: Send + Sync {
    /// Takes over up to `limit` runs that need a worker now, for `owner` until `until`,
    /// and returns them as they were before (so a suspended run's wait is known): queued
    /// runs (submitted, answered, scheduled and due), runs whose owner died (an expired
    /// lease, or an owner in `dead_owners`; a child only when its parent is not running,
    /// else its parent continues it), suspended runs whose wait expired or whose deadline
    /// passed, and runs waiting for children of which one ended since. Concurrent
    /// claimers never take the same run (PostgreSQL: rows locked with `SKIP LOCKED`;
    /// SQLite: one writer at a time).
    fn claim_due<'a>(
        &'a self,
        owner: &'a str,
        until: SystemTime,
        limit: u32,
        dead_owners: &'a [String],
    ) -> StoreFuture<'a, Vec<RunRecord>>;

    /// Whether any run needs a worker now, and when the next one will (a scheduled start,
    /// a wait's expiry, a deadline, a lease's end): what a worker with nothing to do sleeps
    /// until. One statement.
    fn due(&self) -> StoreFuture<'_, Due>;

    /// Renews, in one statement, the leases `owner` holds on the runs it drives
    /// (`runs`: a run it holds but no longer drives — its drive failed — is left to expire),
    /// and the worker's own record (`renewed_at`, `holding`: how many runs); returns the
    /// runs it still holds, with whether an interrupt was requested for each.
    fn renew_leases<'a>(
        &'a self,
        owner: &'a str,
        until: SystemTime,
        runs: &'a [String],
    ) -> StoreFuture<'a, Vec<HeldLease>>;

    /// Records a worker (or its new start).
    fn put_worker<'a>(&'a self, worker: &'a WorkerRecord) -> StoreFuture<'a, ()>;

    /// Every recorded worker, oldest first.
    fn workers(&self) -> StoreFuture<'_, Vec<WorkerRecord>>;

    /// Forgets a worker (stopped, or found dead); returns whether it was recorded.
    fn remove_worker<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool>;

    /// The queue's depth: queued runs, the oldest of them, scheduled starts and timers.
    fn queue(&self) -> StoreFuture<'_, QueueStats>;

    /// A subscription to the notices of
    /// [`Leases::notify`](claij_core::store::Leases::notify), from any process: `None`
    /// where the backend has none.
    fn listen(&self) -> StoreFuture<'_, Option<Box<dyn Doorbell>>>;
}

/// Notices delivered to a worker, one at a time.
pub trait Doorbell: Send {
    /// The next notice (waits for it). An error means the subscription broke; the caller
    /// polls, and may listen again.
    fn next(&mut self) -> StoreFuture<'_, Notice>;
}

/// What [`WorkQueue::due`] found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Due {
    /// Whether a run needs a worker now.
    pub now: bool,
    /// When the next one will (the earliest future timer or lease end).
    pub next: Option<SystemTime>,
}

/// A worker process as the store knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerRecord {
    /// Its lease owner id (`host:pid:started`).
    pub id: String,
    /// Its host.
    pub host: String,
    /// How many runs it drives at once, at most.
    pub concurrency: u32,
    /// How many it drove at its last renewal.
    pub holding: u32,
    /// When it started.
    pub started_at: SystemTime,
    /// When it last renewed its leases.
    pub renewed_at: SystemTime,
}

/// The queue's depth ([`WorkQueue::queue`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueStats {
    /// Runs waiting for a worker now (submitted, answered, scheduled and due, or left by
    /// a dead owner whose lease expired).
    pub queued: u64,
    /// When the oldest of them was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest_queued: Option<SystemTime>,
    /// Scheduled starts not due yet.
    pub scheduled: u64,
    /// Suspended runs whose wait expiry or deadline has passed (due now).
    pub timers_due: u64,
    /// Suspended runs with a timer still to come.
    pub timers_pending: u64,
    /// The earliest timer or scheduled start still to come.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_timer: Option<SystemTime>,
    /// Runs held by a live lease (being driven).
    pub held: u64,
}
