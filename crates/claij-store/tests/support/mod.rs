//! Test support: a store per test, on a fresh SQLite file or a fresh database of the
//! PostgreSQL cluster that every test process shares (both from `claij_testkit`, which
//! says how the cluster is found or started). Missing PostgreSQL binaries fail the
//! PostgreSQL tests, saying how to install them.

#![allow(dead_code)]

use std::sync::Arc;

use claij_core::store::{Durability, StoreError};
use claij_store::roles::Store;
use claij_store::{AppliedMigration, CommitStats, PostgresStore, SqliteStore};
pub(crate) use claij_testkit::Backend;
use claij_testkit::TestStore;

/// Where one test's store lives (removed or dropped with it).
pub(crate) struct Harness {
    store: TestStore,
}

/// A store as its concrete type, for what the trait does not show.
pub(crate) enum Concrete {
    Sqlite(Arc<SqliteStore>),
    Postgres(Arc<PostgresStore>),
}

impl Concrete {
    pub(crate) fn stats(&self) -> CommitStats {
        match self {
            Concrete::Sqlite(s) => s.stats(),
            Concrete::Postgres(s) => s.stats(),
        }
    }

    pub(crate) async fn applied_migrations(&self) -> Vec<AppliedMigration> {
        match self {
            Concrete::Sqlite(s) => s.applied_migrations().await,
            Concrete::Postgres(s) => s.applied_migrations().await,
        }
        .expect("applied migrations")
    }

    pub(crate) async fn durability_settings(&self) -> String {
        match self {
            Concrete::Sqlite(s) => s.durability_settings().await,
            Concrete::Postgres(s) => s.durability_settings().await,
        }
        .expect("durability settings")
    }

    pub(crate) async fn close(&self) {
        match self {
            Concrete::Sqlite(s) => s.close().await,
            Concrete::Postgres(s) => s.close().await,
        }
    }

    pub(crate) fn store(&self) -> Arc<dyn Store> {
        match self {
            Concrete::Sqlite(s) => s.clone(),
            Concrete::Postgres(s) => s.clone(),
        }
    }
}

impl Harness {
    /// A fresh SQLite file in a temporary directory (in a subdirectory that does not exist
    /// yet: opening creates it).
    pub(crate) fn sqlite() -> Harness {
        Harness {
            store: TestStore::sqlite(),
        }
    }

    /// A fresh database on the shared test cluster (started if needed).
    pub(crate) fn postgres() -> Harness {
        Harness {
            store: TestStore::postgres(),
        }
    }

    pub(crate) fn backend(&self) -> Backend {
        self.store.backend()
    }

    /// The store URL.
    pub(crate) fn url(&self) -> &str {
        self.store.url()
    }

    /// Opens the store with the default durability.
    pub(crate) async fn open(&self) -> Arc<dyn Store> {
        self.try_open(Durability::Normal)
            .await
            .unwrap_or_else(|e| panic!("opening {}: {e}", self.url()))
    }

    /// Opens the store through `claij_store::open`.
    pub(crate) async fn try_open(
        &self,
        durability: Durability,
    ) -> Result<Arc<dyn Store>, StoreError> {
        claij_store::open(self.url(), durability).await
    }

    /// Opens the store as its concrete type.
    pub(crate) async fn open_concrete(&self, durability: Durability) -> Concrete {
        match self.backend() {
            Backend::Sqlite => {
                let path = self.store.sqlite_path().expect("a SQLite file");
                Concrete::Sqlite(
                    claij_store::open_sqlite(path, durability)
                        .await
                        .expect("open sqlite"),
                )
            }
            Backend::Postgres => Concrete::Postgres(
                claij_store::open_postgres(self.url(), durability)
                    .await
                    .expect("open postgres"),
            ),
        }
    }

    /// Runs SQL on the database directly (to damage it on purpose).
    pub(crate) async fn execute(&self, sql: &str) {
        use sqlx::Connection;
        let sql = sqlx::AssertSqlSafe(sql.to_owned());
        match self.backend() {
            Backend::Sqlite => {
                let mut conn = sqlx::SqliteConnection::connect(self.url())
                    .await
                    .expect("connect to sqlite");
                sqlx::raw_sql(sql)
                    .execute(&mut conn)
                    .await
                    .expect("execute");
            }
            Backend::Postgres => {
                let mut conn = sqlx::PgConnection::connect(self.url())
                    .await
                    .expect("connect to postgres");
                sqlx::raw_sql(sql)
                    .execute(&mut conn)
                    .await
                    .expect("execute");
            }
        }
    }

    /// A URL of the same database with a password in it (the test cluster trusts every
    /// local connection, so any password works).
    pub(crate) fn url_with_password(&self, password: &str) -> Option<String> {
        self.store
            .database()
            .map(|db| db.url_with_password(password))
    }
}
