//! [`SqlStore`]: every role of a store ([`Store`](crate::roles::Store)) over either
//! database. Its queries are written once (`$n`
//! parameters work in both); what differs is in [`Dialect`].

use std::sync::Arc;
use std::time::SystemTime;

use claij_core::store::{
    Checkpoint, ClaimFrom, Definition, Heartbeat, Notice, RunFilter, RunRecord, RunStatus,
    StoreError,
};
use claij_core::trail::TrailEntry;
use sqlx::error::ErrorKind;
use sqlx::{AssertSqlSafe, Decode, Encode, Executor, IntoArguments, Pool, Row, Type};

use crate::committer::{CommitStats, Commits, Counters, Writer};
use crate::dialect::Dialect;
use crate::migrate::{self, AppliedMigration};
use crate::rows::{
    self, DEFINITION_COLUMNS, DefinitionRow, FINAL_STATUSES_SQL, RUN_COLUMNS, RunRow, SpendColumns,
};

/// Ids per `IN (…)` list when deleting runs.
const DELETE_CHUNK: usize = 500;

/// A run store on SQLite or PostgreSQL (see [`crate::SqliteStore`], [`crate::PostgresStore`]).
pub struct SqlStore<DB: Dialect> {
    pool: Pool<DB>,
    description: String,
    commits: Commits<DB>,
    counters: Arc<Counters>,
}

impl<DB: Dialect> std::fmt::Debug for SqlStore<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlStore")
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

mod events;
mod migrate_run;
mod queue;
mod role_impls;
mod serving;
mod spend;

fn backend(what: &str) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
    move |e| StoreError::Backend(format!("{what}: {e}"))
}

fn db_error_kind(e: &sqlx::Error) -> Option<ErrorKind> {
    e.as_database_error().map(|d| d.kind())
}

/// A parameter of a query built at run time.
enum Param {
    Text(String),
    Int(i64),
}

/// The `WHERE … ORDER BY … LIMIT …` of a filtered listing, with its parameters (numbered
/// from `$1`), restricted to `statuses`.
fn filter_sql(filter: &RunFilter, statuses: &[RunStatus]) -> (String, Vec<Param>) {
    let mut sql = String::from(" WHERE 1 = 1");
    let mut params = Vec::new();
    if !statuses.is_empty() {
        // The words come from `RunStatus::as_str`, never from input.
        let words: Vec<String> = statuses
            .iter()
            .map(|s| format!("'{}'", s.as_str()))
            .collect();
        sql.push_str(&format!(" AND status IN ({})", words.join(", ")));
    }
    if let Some(fsm_id) = &filter.fsm_id {
        params.push(Param::Text(fsm_id.clone()));
        sql.push_str(&format!(" AND fsm_id = ${}", params.len()));
    }
    if let Some(before) = filter.updated_before {
        match rows::micros(before) {
            Ok(before) => params.push(Param::Int(before)),
            // Before any storable time: nothing matches.
            Err(_) => params.push(Param::Int(i64::MIN)),
        }
        sql.push_str(&format!(" AND updated_at < ${}", params.len()));
    }
    let micros = |t: SystemTime| rows::micros(t).unwrap_or(i64::MIN);
    if let Some(since) = filter.created_since {
        params.push(Param::Int(micros(since)));
        sql.push_str(&format!(" AND created_at >= ${}", params.len()));
    }
    if let Some(before) = filter.created_before {
        params.push(Param::Int(micros(before)));
        sql.push_str(&format!(" AND created_at < ${}", params.len()));
    }
    if let Some(cursor) = &filter.after {
        params.push(Param::Int(micros(cursor.created_at)));
        let at = params.len();
        params.push(Param::Text(cursor.id.clone()));
        sql.push_str(&format!(
            " AND (created_at < ${at} OR (created_at = ${at} AND id < ${}))",
            params.len()
        ));
    }
    sql.push_str(" ORDER BY created_at DESC, id DESC");
    if let Some(limit) = filter.limit {
        params.push(Param::Int(i64::try_from(limit).unwrap_or(i64::MAX)));
        sql.push_str(&format!(" LIMIT ${}", params.len()));
    }
    (sql, params)
}

/// `$from, $from+1, …` (`n` of them).
fn placeholders(from: usize, n: usize) -> String {
    (from..from + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

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
    /// Migrates the schema and sets up the commit queue and its writer.
    pub(crate) async fn start(pool: Pool<DB>, description: String) -> Result<Self, StoreError> {
        migrate::migrate(&pool).await?;
        let counters = Arc::new(Counters::default());
        let commits = Commits::new(pool.clone(), counters.clone());
        Ok(SqlStore {
            pool,
            description,
            commits,
            counters,
        })
    }

    /// How the commits so far were grouped (commits, transactions, largest group).
    pub fn stats(&self) -> CommitStats {
        self.counters.snapshot()
    }

    /// The schema migrations applied to the database, in order. Library API for operators
    /// and tests: which schema a database has (`claij` itself only migrates on open).
    pub async fn applied_migrations(&self) -> Result<Vec<AppliedMigration>, StoreError> {
        migrate::applied(&self.pool).await
    }

    /// The durability settings of a connection, as the database reports them
    /// (`journal_mode=wal synchronous=normal`, `synchronous_commit=off`). Library API for
    /// checks: that the chosen [`Durability`](claij_core::store::Durability) reached the
    /// database (the test suite asserts it for both modes).
    pub async fn durability_settings(&self) -> Result<String, StoreError> {
        let row = sqlx::query(DB::DURABILITY_PROBE)
            .fetch_one(&self.pool)
            .await
            .map_err(backend("reading the durability settings"))?;
        row.try_get(0)
            .map_err(backend("reading the durability settings"))
    }

    /// Closes the connections, waiting for those in use to be returned. Every operation
    /// after this fails, commits still queued included: call it once the runs are idle.
    pub async fn close(&self) {
        self.commits.release().await;
        self.pool.close().await;
    }

    fn run_row(row: &DB::Row) -> Result<RunRow, sqlx::Error> {
        Ok(RunRow {
            id: row.try_get(0)?,
            fsm_id: row.try_get(1)?,
            version: row.try_get(2)?,
            hash: row.try_get(3)?,
            parent_id: row.try_get(4)?,
            status: row.try_get(5)?,
            state: row.try_get(6)?,
            context: row.try_get(7)?,
            trail_len: row.try_get(8)?,
            wait: row.try_get(9)?,
            lease_owner: row.try_get(10)?,
            lease_until: row.try_get(11)?,
            interrupt_requested: row.try_get(12)?,
            created_at: row.try_get(13)?,
            updated_at: row.try_get(14)?,
            wake_at: row.try_get(15)?,
            idempotency_key: row.try_get(16)?,
            spend: Self::spend_columns(row, 17)?,
            budget: row.try_get(23)?,
            pending: row.try_get(24)?,
            forked_from: row.try_get(25)?,
        })
    }

    /// The six spend columns (see [`rows::SPEND_COLUMNS`]) starting at column `from`.
    fn spend_columns(row: &DB::Row, from: usize) -> Result<SpendColumns, sqlx::Error> {
        Ok(SpendColumns {
            input_tokens: row.try_get(from)?,
            output_tokens: row.try_get(from + 1)?,
            cost_usd: row.try_get(from + 2)?,
            calls: row.try_get(from + 3)?,
            time_ms: row.try_get(from + 4)?,
            waiting_ms: row.try_get(from + 5)?,
        })
    }

    fn record(row: &DB::Row, what: &str) -> Result<RunRecord, StoreError> {
        rows::decode_run(Self::run_row(row).map_err(backend(what))?)
    }

    fn definition_row(row: &DB::Row) -> Result<DefinitionRow, sqlx::Error> {
        Ok(DefinitionRow {
            fsm_id: row.try_get(0)?,
            version: row.try_get(1)?,
            hash: row.try_get(2)?,
            document: row.try_get(3)?,
            created_at: row.try_get(4)?,
            owner: row.try_get(5)?,
        })
    }

    fn definition(row: &DB::Row) -> Result<Definition, StoreError> {
        rows::decode_definition(Self::definition_row(row).map_err(backend("reading a definition"))?)
    }

    /// `SELECT {columns} FROM runs` with the filter (restricted to `statuses`) applied
    /// and its parameters bound, then `suffix`.
    fn select_runs(
        columns: &str,
        filter: &RunFilter,
        statuses: &[RunStatus],
        suffix: &str,
    ) -> sqlx::query::Query<'static, DB, DB::Arguments> {
        let (condition, params) = filter_sql(filter, statuses);
        let sql = format!("SELECT {columns} FROM runs{condition}{suffix}");
        let mut query = sqlx::query(AssertSqlSafe(sql));
        for param in params {
            query = match param {
                Param::Text(text) => query.bind(text),
                Param::Int(n) => query.bind(n),
            };
        }
        query
    }

    /// A run's record, or `NotFound`.
    async fn run_now(&self, run_id: &str, what: &str) -> Result<RunRecord, StoreError> {
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE id = $1"
        )))
        .bind(run_id.to_owned())
        .fetch_optional(&self.pool)
        .await
        .map_err(backend(what))?;
        match row {
            Some(row) => Self::record(&row, what),
            None => Err(StoreError::NotFound {
                what: "run",
                id: run_id.to_owned(),
            }),
        }
    }

    async fn put_definition_now(&self, definition: &Definition) -> Result<(), StoreError> {
        let what = format!(
            "definition `{}` version {}",
            definition.fsm_id, definition.version
        );
        let document = rows::to_json(&what, &definition.document)?;
        sqlx::query(
            // The operator's storing a client's definition makes it the operator's; the
            // reverse changes nothing.
            "INSERT INTO definitions (fsm_id, version, hash, document, created_at, owner) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (fsm_id, version, hash) \
             DO UPDATE SET owner = 'operator' WHERE excluded.owner = 'operator'",
        )
        .bind(definition.fsm_id.clone())
        .bind(i64::from(definition.version))
        .bind(definition.hash.clone())
        .bind(document)
        .bind(rows::micros(definition.created_at)?)
        .bind(definition.owner.as_str().to_owned())
        .execute(&self.pool)
        .await
        .map_err(backend("storing a definition"))?;
        Ok(())
    }

    async fn definition_now(
        &self,
        fsm_id: &str,
        version: u32,
        hash: Option<&str>,
    ) -> Result<Definition, StoreError> {
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT {DEFINITION_COLUMNS} FROM definitions \
             WHERE fsm_id = $1 AND version = $2 AND ($3 IS NULL OR hash = $3) \
             ORDER BY created_at DESC, hash DESC LIMIT 1"
        )))
        .bind(fsm_id.to_owned())
        .bind(i64::from(version))
        .bind(hash.map(str::to_owned))
        .fetch_optional(&self.pool)
        .await
        .map_err(backend("reading a definition"))?;
        match row {
            Some(row) => Self::definition(&row),
            None => Err(StoreError::NotFound {
                what: "definition",
                id: match hash {
                    Some(hash) => format!("{fsm_id} version {version} (hash {hash})"),
                    None => format!("{fsm_id} version {version}"),
                },
            }),
        }
    }

    async fn definitions_now(&self) -> Result<Vec<Definition>, StoreError> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {DEFINITION_COLUMNS} FROM definitions \
             ORDER BY created_at DESC, fsm_id, version DESC, hash"
        )))
        .fetch_all(&self.pool)
        .await
        .map_err(backend("listing definitions"))?;
        rows.iter().map(Self::definition).collect()
    }

    async fn create_run_now(
        &self,
        record: &RunRecord,
        entries: &[TrailEntry],
    ) -> Result<(), StoreError> {
        let run = rows::encode_run(record)?;
        let entries = match rows::encode_entries(&record.id, entries, 0)? {
            Ok(entries) => entries,
            Err(seq) => {
                return Err(StoreError::Sequence {
                    run: record.id.clone(),
                    seq,
                    stored: 0,
                });
            }
        };
        if record.trail_len != entries.len() as u64 {
            return Err(StoreError::Conflict {
                run: record.id.clone(),
                reason: format!(
                    "declares {} trail entries but was created with {}",
                    record.trail_len,
                    entries.len()
                ),
            });
        }
        let what = "creating a run";
        let mut tx = self
            .pool
            .begin_with(DB::BEGIN_WRITE)
            .await
            .map_err(backend(what))?;
        let inserted = sqlx::query(AssertSqlSafe(format!(
            "INSERT INTO runs ({RUN_COLUMNS}) VALUES ({})",
            placeholders(1, RUN_COLUMNS.split(',').count())
        )))
        .bind(run.id)
        .bind(run.fsm_id)
        .bind(run.version)
        .bind(run.hash)
        .bind(run.parent_id)
        .bind(run.status.to_owned())
        .bind(run.state)
        .bind(run.context)
        .bind(run.trail_len)
        .bind(run.wait)
        .bind(run.lease_owner)
        .bind(run.lease_until)
        .bind(run.interrupt_requested)
        .bind(run.created_at)
        .bind(run.updated_at)
        .bind(run.wake_at)
        .bind(run.idempotency_key)
        .bind(run.spend.input_tokens)
        .bind(run.spend.output_tokens)
        .bind(run.spend.cost_usd)
        .bind(run.spend.calls)
        .bind(run.spend.time_ms)
        .bind(run.spend.waiting_ms)
        .bind(run.budget)
        .bind(run.pending)
        .bind(run.forked_from)
        .execute(&mut *tx)
        .await;
        match inserted {
            Ok(_) => {}
            Err(e) if db_error_kind(&e) == Some(ErrorKind::UniqueViolation) => {
                let reason = match (
                    &record.idempotency_key,
                    self.run_now(&record.id, what).await,
                ) {
                    (Some(key), Err(StoreError::NotFound { .. })) => {
                        format!("was not created: a run with the key `{key}` exists")
                    }
                    _ => "already exists".into(),
                };
                return Err(StoreError::Conflict {
                    run: record.id.clone(),
                    reason,
                });
            }
            Err(e) if db_error_kind(&e) == Some(ErrorKind::ForeignKeyViolation) => {
                return Err(StoreError::NotFound {
                    what: "definition",
                    id: format!(
                        "{} version {} (hash {}), which run `{}` is pinned to,",
                        record.fsm_id, record.version, record.hash, record.id
                    ),
                });
            }
            Err(e) => return Err(backend(what)(e)),
        }
        Writer::<DB>::insert_entries(&mut *tx, &record.id, &entries)
            .await
            .map_err(backend(what))?;
        // A queued run (held by no one): the workers hear of it when it is committed.
        if let (None, Some(notify)) = (&record.lease, DB::NOTIFY) {
            let notice = Notice::Work {
                at: record.not_before,
            };
            sqlx::query(notify)
                .bind(notice.to_payload())
                .execute(&mut *tx)
                .await
                .map_err(backend(what))?;
        }
        tx.commit().await.map_err(backend(what))
    }

    async fn commit_now(&self, checkpoint: Checkpoint) -> Result<(), StoreError> {
        let encoded = match rows::encode_checkpoint(&checkpoint)? {
            Ok(encoded) => encoded,
            Err(gap) => return Err(self.gap(&checkpoint, gap).await),
        };
        self.commits.commit(encoded).await
    }

    /// The error for a checkpoint whose entries are not consecutive (`gap`: the first one
    /// out of place), unless a lost lease or a wrong start explains it first.
    async fn gap(&self, checkpoint: &Checkpoint, gap: u64) -> StoreError {
        let first = checkpoint.entries.first().map(|e| e.seq);
        let refusal =
            Writer::<DB>::refusal(&self.pool, &checkpoint.run_id, &checkpoint.owner, first).await;
        match refusal {
            Ok(StoreError::Sequence { run, stored, .. }) if Some(stored) == first => {
                StoreError::Sequence {
                    run,
                    seq: gap,
                    stored,
                }
            }
            Ok(error) => error,
            Err(e) => backend("commit")(e),
        }
    }

    async fn claim_now(
        &self,
        run_id: &str,
        from: ClaimFrom,
        owner: &str,
        until: SystemTime,
    ) -> Result<RunRecord, StoreError> {
        let what = "claiming a run";
        let now = rows::now_micros()?;
        // The wait stays until the claimer's first commit replaces it: a claimer that dies
        // before then leaves it for the next one (an expired wait is not waited for again).
        let set = "SET status = 'running', lease_owner = $1, lease_until = $2, \
                   wake_at = NULL, updated_at = $3 WHERE id = $4";
        // A suspended run is claimed in the wait it was found in (`$5`: its trail length
        // then), so a claim made on a stale reading never takes a later wait.
        let (sql, dead) = match &from {
            ClaimFrom::Suspended { .. } => (
                format!(
                    "UPDATE runs {set} AND status = 'suspended' AND trail_len = $5 \
                     RETURNING {RUN_COLUMNS}"
                ),
                &[][..],
            ),
            ClaimFrom::Stale { dead_owners } => {
                let dead = if dead_owners.is_empty() {
                    String::new()
                } else {
                    format!(
                        " OR lease_owner IN ({})",
                        placeholders(5, dead_owners.len())
                    )
                };
                (
                    format!(
                        "UPDATE runs {set} AND status = 'running' AND (lease_owner IS NULL \
                         OR lease_until IS NULL OR lease_until < $3{dead}) \
                         RETURNING {RUN_COLUMNS}"
                    ),
                    &dead_owners[..],
                )
            }
        };
        let mut query = sqlx::query(AssertSqlSafe(sql))
            .bind(owner.to_owned())
            .bind(rows::micros(until)?)
            .bind(now)
            .bind(run_id.to_owned());
        if let ClaimFrom::Suspended { trail_len } = &from {
            query = query.bind(rows::signed("trail length", *trail_len)?);
        }
        for dead_owner in dead {
            query = query.bind(dead_owner.clone());
        }
        let row = query
            .fetch_optional(&self.pool)
            .await
            .map_err(backend(what))?;
        if let Some(row) = row {
            return Self::record(&row, what);
        }
        let current = self.run_now(run_id, what).await?;
        let reason = match (&from, current.status) {
            (ClaimFrom::Suspended { trail_len }, RunStatus::Suspended) => format!(
                "is not in the wait this claim was made for (at trail length {trail_len}): it waits at trail length {}",
                current.trail_len
            ),
            (ClaimFrom::Suspended { .. }, status) => format!("is {status}, not suspended"),
            (ClaimFrom::Stale { .. }, RunStatus::Running) => match &current.lease {
                Some(lease) => format!(
                    "is running and its lease, held by `{}`, lasts until {}",
                    lease.owner,
                    humantime::format_rfc3339_micros(lease.until)
                ),
                None => "is running and was claimed by another".into(),
            },
            (ClaimFrom::Stale { .. }, status) => format!("is {status}, not running"),
        };
        Err(StoreError::Conflict {
            run: run_id.to_owned(),
            reason,
        })
    }

    /// Up to `limit` entries of a run's trail from `from_seq` on (by the primary key: the
    /// rows past the page are not read).
    async fn trail_now(
        &self,
        run_id: &str,
        from_seq: u64,
        limit: u64,
    ) -> Result<Vec<TrailEntry>, StoreError> {
        let what = "reading a trail";
        let rows = sqlx::query(
            "SELECT seq, entry FROM trail WHERE run_id = $1 AND seq >= $2 ORDER BY seq LIMIT $3",
        )
        .bind(run_id.to_owned())
        .bind(i64::try_from(from_seq).unwrap_or(i64::MAX))
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await
        .map_err(backend(what))?;
        if rows.is_empty() {
            // Tell an unknown run from a trail with nothing after `from_seq`.
            self.run_now(run_id, what).await?;
        }
        rows.iter()
            .map(|row| {
                let seq: i64 = row.try_get(0).map_err(backend(what))?;
                let text: String = row.try_get(1).map_err(backend(what))?;
                rows::decode_entry(run_id, seq, &text)
            })
            .collect()
    }

    async fn runs_now(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, StoreError> {
        let what = "listing runs";
        let query = Self::select_runs(RUN_COLUMNS, filter, &filter.statuses, "");
        let rows = query.fetch_all(&self.pool).await.map_err(backend(what))?;
        rows.iter().map(|row| Self::record(row, what)).collect()
    }

    async fn request_interrupt_now(&self, run_id: &str) -> Result<RunRecord, StoreError> {
        let what = "requesting an interrupt";
        let row = sqlx::query(AssertSqlSafe(format!(
            "UPDATE runs SET interrupt_requested = $1, updated_at = $2 \
             WHERE id = $3 AND status NOT IN {FINAL_STATUSES_SQL} RETURNING {RUN_COLUMNS}"
        )))
        .bind(true)
        .bind(rows::now_micros()?)
        .bind(run_id.to_owned())
        .fetch_optional(&self.pool)
        .await
        .map_err(backend(what))?;
        match row {
            Some(row) => {
                let record = Self::record(&row, what)?;
                // Workers hear of it at once. A notice that fails is no error: the
                // request is stored, and workers find it when they renew their leases.
                let notice = Notice::Interrupt {
                    run_id: run_id.to_owned(),
                };
                let _ = self.notify_now(&notice).await;
                Ok(record)
            }
            None => {
                let current = self.run_now(run_id, what).await?;
                Err(StoreError::Conflict {
                    run: run_id.to_owned(),
                    reason: format!(
                        "is {}: a finished run cannot be interrupted",
                        current.status
                    ),
                })
            }
        }
    }

    async fn prune_now(&self, filter: &RunFilter) -> Result<u64, StoreError> {
        let what = "pruning runs";
        let statuses: Vec<RunStatus> = RunStatus::ALL
            .into_iter()
            .filter(|s| s.is_final() && (filter.statuses.is_empty() || filter.statuses.contains(s)))
            .collect();
        if statuses.is_empty() {
            return Ok(0);
        }
        let mut tx = self
            .pool
            .begin_with(DB::BEGIN_WRITE)
            .await
            .map_err(backend(what))?;
        let query = Self::select_runs("id", filter, &statuses, DB::FOR_UPDATE);
        let ids = query
            .fetch_all(&mut *tx)
            .await
            .map_err(backend(what))?
            .iter()
            .map(|row| row.try_get::<String, _>(0))
            .collect::<Result<Vec<_>, _>>()
            .map_err(backend(what))?;
        let mut deleted = 0;
        for chunk in ids.chunks(DELETE_CHUNK) {
            let list = placeholders(1, chunk.len());
            // The trail and resume links first: this does not rely on the foreign keys'
            // cascade being enabled.
            let mut trail = sqlx::query(AssertSqlSafe(format!(
                "DELETE FROM trail WHERE run_id IN ({list})"
            )));
            let mut hooks = sqlx::query(AssertSqlSafe(format!(
                "DELETE FROM hooks WHERE run_id IN ({list})"
            )));
            let mut callbacks = sqlx::query(AssertSqlSafe(format!(
                "DELETE FROM callbacks WHERE run_id IN ({list})"
            )));
            let mut deliveries = sqlx::query(AssertSqlSafe(format!(
                "DELETE FROM deliveries WHERE run_id IN ({list})"
            )));
            let mut runs = sqlx::query(AssertSqlSafe(format!(
                "DELETE FROM runs WHERE id IN ({list}) RETURNING id"
            )));
            for id in chunk {
                trail = trail.bind(id.clone());
                hooks = hooks.bind(id.clone());
                callbacks = callbacks.bind(id.clone());
                deliveries = deliveries.bind(id.clone());
                runs = runs.bind(id.clone());
            }
            trail.execute(&mut *tx).await.map_err(backend(what))?;
            hooks.execute(&mut *tx).await.map_err(backend(what))?;
            callbacks.execute(&mut *tx).await.map_err(backend(what))?;
            deliveries.execute(&mut *tx).await.map_err(backend(what))?;
            deleted += runs.fetch_all(&mut *tx).await.map_err(backend(what))?.len() as u64;
        }
        tx.commit().await.map_err(backend(what))?;
        Ok(deleted)
    }

    async fn heartbeat_now(
        &self,
        run_id: &str,
        owner: &str,
        renew_until: Option<SystemTime>,
    ) -> Result<Heartbeat, StoreError> {
        let what = "renewing a lease";
        if let Some(until) = renew_until {
            // Only the lease end changes, and only while `owner` holds it: a commit that
            // released or a claim that took the lease wins.
            let row = sqlx::query(
                "UPDATE runs SET lease_until = $1 WHERE id = $2 AND lease_owner = $3 \
                 RETURNING interrupt_requested",
            )
            .bind(rows::micros(until)?)
            .bind(run_id.to_owned())
            .bind(owner.to_owned())
            .fetch_optional(&self.pool)
            .await
            .map_err(backend(what))?;
            if let Some(row) = row {
                return Ok(Heartbeat {
                    held: true,
                    interrupt_requested: row.try_get(0).map_err(backend(what))?,
                });
            }
        }
        let row = sqlx::query("SELECT lease_owner, interrupt_requested FROM runs WHERE id = $1")
            .bind(run_id.to_owned())
            .fetch_optional(&self.pool)
            .await
            .map_err(backend(what))?;
        let Some(row) = row else {
            return Err(StoreError::NotFound {
                what: "run",
                id: run_id.to_owned(),
            });
        };
        let holder: Option<String> = row.try_get(0).map_err(backend(what))?;
        Ok(Heartbeat {
            // Renewing failed only if someone else holds it.
            held: renew_until.is_none() && holder.as_deref() == Some(owner),
            interrupt_requested: row.try_get(1).map_err(backend(what))?,
        })
    }

    async fn run_bytes_now(&self, run_id: &str) -> Result<u64, StoreError> {
        let what = "measuring a run";
        // The bytes of the run's text as stored: the record's text columns and every trail
        // entry (integers, row headers and indexes are not counted).
        let row = sqlx::query(
            "SELECT CAST(octet_length(id) + octet_length(fsm_id) + octet_length(hash) \
             + COALESCE(octet_length(parent_id), 0) + octet_length(status) \
             + octet_length(state) + octet_length(context) + COALESCE(octet_length(wait), 0) \
             + COALESCE(octet_length(lease_owner), 0) + COALESCE(octet_length(budget), 0) \
             + COALESCE(octet_length(pending), 0) \
             + COALESCE((SELECT SUM(octet_length(entry)) FROM trail WHERE run_id = $1), 0) \
             AS BIGINT) FROM runs WHERE id = $1",
        )
        .bind(run_id.to_owned())
        .fetch_optional(&self.pool)
        .await
        .map_err(backend(what))?;
        let Some(row) = row else {
            return Err(StoreError::NotFound {
                what: "run",
                id: run_id.to_owned(),
            });
        };
        let bytes: i64 = row.try_get(0).map_err(backend(what))?;
        Ok(u64::try_from(bytes).unwrap_or(0))
    }
}
