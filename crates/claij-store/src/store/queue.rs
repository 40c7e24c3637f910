//! The queue `claij worker` processes share: claims of the runs that need a worker
//! (locked rows skipped, so concurrent claimers never meet), when the next one will, lease
//! renewals for all of a worker's runs in one statement, hand-backs, the workers' own
//! records, the queue's depth, and notices (PostgreSQL's `NOTIFY`; SQLite's workers poll).

use std::time::SystemTime;

use claij_core::store::{HeldLease, Notice, RunRecord, StoreError};
use sqlx::{AssertSqlSafe, Decode, Encode, Executor, IntoArguments, Row, Type};

use super::{SqlStore, backend, placeholders};
use crate::dialect::Dialect;
use crate::roles::{Due, QueueStats, WorkerRecord};
use crate::rows::{self, FINAL_STATUSES_SQL, RUN_COLUMNS, WAKE_ON_CHILD};

/// The runs that need a worker at `$1` (microseconds), `dead` an extra condition on
/// `lease_owner` (owners known dead): queued and due, left by a dead owner (a child only
/// when its parent is not running), suspended past a timer, or waiting for children of
/// which one ended since.
fn due_condition(dead: &str) -> String {
    format!(
        "((status = 'running' AND (lease_owner IS NULL OR lease_until < $1{dead}) \
           AND (wake_at IS NULL OR wake_at <= $1) \
           AND (parent_id IS NULL OR NOT EXISTS (SELECT 1 FROM runs p \
                WHERE p.id = runs.parent_id AND p.status = 'running'))) \
         OR (status = 'suspended' AND wake_at <= $1) \
         OR (status = 'suspended' AND wake_at = {WAKE_ON_CHILD} AND EXISTS (SELECT 1 FROM runs c \
                WHERE c.parent_id = runs.id AND c.status IN {FINAL_STATUSES_SQL} \
                AND c.updated_at >= runs.updated_at)))"
    )
}

const WORKER_COLUMNS: &str = "id, host, concurrency, holding, started_at, renewed_at";

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
    pub(super) async fn claim_due_now(
        &self,
        owner: &str,
        until: SystemTime,
        limit: u32,
        dead_owners: &[String],
    ) -> Result<Vec<RunRecord>, StoreError> {
        let what = "claiming queued runs";
        if limit == 0 {
            return Ok(Vec::new());
        }
        let now = rows::now_micros()?;
        let dead = if dead_owners.is_empty() {
            String::new()
        } else {
            format!(
                " OR lease_owner IN ({})",
                placeholders(3, dead_owners.len())
            )
        };
        let mut tx = self
            .pool
            .begin_with(DB::BEGIN_WRITE)
            .await
            .map_err(backend(what))?;
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE {} ORDER BY created_at, id LIMIT $2{}",
            due_condition(&dead),
            DB::SKIP_LOCKED
        );
        let mut query = sqlx::query(AssertSqlSafe(sql))
            .bind(now)
            .bind(i64::from(limit));
        for dead_owner in dead_owners {
            query = query.bind(dead_owner.clone());
        }
        let found = query.fetch_all(&mut *tx).await.map_err(backend(what))?;
        let claimed: Vec<RunRecord> = found
            .iter()
            .map(|row| Self::record(row, what))
            .collect::<Result<_, _>>()?;
        if claimed.is_empty() {
            tx.rollback().await.map_err(backend(what))?;
            return Ok(claimed);
        }
        let sql = format!(
            // The wait stays until the claimer's first commit (see `claim_now`).
            "UPDATE runs SET status = 'running', lease_owner = $1, lease_until = $2, \
             wake_at = NULL, updated_at = $3 WHERE id IN ({})",
            placeholders(4, claimed.len())
        );
        let mut update = sqlx::query(AssertSqlSafe(sql))
            .bind(owner.to_owned())
            .bind(rows::micros(until)?)
            .bind(now);
        for run in &claimed {
            update = update.bind(run.id.clone());
        }
        update.execute(&mut *tx).await.map_err(backend(what))?;
        tx.commit().await.map_err(backend(what))?;
        Ok(claimed)
    }

    pub(super) async fn due_now(&self) -> Result<Due, StoreError> {
        let what = "looking for due runs";
        let sql = format!(
            "SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM runs WHERE {} LIMIT 1) AS d) \
               + (SELECT COUNT(*) FROM (SELECT 1 FROM events WHERE status = 'pending' \
                  AND (claimed_until IS NULL OR claimed_until < $1) LIMIT 1) AS e), \
             (SELECT MIN(t) FROM ( \
                SELECT MIN(wake_at) AS t FROM runs WHERE status = 'suspended' \
                    AND wake_at > $1 AND wake_at < {WAKE_ON_CHILD} \
                UNION ALL SELECT MIN(wake_at) FROM runs WHERE status = 'running' \
                    AND lease_owner IS NULL AND wake_at > $1 \
                UNION ALL SELECT MIN(lease_until) FROM runs WHERE status = 'running' \
                    AND lease_until >= $1 \
                UNION ALL SELECT MIN(claimed_until) FROM events WHERE status = 'pending' \
                    AND claimed_until >= $1) AS n)",
            due_condition("")
        );
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(rows::now_micros()?)
            .fetch_one(&self.pool)
            .await
            .map_err(backend(what))?;
        let now: i64 = row.try_get(0).map_err(backend(what))?;
        let next: Option<i64> = row.try_get(1).map_err(backend(what))?;
        Ok(Due {
            now: now > 0,
            next: next.map(rows::time),
        })
    }

    pub(super) async fn renew_leases_now(
        &self,
        owner: &str,
        until: SystemTime,
        runs: &[String],
    ) -> Result<Vec<HeldLease>, StoreError> {
        let what = "renewing a worker's leases";
        let now = rows::now_micros()?;
        let until = rows::micros(until)?;
        let holding = i64::try_from(runs.len()).unwrap_or(i64::MAX);
        let worker = "UPDATE workers SET renewed_at = $2, holding = $3 WHERE id = $1";
        if runs.is_empty() {
            sqlx::query(worker)
                .bind(owner.to_owned())
                .bind(now)
                .bind(holding)
                .execute(&self.pool)
                .await
                .map_err(backend(what))?;
            return Ok(Vec::new());
        }
        // The ids' parameters start at `first` (after the worker statement's, in one).
        let renew = |first: usize| {
            format!(
                "UPDATE runs SET lease_until = $2 WHERE lease_owner = $1 AND status = 'running' \
                 AND id IN ({}) RETURNING id, interrupt_requested",
                placeholders(first, runs.len())
            )
        };
        let rows = match DB::RENEW_WITH_WORKER {
            // One statement: the worker's record in a data-modifying `WITH`.
            Some(with) => {
                let sql = format!("{with} {}", renew(5));
                let mut query = sqlx::query(AssertSqlSafe(sql))
                    .bind(owner.to_owned())
                    .bind(until)
                    .bind(now)
                    .bind(holding);
                for run in runs {
                    query = query.bind(run.clone());
                }
                query.fetch_all(&self.pool).await.map_err(backend(what))?
            }
            None => {
                let mut tx = self
                    .pool
                    .begin_with(DB::BEGIN_WRITE)
                    .await
                    .map_err(backend(what))?;
                sqlx::query(worker)
                    .bind(owner.to_owned())
                    .bind(now)
                    .bind(holding)
                    .execute(&mut *tx)
                    .await
                    .map_err(backend(what))?;
                let mut query = sqlx::query(AssertSqlSafe(renew(3)))
                    .bind(owner.to_owned())
                    .bind(until);
                for run in runs {
                    query = query.bind(run.clone());
                }
                let rows = query.fetch_all(&mut *tx).await.map_err(backend(what))?;
                tx.commit().await.map_err(backend(what))?;
                rows
            }
        };
        rows.iter()
            .map(|row| {
                Ok(HeldLease {
                    run_id: row.try_get(0).map_err(backend(what))?,
                    interrupt_requested: row.try_get(1).map_err(backend(what))?,
                })
            })
            .collect()
    }

    pub(super) async fn release_now(&self, run_id: &str, owner: &str) -> Result<bool, StoreError> {
        let what = "handing a run back";
        let done = sqlx::query(
            "UPDATE runs SET lease_owner = NULL, lease_until = NULL, updated_at = $3 \
             WHERE id = $1 AND lease_owner = $2 AND status = 'running' RETURNING id",
        )
        .bind(run_id.to_owned())
        .bind(owner.to_owned())
        .bind(rows::now_micros()?)
        .fetch_optional(&self.pool)
        .await
        .map_err(backend(what))?;
        let released = done.is_some();
        if released {
            self.notify_now(&Notice::Work { at: None }).await?;
        }
        Ok(released)
    }

    pub(super) async fn put_worker_now(&self, worker: &WorkerRecord) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO workers (id, host, concurrency, holding, started_at, renewed_at) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO UPDATE SET \
             host = $2, concurrency = $3, holding = $4, started_at = $5, renewed_at = $6",
        )
        .bind(worker.id.clone())
        .bind(worker.host.clone())
        .bind(i64::from(worker.concurrency))
        .bind(i64::from(worker.holding))
        .bind(rows::micros(worker.started_at)?)
        .bind(rows::micros(worker.renewed_at)?)
        .execute(&self.pool)
        .await
        .map_err(backend("recording a worker"))?;
        Ok(())
    }

    pub(super) async fn workers_now(&self) -> Result<Vec<WorkerRecord>, StoreError> {
        let what = "listing workers";
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {WORKER_COLUMNS} FROM workers ORDER BY started_at, id"
        )))
        .fetch_all(&self.pool)
        .await
        .map_err(backend(what))?;
        rows.iter()
            .map(|row| {
                let count = |i: usize| -> Result<u32, StoreError> {
                    let n: i64 = row.try_get(i).map_err(backend(what))?;
                    Ok(u32::try_from(n).unwrap_or(u32::MAX))
                };
                Ok(WorkerRecord {
                    id: row.try_get(0).map_err(backend(what))?,
                    host: row.try_get(1).map_err(backend(what))?,
                    concurrency: count(2)?,
                    holding: count(3)?,
                    started_at: rows::time(row.try_get(4).map_err(backend(what))?),
                    renewed_at: rows::time(row.try_get(5).map_err(backend(what))?),
                })
            })
            .collect()
    }

    pub(super) async fn remove_worker_now(&self, id: &str) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM workers WHERE id = $1 RETURNING id")
            .bind(id.to_owned())
            .fetch_optional(&self.pool)
            .await
            .map_err(backend("forgetting a worker"))?;
        Ok(done.is_some())
    }

    pub(super) async fn queue_now(&self) -> Result<QueueStats, StoreError> {
        let what = "measuring the queue";
        let sql = format!(
            "SELECT \
               (SELECT COUNT(*) FROM runs WHERE status = 'running' \
                    AND (lease_owner IS NULL OR lease_until < $1) \
                    AND (wake_at IS NULL OR wake_at <= $1)), \
               (SELECT MIN(created_at) FROM runs WHERE status = 'running' \
                    AND (lease_owner IS NULL OR lease_until < $1) \
                    AND (wake_at IS NULL OR wake_at <= $1)), \
               (SELECT COUNT(*) FROM runs WHERE status = 'running' AND lease_owner IS NULL \
                    AND wake_at > $1), \
               (SELECT COUNT(*) FROM runs WHERE status = 'suspended' AND wake_at <= $1), \
               (SELECT COUNT(*) FROM runs WHERE status = 'suspended' AND wake_at > $1 \
                    AND wake_at < {WAKE_ON_CHILD}), \
               (SELECT MIN(wake_at) FROM runs WHERE wake_at > $1 AND wake_at < {WAKE_ON_CHILD} \
                    AND (status = 'suspended' OR (status = 'running' AND lease_owner IS NULL))), \
               (SELECT COUNT(*) FROM runs WHERE status = 'running' AND lease_until >= $1)"
        );
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(rows::now_micros()?)
            .fetch_one(&self.pool)
            .await
            .map_err(backend(what))?;
        let count = |i: usize| -> Result<u64, StoreError> {
            let n: i64 = row.try_get(i).map_err(backend(what))?;
            Ok(u64::try_from(n).unwrap_or(0))
        };
        let time = |i: usize| -> Result<Option<SystemTime>, StoreError> {
            let t: Option<i64> = row.try_get(i).map_err(backend(what))?;
            Ok(t.map(rows::time))
        };
        Ok(QueueStats {
            queued: count(0)?,
            oldest_queued: time(1)?,
            scheduled: count(2)?,
            timers_due: count(3)?,
            timers_pending: count(4)?,
            next_timer: time(5)?,
            held: count(6)?,
        })
    }

    pub(super) async fn run_by_key_now(&self, key: &str) -> Result<Option<RunRecord>, StoreError> {
        let what = "finding a run by its key";
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE idempotency_key = $1"
        )))
        .bind(key.to_owned())
        .fetch_optional(&self.pool)
        .await
        .map_err(backend(what))?;
        row.map(|row| Self::record(&row, what)).transpose()
    }

    pub(super) async fn notify_now(&self, notice: &Notice) -> Result<(), StoreError> {
        let Some(sql) = DB::NOTIFY else {
            return Ok(());
        };
        sqlx::query(sql)
            .bind(notice.to_payload())
            .execute(&self.pool)
            .await
            .map_err(backend("notifying the workers"))?;
        Ok(())
    }
}
