//! What `claij serve` keeps beside the runs: resume links (by the hash of their secret),
//! completion callbacks and their deliveries.

use claij_core::store::StoreError;
use sqlx::{Decode, Encode, Executor, IntoArguments, Row, Type};

use super::{SqlStore, backend};
use crate::dialect::Dialect;
use crate::roles::{Delivery, DeliveryStatus, Hook};
use crate::rows;

const DELIVERY_COLUMNS: &str = "id, run_id, url, kind, payload, attempts, status, last_status, \
     last_error, next_at, created_at, updated_at";

impl<DB> SqlStore<DB>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'e> i64: Encode<'e, DB> + Decode<'e, DB> + Type<DB>,
    for<'e> String: Encode<'e, DB> + Decode<'e, DB> + Type<DB>,
    for<'e> Option<i64>: Encode<'e, DB> + Decode<'e, DB> + Type<DB>,
    for<'e> Option<String>: Encode<'e, DB> + Decode<'e, DB> + Type<DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
{
    pub(super) async fn put_hook_now(
        &self,
        token_hash: &str,
        hook: &Hook,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO hooks (token_hash, run_id, wait_seq, created_at) VALUES ($1, $2, $3, $4)",
        )
        .bind(token_hash.to_owned())
        .bind(hook.run_id.clone())
        .bind(rows::signed("a wait's sequence number", hook.wait_seq)?)
        .bind(rows::micros(hook.created_at)?)
        .execute(&self.pool)
        .await
        .map_err(backend("storing a resume link"))?;
        Ok(())
    }

    pub(super) async fn hook_now(&self, token_hash: &str) -> Result<Option<Hook>, StoreError> {
        let what = "reading a resume link";
        let row =
            sqlx::query("SELECT run_id, wait_seq, created_at FROM hooks WHERE token_hash = $1")
                .bind(token_hash.to_owned())
                .fetch_optional(&self.pool)
                .await
                .map_err(backend(what))?;
        let Some(row) = row else { return Ok(None) };
        let run_id: String = row.try_get(0).map_err(backend(what))?;
        let wait_seq: i64 = row.try_get(1).map_err(backend(what))?;
        let created_at: i64 = row.try_get(2).map_err(backend(what))?;
        Ok(Some(Hook {
            run_id,
            wait_seq: u64::try_from(wait_seq).unwrap_or(0),
            created_at: rows::time(created_at),
        }))
    }

    pub(super) async fn delete_hooks_now(
        &self,
        run_id: &str,
        before_seq: u64,
    ) -> Result<u64, StoreError> {
        let deleted = sqlx::query(
            "DELETE FROM hooks WHERE run_id = $1 AND wait_seq < $2 RETURNING token_hash",
        )
        .bind(run_id.to_owned())
        .bind(i64::try_from(before_seq).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await
        .map_err(backend("deleting resume links"))?;
        Ok(deleted.len() as u64)
    }

    pub(super) async fn put_callback_now(&self, run_id: &str, url: &str) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO callbacks (run_id, url, created_at) VALUES ($1, $2, $3) \
             ON CONFLICT (run_id) DO UPDATE SET url = excluded.url",
        )
        .bind(run_id.to_owned())
        .bind(url.to_owned())
        .bind(rows::now_micros()?)
        .execute(&self.pool)
        .await
        .map_err(backend("storing a callback"))?;
        Ok(())
    }

    pub(super) async fn callback_now(&self, run_id: &str) -> Result<Option<String>, StoreError> {
        let what = "reading a callback";
        let row = sqlx::query("SELECT url FROM callbacks WHERE run_id = $1")
            .bind(run_id.to_owned())
            .fetch_optional(&self.pool)
            .await
            .map_err(backend(what))?;
        row.map(|r| r.try_get::<String, _>(0).map_err(backend(what)))
            .transpose()
    }

    pub(super) async fn put_delivery_now(&self, d: &Delivery) -> Result<(), StoreError> {
        let what = format!("delivery {}", d.id);
        let payload = rows::to_json(&what, &d.payload)?;
        let next_at = d.next_at.map(rows::micros).transpose()?;
        sqlx::query(
            "INSERT INTO deliveries (id, run_id, url, kind, payload, attempts, status, \
             last_status, last_error, next_at, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
             ON CONFLICT (id) DO UPDATE SET attempts = excluded.attempts, \
             status = excluded.status, last_status = excluded.last_status, \
             last_error = excluded.last_error, next_at = excluded.next_at, \
             updated_at = excluded.updated_at",
        )
        .bind(d.id.clone())
        .bind(d.run_id.clone())
        .bind(d.url.clone())
        .bind(d.kind.clone())
        .bind(payload)
        .bind(i64::from(d.attempts))
        .bind(d.status.as_str().to_owned())
        .bind(d.last_status.map(i64::from))
        .bind(d.last_error.clone())
        .bind(next_at)
        .bind(rows::micros(d.created_at)?)
        .bind(rows::micros(d.updated_at)?)
        .execute(&self.pool)
        .await
        .map_err(backend(&what))?;
        Ok(())
    }

    pub(super) async fn deliveries_now(&self, run_id: &str) -> Result<Vec<Delivery>, StoreError> {
        let sql = format!(
            "SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE run_id = $1 ORDER BY created_at, id"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(run_id.to_owned())
            .fetch_all(&self.pool)
            .await
            .map_err(backend("reading deliveries"))?;
        rows.iter().map(delivery).collect()
    }

    pub(super) async fn pending_deliveries_now(&self) -> Result<Vec<Delivery>, StoreError> {
        let sql = format!(
            "SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE status = 'pending' ORDER BY next_at, id"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .fetch_all(&self.pool)
            .await
            .map_err(backend("reading pending deliveries"))?;
        rows.iter().map(delivery).collect()
    }
}

/// A delivery row.
fn delivery<R: Row>(row: &R) -> Result<Delivery, StoreError>
where
    for<'e> i64: Decode<'e, R::Database> + Type<R::Database>,
    for<'e> String: Decode<'e, R::Database> + Type<R::Database>,
    for<'e> Option<i64>: Decode<'e, R::Database> + Type<R::Database>,
    for<'e> Option<String>: Decode<'e, R::Database> + Type<R::Database>,
    usize: sqlx::ColumnIndex<R>,
{
    let what = "reading a delivery";
    let id: String = row.try_get(0).map_err(backend(what))?;
    let payload: String = row.try_get(4).map_err(backend(what))?;
    let status: String = row.try_get(6).map_err(backend(what))?;
    let corrupt = |message: String| StoreError::Corrupt {
        what: format!("delivery {id}"),
        message,
    };
    Ok(Delivery {
        run_id: row.try_get(1).map_err(backend(what))?,
        url: row.try_get(2).map_err(backend(what))?,
        kind: row.try_get(3).map_err(backend(what))?,
        payload: rows::from_json(format!("delivery {id}"), &payload)?,
        attempts: u32::try_from(row.try_get::<i64, _>(5).map_err(backend(what))?)
            .map_err(|e| corrupt(e.to_string()))?,
        status: DeliveryStatus::parse(&status)
            .ok_or_else(|| corrupt(format!("unknown status `{status}`")))?,
        last_status: row
            .try_get::<Option<i64>, _>(7)
            .map_err(backend(what))?
            .and_then(|s| u16::try_from(s).ok()),
        last_error: row.try_get(8).map_err(backend(what))?,
        next_at: row
            .try_get::<Option<i64>, _>(9)
            .map_err(backend(what))?
            .map(rows::time),
        created_at: rows::time(row.try_get(10).map_err(backend(what))?),
        updated_at: rows::time(row.try_get(11).map_err(backend(what))?),
        id,
    })
}
