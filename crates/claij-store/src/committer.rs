//! Grouped commits: every checkpoint joins a queue; whoever holds the store's writer
//! takes whatever is queued (up to [`MAX_GROUP`]), writes it all in one transaction — one
//! fsync for the lot — and answers each committer on its own.
//!
//! There is no committer task: the committers take turns. One that finds the writer free
//! takes the queue; a group of just its own checkpoint it writes itself (so a lone run's
//! commit goes from its task to the database and back, with no hand-off to another
//! task), a larger group in a task of its own (so that cancelling one committer cannot
//! lose the others' answers). The others wait for their answer or for the writer, and
//! the first to get the writer takes what has queued meanwhile.
//!
//! A failing checkpoint must not fail the others. The usual failures (a lost lease, an
//! entry out of sequence, an unknown run) are found by a guarded `UPDATE` that changes
//! nothing when they apply, so they cost nothing. When a statement fails outright (which
//! PostgreSQL answers by aborting the transaction), the group is written again with each
//! checkpoint inside its own savepoint, so only the checkpoint at fault fails.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use claij_core::store::StoreError;
use sqlx::pool::PoolConnection;
use sqlx::{AssertSqlSafe, Connection, Decode, Encode, Executor, IntoArguments, Pool, Row, Type};
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard, oneshot};

use crate::dialect::{CHECKPOINT_REFUSED, Dialect};
use crate::rows::{EncodedCheckpoint, now_micros};

/// The most checkpoints written in one transaction.
pub(crate) const MAX_GROUP: usize = 256;

/// Rows per multi-row `INSERT` into `trail` (3 parameters each; both databases allow far
/// more parameters than this needs).
const INSERT_CHUNK: usize = 200;

/// How long the writer keeps its connection idle before giving it back to the pool
/// (which checks it before the next use: a server may have closed it meanwhile).
const KEEP_IDLE: Duration = Duration::from_secs(1);

/// A checkpoint waiting to be written, and where its outcome goes.
struct Pending {
    /// Which commit it is (to recognize one's own).
    id: u64,
    checkpoint: EncodedCheckpoint,
    reply: oneshot::Sender<Result<(), StoreError>>,
}

/// How a store's commits were grouped since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitStats {
    /// Checkpoints handled (written or refused).
    pub commits: u64,
    /// Transactions begun to write them (grouping makes this much smaller than `commits`
    /// when many runs commit at once).
    pub transactions: u64,
    /// The largest group written in one transaction.
    pub largest_group: u64,
}

/// The commit counters, shared by the writer and the store.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    commits: AtomicU64,
    transactions: AtomicU64,
    largest_group: AtomicU64,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> CommitStats {
        CommitStats {
            commits: self.commits.load(Ordering::Relaxed),
            transactions: self.transactions.load(Ordering::Relaxed),
            largest_group: self.largest_group.load(Ordering::Relaxed),
        }
    }
}

impl<DB: Dialect> Drop for Writer<DB> {
    fn drop(&mut self) {
        // A connection going back to the pool does so in a task, which needs a runtime;
        // a store dropped outside one (after its runtime, say) closes it instead.
        if let Some((connection, _)) = self.held.take()
            && tokio::runtime::Handle::try_current().is_err()
        {
            drop(connection.detach());
        }
    }
}

/// A store's commits: the queue and the writer the committers take turns at.
pub(crate) struct Commits<DB: Dialect> {
    queue: std::sync::Mutex<Vec<Pending>>,
    writer: Arc<AsyncMutex<Writer<DB>>>,
    next_id: AtomicU64,
}

fn stopped() -> StoreError {
    StoreError::Backend("the commit was abandoned before its outcome was known".into())
}

impl<DB> Commits<DB>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'e> i64: Encode<'e, DB> + Decode<'e, DB> + Type<DB>,
    for<'e> String: Encode<'e, DB> + Decode<'e, DB> + Type<DB>,
    for<'e> Option<i64>: Encode<'e, DB> + Type<DB>,
    for<'e> Option<String>: Encode<'e, DB> + Type<DB>,
    for<'e> f64: Encode<'e, DB> + Type<DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
{
    pub(crate) fn new(pool: Pool<DB>, counters: Arc<Counters>) -> Self {
        Self {
            queue: std::sync::Mutex::new(Vec::new()),
            writer: Arc::new(AsyncMutex::new(Writer {
                pool,
                counters,
                held: None,
            })),
            next_id: AtomicU64::new(0),
        }
    }

    /// Writes `checkpoint`, grouped with whatever else is queued, and returns its outcome.
    pub(crate) async fn commit(&self, checkpoint: EncodedCheckpoint) -> Result<(), StoreError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (reply, mut outcome) = oneshot::channel();
        self.lock_queue().push(Pending {
            id,
            checkpoint,
            reply,
        });
        loop {
            let writer: OwnedMutexGuard<Writer<DB>> = tokio::select! {
                biased;
                result = &mut outcome => return result.unwrap_or_else(|_| Err(stopped())),
                writer = self.writer.clone().lock_owned() => writer,
            };
            let group: Vec<Pending> = {
                let mut queue = self.lock_queue();
                let n = queue.len().min(MAX_GROUP);
                queue.drain(..n).collect()
            };
            match group.as_slice() {
                // Another committer's group took this one; its answer is there (the
                // writer is released only after the answers are sent).
                [] => continue,
                [lone] if lone.id == id => {
                    let mut writer = writer;
                    writer.write_and_answer(group).await;
                }
                _ => {
                    tokio::spawn(async move {
                        let mut writer = writer;
                        writer.write_and_answer(group).await;
                    });
                }
            }
        }
    }

    /// Gives the writer's connection back to the pool (before the pool is closed, which
    /// waits for every connection to come back).
    pub(crate) async fn release(&self) {
        self.writer.lock().await.held = None;
    }

    fn lock_queue(&self) -> std::sync::MutexGuard<'_, Vec<Pending>> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// How a group's transaction failed as a whole.
enum GroupFailure {
    /// A statement failed before the commit: nothing was written.
    Statement(sqlx::Error),
    /// Beginning, committing or a savepoint failed: every checkpoint in the group fails.
    Transaction(sqlx::Error),
}

fn backend(what: &str, e: sqlx::Error) -> StoreError {
    StoreError::Backend(format!("{what}: {e}"))
}

/// The store's writer, which the committers take turns holding: the pool it writes
/// through, its counters and the connection it keeps between groups. Its functions also
/// serve the store for the SQL they share (appending entries, explaining a refused commit).
pub(crate) struct Writer<DB: Dialect> {
    pool: Pool<DB>,
    counters: Arc<Counters>,
    /// The connection of the last group, kept while commits keep coming: a connection
    /// going back to the pool costs a round trip (sqlx pings it), and so does taking one.
    held: Option<(PoolConnection<DB>, Instant)>,
}

impl<DB> Writer<DB>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'e> i64: Encode<'e, DB> + Decode<'e, DB> + Type<DB>,
    for<'e> String: Encode<'e, DB> + Decode<'e, DB> + Type<DB>,
    for<'e> Option<i64>: Encode<'e, DB> + Type<DB>,
    for<'e> Option<String>: Encode<'e, DB> + Type<DB>,
    for<'e> f64: Encode<'e, DB> + Type<DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
{
    /// Writes `group` and answers each of its committers.
    async fn write_and_answer(&mut self, group: Vec<Pending>) {
        let results = self.write_group(&group).await;
        for (pending, result) in group.into_iter().zip(results) {
            // A committer that stopped waiting (its task was cancelled) is no error.
            let _ = pending.reply.send(result);
        }
    }

    /// Writes a group; one outcome per checkpoint, in order.
    async fn write_group(&mut self, group: &[Pending]) -> Vec<Result<(), StoreError>> {
        let n = group.len() as u64;
        self.counters.commits.fetch_add(n, Ordering::Relaxed);
        self.counters.largest_group.fetch_max(n, Ordering::Relaxed);
        let mut outcome = self.write_once(group, false).await;
        if group.len() > 1 && matches!(outcome, Err(GroupFailure::Statement(_))) {
            outcome = self.write_once(group, true).await;
        }
        let error = match outcome {
            Ok(results) => return results,
            Err(GroupFailure::Statement(e) | GroupFailure::Transaction(e)) => backend("commit", e),
        };
        group.iter().map(|_| Err(error.clone())).collect()
    }

    /// One transaction over the group, with a savepoint per checkpoint when `isolate`, on
    /// the held connection (or a new one from the pool). The connection is kept only if
    /// all went well.
    async fn write_once(
        &mut self,
        group: &[Pending],
        isolate: bool,
    ) -> Result<Vec<Result<(), StoreError>>, GroupFailure> {
        let now = match now_micros() {
            Ok(now) => now,
            Err(e) => return Ok(group.iter().map(|_| Err(e.clone())).collect()),
        };
        self.counters.transactions.fetch_add(1, Ordering::Relaxed);
        let mut conn = match self.held.take() {
            Some((conn, since)) if since.elapsed() < KEEP_IDLE => conn,
            _ => self
                .pool
                .acquire()
                .await
                .map_err(GroupFailure::Transaction)?,
        };
        let outcome = Self::write_on(&mut conn, group, isolate, now).await;
        if outcome.is_ok() {
            self.held = Some((conn, Instant::now()));
        }
        outcome
    }

    /// [`Self::write_once`] on `conn`.
    async fn write_on(
        conn: &mut DB::Connection,
        group: &[Pending],
        isolate: bool,
        now: i64,
    ) -> Result<Vec<Result<(), StoreError>>, GroupFailure> {
        if let ([lone], false, Some(_)) = (group, isolate, DB::CHECKPOINT_STATEMENT)
            && lone.checkpoint.published.is_empty()
        {
            // One statement is its own transaction: no BEGIN and COMMIT round trips.
            return match Self::apply(conn, &lone.checkpoint, now).await {
                Ok(result) => Ok(vec![result]),
                Err(e) => Err(GroupFailure::Statement(e)),
            };
        }
        let mut tx = conn
            .begin_with(DB::BEGIN_WRITE)
            .await
            .map_err(GroupFailure::Transaction)?;
        // Runs are written in id order, so that two stores' groups (two workers on one
        // PostgreSQL database) lock rows in the same order and cannot deadlock. The sort is
        // stable: two checkpoints of one run keep theirs.
        let mut order: Vec<usize> = (0..group.len()).collect();
        order.sort_by(|&a, &b| group[a].checkpoint.run_id.cmp(&group[b].checkpoint.run_id));
        let mut results = vec![Ok(()); group.len()];
        for i in order {
            if isolate {
                Self::savepoint(&mut tx, "SAVEPOINT claij_commit").await?;
            }
            match Self::apply(&mut tx, &group[i].checkpoint, now).await {
                Ok(result) => results[i] = result,
                Err(e) if isolate => {
                    Self::savepoint(&mut tx, "ROLLBACK TO SAVEPOINT claij_commit").await?;
                    results[i] = Err(backend("commit", e));
                }
                Err(e) => return Err(GroupFailure::Statement(e)),
            }
            if isolate {
                Self::savepoint(&mut tx, "RELEASE SAVEPOINT claij_commit").await?;
            }
        }
        tx.commit().await.map_err(GroupFailure::Transaction)?;
        Ok(results)
    }

    async fn savepoint(
        conn: &mut DB::Connection,
        statement: &'static str,
    ) -> Result<(), GroupFailure> {
        sqlx::query(statement)
            .execute(conn)
            .await
            .map(|_| ())
            .map_err(GroupFailure::Transaction)
    }

    /// Writes one checkpoint inside the group's transaction. The outer error is a failed
    /// statement; the inner one a refusal (nothing was written).
    async fn apply(
        conn: &mut DB::Connection,
        checkpoint: &EncodedCheckpoint,
        now: i64,
    ) -> Result<Result<(), StoreError>, sqlx::Error> {
        let written = Self::apply_checkpoint(conn, checkpoint, now).await?;
        if written.is_ok() && !checkpoint.published.is_empty() {
            Self::insert_published(conn, checkpoint, now).await?;
        }
        Ok(written)
    }

    /// The outbox: a checkpoint's published events, in its transaction, and a notice for
    /// the workers (sent when the transaction commits). An event written before (the same
    /// attempt, committed twice) is left as it is.
    async fn insert_published(
        conn: &mut DB::Connection,
        checkpoint: &EncodedCheckpoint,
        now: i64,
    ) -> Result<(), sqlx::Error> {
        for (id, topic, event) in &checkpoint.published {
            sqlx::query(
                "INSERT INTO events (id, topic, event, run_id, status, created_at) \
                 VALUES ($1, $2, $3, $4, 'pending', $5) ON CONFLICT (id) DO NOTHING",
            )
            .bind(id.clone())
            .bind(topic.clone())
            .bind(event.clone())
            .bind(checkpoint.run_id.clone())
            .bind(now)
            .execute(&mut *conn)
            .await?;
        }
        if let Some(notify) = DB::NOTIFY {
            sqlx::query(notify)
                .bind("work".to_owned())
                .execute(&mut *conn)
                .await?;
        }
        Ok(())
    }

    /// Writes one checkpoint's run update and trail entries.
    async fn apply_checkpoint(
        conn: &mut DB::Connection,
        checkpoint: &EncodedCheckpoint,
        now: i64,
    ) -> Result<Result<(), StoreError>, sqlx::Error> {
        if let Some(statement) = DB::CHECKPOINT_STATEMENT {
            return Self::apply_in_one(conn, statement, checkpoint, now).await;
        }
        let updated = sqlx::query(UPDATE_RUN)
            .bind(checkpoint.status.to_owned())
            .bind(checkpoint.state.clone())
            .bind(checkpoint.context.clone())
            .bind(checkpoint.wait.clone())
            .bind(checkpoint.lease_until)
            .bind(checkpoint.entries.len() as i64)
            .bind(now)
            .bind(checkpoint.run_id.clone())
            .bind(checkpoint.owner.clone())
            .bind(checkpoint.first_seq)
            .bind(checkpoint.wake_at)
            .bind(checkpoint.spend.input_tokens)
            .bind(checkpoint.spend.output_tokens)
            .bind(checkpoint.spend.cost_usd)
            .bind(checkpoint.spend.calls)
            .bind(checkpoint.spend.time_ms)
            .bind(checkpoint.spend.waiting_ms)
            .fetch_optional(&mut *conn)
            .await?;
        if updated.is_none() {
            return Ok(Err(Self::refused(conn, checkpoint).await?));
        }
        Self::insert_entries(conn, &checkpoint.run_id, &checkpoint.entries).await?;
        Ok(Ok(()))
    }

    /// [`Self::apply`] through the dialect's one checkpoint `statement`.
    async fn apply_in_one(
        conn: &mut DB::Connection,
        statement: &'static str,
        checkpoint: &EncodedCheckpoint,
        now: i64,
    ) -> Result<Result<(), StoreError>, sqlx::Error> {
        let entries = serde_json::to_string(&checkpoint.entries)
            .map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
        let written = sqlx::query(statement)
            .bind(checkpoint.run_id.clone())
            .bind(checkpoint.owner.clone())
            .bind(checkpoint.first_seq)
            .bind(checkpoint.status.to_owned())
            .bind(checkpoint.state.clone())
            .bind(checkpoint.context.clone())
            .bind(checkpoint.wait.clone())
            .bind(checkpoint.lease_until)
            .bind(now)
            .bind(entries)
            .bind(checkpoint.wake_at)
            .bind(checkpoint.spend.input_tokens)
            .bind(checkpoint.spend.output_tokens)
            .bind(checkpoint.spend.cost_usd)
            .bind(checkpoint.spend.calls)
            .bind(checkpoint.spend.time_ms)
            .bind(checkpoint.spend.waiting_ms)
            .execute(&mut *conn)
            .await;
        match written {
            Ok(_) => Ok(Ok(())),
            Err(e)
                if e.as_database_error()
                    .is_some_and(|d| d.message().contains(CHECKPOINT_REFUSED)) =>
            {
                Ok(Err(Self::refused(conn, checkpoint).await?))
            }
            Err(e) => Err(e),
        }
    }

    /// Why the guard refused `checkpoint` (nothing of it was written).
    async fn refused(
        conn: &mut DB::Connection,
        checkpoint: &EncodedCheckpoint,
    ) -> Result<StoreError, sqlx::Error> {
        let first = checkpoint.first_seq.and_then(|s| u64::try_from(s).ok());
        Self::refusal(&mut *conn, &checkpoint.run_id, &checkpoint.owner, first).await
    }

    /// Appends `(seq, entry JSON)` rows to a run's trail.
    pub(crate) async fn insert_entries(
        conn: &mut DB::Connection,
        run_id: &str,
        entries: &[(i64, String)],
    ) -> Result<(), sqlx::Error> {
        for chunk in entries.chunks(INSERT_CHUNK) {
            let rows: Vec<String> = (0..chunk.len())
                .map(|i| format!("(${}, ${}, ${})", 3 * i + 1, 3 * i + 2, 3 * i + 3))
                .collect();
            let sql = format!(
                "INSERT INTO trail (run_id, seq, entry) VALUES {}",
                rows.join(", ")
            );
            let mut query = sqlx::query(AssertSqlSafe(sql));
            for (seq, entry) in chunk {
                query = query.bind(run_id.to_owned()).bind(*seq).bind(entry.clone());
            }
            query.execute(&mut *conn).await?;
        }
        Ok(())
    }

    /// Why a checkpoint by `owner` cannot be written: the run is unknown, held by another,
    /// or its trail does not end where the checkpoint's entries start (`seq`).
    pub(crate) async fn refusal<'c, E>(
        executor: E,
        run_id: &str,
        owner: &str,
        seq: Option<u64>,
    ) -> Result<StoreError, sqlx::Error>
    where
        E: Executor<'c, Database = DB>,
    {
        let row = sqlx::query("SELECT lease_owner, trail_len FROM runs WHERE id = $1")
            .bind(run_id.to_owned())
            .fetch_optional(executor)
            .await?;
        let Some(row) = row else {
            return Ok(StoreError::NotFound {
                what: "run",
                id: run_id.to_owned(),
            });
        };
        let holder: Option<String> = row.try_get(0)?;
        let stored: i64 = row.try_get(1)?;
        let run = run_id.to_owned();
        Ok(match (holder.as_deref() == Some(owner), seq) {
            (false, _) => StoreError::LostLease { run },
            (true, Some(seq)) => StoreError::Sequence {
                run,
                seq,
                stored: u64::try_from(stored).unwrap_or(0),
            },
            // The guarded update found nothing wrong: the run changed meanwhile.
            (true, None) => StoreError::Conflict {
                run,
                reason: "changed while the commit was being written; try again".into(),
            },
        })
    }
}

/// The guarded update of a checkpoint: changes the run only if `$9` holds its lease and
/// (with new entries) its trail is `$10` entries long; `$11` is its new wake time,
/// `$12`–`$17` its spend (written in place of the stored one); its pending calls are
/// forgotten.
const UPDATE_RUN: &str = "UPDATE runs SET status = $1, state = $2, \
     context = COALESCE($3, context), wait = $4, \
     lease_owner = CASE WHEN $5 IS NULL THEN NULL ELSE lease_owner END, lease_until = $5, \
     trail_len = trail_len + $6, updated_at = $7, wake_at = $11, \
     input_tokens = $12, output_tokens = $13, cost_usd = $14, calls = $15, time_ms = $16, \
     waiting_ms = $17, pending = NULL \
     WHERE id = $8 AND lease_owner = $9 AND ($10 IS NULL OR trail_len = $10) \
     RETURNING trail_len";
