//! Events that start workflows: the subscriptions of FSMs to topics, and the published
//! events (written by checkpoints, see the committer) claimed by workers, dispatched and
//! settled.

use std::time::SystemTime;

use claij_core::store::{EventRecord, EventStatus, StoreError, Subscription};
use sqlx::{AssertSqlSafe, Decode, Encode, Executor, IntoArguments, Row, Type};

use super::{SqlStore, backend, placeholders};
use crate::dialect::Dialect;
use crate::rows;

const EVENT_COLUMNS: &str = "id, topic, event, run_id, status, runs, note, created_at, settled_at";

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
    fn event_record(row: &DB::Row, what: &str) -> Result<EventRecord, StoreError> {
        let id: String = row.try_get(0).map_err(backend(what))?;
        let event: String = row.try_get(2).map_err(backend(what))?;
        let status: String = row.try_get(4).map_err(backend(what))?;
        let runs: Option<String> = row.try_get(5).map_err(backend(what))?;
        let settled_at: Option<i64> = row.try_get(8).map_err(backend(what))?;
        Ok(EventRecord {
            topic: row.try_get(1).map_err(backend(what))?,
            event: rows::from_json(format!("event `{id}`"), &event)?,
            run_id: row.try_get(3).map_err(backend(what))?,
            status: EventStatus::parse(&status).ok_or_else(|| StoreError::Corrupt {
                what: format!("event `{id}` status"),
                message: format!("unknown status `{status}`"),
            })?,
            runs: match runs {
                Some(text) => rows::from_json(format!("event `{id}` runs"), &text)?,
                None => Vec::new(),
            },
            note: row.try_get(6).map_err(backend(what))?,
            created_at: rows::time(row.try_get(7).map_err(backend(what))?),
            settled_at: settled_at.map(rows::time),
            id,
        })
    }

    pub(super) async fn put_subscription_now(
        &self,
        subscription: &Subscription,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO subscriptions (topic, fsm_id, version, hash, created_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (topic, fsm_id) DO UPDATE SET \
             version = $3, hash = $4, created_at = $5",
        )
        .bind(subscription.topic.clone())
        .bind(subscription.fsm_id.clone())
        .bind(i64::from(subscription.version))
        .bind(subscription.hash.clone())
        .bind(rows::now_micros()?)
        .execute(&self.pool)
        .await
        .map_err(backend("storing a subscription"))?;
        Ok(())
    }

    pub(super) async fn subscriptions_now(
        &self,
        topic: &str,
    ) -> Result<Vec<Subscription>, StoreError> {
        let what = "reading subscriptions";
        let rows = sqlx::query(
            "SELECT topic, fsm_id, version, hash FROM subscriptions WHERE topic = $1 \
             ORDER BY fsm_id",
        )
        .bind(topic.to_owned())
        .fetch_all(&self.pool)
        .await
        .map_err(backend(what))?;
        rows.iter()
            .map(|row| {
                let version: i64 = row.try_get(2).map_err(backend(what))?;
                Ok(Subscription {
                    topic: row.try_get(0).map_err(backend(what))?,
                    fsm_id: row.try_get(1).map_err(backend(what))?,
                    version: u32::try_from(version).map_err(|_| StoreError::Corrupt {
                        what: "a subscription".into(),
                        message: format!("version {version} is out of range"),
                    })?,
                    hash: row.try_get(3).map_err(backend(what))?,
                })
            })
            .collect()
    }

    pub(super) async fn claim_events_now(
        &self,
        owner: &str,
        until: SystemTime,
        limit: u32,
        dead_owners: &[String],
    ) -> Result<Vec<EventRecord>, StoreError> {
        let what = "claiming published events";
        if limit == 0 {
            return Ok(Vec::new());
        }
        let now = rows::now_micros()?;
        let mut tx = self
            .pool
            .begin_with(DB::BEGIN_WRITE)
            .await
            .map_err(backend(what))?;
        let dead = if dead_owners.is_empty() {
            String::new()
        } else {
            format!(" OR claimed_by IN ({})", placeholders(3, dead_owners.len()))
        };
        let sql = format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE status = 'pending' \
             AND (claimed_until IS NULL OR claimed_until < $1{dead}) \
             ORDER BY created_at, id LIMIT $2{}",
            DB::SKIP_LOCKED
        );
        let mut query = sqlx::query(AssertSqlSafe(sql))
            .bind(now)
            .bind(i64::from(limit));
        for dead_owner in dead_owners {
            query = query.bind(dead_owner.clone());
        }
        let found = query.fetch_all(&mut *tx).await.map_err(backend(what))?;
        let events: Vec<EventRecord> = found
            .iter()
            .map(|row| Self::event_record(row, what))
            .collect::<Result<_, _>>()?;
        if events.is_empty() {
            tx.rollback().await.map_err(backend(what))?;
            return Ok(events);
        }
        let sql = format!(
            "UPDATE events SET claimed_by = $1, claimed_until = $2 WHERE id IN ({})",
            placeholders(3, events.len())
        );
        let mut update = sqlx::query(AssertSqlSafe(sql))
            .bind(owner.to_owned())
            .bind(rows::micros(until)?);
        for event in &events {
            update = update.bind(event.id.clone());
        }
        update.execute(&mut *tx).await.map_err(backend(what))?;
        tx.commit().await.map_err(backend(what))?;
        Ok(events)
    }

    pub(super) async fn settle_event_now(
        &self,
        id: &str,
        status: EventStatus,
        runs: &[String],
        note: Option<&str>,
    ) -> Result<(), StoreError> {
        let runs = (!runs.is_empty())
            .then(|| rows::to_json("an event's runs", &runs))
            .transpose()?;
        sqlx::query(
            "UPDATE events SET status = $2, runs = $3, note = $4, settled_at = $5, \
             claimed_by = NULL, claimed_until = NULL WHERE id = $1",
        )
        .bind(id.to_owned())
        .bind(status.as_str().to_owned())
        .bind(runs)
        .bind(note.map(str::to_owned))
        .bind(rows::now_micros()?)
        .execute(&self.pool)
        .await
        .map_err(backend("settling an event"))?;
        Ok(())
    }

    pub(super) async fn events_now(
        &self,
        status: Option<EventStatus>,
    ) -> Result<Vec<EventRecord>, StoreError> {
        let what = "listing events";
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE ($1 IS NULL OR status = $1) \
             ORDER BY created_at, id"
        )))
        .bind(status.map(|s| s.as_str().to_owned()))
        .fetch_all(&self.pool)
        .await
        .map_err(backend(what))?;
        rows.iter()
            .map(|row| Self::event_record(row, what))
            .collect()
    }
}
