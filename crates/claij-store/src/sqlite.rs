//! SQLite: one file, WAL journal, one writer at a time (commits are grouped so that one
//! fsync covers many runs).

use std::path::Path;
use std::time::Duration;

use claij_core::store::{Durability, StoreError, StoreFuture};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Pool, Sqlite};

use crate::dialect::{Dialect, Migration};
use crate::roles::Doorbell;

/// How long a connection waits for another to release the write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Connections in the pool (reads run in parallel; writes take turns).
const MAX_CONNECTIONS: u32 = 8;

impl Dialect for Sqlite {
    const SCHEME: &'static str = "sqlite";
    const MIGRATIONS: &'static [Migration] = &[
        Migration {
            version: 1,
            name: "initial",
            sql: include_str!("../migrations/sqlite/0001_initial.sql"),
        },
        Migration {
            version: 2,
            name: "checkpoint_statement",
            sql: include_str!("../migrations/sqlite/0002_checkpoint_statement.sql"),
        },
        Migration {
            version: 3,
            name: "server",
            sql: include_str!("../migrations/sqlite/0003_server.sql"),
        },
        Migration {
            version: 4,
            name: "workers",
            sql: include_str!("../migrations/sqlite/0004_workers.sql"),
        },
        Migration {
            version: 5,
            name: "events",
            sql: include_str!("../migrations/sqlite/0005_events.sql"),
        },
        Migration {
            version: 6,
            name: "spend",
            sql: include_str!("../migrations/sqlite/0006_spend.sql"),
        },
        Migration {
            version: 7,
            name: "owners",
            sql: include_str!("../migrations/sqlite/0007_owners.sql"),
        },
        Migration {
            version: 8,
            name: "forks",
            sql: include_str!("../migrations/sqlite/0008_forks.sql"),
        },
    ];
    const BEGIN_WRITE: &'static str = "BEGIN IMMEDIATE";
    const MIGRATION_LOCK: Option<&'static str> = None;
    const FOR_UPDATE: &'static str = "";
    // One writer at a time: a claim's transaction (`BEGIN IMMEDIATE`) has the rows alone.
    const SKIP_LOCKED: &'static str = "";
    const NOTIFY: Option<&'static str> = None;
    const RENEW_WITH_WORKER: Option<&'static str> = None;
    fn listen(_pool: &Pool<Sqlite>) -> StoreFuture<'_, Option<Box<dyn Doorbell>>> {
        Box::pin(async { Ok(None) })
    }
    const DURABILITY_PROBE: &'static str = "SELECT 'journal_mode=' || j.journal_mode || \
         ' synchronous=' || CASE s.synchronous WHEN 0 THEN 'off' WHEN 1 THEN 'normal' \
         WHEN 2 THEN 'full' ELSE 'extra' END FROM pragma_journal_mode AS j, pragma_synchronous AS s";
    // The view and trigger of migrations 2, 4 and 6.
    const CHECKPOINT_STATEMENT: Option<&'static str> = Some(
        "INSERT INTO checkpoint_writes (run_id, owner, first_seq, status, state, context, \
         wait, lease_until, updated_at, entries, wake_at, input_tokens, output_tokens, \
         cost_usd, calls, time_ms, waiting_ms) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
    );
}

/// A pool on the SQLite file at `path` (created with its parent directories if missing).
pub(crate) async fn connect(
    path: &Path,
    durability: Durability,
) -> Result<Pool<Sqlite>, StoreError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| StoreError::Backend(format!("cannot create {}: {e}", parent.display())))?;
    }
    let synchronous = match durability {
        Durability::Normal => SqliteSynchronous::Normal,
        Durability::Strict => SqliteSynchronous::Full,
    };
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(synchronous)
        .busy_timeout(BUSY_TIMEOUT)
        .foreign_keys(true);
    SqlitePoolOptions::new()
        .max_connections(MAX_CONNECTIONS)
        // A connection to a local file does not go stale: no ping (a round trip to the
        // connection's thread) before each use.
        .test_before_acquire(false)
        .connect_with(options)
        .await
        .map_err(|e| StoreError::Backend(format!("cannot open sqlite:{}: {e}", path.display())))
}
