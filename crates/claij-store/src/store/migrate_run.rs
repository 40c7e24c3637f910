//! Moving a run to another definition of its FSM: one transaction that re-pins it, sets
//! its state and wait, appends its `migrated` entry and carries its resume links over —
//! guarded by everything the move was planned on, so that a run changed meanwhile (or a
//! crash half-way) leaves it as it was.

use claij_core::store::{Migration, StoreError};
use sqlx::error::ErrorKind;
use sqlx::{Decode, Encode, Executor, IntoArguments, Type};

use super::{SqlStore, backend, db_error_kind};
use crate::committer::Writer;
use crate::dialect::Dialect;
use crate::rows;

/// The guarded re-pin: `$1`–`$6` the new version, hash, state, wait, wake time and time;
/// `$7` the run; `$8`–`$13` what it was found as (status, hash, trail length, last change,
/// lease owner and end; null-safe, a lease may be absent).
const MOVE_RUN: &str = "UPDATE runs SET version = $1, hash = $2, state = $3, wait = $4, \
     wake_at = $5, updated_at = $6, trail_len = trail_len + 1 \
     WHERE id = $7 AND status = $8 AND hash = $9 AND trail_len = $10 AND updated_at = $11 \
     AND lease_owner IS NOT DISTINCT FROM $12 AND lease_until IS NOT DISTINCT FROM $13 \
     RETURNING trail_len";

impl<DB> SqlStore<DB>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'e> i64: Encode<'e, DB> + Decode<'e, DB> + Type<DB>,
    for<'e> String: Encode<'e, DB> + Decode<'e, DB> + Type<DB>,
    for<'e> bool: Encode<'e, DB> + Decode<'e, DB> + Type<DB>,
    for<'e> Option<i64>: Encode<'e, DB> + Decode<'e, DB> + Type<DB>,
    for<'e> Option<String>: Encode<'e, DB> + Decode<'e, DB> + Type<DB>,
    for<'e> f64: Encode<'e, DB> + Decode<'e, DB> + Type<DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
{
    pub(super) async fn migrate_run_now(&self, migration: &Migration) -> Result<(), StoreError> {
        let what = "migrating a run";
        let found = &migration.found;
        let run = found.id.as_str();
        if migration.entry.seq != found.trail_len {
            return Err(StoreError::Sequence {
                run: run.to_owned(),
                seq: migration.entry.seq,
                stored: found.trail_len,
            });
        }
        let entries = match rows::encode_entries(
            run,
            std::slice::from_ref(&migration.entry),
            found.trail_len,
        )? {
            Ok(entries) => entries,
            Err(seq) => {
                return Err(StoreError::Sequence {
                    run: run.to_owned(),
                    seq,
                    stored: found.trail_len,
                });
            }
        };
        let wait = migration
            .wait
            .as_ref()
            .map(|w| rows::to_json(&format!("run `{run}` wait"), w))
            .transpose()?;
        let wake_at = rows::wake_at(found.status, migration.wait.as_ref(), found.not_before)?;
        let trail_len = rows::signed("trail length", found.trail_len)?;
        let mut tx = self
            .pool
            .begin_with(DB::BEGIN_WRITE)
            .await
            .map_err(backend(what))?;
        let moved = sqlx::query(MOVE_RUN)
            .bind(i64::from(migration.version))
            .bind(migration.hash.clone())
            .bind(migration.state.clone())
            .bind(wait)
            .bind(wake_at)
            .bind(rows::now_micros()?)
            .bind(run.to_owned())
            .bind(found.status.as_str().to_owned())
            .bind(found.hash.clone())
            .bind(trail_len)
            .bind(rows::micros(found.updated_at)?)
            .bind(found.lease.as_ref().map(|l| l.owner.clone()))
            .bind(
                found
                    .lease
                    .as_ref()
                    .map(|l| rows::micros(l.until))
                    .transpose()?,
            )
            .fetch_optional(&mut *tx)
            .await;
        let moved = match moved {
            Ok(row) => row,
            Err(e) if db_error_kind(&e) == Some(ErrorKind::ForeignKeyViolation) => {
                return Err(StoreError::NotFound {
                    what: "definition",
                    id: format!(
                        "{} version {} (hash {}), which run `{run}` was to move to,",
                        found.fsm_id, migration.version, migration.hash
                    ),
                });
            }
            Err(e) => return Err(backend(what)(e)),
        };
        if moved.is_none() {
            drop(tx);
            let now = self.run_now(run, what).await?;
            return Err(StoreError::Conflict {
                run: run.to_owned(),
                reason: format!(
                    "changed since its move was planned (it is {} in `{}` with {} trail entries): it was not moved",
                    now.status, now.state, now.trail_len
                ),
            });
        }
        Writer::<DB>::insert_entries(&mut *tx, run, &entries)
            .await
            .map_err(backend(what))?;
        // Links made for the wait it had answer the wait it has now.
        sqlx::query("UPDATE hooks SET wait_seq = $1 WHERE run_id = $2 AND wait_seq = $3")
            .bind(trail_len + 1)
            .bind(run.to_owned())
            .bind(trail_len)
            .execute(&mut *tx)
            .await
            .map_err(backend(what))?;
        tx.commit().await.map_err(backend(what))
    }
}
