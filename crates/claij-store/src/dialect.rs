//! What differs between the backends, as constants: the queries and grouped commits are
//! written once, generic over the database. The schema migrations are written per
//! backend (`migrations/sqlite/`, `migrations/postgres/`) and listed here as constants
//! ([`Migration`]); `migrate` applies them.

use claij_core::store::StoreFuture;

use crate::roles::Doorbell;

/// A database claij can keep runs in: implemented for [`sqlx::Sqlite`] and
/// [`sqlx::Postgres`] only (sealed).
pub trait Dialect: sqlx::Database + private::Sealed {
    /// The scheme shown in descriptions and messages (`sqlite`, `postgres`).
    const SCHEME: &'static str;
    /// The schema migrations, in order.
    #[doc(hidden)]
    const MIGRATIONS: &'static [Migration];
    /// The statement that begins a transaction that will write (SQLite takes the write
    /// lock up front, so a transaction that reads first cannot fail to upgrade later).
    #[doc(hidden)]
    const BEGIN_WRITE: &'static str;
    /// Run first in the migration transaction so that concurrent openers take turns.
    #[doc(hidden)]
    const MIGRATION_LOCK: Option<&'static str>;
    /// Appended to a `SELECT` whose rows must stay locked until the transaction ends.
    #[doc(hidden)]
    const FOR_UPDATE: &'static str;
    /// Appended to the `SELECT` of a claim: rows another claimer has locked are passed
    /// over rather than waited for.
    #[doc(hidden)]
    const SKIP_LOCKED: &'static str;
    /// The statement that sends a notice (`$1`, its payload) to every listening worker;
    /// `None` where the backend has no notifications.
    #[doc(hidden)]
    const NOTIFY: Option<&'static str>;
    /// The `WITH` that makes a lease renewal (an `UPDATE runs` of `$1`'s leases to `$2`)
    /// also renew the worker's record (`renewed_at = $3`, `holding = $4`) in one
    /// statement; `None`: two statements in a transaction.
    #[doc(hidden)]
    const RENEW_WITH_WORKER: Option<&'static str>;
    /// Subscribes to the workers' notices on a connection of its own (`None` where the
    /// backend has none).
    #[doc(hidden)]
    fn listen(pool: &sqlx::Pool<Self>) -> StoreFuture<'_, Option<Box<dyn Doorbell>>>;
    /// A query returning the connection's durability setting, as text.
    #[doc(hidden)]
    const DURABILITY_PROBE: &'static str;
    /// One statement that writes a whole checkpoint (parameters `$1`–`$17`: run id, owner,
    /// first sequence number, status, state, context, wait, lease end, time, entries as a
    /// JSON array of `[seq, entry]`, wake time, then the run's spend: input tokens, output
    /// tokens, cost, calls, time running, time waiting), forgetting the run's pending
    /// calls, and failing with `claij: checkpoint refused` in its message when the guard
    /// refuses it; `None` where a checkpoint is a guarded `UPDATE` and an `INSERT`.
    #[doc(hidden)]
    const CHECKPOINT_STATEMENT: Option<&'static str>;
}

/// One schema migration.
#[derive(Debug)]
pub struct Migration {
    /// Its number: migrations apply in increasing order, each once.
    pub version: i64,
    /// A short name (the file name without number and extension).
    pub name: &'static str,
    /// The SQL (several statements).
    pub sql: &'static str,
}

/// The message of a [`Dialect::CHECKPOINT_STATEMENT`] the guard refused.
pub(crate) const CHECKPOINT_REFUSED: &str = "claij: checkpoint refused";

mod private {
    pub trait Sealed {}
    impl Sealed for sqlx::Sqlite {}
    impl Sealed for sqlx::Postgres {}
}
