//! PostgreSQL: shared by many workers; durability is `synchronous_commit`, set on every
//! connection.

use std::str::FromStr;

use claij_core::store::{Durability, Notice, StoreError, StoreFuture};
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, Pool, Postgres};

use crate::dialect::{Dialect, Migration};
use crate::roles::Doorbell;

/// The channel workers listen on (`NOTIFY claij_work`).
const CHANNEL: &str = "claij_work";

/// A worker's subscription: `LISTEN claij_work` on a connection of its own (sqlx listens
/// again after reconnecting; notices sent meanwhile are lost, which the workers' polls
/// make up for).
struct Listener(PgListener);

impl Doorbell for Listener {
    fn next(&mut self) -> StoreFuture<'_, Notice> {
        Box::pin(async move {
            loop {
                let notification = self
                    .0
                    .recv()
                    .await
                    .map_err(|e| StoreError::Backend(format!("listening for work: {e}")))?;
                if let Some(notice) = Notice::from_payload(notification.payload()) {
                    return Ok(notice);
                }
            }
        })
    }
}

/// Connections in the pool.
const MAX_CONNECTIONS: u32 = 10;

impl Dialect for Postgres {
    const SCHEME: &'static str = "postgres";
    const MIGRATIONS: &'static [Migration] = &[
        Migration {
            version: 1,
            name: "initial",
            sql: include_str!("../migrations/postgres/0001_initial.sql"),
        },
        Migration {
            version: 2,
            name: "server",
            sql: include_str!("../migrations/postgres/0002_server.sql"),
        },
        Migration {
            version: 3,
            name: "workers",
            sql: include_str!("../migrations/postgres/0003_workers.sql"),
        },
        Migration {
            version: 4,
            name: "events",
            sql: include_str!("../migrations/postgres/0004_events.sql"),
        },
        Migration {
            version: 5,
            name: "spend",
            sql: include_str!("../migrations/postgres/0005_spend.sql"),
        },
        Migration {
            version: 6,
            name: "owners",
            sql: include_str!("../migrations/postgres/0006_owners.sql"),
        },
        Migration {
            version: 7,
            name: "forks",
            sql: include_str!("../migrations/postgres/0007_forks.sql"),
        },
    ];
    const BEGIN_WRITE: &'static str = "BEGIN";
    // A transaction-scoped advisory lock (key: "claij" in ASCII) serializes concurrent
    // openers, so two workers starting at once do not both create the tables.
    const MIGRATION_LOCK: Option<&'static str> = Some("SELECT pg_advisory_xact_lock(427020085610)");
    const FOR_UPDATE: &'static str = " FOR UPDATE";
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    const NOTIFY: Option<&'static str> = Some("SELECT pg_notify('claij_work', $1)");
    const RENEW_WITH_WORKER: Option<&'static str> =
        Some("WITH worker AS (UPDATE workers SET renewed_at = $3, holding = $4 WHERE id = $1)");
    fn listen(pool: &Pool<Postgres>) -> StoreFuture<'_, Option<Box<dyn Doorbell>>> {
        Box::pin(async move {
            let mut listener = PgListener::connect_with(pool)
                .await
                .map_err(|e| StoreError::Backend(format!("listening for work: {e}")))?;
            listener
                .listen(CHANNEL)
                .await
                .map_err(|e| StoreError::Backend(format!("listening for work: {e}")))?;
            Ok(Some(Box::new(Listener(listener)) as Box<dyn Doorbell>))
        })
    }
    const DURABILITY_PROBE: &'static str =
        "SELECT 'synchronous_commit=' || current_setting('synchronous_commit')";
    const CHECKPOINT_STATEMENT: Option<&'static str> = None;
}

/// Parses a `postgres://` URL; the description it returns has no password.
pub(crate) fn parse(url: &str) -> Result<(PgConnectOptions, String), StoreError> {
    let options = PgConnectOptions::from_str(url)
        .map_err(|e| StoreError::Backend(format!("invalid PostgreSQL URL: {e}")))?;
    let description = describe(&options);
    Ok((options, description))
}

/// `postgres://user@host:port/database`, never with the password.
fn describe(options: &PgConnectOptions) -> String {
    let user = options.get_username();
    let database = options.get_database().unwrap_or(user);
    match options.get_socket() {
        Some(socket) => format!("postgres://{user}@/{database}?host={}", socket.display()),
        None => format!(
            "postgres://{user}@{}:{}/{database}",
            options.get_host(),
            options.get_port()
        ),
    }
}

/// A pool on the database, each connection with `synchronous_commit` set for `durability`.
pub(crate) async fn connect(
    options: PgConnectOptions,
    description: &str,
    durability: Durability,
) -> Result<Pool<Postgres>, StoreError> {
    let synchronous_commit = match durability {
        Durability::Normal => "off",
        Durability::Strict => "on",
    };
    let options = options.options([("synchronous_commit", synchronous_commit)]);
    let failed =
        |e: sqlx::Error| StoreError::Backend(format!("cannot connect to {description}: {e}"));
    // One connection first: the pool would retry an unreachable server for its whole
    // acquire timeout, where a wrong URL should fail at once.
    let probe = options.connect().await.map_err(failed)?;
    let _ = probe.close().await;
    PgPoolOptions::new()
        .max_connections(MAX_CONNECTIONS)
        .connect_with(options)
        .await
        .map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_never_show_the_password() {
        for url in [
            "postgres://alice:s3cret@db.example:5433/claij",
            "postgresql://alice:s3cret@db.example:5433/claij?sslmode=disable",
            "postgres://alice@db.example:5433/claij?password=s3cret",
        ] {
            let (_, description) = parse(url).unwrap_or_else(|e| panic!("{url}: {e}"));
            assert_eq!(description, "postgres://alice@db.example:5433/claij");
        }
    }
}
