//! claij's durable run stores: every role of a store ([`roles::Store`]: the core's
//! [`RunStore`](claij_core::store::RunStore) and the server's and workers' roles) on
//! SQLite (embedded, one file: the default) and on PostgreSQL (shared by many workers on
//! many machines).
//!
//! ```no_run
//! # async fn demo() -> Result<(), claij_core::store::StoreError> {
//! use claij_core::store::Durability;
//! let store = claij_store::open("sqlite:/tmp/claij.db", Durability::Normal).await?;
//! println!("runs are kept in {}", store.describe());
//! # Ok(()) }
//! ```
//!
//! # What is stored
//! Three tables (plus `claij_migrations`, the schema versions applied): `definitions` (id,
//! version, content hash, the document as JSON text), `runs` (one row per run: the
//! definition it is pinned to, parent, status, state, context, wait, lease, interrupt flag,
//! trail length, times, what it spent, its budget, its model calls in flight) and `trail`
//! (one row per trail entry, keyed by run and sequence number). A commit appends its new
//! entries and updates the run's row (its spend written in place): it never rewrites
//! history, so storage grows linearly with the run. Times are integer microseconds since
//! the Unix epoch (read back exactly, to the microsecond); JSON is text, exactly as written
//! (key order kept). On SQLite a checkpoint is one `INSERT` into the view
//! `checkpoint_writes`, whose trigger does the guarded update and appends the entries.
//!
//! The schema ships in the binary and is migrated on open (see `migrations/`); a database
//! written by a newer claij is refused with a clear error.
//!
//! # Durability
//! Every commit is in the database when [`Runs::commit`](claij_core::store::Runs::commit)
//! returns. What it survives depends on [`Durability`]:
//!
//! | | [`Durability::Normal`] (default) | [`Durability::Strict`] |
//! |---|---|---|
//! | SQLite | WAL journal, `synchronous=NORMAL`: the commit is in the WAL file (in the OS's cache). Survives the claij process crashing or being killed. A power loss or OS crash may undo the last commits, never corrupts the file. | WAL, `synchronous=FULL`: the WAL is flushed to disk before the commit returns. Also survives power loss. |
//! | PostgreSQL | `synchronous_commit=off`: the server answers before flushing its WAL. Survives the claij process crashing; a crash of the server or of its machine may lose the commits of the last 3 × `wal_writer_delay` (600 ms by default), never corrupts. | `synchronous_commit=on`: flushed (and replicated, if so configured) before the commit returns. Also survives power loss. |
//!
//! Commits are grouped (see [`CommitStats`]): commits queue, and whoever holds the store's
//! writer writes every commit queued at that moment (up to 256) in one transaction, so
//! concurrent runs share one fsync; each commit still succeeds or fails on its own. There
//! is no committer task: a commit alone in the queue is written by the task that commits
//! it, a larger group by a task spawned for it (so that cancelling one commit cannot lose
//! the others' answers). SQLite connections also get `busy_timeout` (30 s) and
//! `foreign_keys=ON`. docs/DURABILITY.md has the details.
//!
//! # Runtime
//! The stores run on tokio: open and use them inside one runtime (sqlx's connection pool
//! belongs to the runtime it was opened on, and a group of commits is written by a task
//! spawned on the committing task's runtime). [`SqlStore::close`] closes the connections
//! once the runs are idle; a store dropped without it, even after its runtime has ended,
//! lets its connections go quietly.
//!
//! # Modules
//!
//! - `store`: `SqlStore`, the store contract as SQL, with what `claij serve` keeps
//!   (resume links, callbacks, deliveries), events and subscriptions, the workers' queue,
//!   a run tree's spend and a run's move to another version, each in a submodule.
//! - `committer`: grouped commits, one transaction for whatever is queued.
//! - `migrate`: the schema migrations, embedded per backend and applied on open.
//! - `dialect`: what differs between the backends, as constants.
//! - `rows`: rows encoded and decoded, the same for both backends.
//! - `sqlite`, `postgres`: connection options per durability mode; PostgreSQL's `LISTEN`
//!   subscription.

mod committer;
mod dialect;
mod migrate;
mod postgres;
pub mod roles;
mod rows;
mod sqlite;
mod store;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use claij_core::store::{Durability, StoreError};

use crate::roles::Store;

pub use committer::CommitStats;
pub use dialect::Dialect;
pub use migrate::AppliedMigration;
pub use store::SqlStore;

/// A store in a SQLite file.
pub type SqliteStore = SqlStore<sqlx::Sqlite>;

/// A store in a PostgreSQL database.
pub type PostgresStore = SqlStore<sqlx::Postgres>;

/// Where a store URL points.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Location {
    Sqlite(PathBuf),
    Postgres(String),
}

/// Reads a store URL: `sqlite:PATH`, `sqlite://PATH`, a plain path (SQLite), or
/// `postgres://…` / `postgresql://…`.
fn locate(url: &str) -> Result<Location, StoreError> {
    let url = url.trim();
    let invalid = |why: &str| StoreError::Backend(format!("invalid store URL `{url}`: {why}"));
    if url.is_empty() {
        return Err(invalid("it is empty"));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(Location::Postgres(url.to_owned()));
    }
    if let Some(rest) = url.strip_prefix("sqlite:") {
        let path = rest.strip_prefix("//").unwrap_or(rest);
        if path.is_empty() {
            return Err(invalid("it names no file"));
        }
        if path.starts_with(":memory:") || path.contains("mode=memory") {
            return Err(invalid(
                "an in-memory database would lose every run when the process ends; name a file",
            ));
        }
        return Ok(Location::Sqlite(PathBuf::from(path)));
    }
    if let Some((scheme, _)) = url.split_once("://") {
        return Err(invalid(&format!(
            "`{scheme}` stores are not supported (use sqlite:PATH or postgres://…)"
        )));
    }
    Ok(Location::Sqlite(PathBuf::from(url)))
}

/// Opens (creating or migrating as needed) the store at `url`: `sqlite:PATH`, a plain
/// path (SQLite; parent directories are created), or `postgres://user:password@host/db`
/// (the database must exist).
pub async fn open(url: &str, durability: Durability) -> Result<Arc<dyn Store>, StoreError> {
    Ok(match locate(url)? {
        Location::Sqlite(path) => open_sqlite(&path, durability).await?,
        Location::Postgres(url) => open_postgres(&url, durability).await?,
    })
}

/// Opens (creating it and its parent directories if missing) the SQLite store at `path`.
pub async fn open_sqlite(
    path: impl AsRef<Path>,
    durability: Durability,
) -> Result<Arc<SqliteStore>, StoreError> {
    let path = path.as_ref();
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let pool = sqlite::connect(&path, durability).await?;
    let store = SqlStore::start(pool, format!("sqlite:{}", path.display())).await?;
    Ok(Arc::new(store))
}

/// Opens the PostgreSQL store at `url` (`postgres://…`; the database must exist), creating
/// or migrating its tables.
pub async fn open_postgres(
    url: &str,
    durability: Durability,
) -> Result<Arc<PostgresStore>, StoreError> {
    let (options, description) = postgres::parse(url)?;
    let pool = postgres::connect(options, &description, durability).await?;
    let store = SqlStore::start(pool, description).await?;
    Ok(Arc::new(store))
}

/// Where the SQLite store lives by default: `$XDG_DATA_HOME/claij/claij.db`, else
/// `$HOME/.local/share/claij/claij.db` (else `claij.db` in the current directory). The
/// CLI's `$CLAIJ_STORE` overrides it.
pub fn default_sqlite_path() -> PathBuf {
    match claij_core::data_home() {
        Some(dir) => dir.join("claij.db"),
        None => PathBuf::from("claij.db"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sqlite(path: &str) -> Result<Location, StoreError> {
        Ok(Location::Sqlite(PathBuf::from(path)))
    }

    #[test]
    fn store_urls_are_read() {
        assert_eq!(locate("sqlite:/var/claij.db"), sqlite("/var/claij.db"));
        assert_eq!(locate("sqlite:///var/claij.db"), sqlite("/var/claij.db"));
        assert_eq!(locate("sqlite://rel/claij.db"), sqlite("rel/claij.db"));
        assert_eq!(locate("sqlite:rel.db"), sqlite("rel.db"));
        assert_eq!(locate("/var/claij.db"), sqlite("/var/claij.db"));
        assert_eq!(locate(" runs.db "), sqlite("runs.db"));
        assert_eq!(
            locate("postgresql://u@h/db"),
            Ok(Location::Postgres("postgresql://u@h/db".into()))
        );
        assert_eq!(
            locate("postgres://u:p@h:5433/db"),
            Ok(Location::Postgres("postgres://u:p@h:5433/db".into()))
        );
    }

    #[test]
    fn bad_store_urls_say_why() {
        for (url, why) in [
            ("", "empty"),
            ("sqlite::memory:", "in-memory"),
            ("sqlite:", "no file"),
            ("mysql://h/db", "`mysql` stores are not supported"),
        ] {
            let err = locate(url).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.contains(why), "{url}: {err}");
        }
    }
}
