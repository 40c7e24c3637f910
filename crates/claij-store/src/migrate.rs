//! Schema migrations: SQL files embedded in the binary (`migrations/{sqlite,postgres}/`),
//! applied in order on open, inside one transaction, and recorded in `claij_migrations`.
//!
//! Hand-rolled rather than `sqlx::migrate!`: that macro needs sqlx's `macros` feature (a
//! proc-macro stack that every build would pay for), and this is a few lines.

use sqlx::{Decode, Encode, Executor, IntoArguments, Pool, Row, Type};

use claij_core::store::StoreError;

use crate::dialect::{Dialect, Migration};
use crate::rows::now_micros;

/// A migration that has been applied to a database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedMigration {
    /// Its number.
    pub version: i64,
    /// Its name.
    pub name: String,
    /// When it was applied (microseconds since the Unix epoch).
    pub applied_at: i64,
}

const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS claij_migrations (\
     version BIGINT NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)";

fn failed(e: sqlx::Error) -> StoreError {
    StoreError::Backend(format!("migrating the schema: {e}"))
}

/// Brings the database's schema up to date; fails on a database newer than this binary.
pub(crate) async fn migrate<DB>(pool: &Pool<DB>) -> Result<(), StoreError>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'e> i64: Encode<'e, DB> + Decode<'e, DB> + Type<DB>,
    for<'e> String: Encode<'e, DB> + Decode<'e, DB> + Type<DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
{
    let mut tx = pool.begin_with(DB::BEGIN_WRITE).await.map_err(failed)?;
    if let Some(lock) = DB::MIGRATION_LOCK {
        sqlx::query(lock).execute(&mut *tx).await.map_err(failed)?;
    }
    sqlx::query(CREATE_TABLE)
        .execute(&mut *tx)
        .await
        .map_err(failed)?;
    let applied = sqlx::query("SELECT version, name FROM claij_migrations ORDER BY version")
        .fetch_all(&mut *tx)
        .await
        .map_err(failed)?;
    let mut done = Vec::with_capacity(applied.len());
    for row in &applied {
        let version: i64 = row.try_get(0).map_err(failed)?;
        let name: String = row.try_get(1).map_err(failed)?;
        done.push((version, name));
    }
    check_known(DB::SCHEME, DB::MIGRATIONS, &done)?;
    for migration in DB::MIGRATIONS {
        if done.iter().any(|(v, _)| *v == migration.version) {
            continue;
        }
        sqlx::raw_sql(migration.sql)
            .execute(&mut *tx)
            .await
            .map_err(|e| {
                StoreError::Backend(format!(
                    "applying schema migration {} ({}): {e}",
                    migration.version, migration.name
                ))
            })?;
        sqlx::query("INSERT INTO claij_migrations (version, name, applied_at) VALUES ($1, $2, $3)")
            .bind(migration.version)
            .bind(migration.name.to_owned())
            .bind(now_micros()?)
            .execute(&mut *tx)
            .await
            .map_err(failed)?;
    }
    tx.commit().await.map_err(failed)
}

/// Fails unless every applied migration is one this binary has, under the same name.
fn check_known(
    scheme: &str,
    known: &[Migration],
    applied: &[(i64, String)],
) -> Result<(), StoreError> {
    let newest_known = known.iter().map(|m| m.version).max().unwrap_or(0);
    for (version, name) in applied {
        match known.iter().find(|m| m.version == *version) {
            Some(m) if m.name == name => {}
            Some(m) => {
                return Err(StoreError::Backend(format!(
                    "the {scheme} database's schema migration {version} is `{name}`, but this \
                     claij's is `{}`: the database was written by a different claij",
                    m.name
                )));
            }
            None => {
                return Err(StoreError::Backend(format!(
                    "the {scheme} database has schema version {version} (`{name}`), newer than \
                     this claij knows (up to {newest_known}): upgrade claij to use it"
                )));
            }
        }
    }
    Ok(())
}

/// The migrations applied to a database, in order.
pub(crate) async fn applied<DB>(pool: &Pool<DB>) -> Result<Vec<AppliedMigration>, StoreError>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'e> i64: Encode<'e, DB> + Decode<'e, DB> + Type<DB>,
    for<'e> String: Encode<'e, DB> + Decode<'e, DB> + Type<DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
{
    let rows =
        sqlx::query("SELECT version, name, applied_at FROM claij_migrations ORDER BY version")
            .fetch_all(pool)
            .await
            .map_err(failed)?;
    rows.iter()
        .map(|row| {
            Ok(AppliedMigration {
                version: row.try_get(0)?,
                name: row.try_get(1)?,
                applied_at: row.try_get(2)?,
            })
        })
        .collect::<Result<_, sqlx::Error>>()
        .map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: &[Migration] = &[
        Migration {
            version: 1,
            name: "initial",
            sql: "",
        },
        Migration {
            version: 2,
            name: "more",
            sql: "",
        },
    ];

    #[test]
    fn a_newer_database_is_refused_clearly() {
        let err = check_known(
            "sqlite",
            KNOWN,
            &[(1, "initial".into()), (3, "future".into())],
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(err.contains("schema version 3"), "{err}");
        assert!(err.contains("upgrade claij"), "{err}");
    }

    #[test]
    fn a_renamed_migration_is_refused() {
        let err = check_known("sqlite", KNOWN, &[(1, "other".into())])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("`other`"), "{err}");
        assert!(check_known("sqlite", KNOWN, &[(1, "initial".into())]).is_ok());
    }
}
