//! The worker: a long-running process that takes runs from a shared store's queue and
//! drives them — submitted runs, answered waits, runs whose owner died, due timers
//! (expired waits, passed deadlines, scheduled starts), parents whose children ended —
//! with any number of workers, on any number of machines, sharing one store (PostgreSQL;
//! or one SQLite file on one machine).
//!
//! There is no broker: the store is the queue ([`WorkQueue::claim_due`]: locked rows
//! skipped), the timer wheel (each run's wake time, [`WorkQueue::due`]) and the doorbell
//! ([`WorkQueue::listen`]: PostgreSQL's `LISTEN`; SQLite's workers poll). A worker holds
//! the runs it drives under one lease renewed for all of them in one statement
//! ([`WorkQueue::renew_leases`]), hears interrupts by notice (or at that renewal), and on
//! shutdown stops claiming, lets its runs finish within a grace period and hands back the
//! rest. Like `claij-mcp-server` and `claij-server`, it receives an assembled engine and
//! the store's roles it uses (the runs, the work queue) from the binary.
//!
//! - `lib`: [`Worker`], [`WorkerConfig`], the claim loop (runs, and published events
//!   dispatched to the FSMs that subscribe to their topics), shutdown;
//! - `leases`: the renewal task;
//! - `bell`: notices forwarded from the store's subscription;
//! - `dead`: other workers found dead, whose runs can be taken over at once.
//!
//! Every 10 seconds, when something listens (`tracing::enabled!`: telemetry's layer, or
//! logs at `DEBUG`), the worker samples how the queue stands and reports it as a `tracing`
//! event, name and target `claij.queue`, level `DEBUG`, with the store's counts (its
//! `QueueStats`) as `u64` fields: `queued` (runs waiting for a worker now), `scheduled`
//! (scheduled starts not due yet), `timers_due` (suspended runs whose timer has passed),
//! `timers_pending` (suspended runs with a timer to come) and `held` (runs held by a live
//! lease). claij-telemetry's layer makes them the `claij.queue.runs` gauge.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use claij_core::store::{EventStatus, Notice, RunRecord, RunStore, StoreError};
use claij_engine::{Engine, LeaseKeeper, Observer, RunError, RunOptions, process_owner};
use claij_store::roles::{Due, WorkQueue, WorkerRecord};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

mod bell;
mod dead;
mod leases;

/// How a worker works.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Runs driven at once, at most.
    pub concurrency: u32,
    /// How long a lease lasts unless renewed (renewed every third of it).
    pub lease: Duration,
    /// How often an idle worker looks for work when no notice comes (PostgreSQL's
    /// notices make this a fallback; SQLite's workers rely on it).
    pub poll: Duration,
    /// How long a stopping worker lets its runs go on before handing them back.
    pub grace: Duration,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            concurrency: 16,
            lease: Duration::from_secs(30),
            poll: Duration::from_secs(60),
            grace: Duration::from_secs(30),
        }
    }
}

/// What a worker did, when it stops.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Runs it took from the queue.
    pub claimed: u64,
    /// Runs it drove to an end or a suspension.
    pub finished: u64,
    /// Runs it handed back when it stopped (the grace period ran out).
    pub handed_back: u64,
    /// Published events it dispatched.
    pub dispatched: u64,
}

/// A worker could not start: its store refused to record it.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The store failed.
    #[error("worker: {0}")]
    Store(#[from] StoreError),
}

/// A worker: an engine and a store, and how it works.
pub struct Worker {
    engine: Arc<Engine>,
    store: Arc<dyn RunStore>,
    work_queue: Arc<dyn WorkQueue>,
    config: WorkerConfig,
    id: String,
    observers: Vec<Arc<dyn Observer>>,
}

/// The longest pause between claims when the store says work is due but none could be
/// claimed (another worker holds it locked for a moment).
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// How often the queue's state is sampled (the `claij.queue` event), when something
/// listens.
const QUEUE_SAMPLE_EVERY: Duration = Duration::from_secs(10);

impl Worker {
    /// A worker driving runs of `store`, taken from `work_queue` (the same store, seen as
    /// the workers' queue), with `engine` (whose registry must have the actions the stored
    /// definitions use). Its id, the lease owner of what it drives, is this process's
    /// (`host:pid:started`).
    pub fn new(
        engine: Arc<Engine>,
        store: Arc<dyn RunStore>,
        work_queue: Arc<dyn WorkQueue>,
        config: WorkerConfig,
    ) -> Self {
        Worker {
            engine,
            store,
            work_queue,
            config: WorkerConfig {
                concurrency: config.concurrency.max(1),
                ..config
            },
            id: process_owner(),
            observers: Vec::new(),
        }
    }

    /// Tells `observer` of every run this worker drives, besides the engine's observers:
    /// a server with a worker in its own process (plain `claij serve`) follows the runs
    /// the worker takes up — their event streams and completion callbacks — as its own.
    pub fn observed_by(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observers.push(observer);
        self
    }

    /// Reports how the queue stands (the `claij.queue` event).
    async fn sample_queue(&self) {
        match self.work_queue.queue().await {
            Ok(queue) => tracing::debug!(
                name: "claij.queue",
                target: "claij.queue",
                queued = queue.queued,
                scheduled = queue.scheduled,
                timers_due = queue.timers_due,
                timers_pending = queue.timers_pending,
                held = queue.held,
                "the queue sampled"
            ),
            Err(e) => tracing::debug!(error = %e, "sampling the queue failed"),
        }
    }

    /// The worker's id: the lease owner of the runs it drives.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Works until `shutdown` is cancelled, then drains: stops claiming, lets the runs it
    /// drives go on for the grace period, hands back those still going, forgets itself and
    /// returns. Nothing is lost either way: a handed-back run continues on another worker
    /// from its last committed transition.
    pub async fn run(self, shutdown: CancellationToken) -> Result<WorkerReport, WorkerError> {
        let now = SystemTime::now();
        self.work_queue
            .put_worker(&WorkerRecord {
                id: self.id.clone(),
                host: self.id.split(':').next().unwrap_or_default().to_owned(),
                concurrency: self.config.concurrency,
                holding: 0,
                started_at: now,
                renewed_at: now,
            })
            .await?;
        tracing::info!(worker = %self.id, store = %self.store.describe(), concurrency = self.config.concurrency, "worker started");
        let keeper = LeaseKeeper::new();
        let stop_renewing = CancellationToken::new();
        let renewals = leases::spawn(
            self.work_queue.clone(),
            self.id.clone(),
            keeper.clone(),
            self.config.lease,
            stop_renewing.clone(),
        );
        let (notices_tx, mut notices) = mpsc::channel::<Notice>(64);
        let stop_listening = CancellationToken::new();
        let listener = bell::spawn(self.work_queue.clone(), notices_tx, stop_listening.clone());
        let mut dead = dead::DeadOwners::new(self.config.lease);
        let mut tasks: JoinSet<()> = JoinSet::new();
        let mut report = WorkerReport::default();
        let mut backoff = Duration::from_millis(50);
        let mut listening = true;
        // The earliest timer announced by a notice.
        let mut announced: Option<SystemTime> = None;
        let mut sampled: Option<std::time::Instant> = None;
        while !shutdown.is_cancelled() {
            while tasks.try_join_next().is_some() {
                report.finished += 1;
            }
            if tracing::enabled!(target: "claij.queue", tracing::Level::DEBUG)
                && sampled.is_none_or(|at| at.elapsed() >= QUEUE_SAMPLE_EVERY)
            {
                sampled = Some(std::time::Instant::now());
                self.sample_queue().await;
            }
            let found_dead = dead.refresh(self.work_queue.as_ref(), &self.id).await;
            let free = self.config.concurrency.saturating_sub(tasks.len() as u32);
            // Asleep by default until the poll: a timer, a notice, a run ending or
            // shutdown wakes it sooner.
            let mut sleep_for = self.config.poll;
            if free > 0 {
                // One statement tells whether anything is due and when the next timer is;
                // a claim is made only when something is (a dead worker's runs are due
                // before their leases end, which only a claim naming it finds).
                let due = match self.work_queue.due().await {
                    Ok(due) => due,
                    Err(e) => {
                        tracing::warn!(error = %e, "looking for due runs failed; trying again");
                        Due {
                            now: true,
                            next: None,
                        }
                    }
                };
                if due.now || found_dead {
                    report.dispatched += self.dispatch_events(free, dead.owners()).await;
                }
                if due.now || found_dead {
                    let until = SystemTime::now() + self.config.lease;
                    let claimed = match self
                        .work_queue
                        .claim_due(&self.id, until, free, dead.owners())
                        .await
                    {
                        Ok(runs) => {
                            let claimed = runs.len() as u32;
                            report.claimed += u64::from(claimed);
                            for record in runs {
                                tasks.spawn(self.drive(record, keeper.clone()));
                            }
                            claimed
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "claiming runs failed; trying again");
                            0
                        }
                    };
                    if claimed > 0 {
                        backoff = Duration::from_millis(50);
                        // There may be more: look again at once.
                        continue;
                    }
                    if due.now {
                        // Due, but locked by another claimer for a moment.
                        sleep_for = backoff;
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                    }
                }
                if let Some(next) = due.next {
                    let until = next.duration_since(SystemTime::now()).unwrap_or_default();
                    sleep_for = sleep_for.min(until + Duration::from_millis(5));
                }
            }
            if let Some(at) = announced.take() {
                let until = at.duration_since(SystemTime::now()).unwrap_or_default();
                sleep_for = sleep_for.min(until + Duration::from_millis(5));
                if !until.is_zero() {
                    announced = Some(at);
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(sleep_for) => {}
                Some(_) = tasks.join_next(), if !tasks.is_empty() => report.finished += 1,
                notice = notices.recv(), if listening => match notice {
                    Some(Notice::Interrupt { run_id }) => {
                        keeper.interrupt(&run_id);
                    }
                    Some(Notice::Work { at: Some(at) }) => {
                        announced = Some(announced.map_or(at, |a| a.min(at)));
                    }
                    Some(Notice::Work { at: None }) => {}
                    // No notices from this store (SQLite): the poll does.
                    None => listening = false,
                },
            }
        }
        // Draining: no more claims; the runs under way get the grace period.
        tracing::info!(worker = %self.id, running = tasks.len(), grace = ?self.config.grace, "worker stopping");
        stop_listening.cancel();
        let drained = tokio::time::timeout(self.config.grace, async {
            while tasks.join_next().await.is_some() {
                report.finished += 1;
            }
        })
        .await;
        if drained.is_err() {
            let held = keeper.run_ids();
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
            stop_renewing.cancel();
            let _ = renewals.await;
            for run_id in held {
                match self.store.release(&run_id, &self.id).await {
                    Ok(true) => report.handed_back += 1,
                    Ok(false) => {}
                    Err(e) => {
                        tracing::warn!(run = %run_id, error = %e, "handing a run back failed; its lease will expire")
                    }
                }
            }
        } else {
            stop_renewing.cancel();
            let _ = renewals.await;
        }
        let _ = listener.await;
        if let Err(e) = self.work_queue.remove_worker(&self.id).await {
            tracing::warn!(error = %e, "forgetting this worker failed");
        }
        tracing::info!(worker = %self.id, claimed = report.claimed, finished = report.finished, handed_back = report.handed_back, "worker stopped");
        Ok(report)
    }

    /// Dispatches up to `limit` published events (each starts one run of every FSM whose
    /// trigger takes it); returns how many were settled. A failure leaves an event
    /// pending: its claim ends with the lease, and it is dispatched again.
    async fn dispatch_events(&self, limit: u32, dead_owners: &[String]) -> u64 {
        let until = SystemTime::now() + self.config.lease;
        let events = match self
            .store
            .claim_events(&self.id, until, limit, dead_owners)
            .await
        {
            Ok(events) => events,
            Err(e) => {
                tracing::warn!(error = %e, "claiming published events failed; trying again");
                return 0;
            }
        };
        let mut settled = 0;
        for event in &events {
            match self.engine.dispatch(&self.store, event).await {
                Ok(dispatch) => {
                    settled += 1;
                    if dispatch.status == EventStatus::Unmatched {
                        tracing::warn!(event = %event.id, topic = %event.topic, note = dispatch.note.as_deref().unwrap_or(""), "an event started nothing; kept as unmatched");
                    } else {
                        tracing::debug!(event = %event.id, runs = ?dispatch.runs, "event dispatched");
                    }
                }
                Err(e) => {
                    tracing::warn!(event = %event.id, error = %e, "dispatching an event failed; it will be dispatched again")
                }
            }
        }
        settled
    }

    /// Drives one claimed run to its end or suspension (errors are logged: the run is
    /// where its last commit left it, and another worker or a later claim continues it).
    fn drive(
        &self,
        record: RunRecord,
        keeper: LeaseKeeper,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let engine = self.engine.clone();
        let store = self.store.clone();
        let owner = self.id.clone();
        let lease = self.config.lease;
        let observers = self.observers.clone();
        async move {
            let fsm = match engine.stored_fsm(store.as_ref(), &record).await {
                Ok(fsm) => fsm,
                Err(e) => {
                    tracing::error!(run = %record.id, error = %e, "cannot load the run's definition; handing it back");
                    let _ = store.release(&record.id, &owner).await;
                    return;
                }
            };
            let options = RunOptions {
                store: Some(store.clone()),
                owner: Some(owner.clone()),
                lease: Some(lease),
                lease_keeper: Some(keeper),
                observers,
                ..RunOptions::default()
            };
            match engine.continue_claimed(fsm, &record, options).await {
                Ok(outcome) => {
                    tracing::debug!(run = %record.id, status = %outcome.status, "run driven");
                    // A new timer: every worker should know when it is due.
                    if let Some(at) = outcome.wait.as_ref().and_then(|w| w.wakes_at()) {
                        let _ = store.notify(&Notice::Work { at: Some(at) }).await;
                    }
                }
                // Taken over by another worker: it is theirs now.
                Err(RunError::Store(StoreError::LostLease { .. })) => {
                    tracing::info!(run = %record.id, "run taken over by another worker")
                }
                // Anything else (the store failed, say): the run stays where its last commit
                // left it, and is handed back for another try.
                Err(e) => {
                    tracing::warn!(run = %record.id, error = %e, "run stopped; handing it back");
                    let _ = store.release(&record.id, &owner).await;
                }
            }
        }
    }
}
