//! What runs spend and may spend: a run tree's totals (summed over the `parent_id` links,
//! recursively, in one statement), budgets, and the model calls a running run has in
//! flight (kept until its next commit, which writes its spend and forgets them).

use claij_core::budget::{Budget, PendingCalls, Spend};
use claij_core::store::StoreError;
use sqlx::{AssertSqlSafe, Decode, Encode, Executor, IntoArguments, Row, Type};

use super::{SqlStore, backend};
use crate::dialect::Dialect;
use crate::rows::{self, SPEND_COLUMNS};

/// The run `$1` and every run below it, each once (`UNION`, not `UNION ALL`: a damaged
/// cycle of parent links ends instead of looping), with their spends summed: how many
/// runs were found (none: no such run), then the six sums in [`SPEND_COLUMNS`]' order —
/// the times being the top run's own (its children run within it).
/// The casts make both databases return 64-bit integers and a double (PostgreSQL's `SUM`
/// of `BIGINT` is `NUMERIC`; SQLite reads `DOUBLE PRECISION` as `REAL`).
fn tree_spend_sql() -> String {
    let columns: Vec<&str> = SPEND_COLUMNS.split(", ").collect();
    let of_r: Vec<String> = columns.iter().map(|c| format!("r.{c}")).collect();
    let sums: Vec<String> = columns
        .iter()
        .map(|&c| match c {
            "cost_usd" => format!("CAST(COALESCE(SUM({c}), 0) AS DOUBLE PRECISION)"),
            // Children run within their parent's time: the tree's times are its top run's.
            "time_ms" | "waiting_ms" => {
                format!("CAST(COALESCE(SUM(CASE WHEN id = $1 THEN {c} ELSE 0 END), 0) AS BIGINT)")
            }
            _ => format!("CAST(COALESCE(SUM({c}), 0) AS BIGINT)"),
        })
        .collect();
    format!(
        "WITH RECURSIVE tree (id, {SPEND_COLUMNS}) AS ( \
             SELECT id, {SPEND_COLUMNS} FROM runs WHERE id = $1 \
             UNION \
             SELECT r.id, {} FROM runs r JOIN tree t ON r.parent_id = t.id) \
         SELECT COUNT(*), {} FROM tree",
        of_r.join(", "),
        sums.join(", ")
    )
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
    pub(super) async fn tree_spend_now(&self, run_id: &str) -> Result<Spend, StoreError> {
        let what = "summing a run tree's spend";
        let row = sqlx::query(AssertSqlSafe(tree_spend_sql()))
            .bind(run_id.to_owned())
            .fetch_one(&self.pool)
            .await
            .map_err(backend(what))?;
        let runs: i64 = row.try_get(0).map_err(backend(what))?;
        if runs == 0 {
            return Err(StoreError::NotFound {
                what: "run",
                id: run_id.to_owned(),
            });
        }
        let columns = Self::spend_columns(&row, 1).map_err(backend(what))?;
        rows::decode_spend(&format!("the tree of run `{run_id}`"), columns)
    }

    pub(super) async fn set_budget_now(
        &self,
        run_id: &str,
        budget: Option<&Budget>,
    ) -> Result<(), StoreError> {
        let what = "setting a run's budget";
        let text = budget
            .map(|b| rows::to_json(&format!("run `{run_id}` budget"), b))
            .transpose()?;
        let updated = sqlx::query("UPDATE runs SET budget = $1 WHERE id = $2 RETURNING id")
            .bind(text)
            .bind(run_id.to_owned())
            .fetch_optional(&self.pool)
            .await
            .map_err(backend(what))?;
        match updated {
            Some(_) => Ok(()),
            None => Err(StoreError::NotFound {
                what: "run",
                id: run_id.to_owned(),
            }),
        }
    }

    pub(super) async fn note_pending_now(
        &self,
        run_id: &str,
        owner: &str,
        pending: &PendingCalls,
    ) -> Result<(), StoreError> {
        let what = "noting a run's pending calls";
        let text = rows::to_json(&format!("run `{run_id}` pending"), pending)?;
        let updated = sqlx::query(
            "UPDATE runs SET pending = $1 \
             WHERE id = $2 AND lease_owner = $3 AND status = 'running' RETURNING id",
        )
        .bind(text)
        .bind(run_id.to_owned())
        .bind(owner.to_owned())
        .fetch_optional(&self.pool)
        .await
        .map_err(backend(what))?;
        if updated.is_some() {
            return Ok(());
        }
        let exists = sqlx::query("SELECT id FROM runs WHERE id = $1")
            .bind(run_id.to_owned())
            .fetch_optional(&self.pool)
            .await
            .map_err(backend(what))?;
        Err(match exists {
            Some(_) => StoreError::LostLease {
                run: run_id.to_owned(),
            },
            None => StoreError::NotFound {
                what: "run",
                id: run_id.to_owned(),
            },
        })
    }
}
