//! The durable-run contract: what the engine asks of a store, as traits (one per role:
//! [`Runs`], [`Definitions`], [`Spending`], [`Leases`], [`Events`]; [`RunStore`] is them
//! all) with plain data types. Backends (SQLite, PostgreSQL) live in the `claij-store`
//! crate; the engine only sees these traits, so neither depends on the other and the core
//! stays runtime-free (methods return boxed futures; no executor is assumed).
//!
//! A run is kept as: its record (status, current state, context, wait, lease), its trail
//! as appended deltas (one row per entry, keyed by sequence number, so an entry can never
//! be written twice), and the FSM definition it is pinned to (id, version, content hash).
//! Stores keep times to the microsecond (as the trail's JSON does), so what is read back
//! equals what the engine wrote.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::trail::TrailEntry;

/// A boxed, sendable future (what store methods return).
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Where a run is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// In progress (or, if its lease expired, cut off by a crash and waiting to resume).
    Running,
    /// Waiting for a person, a webhook, a timer or a child.
    Suspended,
    /// Reached a terminal state.
    Completed,
    /// Gave up: attempts ran out with no `on_failure` route, or the deadline passed.
    Failed,
    /// Stopped by an interrupt.
    Interrupted,
}

impl RunStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [RunStatus; 5] = [
        RunStatus::Running,
        RunStatus::Suspended,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Interrupted,
    ];

    /// The lowercase word (`running`, …), as stored and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Suspended => "suspended",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Interrupted => "interrupted",
        }
    }

    /// Whether the run is over.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Interrupted
        )
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for RunStatus {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RunStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| {
                format!("unknown run status `{s}`; one of running, suspended, completed, failed, interrupted")
            })
    }
}

/// An FSM definition as stored: runs are pinned to one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Definition {
    /// The FSM's id.
    pub fsm_id: String,
    /// The FSM's version.
    pub version: u32,
    /// The SHA-256 of the document's canonical JSON, hex.
    pub hash: String,
    /// The document (JSON), to load the definition again.
    pub document: Value,
    /// When it was first stored.
    pub created_at: SystemTime,
    /// Who gave it: the operator, or an API client (the default when unknown). Storing
    /// the same definition as the operator's makes it the operator's; nothing makes an
    /// operator's definition a client's.
    #[serde(default)]
    pub owner: crate::fsm::Owner,
}

impl Definition {
    /// The definition of a loaded document, stored now.
    pub fn of(fsm: &crate::Fsm) -> Self {
        Definition {
            fsm_id: fsm.id.to_string(),
            version: fsm.version,
            hash: fsm.hash.clone(),
            document: fsm.document.clone(),
            created_at: SystemTime::now(),
            owner: fsm.owner,
        }
    }
}

/// What a suspended run waits for: an event taking one of these transitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Wait {
    /// The state that waits.
    pub state: String,
    /// The transitions the input may take (`[state, to]` pairs).
    pub transitions: Vec<(String, String)>,
    /// The schema the input must satisfy (the union of those transitions' effective
    /// schemas, shared schemas by `$ref`), for people and tools.
    pub schema: Value,
    /// When the wait expires, if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<SystemTime>,
    /// Where the run goes when the wait expires (a transition `[state, target]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_expiry: Option<String>,
    /// What the person is asked, if the state says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// The child runs the run waits for (sub-FSMs, fork branches waiting for a person):
    /// such a run takes no input; it continues when its children are done.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<String>,
    /// When the run's deadline passes while it waits, if it has one: the run is then
    /// continued without input and its deadline's failure followed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_at: Option<SystemTime>,
    /// Why the run stopped for a budget, when it did: such a run takes no input; it goes
    /// on when resumed after its budget was raised (`claij runs resume RUN --budget …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Box<crate::budget::BudgetPause>>,
    /// The question an MCP server asked, when the run stopped for one: its answer (see
    /// [`Question::answer`](crate::Question::answer)) is the input the run takes; `schema`
    /// is then the question's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<Box<crate::Question>>,
    /// For a question: the process that asked holds the server's request open until
    /// `until`. An answer given before then is recorded and the run handed back to that
    /// process (the server gets the answer in the request it is waiting on); after it,
    /// whoever answers makes the attempt again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<Lease>,
}

impl Wait {
    /// The hold on this wait's question, while it lasts at `now`.
    pub fn held_at(&self, now: SystemTime) -> Option<&Lease> {
        self.held.as_ref().filter(|h| h.until > now)
    }
}

impl Wait {
    /// Whether the run waits for an input (a person's answer, a webhook's call): not for
    /// its child runs, nor for its budget to be raised.
    pub fn takes_input(&self) -> bool {
        self.children.is_empty() && self.budget.is_none()
    }

    /// When the wait needs a worker without any input: the earlier of its expiry and the
    /// run's deadline (`None`: only an input, or a child's end, moves it).
    pub fn wakes_at(&self) -> Option<SystemTime> {
        match (self.expires_at, self.deadline_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Who is running a run, until when. A lease that is not renewed expires, and the run
/// may then be resumed by anyone (a crash recovery).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The owner: the process running it, as `host:pid:started` (the engine's
    /// `process_owner`: `started` tells a later process reusing the pid apart).
    pub owner: String,
    /// When the lease ends unless renewed.
    pub until: SystemTime,
}

/// A run's record (its trail is kept apart, see [`Runs::trail`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run's id.
    pub id: String,
    /// The FSM's id.
    pub fsm_id: String,
    /// The FSM's version.
    pub version: u32,
    /// The definition's content hash: the run is pinned to it.
    pub hash: String,
    /// The parent run, for child runs (sub-FSMs, branches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Status.
    pub status: RunStatus,
    /// The current state (for final runs, the state they ended in).
    pub state: String,
    /// The context.
    pub context: Value,
    /// How many trail entries are stored (the next entry's sequence number).
    pub trail_len: u64,
    /// What a suspended run waits for (kept on a claimed run until its claimer's first
    /// commit: a claimer that died before it leaves the wait to the next one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<Wait>,
    /// Who runs it, while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// Whether an interrupt was requested (by another process).
    #[serde(default)]
    pub interrupt_requested: bool,
    /// A queued run (running, held by no one) that must not start before this time: a
    /// scheduled start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<SystemTime>,
    /// The key the run was submitted with: a second submission with the same key finds
    /// this run instead of creating another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// What the run itself spent (its own trail's model calls, its time running and
    /// waiting); its tree's totals come from [`Spending::tree_spend`].
    #[serde(default)]
    pub spend: crate::budget::Spend,
    /// What the run and its children may spend together, when limited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::budget::Budget>,
    /// Model calls in flight when the run was last committed (a crash leaves them here:
    /// the run taken over records them as spent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<crate::budget::PendingCalls>,
    /// The run and trail entry this run was forked from (time travel: its trail is that
    /// run's up to the entry, the entry's event perhaps replaced), for a fork.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkPoint>,
    /// When it started.
    pub created_at: SystemTime,
    /// When it last changed.
    pub updated_at: SystemTime,
}

/// Where a forked run came from: the run it was forked from and the trail entry it was
/// forked at. The fork's trail holds that run's entries before `seq` unchanged, then its
/// own entry `seq` (the original's, or an event given in its place), then its own steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkPoint {
    /// The run forked from (kept even if that run is pruned later).
    pub run: String,
    /// The entry of its trail the fork took over (or replaced): the fork's last copied one.
    pub seq: u64,
    /// Whether the entry's event was replaced (else it is the original's, unchanged).
    #[serde(default)]
    pub edited: bool,
}

/// What one commit writes: the new trail entries (a delta, never the whole history) and
/// the run's new position. Committed atomically; visible to others once it returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// The run.
    pub run_id: String,
    /// The committing owner: the commit fails with [`StoreError::LostLease`] unless the
    /// run's lease is still held by it.
    pub owner: String,
    /// New entries, in order, continuing the stored trail exactly (their `seq` must be
    /// `trail_len`, `trail_len + 1`, …).
    pub entries: Vec<TrailEntry>,
    /// The new status.
    pub status: RunStatus,
    /// The new current state.
    pub state: String,
    /// The new context, when it changed.
    pub context: Option<Value>,
    /// The wait, when the run suspends (cleared otherwise).
    pub wait: Option<Wait>,
    /// The renewed lease end while running (`None` releases the lease: suspended or final).
    pub lease_until: Option<SystemTime>,
    /// Events published by the new entries (`publish` states): written in the same
    /// transaction as the rest (the outbox), for workers to dispatch to the FSMs whose
    /// triggers subscribe to their topics.
    pub published: Vec<Published>,
    /// What the run has spent, all told, once these entries are in (written in place of
    /// the stored totals). Every commit also forgets the run's pending calls: their
    /// entries are in.
    pub spend: crate::budget::Spend,
}

/// A run moved to another definition of its FSM, as [`Runs::migrate_run`] writes it:
/// its new pin and position, and the `migrated` entry that records the move.
#[derive(Debug, Clone, PartialEq)]
pub struct Migration {
    /// The run as it was found when the move was planned: the move is made only if it
    /// still is (its status, definition, trail length, lease and last change untouched).
    pub found: RunRecord,
    /// The definition's version it moves to (stored already, same FSM).
    pub version: u32,
    /// That definition's content hash.
    pub hash: String,
    /// Its state there.
    pub state: String,
    /// What it waits for there, when it waits (resume links made for its wait answer the
    /// new one).
    pub wait: Option<Wait>,
    /// The `migrated` entry: its `seq` is the run's trail length.
    pub entry: TrailEntry,
}

/// An event published by a run (a `publish` state), as its checkpoint writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Published {
    /// The event's id: `RUN:SEQ` (the trail entry that published it), so an attempt made
    /// again after a crash publishes the same event, not a second one.
    pub id: String,
    /// The topic.
    pub topic: String,
    /// The event.
    pub event: Value,
}

/// A published event as the store keeps it, with what its dispatch did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    /// The event's id (`RUN:SEQ`).
    pub id: String,
    /// The topic.
    pub topic: String,
    /// The event.
    pub event: Value,
    /// The run that published it.
    pub run_id: String,
    /// Where its dispatch stands.
    pub status: EventStatus,
    /// The runs it started (one per subscribed FSM whose trigger it satisfied).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<String>,
    /// Why it started nothing, or which triggers refused it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// When it was published.
    pub created_at: SystemTime,
    /// When it was dispatched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_at: Option<SystemTime>,
}

/// Where a published event's dispatch stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventStatus {
    /// Not dispatched yet.
    Pending,
    /// It started a run of every subscribed FSM whose trigger it satisfied (at least one).
    Dispatched,
    /// No subscribed FSM's trigger took it: kept, and reported.
    Unmatched,
}

impl EventStatus {
    /// The word stored.
    pub fn as_str(self) -> &'static str {
        match self {
            EventStatus::Pending => "pending",
            EventStatus::Dispatched => "dispatched",
            EventStatus::Unmatched => "unmatched",
        }
    }

    /// The status a stored word names.
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "pending" => Some(EventStatus::Pending),
            "dispatched" => Some(EventStatus::Dispatched),
            "unmatched" => Some(EventStatus::Unmatched),
            _ => None,
        }
    }
}

/// An FSM's subscription to a topic: the definition whose `triggers` name it (the newest
/// registered of that FSM).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    /// The topic.
    pub topic: String,
    /// The FSM's id.
    pub fsm_id: String,
    /// Its version.
    pub version: u32,
    /// Its content hash.
    pub hash: String,
}

/// How a claim takes a run over.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimFrom {
    /// A suspended run, in the wait it was found in: the one that began when its trail
    /// had `trail_len` entries (what a resume link records as its `wait_seq`). Exactly
    /// one of concurrent claimers of a wait wins; once the run has moved past it (answered,
    /// even if it waits again since), the claim fails and nothing changes.
    Suspended {
        /// The run's trail length as found (its record's `trail_len`).
        trail_len: u64,
    },
    /// A running run whose lease expired or whose owner is known dead (crash recovery).
    Stale {
        /// Owners known to be dead (same host, process gone): their leases count as expired.
        dead_owners: Vec<String>,
    },
}

impl ClaimFrom {
    /// A claim of the wait `record` (a suspended run as found) is in.
    pub fn wait_of(record: &RunRecord) -> Self {
        ClaimFrom::Suspended {
            trail_len: record.trail_len,
        }
    }
}

/// Which runs to list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunFilter {
    /// Only these statuses (all when empty).
    pub statuses: Vec<RunStatus>,
    /// Only this FSM.
    pub fsm_id: Option<String>,
    /// Only runs last updated before this time.
    pub updated_before: Option<SystemTime>,
    /// Only runs created at or after this time.
    pub created_since: Option<SystemTime>,
    /// Only runs created before this time.
    pub created_before: Option<SystemTime>,
    /// Only runs listed after this one (newest first: created earlier, or at the same
    /// time with a smaller id): the cursor of a paged listing.
    pub after: Option<RunCursor>,
    /// At most this many (newest first); all when `None`.
    pub limit: Option<u64>,
}

/// A place in the listing of runs (newest first: by creation time, then id): the last
/// run of a page, from which the next page continues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunCursor {
    /// The run's creation time.
    pub created_at: SystemTime,
    /// The run's id.
    pub id: String,
}

impl RunCursor {
    /// The cursor just past `record`.
    pub fn after(record: &RunRecord) -> Self {
        RunCursor {
            created_at: record.created_at,
            id: record.id.clone(),
        }
    }
}

/// How much durability a commit buys.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Survives a crash of the process (SQLite: WAL with `synchronous=NORMAL`;
    /// PostgreSQL: `synchronous_commit=off`: a power loss may lose the last commits —
    /// up to three `wal_writer_delay`s, 600 ms by default — but never corrupts).
    #[default]
    Normal,
    /// Also survives power loss: every commit is on disk before it returns (SQLite:
    /// `synchronous=FULL`, one fsync per commit group; PostgreSQL: `synchronous_commit=on`).
    Strict,
}

/// A store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// No such run or definition.
    #[error("{what} `{id}` is not in the store")]
    NotFound {
        /// `run` or `definition`.
        what: &'static str,
        /// Its id.
        id: String,
    },
    /// The run is not in a state the operation needs (another resume won, say).
    #[error("run `{run}` {reason}")]
    Conflict {
        /// The run.
        run: String,
        /// Why, in words (e.g. "is completed, not suspended").
        reason: String,
    },
    /// The committing process no longer holds the run's lease (another took over).
    #[error("run `{run}` is no longer held by this process (its lease was taken over)")]
    LostLease {
        /// The run.
        run: String,
    },
    /// A trail entry out of sequence (a gap or a duplicate).
    #[error("run `{run}`: trail entry {seq} is out of sequence (the store holds {stored})")]
    Sequence {
        /// The run.
        run: String,
        /// The entry's sequence number.
        seq: u64,
        /// How many entries the store holds.
        stored: u64,
    },
    /// Stored data that cannot be read back.
    #[error("corrupt data in the store ({what}): {message}")]
    Corrupt {
        /// What was being read.
        what: String,
        /// Why it failed.
        message: String,
    },
    /// The database failed (connection, I/O, SQL).
    #[error("store: {0}")]
    Backend(String),
}

/// What the engine asks of a store: every core role. Each role is a trait of its own, so
/// that code can name only the part it uses (`Arc<dyn Runs>`, `&dyn Definitions`, …);
/// this one is implemented for anything that has them all, and a `dyn RunStore` upcasts
/// to any of them. The HTTP server's resume links, callbacks and deliveries, and the
/// workers' queue, are roles of the `claij-store` crate (`claij_store::roles`): the core
/// knows nothing of webhooks or workers.
pub trait RunStore: Runs + Definitions + Spending + Leases + Events {}

impl<T: Runs + Definitions + Spending + Leases + Events + ?Sized> RunStore for T {}

/// Runs and their trails: created, moved, committed, claimed, read, listed, interrupted
/// and pruned. Every method is atomic.
pub trait Runs: Send + Sync {
    /// A short description (`sqlite:/path/claij.db`, `postgres://host/db`), without secrets.
    fn describe(&self) -> String;

    /// Creates a run with its first entries, held by `record.lease`'s owner. The run's
    /// definition must be stored already; the entries are numbered from 0 and
    /// `record.trail_len` counts them.
    fn create_run<'a>(
        &'a self,
        record: &'a RunRecord,
        entries: &'a [TrailEntry],
    ) -> StoreFuture<'a, ()>;

    /// Moves a run to another definition of its FSM, in one transaction: the new pin,
    /// state and wait, and the `migrated` entry; resume links made for its wait carry over.
    /// Made only if the run is still as [`Migration::found`] says ([`StoreError::Conflict`]
    /// otherwise, and nothing changes).
    fn migrate_run<'a>(&'a self, migration: &'a Migration) -> StoreFuture<'a, ()>;

    /// Commits a checkpoint (grouped with other runs' commits where the backend can).
    /// Once queued, a commit may be written even if its future is dropped; the store's
    /// guards (lease owner, sequence) keep that harmless.
    fn commit(&self, checkpoint: Checkpoint) -> StoreFuture<'_, ()>;

    /// Takes a run over for `owner` until `until`: exactly one of concurrent claimers
    /// succeeds; the others get [`StoreError::Conflict`], as does a claim of a suspended
    /// run's wait it has moved past (see [`ClaimFrom::Suspended`]). Returns the record as
    /// claimed.
    fn claim<'a>(
        &'a self,
        run_id: &'a str,
        from: ClaimFrom,
        owner: &'a str,
        until: SystemTime,
    ) -> StoreFuture<'a, RunRecord>;

    /// A run's record.
    fn run<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, RunRecord>;

    /// The run submitted with `key`, if there is one.
    fn run_by_key<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Option<RunRecord>>;

    /// A run's trail, from entry `from_seq` on (all of it: see
    /// [`trail_page`](Self::trail_page) for a part).
    fn trail<'a>(&'a self, run_id: &'a str, from_seq: u64) -> StoreFuture<'a, Vec<TrailEntry>>;

    /// At most `limit` entries of a run's trail, from entry `from_seq` on, in order: a
    /// page, read without reading the rest (its record's `trail_len` says how many entries
    /// there are). Empty past the end; [`StoreError::NotFound`] for an unknown run.
    fn trail_page<'a>(
        &'a self,
        run_id: &'a str,
        from_seq: u64,
        limit: u64,
    ) -> StoreFuture<'a, Vec<TrailEntry>>;

    /// Runs matching the filter, newest first.
    fn runs<'a>(&'a self, filter: &'a RunFilter) -> StoreFuture<'a, Vec<RunRecord>>;

    /// Asks the process running a run to stop it (it notices within its poll interval).
    /// A suspended run has no process: the caller finishes it itself.
    fn request_interrupt<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, RunRecord>;

    /// Deletes final runs (and their trails, and what was kept beside them) matching the
    /// filter; returns how many.
    fn prune<'a>(&'a self, filter: &'a RunFilter) -> StoreFuture<'a, u64>;
}

/// FSM definitions: runs are pinned to one.
pub trait Definitions: Send + Sync {
    /// Stores a definition (no-op when the same id, version and hash are there, except
    /// that the operator's storing it makes it the operator's).
    fn put_definition<'a>(&'a self, definition: &'a Definition) -> StoreFuture<'a, ()>;

    /// A definition by id, version and hash (`None` hash: the newest of that version).
    fn definition<'a>(
        &'a self,
        fsm_id: &'a str,
        version: u32,
        hash: Option<&'a str>,
    ) -> StoreFuture<'a, Definition>;

    /// Every definition, newest first.
    fn definitions(&self) -> StoreFuture<'_, Vec<Definition>>;
}

/// What runs spent and may spend: tokens, cost and time (a run's own are on its record),
/// budgets, model calls in flight, and the bytes a run takes in the store.
pub trait Spending: Send + Sync {
    /// What a run and every run below it (children, their children, …) spent: their
    /// tokens, cost and calls summed; the run's own time running and waiting (its
    /// children run within it).
    fn tree_spend<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, crate::budget::Spend>;

    /// Sets (or with `None` removes) what a run and its children may spend together.
    fn set_budget<'a>(
        &'a self,
        run_id: &'a str,
        budget: Option<&'a crate::budget::Budget>,
    ) -> StoreFuture<'a, ()>;

    /// Records the model calls a running run has in flight, before they are made, if
    /// `owner` still holds its lease ([`StoreError::LostLease`] otherwise); the next
    /// commit forgets them.
    fn note_pending<'a>(
        &'a self,
        run_id: &'a str,
        owner: &'a str,
        pending: &'a crate::budget::PendingCalls,
    ) -> StoreFuture<'a, ()>;

    /// Bytes used by a run: its record and trail rows as stored (for growth checks).
    fn run_bytes<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, u64>;
}

/// A run's lease as the process driving it sees it: kept alive, handed back, and the
/// notices that tell every worker (other processes included) there is work or an
/// interrupt.
pub trait Leases: Send + Sync {
    /// Called periodically by the process running a run: renews its lease to `renew_until`
    /// (when given) if `owner` still holds it, and reports whether it does and whether an
    /// interrupt was requested. Touches nothing else, so it never races a commit.
    fn heartbeat<'a>(
        &'a self,
        run_id: &'a str,
        owner: &'a str,
        renew_until: Option<SystemTime>,
    ) -> StoreFuture<'a, Heartbeat>;

    /// Hands a running run back to the queue (its lease released, if `owner` holds it), so
    /// that another worker takes it up at once; returns whether it did.
    fn release<'a>(&'a self, run_id: &'a str, owner: &'a str) -> StoreFuture<'a, bool>;

    /// Tells every listening worker (other processes included) about `notice`. Best
    /// effort: a notice that is lost delays work until the workers' next poll, never more.
    /// A no-op where the backend has no notifications (SQLite: workers poll).
    fn notify<'a>(&'a self, notice: &'a Notice) -> StoreFuture<'a, ()>;
}

/// Published events (the outbox of `publish` states) and the subscriptions that dispatch
/// them to the FSMs whose triggers name their topics.
pub trait Events: Send + Sync {
    /// Subscribes a definition (stored already) to a topic, replacing the subscription of
    /// an earlier definition of the same FSM.
    fn put_subscription<'a>(&'a self, subscription: &'a Subscription) -> StoreFuture<'a, ()>;

    /// The subscriptions to `topic`.
    fn subscriptions<'a>(&'a self, topic: &'a str) -> StoreFuture<'a, Vec<Subscription>>;

    /// Takes up to `limit` published events not yet dispatched (nor being dispatched by a
    /// live claimer: an expired claim, or one of `dead_owners`, is taken over) for `owner`
    /// until `until`, oldest first.
    fn claim_events<'a>(
        &'a self,
        owner: &'a str,
        until: SystemTime,
        limit: u32,
        dead_owners: &'a [String],
    ) -> StoreFuture<'a, Vec<EventRecord>>;

    /// Records what an event's dispatch did (`status`, the runs it started, a note).
    fn settle_event<'a>(
        &'a self,
        id: &'a str,
        status: EventStatus,
        runs: &'a [String],
        note: Option<&'a str>,
    ) -> StoreFuture<'a, ()>;

    /// Published events, oldest first; only those with `status` when given.
    fn events<'a>(&'a self, status: Option<EventStatus>) -> StoreFuture<'a, Vec<EventRecord>>;
}

/// What a worker is told about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// There is work: now, or (a scheduled start, a wait's expiry) at this time.
    Work {
        /// When it is due (`None`: now).
        at: Option<SystemTime>,
    },
    /// An interrupt was requested for a run.
    Interrupt {
        /// The run.
        run_id: String,
    },
}

impl Notice {
    /// The notice as a short text (a notification's payload): `work`, `work MICROS`,
    /// `interrupt RUN`.
    pub fn to_payload(&self) -> String {
        match self {
            Notice::Work { at: None } => "work".into(),
            Notice::Work { at: Some(at) } => {
                let micros = at
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_micros())
                    .unwrap_or(0);
                format!("work {micros}")
            }
            Notice::Interrupt { run_id } => format!("interrupt {run_id}"),
        }
    }

    /// A notice from its payload; `None` for text that is none.
    pub fn from_payload(payload: &str) -> Option<Notice> {
        let (word, rest) = payload.split_once(' ').unwrap_or((payload, ""));
        match (word, rest) {
            ("work", "") => Some(Notice::Work { at: None }),
            ("work", micros) => {
                let micros: u64 = micros.parse().ok()?;
                Some(Notice::Work {
                    at: Some(std::time::UNIX_EPOCH + std::time::Duration::from_micros(micros)),
                })
            }
            ("interrupt", run) if !run.is_empty() => Some(Notice::Interrupt {
                run_id: run.to_owned(),
            }),
            _ => None,
        }
    }
}

/// A run a worker holds, as its lease renewal found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldLease {
    /// The run.
    pub run_id: String,
    /// Whether an interrupt was requested for it.
    pub interrupt_requested: bool,
}

/// What a heartbeat found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    /// Whether the caller still holds the run's lease.
    pub held: bool,
    /// Whether an interrupt was requested.
    pub interrupt_requested: bool,
}

/// The canonical content hash of a document: SHA-256 over its compact JSON.
pub fn content_hash(document: &Value) -> String {
    use sha2::{Digest, Sha256};
    let bytes = serde_json::to_vec(document).unwrap_or_default();
    let digest = Sha256::digest(&bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
