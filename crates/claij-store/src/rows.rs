//! Encoding to and decoding from the stored columns, independent of the backend: the
//! backends read raw columns into the plain structs here and write what they produce.
//!
//! Timestamps are integer microseconds since the Unix epoch (exact to the microsecond),
//! JSON is text exactly as `serde_json` writes it (key order kept), unsigned counters are
//! signed 64-bit integers (what both databases have).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use claij_core::budget::{Budget, PendingCalls, Spend};
use claij_core::store::{
    Checkpoint, Definition, ForkPoint, Lease, RunRecord, RunStatus, StoreError, Wait,
};
use claij_core::trail::TrailEntry;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The columns of `runs`, in the order [`RunRow`] reads them.
pub(crate) const RUN_COLUMNS: &str = "id, fsm_id, version, hash, parent_id, status, state, \
     context, trail_len, wait, lease_owner, lease_until, interrupt_requested, created_at, \
     updated_at, wake_at, idempotency_key, input_tokens, output_tokens, cost_usd, calls, \
     time_ms, waiting_ms, budget, pending, forked_from";

/// The spend columns of `runs`, in the order of [`SpendColumns`].
pub(crate) const SPEND_COLUMNS: &str =
    "input_tokens, output_tokens, cost_usd, calls, time_ms, waiting_ms";

/// The `wake_at` of a suspended run waiting for its children: the largest BIGINT (it is
/// due when one of them ends, not at a time).
pub(crate) const WAKE_ON_CHILD: i64 = i64::MAX;

/// The columns of `definitions`, in the order [`DefinitionRow`] reads them.
pub(crate) const DEFINITION_COLUMNS: &str = "fsm_id, version, hash, document, created_at, owner";

/// The statuses of runs that are over, as an SQL list (`prune` deletes only these).
pub(crate) const FINAL_STATUSES_SQL: &str = "('completed', 'failed', 'interrupted')";

/// A `runs` row as read from the database.
#[derive(Debug)]
pub(crate) struct RunRow {
    pub id: String,
    pub fsm_id: String,
    pub version: i64,
    pub hash: String,
    pub parent_id: Option<String>,
    pub status: String,
    pub state: String,
    pub context: String,
    pub trail_len: i64,
    pub wait: Option<String>,
    pub lease_owner: Option<String>,
    pub lease_until: Option<i64>,
    pub interrupt_requested: bool,
    pub created_at: i64,
    pub updated_at: i64,
    pub wake_at: Option<i64>,
    pub idempotency_key: Option<String>,
    pub spend: SpendColumns,
    pub budget: Option<String>,
    pub pending: Option<String>,
    pub forked_from: Option<String>,
}

/// A run's spend as stored (the columns of [`SPEND_COLUMNS`]): counters as signed 64-bit
/// integers, the cost as a double.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct SpendColumns {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_usd: f64,
    pub calls: i64,
    pub time_ms: i64,
    pub waiting_ms: i64,
}

/// A `definitions` row as read from the database.
#[derive(Debug)]
pub(crate) struct DefinitionRow {
    pub fsm_id: String,
    pub version: i64,
    pub hash: String,
    pub document: String,
    pub created_at: i64,
    pub owner: String,
}

/// A run record ready to insert.
#[derive(Debug)]
pub(crate) struct EncodedRun {
    pub id: String,
    pub fsm_id: String,
    pub version: i64,
    pub hash: String,
    pub parent_id: Option<String>,
    pub status: &'static str,
    pub state: String,
    pub context: String,
    pub trail_len: i64,
    pub wait: Option<String>,
    pub lease_owner: Option<String>,
    pub lease_until: Option<i64>,
    pub interrupt_requested: bool,
    pub created_at: i64,
    pub updated_at: i64,
    pub wake_at: Option<i64>,
    pub idempotency_key: Option<String>,
    pub spend: SpendColumns,
    pub budget: Option<String>,
    pub pending: Option<String>,
    pub forked_from: Option<String>,
}

/// A checkpoint ready to write (encoded by the committing task, so that whoever holds the
/// writer only runs SQL).
#[derive(Debug)]
pub(crate) struct EncodedCheckpoint {
    pub run_id: String,
    pub owner: String,
    /// The first new entry's sequence number (`None` when there are no new entries).
    pub first_seq: Option<i64>,
    /// `(seq, entry JSON)`, consecutive.
    pub entries: Vec<(i64, String)>,
    pub status: &'static str,
    pub state: String,
    pub context: Option<String>,
    pub wait: Option<String>,
    pub lease_until: Option<i64>,
    pub wake_at: Option<i64>,
    /// Published events: `(id, topic, event JSON)`.
    pub published: Vec<(String, String, String)>,
    /// The run's spend once the checkpoint is in (written in place of the stored one).
    pub spend: SpendColumns,
}

/// When a run in `status` needs a worker without anyone asking (the `wake_at` column): a
/// queued run's scheduled start, a suspended run's timer (or [`WAKE_ON_CHILD`]).
pub(crate) fn wake_at(
    status: RunStatus,
    wait: Option<&Wait>,
    not_before: Option<SystemTime>,
) -> Result<Option<i64>, StoreError> {
    match (status, wait) {
        (RunStatus::Running, _) => not_before.map(micros).transpose(),
        (RunStatus::Suspended, Some(wait)) if !wait.children.is_empty() => Ok(Some(WAKE_ON_CHILD)),
        (RunStatus::Suspended, Some(wait)) => wait.wakes_at().map(micros).transpose(),
        _ => Ok(None),
    }
}

/// Microseconds since the Unix epoch (negative before it), truncated to the microsecond.
pub(crate) fn micros(at: SystemTime) -> Result<i64, StoreError> {
    let out_of_range = || StoreError::Backend(format!("time {at:?} is out of the storable range"));
    match at.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_micros()).map_err(|_| out_of_range()),
        Err(before) => {
            let before = before.duration();
            // Round away from the epoch so that truncation is a floor, as it is after it.
            let micros = before.as_micros() + u128::from(before.subsec_nanos() % 1000 != 0);
            i64::try_from(micros)
                .map(|m| -m)
                .map_err(|_| out_of_range())
        }
    }
}

/// The time `micros` microseconds after the Unix epoch.
pub(crate) fn time(micros: i64) -> SystemTime {
    let magnitude = Duration::from_micros(micros.unsigned_abs());
    if micros >= 0 {
        UNIX_EPOCH + magnitude
    } else {
        UNIX_EPOCH - magnitude
    }
}

/// The current time, as stored.
pub(crate) fn now_micros() -> Result<i64, StoreError> {
    micros(SystemTime::now())
}

/// A count or sequence number as stored.
pub(crate) fn signed(what: &str, n: u64) -> Result<i64, StoreError> {
    i64::try_from(n).map_err(|_| StoreError::Backend(format!("{what} {n} is too large to store")))
}

/// JSON text of a value, for storing.
pub(crate) fn to_json<T: Serialize>(what: &str, value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::Backend(format!("cannot encode {what} as JSON: {e}")))
}

/// A value from stored JSON text; `what` names it for the error (run and field or seq).
pub(crate) fn from_json<T: DeserializeOwned>(what: String, text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt {
        what,
        message: e.to_string(),
    })
}

fn corrupt(what: String, message: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        what,
        message: message.into(),
    }
}

fn unsigned<T: TryFrom<i64>>(what: impl FnOnce() -> String, n: i64) -> Result<T, StoreError> {
    T::try_from(n).map_err(|_| corrupt(what(), format!("{n} is out of range")))
}

/// A spend as stored; `run` names the run for the error (a count too large to store).
pub(crate) fn encode_spend(run: &str, spend: &Spend) -> Result<SpendColumns, StoreError> {
    let count = |field: &str, n: u64| signed(&format!("run `{run}` {field}"), n);
    Ok(SpendColumns {
        input_tokens: count("input tokens", spend.input_tokens)?,
        output_tokens: count("output tokens", spend.output_tokens)?,
        cost_usd: spend.cost_usd,
        calls: count("calls", spend.calls)?,
        time_ms: count("time running", spend.time_ms)?,
        waiting_ms: count("time waiting", spend.waiting_ms)?,
    })
}

/// A spend from its columns; `what` names the row for the error (a negative count).
pub(crate) fn decode_spend(what: &str, columns: SpendColumns) -> Result<Spend, StoreError> {
    let count = |column: &str, n: i64| unsigned(|| format!("{what} {column}"), n);
    Ok(Spend {
        input_tokens: count("input_tokens", columns.input_tokens)?,
        output_tokens: count("output_tokens", columns.output_tokens)?,
        cost_usd: columns.cost_usd,
        calls: count("calls", columns.calls)?,
        time_ms: count("time_ms", columns.time_ms)?,
        waiting_ms: count("waiting_ms", columns.waiting_ms)?,
    })
}

/// A run record ready to insert.
pub(crate) fn encode_run(record: &RunRecord) -> Result<EncodedRun, StoreError> {
    let what = |field: &str| format!("run `{}` {field}", record.id);
    Ok(EncodedRun {
        id: record.id.clone(),
        fsm_id: record.fsm_id.clone(),
        version: i64::from(record.version),
        hash: record.hash.clone(),
        parent_id: record.parent.clone(),
        status: record.status.as_str(),
        state: record.state.clone(),
        context: to_json(&what("context"), &record.context)?,
        trail_len: signed("trail length", record.trail_len)?,
        wait: record
            .wait
            .as_ref()
            .map(|w| to_json(&what("wait"), w))
            .transpose()?,
        lease_owner: record.lease.as_ref().map(|l| l.owner.clone()),
        lease_until: record.lease.as_ref().map(|l| micros(l.until)).transpose()?,
        interrupt_requested: record.interrupt_requested,
        created_at: micros(record.created_at)?,
        updated_at: micros(record.updated_at)?,
        wake_at: wake_at(record.status, record.wait.as_ref(), record.not_before)?,
        idempotency_key: record.idempotency_key.clone(),
        spend: encode_spend(&record.id, &record.spend)?,
        budget: record
            .budget
            .as_ref()
            .map(|b| to_json(&what("budget"), b))
            .transpose()?,
        pending: record
            .pending
            .as_ref()
            .map(|p| to_json(&what("pending"), p))
            .transpose()?,
        forked_from: record
            .forked_from
            .as_ref()
            .map(|f| to_json(&what("fork point"), f))
            .transpose()?,
    })
}

/// A run record from its row.
pub(crate) fn decode_run(row: RunRow) -> Result<RunRecord, StoreError> {
    let id = row.id;
    let what = |field: &str| format!("run `{id}` {field}");
    let status = row
        .status
        .parse::<RunStatus>()
        .map_err(|e| corrupt(what("status"), e))?;
    let lease = match (row.lease_owner, row.lease_until) {
        (Some(owner), Some(until)) => Some(Lease {
            owner,
            until: time(until),
        }),
        (None, _) => None,
        (Some(owner), None) => {
            return Err(corrupt(
                what("lease"),
                format!("held by `{owner}` with no end"),
            ));
        }
    };
    let wait: Option<Wait> = match &row.wait {
        Some(text) => Some(from_json(what("wait"), text)?),
        None => None,
    };
    let budget: Option<Budget> = match &row.budget {
        Some(text) => Some(from_json(what("budget"), text)?),
        None => None,
    };
    let pending: Option<PendingCalls> = match &row.pending {
        Some(text) => Some(from_json(what("pending"), text)?),
        None => None,
    };
    let forked_from: Option<ForkPoint> = match &row.forked_from {
        Some(text) => Some(from_json(what("fork point"), text)?),
        None => None,
    };
    Ok(RunRecord {
        fsm_id: row.fsm_id,
        version: unsigned(|| what("version"), row.version)?,
        hash: row.hash,
        parent: row.parent_id,
        status,
        state: row.state,
        context: from_json(what("context"), &row.context)?,
        trail_len: unsigned(|| what("trail length"), row.trail_len)?,
        wait,
        lease,
        interrupt_requested: row.interrupt_requested,
        not_before: match status {
            RunStatus::Running => row.wake_at.map(time),
            _ => None,
        },
        idempotency_key: row.idempotency_key,
        spend: decode_spend(&format!("run `{id}`"), row.spend)?,
        budget,
        pending,
        forked_from,
        created_at: time(row.created_at),
        updated_at: time(row.updated_at),
        id,
    })
}

/// A trail entry from its row, checked against the row's sequence number.
pub(crate) fn decode_entry(run_id: &str, seq: i64, text: &str) -> Result<TrailEntry, StoreError> {
    let what = || format!("run `{run_id}` trail entry {seq}");
    let entry: TrailEntry = from_json(what(), text)?;
    if i64::try_from(entry.seq).ok() != Some(seq) {
        return Err(corrupt(
            what(),
            format!("the entry says it is number {}", entry.seq),
        ));
    }
    Ok(entry)
}

/// Trail entries ready to insert, checked to be numbered `first, first + 1, …`: on a gap,
/// the sequence number of the first entry out of place.
pub(crate) fn encode_entries(
    run_id: &str,
    entries: &[TrailEntry],
    first: u64,
) -> Result<Result<Vec<(i64, String)>, u64>, StoreError> {
    let mut out = Vec::with_capacity(entries.len());
    for (expected, entry) in (first..).zip(entries) {
        if entry.seq != expected {
            return Ok(Err(entry.seq));
        }
        let what = format!("run `{run_id}` trail entry {}", entry.seq);
        out.push((
            signed("sequence number", entry.seq)?,
            to_json(&what, entry)?,
        ));
    }
    Ok(Ok(out))
}

/// A checkpoint ready to write, or the sequence number of its first entry out of place.
pub(crate) fn encode_checkpoint(
    checkpoint: &Checkpoint,
) -> Result<Result<EncodedCheckpoint, u64>, StoreError> {
    let run = &checkpoint.run_id;
    let first = checkpoint.entries.first().map(|e| e.seq);
    let entries = match encode_entries(run, &checkpoint.entries, first.unwrap_or(0))? {
        Ok(entries) => entries,
        Err(seq) => return Ok(Err(seq)),
    };
    Ok(Ok(EncodedCheckpoint {
        run_id: run.clone(),
        owner: checkpoint.owner.clone(),
        first_seq: first.map(|s| signed("sequence number", s)).transpose()?,
        entries,
        status: checkpoint.status.as_str(),
        state: checkpoint.state.clone(),
        context: checkpoint
            .context
            .as_ref()
            .map(|c| to_json(&format!("run `{run}` context"), c))
            .transpose()?,
        wait: checkpoint
            .wait
            .as_ref()
            .map(|w| to_json(&format!("run `{run}` wait"), w))
            .transpose()?,
        lease_until: checkpoint.lease_until.map(micros).transpose()?,
        wake_at: wake_at(checkpoint.status, checkpoint.wait.as_ref(), None)?,
        published: checkpoint
            .published
            .iter()
            .map(|p| {
                let event = to_json(&format!("event `{}`", p.id), &p.event)?;
                Ok((p.id.clone(), p.topic.clone(), event))
            })
            .collect::<Result<_, StoreError>>()?,
        spend: encode_spend(run, &checkpoint.spend)?,
    }))
}

/// A definition from its row.
pub(crate) fn decode_definition(row: DefinitionRow) -> Result<Definition, StoreError> {
    let what = || format!("definition `{}` version {}", row.fsm_id, row.version);
    Ok(Definition {
        version: unsigned(what, row.version)?,
        document: from_json(what(), &row.document)?,
        created_at: time(row.created_at),
        owner: claij_core::Owner::parse(&row.owner).ok_or_else(|| StoreError::Corrupt {
            what: what(),
            message: format!("unknown owner `{}`", row.owner),
        })?,
        hash: row.hash,
        fsm_id: row.fsm_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_to_the_microsecond() {
        for micros_in in [0_i64, 1, 1_700_000_000_123_456, -1, -1_234_567] {
            let at = time(micros_in);
            assert_eq!(micros(at).ok(), Some(micros_in));
        }
        let with_nanos = UNIX_EPOCH + Duration::from_nanos(1_500);
        assert_eq!(micros(with_nanos).ok(), Some(1));
        let before_with_nanos = UNIX_EPOCH - Duration::from_nanos(1_500);
        assert_eq!(micros(before_with_nanos).ok(), Some(-2));
    }

    /// A valid row of run `r1`, running and held by no one.
    fn row() -> RunRow {
        RunRow {
            id: "r1".into(),
            fsm_id: "f".into(),
            version: 1,
            hash: "h".into(),
            parent_id: None,
            status: "running".into(),
            state: "s".into(),
            context: "{}".into(),
            trail_len: 0,
            wait: None,
            lease_owner: None,
            lease_until: None,
            interrupt_requested: false,
            created_at: 0,
            updated_at: 0,
            wake_at: None,
            idempotency_key: None,
            spend: SpendColumns::default(),
            budget: None,
            pending: None,
            forked_from: None,
        }
    }

    fn decode_error(row: RunRow) -> String {
        decode_run(row)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn a_lease_owner_without_an_end_is_corrupt() {
        let err = decode_error(RunRow {
            lease_owner: Some("me".into()),
            ..row()
        });
        assert!(err.contains("run `r1` lease"), "{err}");
    }

    #[test]
    fn spend_budget_and_pending_calls_round_trip() {
        let spend = Spend {
            input_tokens: 1200,
            output_tokens: 34,
            cost_usd: 0.000_125,
            calls: 3,
            time_ms: 1800,
            waiting_ms: 7_200_000,
        };
        let budget = Budget {
            cost_usd: Some(0.5),
            tokens: Some(200_000),
            ..Budget::default()
        };
        let pending = PendingCalls {
            models: vec!["smollm2".into()],
            at_most: Spend {
                input_tokens: 900,
                output_tokens: 512,
                cost_usd: 0.01,
                calls: 1,
                ..Spend::default()
            },
            intents: vec![claij_core::Intent {
                kind: claij_core::IntentKind::Tool,
                name: "add".into(),
                server: Some("py".into()),
                key: "r1:3:0".into(),
            }],
        };
        let decoded = decode_run(RunRow {
            spend: encode_spend("r1", &spend).ok().unwrap_or_default(),
            budget: to_json("budget", &budget).ok(),
            pending: to_json("pending", &pending).ok(),
            ..row()
        });
        let decoded = decoded.map(|r| (r.spend, r.budget, r.pending));
        assert_eq!(decoded, Ok((spend, Some(budget), Some(pending))));
    }

    #[test]
    fn unreadable_budgets_pending_calls_and_counts_are_corrupt() {
        let err = decode_error(RunRow {
            budget: Some("{\"tokens\": \"many\"}".into()),
            ..row()
        });
        assert!(err.contains("run `r1` budget"), "{err}");
        let err = decode_error(RunRow {
            pending: Some("[not json".into()),
            ..row()
        });
        assert!(err.contains("run `r1` pending"), "{err}");
        let err = decode_error(RunRow {
            spend: SpendColumns {
                calls: -1,
                ..SpendColumns::default()
            },
            ..row()
        });
        assert!(err.contains("run `r1` calls"), "{err}");
        let too_many = Spend {
            input_tokens: u64::MAX,
            ..Spend::default()
        };
        let err = encode_spend("r1", &too_many)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("run `r1` input tokens"), "{err}");
    }

    #[test]
    fn unreadable_entries_name_the_run_and_seq() {
        let err = decode_entry("r9", 4, "{not json")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("run `r9` trail entry 4"), "{err}");
    }
}
