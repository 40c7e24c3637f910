//! `/runs`: start, list, show, trail, resume, interrupt.

use std::sync::Arc;
use std::time::SystemTime;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use claij_core::store::{RunCursor, RunFilter, RunRecord};
use claij_core::{Fsm, RunStatus};
use claij_engine::{ForkAt, RunOptions};
use serde_json::Value;

use crate::body::JsonBody;
use crate::idempotency;
use crate::problem::{PlacedError, Problem};
use crate::runner::{Launched, Work, launch, wait_duration, wait_for};
use crate::state::AppState;
use crate::views::{
    Accepted, DeliveryView, ForkRun, ListParams, ResumeRun, RunPage, RunSummary, RunView, StartRun,
    TrailPage, TrailParams, WaitParam,
};

/// Starts a run.
#[utoipa::path(
    post, path = "/runs", tag = "runs",
    params(
        WaitParam,
        ("Idempotency-Key" = Option<String>, Header, description = "A key that makes retries of this start safe: a start with a key already used answers with the run it started (200) when it asks for the same FSM and input, and is refused (422) when it asks for another; 1 to 255 visible ASCII characters"),
    ),
    request_body = StartRun,
    responses(
        (status = 200, description = "The `Idempotency-Key` names a run this start made before: that run, as it stands (or as it ends or suspends within `wait`)", body = RunView),
        (status = 201, description = "The run ended or suspended within `wait`", body = RunView),
        (status = 202, description = "The run goes on", body = Accepted),
        (status = 404, description = "No such FSM", body = Problem, content_type = "application/problem+json"),
        (status = 400, description = "A malformed `Idempotency-Key`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The input (or model, deadline, budget) was refused, or the `Idempotency-Key` names a run started with another FSM or input; nothing changed", body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn start(
    State(state): State<AppState>,
    Query(wait): Query<WaitParam>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<StartRun>,
) -> Result<Response, Problem> {
    let key = idempotency::stored_key(&headers)?;
    if let Some(key) = &key
        && let Some(record) = idempotency::run_by_key(&state, key).await?
    {
        return started_before(&state, record, &body, wait_duration(wait.wait)).await;
    }
    let served = state.find(&body.fsm, body.version).ok_or_else(|| {
        Problem::not_found(match body.version {
            Some(v) => format!("no FSM `{}` version {v} is served", body.fsm),
            None => format!("no FSM `{}` is served", body.fsm),
        })
        .with_errors(vec![PlacedError::at("$.fsm", "no such FSM")])
    })?;
    if let Some(model) = &body.model {
        state.assembly.check_model(model).map_err(|e| {
            Problem::refused("unknown-model", "Unknown model", e.clone())
                .with_errors(vec![PlacedError::at("$.model", e)])
        })?;
    }
    let engine = state.engine();
    let deadline = body
        .deadline
        .as_deref()
        .map(humantime::parse_duration)
        .transpose()
        .map_err(|e| {
            Problem::refused(
                "bad-deadline",
                "Bad deadline",
                format!("the deadline is not a duration like `30s` or `2h`: {e}"),
            )
            .with_errors(vec![PlacedError::at("$.deadline", e.to_string())])
        })?;
    let budget = body
        .budget
        .as_deref()
        .map(claij_core::Budget::parse)
        .transpose()
        .map_err(|e| {
            Problem::refused("bad-budget", "Bad budget", format!("the budget: {e}"))
                .with_errors(vec![PlacedError::at("$.budget", e)])
        })?;
    let context = body.context.clone().unwrap_or(Value::Null);
    if !(context.is_null() || context.is_object()) {
        return Err(Problem::refused(
            "bad-context",
            "Bad context",
            "the context must be a JSON object",
        )
        .with_errors(vec![PlacedError::at("$.context", "not an object")]));
    }
    let webhook = match body.webhook.as_deref() {
        Some(url) => Some(webhook_url(&state, url).await?),
        None => None,
    };
    let run_id = claij_engine::new_run_id();
    let options = RunOptions {
        run_id: Some(run_id.clone()),
        context,
        deadline,
        budget,
        model: body.model.clone(),
        idempotency_key: key.clone(),
        ..RunOptions::default()
    };
    if let Some(url) = &webhook {
        state.callbacks.starting(&run_id, url);
    }
    let launched = launch(
        &state,
        engine,
        served.fsm,
        Work::Start {
            input: body.input.clone(),
        },
        options,
        "$.input",
    )
    .await;
    // Started at the same time under the same key: the other start made the run.
    if launched.is_err()
        && let Some(key) = &key
        && let Some(record) = idempotency::run_by_key(&state, key).await?
    {
        state.callbacks.started(&run_id);
        return started_before(&state, record, &body, wait_duration(wait.wait)).await;
    }
    if let (Ok(_), Some(url)) = (&launched, &webhook)
        && let Err(e) = state.webhooks.put_callback(&run_id, url).await
    {
        tracing::warn!("run {run_id}: its callback was not stored: {e}");
    }
    state.callbacks.started(&run_id);
    answer(
        &state,
        launched?,
        wait_duration(wait.wait),
        StatusCode::CREATED,
    )
    .await
}

/// A start whose `Idempotency-Key` names `record`: the run as it stands, or as it ends or
/// suspends within `wait` (200) — unless the start asks for another FSM or input (422).
async fn started_before(
    state: &AppState,
    record: RunRecord,
    body: &StartRun,
    wait: std::time::Duration,
) -> Result<Response, Problem> {
    idempotency::check_same_start(state, &record, &body.fsm, body.version, &body.input).await?;
    if record.status == RunStatus::Running && !wait.is_zero() {
        let settled =
            claij_engine::RunOutcome::settled(state.store.as_ref(), &record.id, &state.shutdown);
        // Not settled within `wait`: answered as it stands.
        let _ = tokio::time::timeout(wait, settled).await;
    }
    let view = run_view(state, &record.id).await?;
    let url = format!("/runs/{}", record.id);
    Ok((StatusCode::OK, [(header::LOCATION, url)], Json(view)).into_response())
}

/// A callback URL checked: a secret to sign with, and a URL the egress policy allows an
/// API client (http or https, no credentials, no internal address unless
/// `--allow-connect` names its host). Checked again at each delivery.
async fn webhook_url(state: &AppState, url: &str) -> Result<String, Problem> {
    let refused = |why: String| {
        Problem::refused("bad-webhook", "Bad webhook", why.clone())
            .with_errors(vec![PlacedError::at("$.webhook", why)])
    };
    if state.config.webhook_secret.is_none() {
        return Err(refused(
            "this server has no webhook secret to sign callbacks with (start it with --webhook-secret-file)"
                .into(),
        ));
    }
    let engine = state.engine();
    let policy = engine.policy();
    let route = policy
        .egress(claij_core::Owner::Client, url)
        .await
        .map_err(|e| refused(e.to_string()))?;
    Ok(route.url)
}

/// A run's callback deliveries, oldest first: each event posted and how its attempts went.
#[utoipa::path(
    get, path = "/runs/{id}/deliveries", tag = "runs",
    params(("id" = String, Path, description = "The run's id")),
    responses(
        (status = 200, body = Vec<DeliveryView>),
        (status = 404, body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn deliveries(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Vec<DeliveryView>>, Problem> {
    find_run(&state, &id).await?;
    let deliveries = state
        .webhooks
        .deliveries(&id)
        .await
        .map_err(|e| Problem::from_store(&e))?;
    Ok(Json(deliveries.iter().map(DeliveryView::from).collect()))
}

/// After a start or resume: the run as it stands if it ended or suspended within `wait`,
/// else 202 with where to follow it.
async fn answer(
    state: &AppState,
    mut launched: Launched,
    wait: std::time::Duration,
    done: StatusCode,
) -> Result<Response, Problem> {
    let finished = wait_for(&mut launched, wait, &state.shutdown).await;
    let url = format!("/runs/{}", launched.run_id);
    if finished {
        let record = find_run(state, &launched.run_id).await?;
        let mut view = run_view_of(state, &record).await?;
        // A run waiting for an answer (not for its children, nor for its budget): a link
        // to give whoever must answer.
        if let Some(wait) = view
            .wait
            .as_mut()
            .filter(|_| record.wait.as_ref().is_some_and(|w| w.takes_input()))
            && let Ok(hook) = crate::links::mint(state, &record).await
        {
            wait.hook_url = Some(hook.url);
        }
        return Ok((done, [(header::LOCATION, url)], Json(view)).into_response());
    }
    let record = state
        .store
        .run(&launched.run_id)
        .await
        .map_err(|e| Problem::from_store(&e))?;
    let accepted = Accepted {
        id: launched.run_id.clone(),
        status: record.status.as_str().to_owned(),
        events_url: format!("{url}/events"),
        url: url.clone(),
    };
    Ok((
        StatusCode::ACCEPTED,
        [(header::LOCATION, url)],
        Json(accepted),
    )
        .into_response())
}

/// The run `id` as the API shows it.
pub(crate) async fn run_view(state: &AppState, id: &str) -> Result<RunView, Problem> {
    let record = find_run(state, id).await?;
    run_view_of(state, &record).await
}

/// The view of `record`: what it spent is in the record, and its result (a completed
/// run's last event) is read from the end of its trail; the rest of the trail is not read.
async fn run_view_of(state: &AppState, record: &RunRecord) -> Result<RunView, Problem> {
    let result = result_of(state, record).await?;
    let fsm = fsm_of(state, record).await;
    Ok(RunView::new(record, result, fsm.as_deref()))
}

/// The entries read from a trail's end for a completed run's result: its last entry is the
/// transition into its terminal state.
const RESULT_TAIL: u64 = 8;

/// A completed run's result (the event of its last transition), read from the end of its
/// trail; `None` for other runs.
pub(crate) async fn result_of(
    state: &AppState,
    record: &RunRecord,
) -> Result<Option<Value>, Problem> {
    if record.status != RunStatus::Completed {
        return Ok(None);
    }
    let from = record.trail_len.saturating_sub(RESULT_TAIL);
    let tail = state
        .store
        .trail_page(&record.id, from, RESULT_TAIL)
        .await
        .map_err(|e| Problem::from_store(&e))?;
    Ok(claij_core::trail::last_event(&tail).cloned())
}

/// The definition `record` is pinned to: a served one, else loaded back from the store.
pub(crate) async fn fsm_of(state: &AppState, record: &RunRecord) -> Option<Arc<Fsm>> {
    let served = state
        .find(&record.fsm_id, Some(record.version))
        .filter(|s| s.fsm.hash == record.hash);
    match served {
        Some(s) => Some(s.fsm),
        None => state
            .engine()
            .stored_fsm(state.store.as_ref(), record)
            .await
            .ok(),
    }
}

pub(crate) async fn find_run(state: &AppState, id: &str) -> Result<RunRecord, Problem> {
    state
        .store
        .run(id)
        .await
        .map_err(|e| Problem::from_store(&e))
}

/// Lists runs, newest first, a page at a time.
#[utoipa::path(
    get, path = "/runs", tag = "runs",
    params(ListParams),
    responses(
        (status = 200, body = RunPage),
        (status = 400, description = "A filter is malformed", body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    Query(params): Query<ListParams>,
) -> Result<Json<RunPage>, Problem> {
    let mut statuses = Vec::new();
    for word in params.status.iter().flat_map(|s| s.split(',')) {
        let status: RunStatus = word.trim().parse().map_err(|_| {
            Problem::bad_request(format!(
                "`{word}` is not a run status (running, suspended, completed, failed, interrupted)"
            ))
            .with_errors(vec![PlacedError::at("query.status", "unknown status")])
        })?;
        statuses.push(status);
    }
    let time = |name: &str, value: &Option<String>| -> Result<Option<SystemTime>, Problem> {
        value
            .as_deref()
            .map(|v| {
                humantime::parse_rfc3339_weak(v).map_err(|e| {
                    Problem::bad_request(format!("`{name}` is not an RFC 3339 time: {e}"))
                        .with_errors(vec![PlacedError::at(
                            format!("query.{name}"),
                            e.to_string(),
                        )])
                })
            })
            .transpose()
    };
    let limit = params.limit.unwrap_or(50).clamp(1, 500);
    let after = params.cursor.as_deref().map(decode_cursor).transpose()?;
    let filter = RunFilter {
        statuses,
        fsm_id: params.fsm.clone(),
        created_since: time("since", &params.since)?,
        created_before: time("before", &params.before)?,
        after,
        // One more than asked tells whether there is a next page.
        limit: Some(limit + 1),
        ..RunFilter::default()
    };
    let mut runs = state
        .store
        .runs(&filter)
        .await
        .map_err(|e| Problem::from_store(&e))?;
    let more = runs.len() as u64 > limit;
    runs.truncate(limit as usize);
    let next_cursor = more
        .then(|| runs.last().map(|r| encode_cursor(&RunCursor::after(r))))
        .flatten();
    Ok(Json(RunPage {
        runs: runs.iter().map(RunSummary::from).collect(),
        next_cursor,
    }))
}

/// `MICROS.ID`: the creation time in microseconds since the epoch, and the id.
fn encode_cursor(cursor: &RunCursor) -> String {
    let micros = cursor
        .created_at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0);
    format!("{micros}.{}", cursor.id)
}

fn decode_cursor(text: &str) -> Result<RunCursor, Problem> {
    let bad = || {
        Problem::bad_request(format!(
            "`{text}` is not a cursor: give the `next_cursor` of the previous page"
        ))
        .with_errors(vec![PlacedError::at("query.cursor", "malformed cursor")])
    };
    let (micros, id) = text.split_once('.').ok_or_else(bad)?;
    let micros: u64 = micros.parse().map_err(|_| bad())?;
    if id.is_empty() {
        return Err(bad());
    }
    Ok(RunCursor {
        created_at: SystemTime::UNIX_EPOCH + std::time::Duration::from_micros(micros),
        id: id.to_owned(),
    })
}

/// Shows a run: its status, state, what it waits for (and the schema of each answer),
/// its result and usage.
#[utoipa::path(
    get, path = "/runs/{id}", tag = "runs",
    params(("id" = String, Path, description = "The run's id")),
    responses(
        (status = 200, body = RunView),
        (status = 404, body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn show(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<RunView>, Problem> {
    Ok(Json(run_view(&state, &id).await?))
}

/// The entries of a trail page unless `limit` says.
const TRAIL_PAGE: u64 = 100;

/// A page of a run's trail (read alone: the rest of the trail is not).
#[utoipa::path(
    get, path = "/runs/{id}/trail", tag = "runs",
    params(("id" = String, Path, description = "The run's id"), TrailParams),
    responses(
        (status = 200, body = TrailPage),
        (status = 404, body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn trail(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(params): Query<TrailParams>,
) -> Result<Json<TrailPage>, Problem> {
    let record = find_run(&state, &id).await?;
    let from = params.from.unwrap_or(0);
    let limit = params
        .limit
        .unwrap_or(TRAIL_PAGE)
        .clamp(1, crate::views::MAX_TRAIL_PAGE);
    let entries = state
        .store
        .trail_page(&id, from, limit)
        .await
        .map_err(|e| Problem::from_store(&e))?;
    let end = from + entries.len() as u64;
    Ok(Json(TrailPage {
        entries,
        next: (end < record.trail_len).then_some(end),
    }))
}

/// Answers a suspended run: the input must take one of the transitions it waits on and
/// satisfy that transition's schema; a refused answer changes nothing and says why. Of
/// concurrent answers exactly one wins; the others get 409 — per wait: an answer is taken
/// only in the wait the run is in when it arrives (or, with `trail_len`, the wait it was
/// made for), never in a later one.
#[utoipa::path(
    post, path = "/runs/{id}/resume", tag = "runs",
    params(("id" = String, Path, description = "The run's id"), WaitParam),
    request_body = ResumeRun,
    responses(
        (status = 200, description = "The run ended or suspended again within `wait`", body = RunView),
        (status = 202, description = "The run goes on", body = Accepted),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The run does not wait for an answer (another answer won, or it is not suspended)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The answer was refused; nothing changed", body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn resume(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(wait): Query<WaitParam>,
    JsonBody(body): JsonBody<ResumeRun>,
) -> Result<Response, Problem> {
    let record = find_run(&state, &id).await?;
    if record.status != RunStatus::Suspended {
        return Err(Problem::conflict(format!(
            "run `{id}` is {}, not suspended: it waits for no answer (another answer may have won); this input was not used",
            record.status
        )));
    }
    if let Some(pause) = record.wait.as_ref().and_then(|w| w.budget.as_deref()) {
        return Err(Problem::conflict(format!(
            "run `{id}` stopped for a budget, not for an answer ({pause}); raise the budget of run `{}` and resume it (`claij runs resume {} --budget …`)",
            pause.run, pause.run
        )));
    }
    if let Some(wait) = record.wait.as_ref().filter(|w| !w.takes_input()) {
        return Err(Problem::conflict(format!(
            "run `{id}` waits for its child runs ({}), not for an answer",
            wait.children.join(", ")
        )));
    }
    if let Some(made_at) = body.trail_len.filter(|&t| t != record.trail_len) {
        return Err(Problem::conflict(format!(
            "run `{id}` no longer waits where this answer was made (at trail length {made_at}): another answer moved it on, and it waits at trail length {}; this input was not used",
            record.trail_len
        )));
    }
    let launched = resume_with(&state, &record, Some(body.input), "$.input").await?;
    answer(&state, launched, wait_duration(wait.wait), StatusCode::OK).await
}

/// Resumes `record` with `input` on the engine of its definition. An input answers the
/// wait `record` is in, and no later one: a run answered meanwhile refuses it (409), even
/// if it waits again.
pub(crate) async fn resume_with(
    state: &AppState,
    record: &RunRecord,
    input: Option<Value>,
    input_place: &str,
) -> Result<Launched, Problem> {
    let engine = state.engine();
    let fsm = engine
        .stored_fsm(state.store.as_ref(), record)
        .await
        .map_err(|e| Problem::from_run(&e, input_place))?;
    let options = RunOptions {
        wait_seq: input.is_some().then_some(record.trail_len),
        ..RunOptions::default()
    };
    let work = Work::Resume {
        run_id: record.id.clone(),
        input,
    };
    launch(state, engine, fsm, work, options, input_place).await
}

/// Forks a run at one of its trail entries (time travel): a new run whose trail is the
/// run's entries before `at`, then that entry (its event replaced by `event`, when given,
/// as if the state that made it had produced it), going on from there. The original is
/// not changed, nothing before `at` runs again, and the states after it start child runs
/// of their own. A refused fork stores nothing.
#[utoipa::path(
    post, path = "/runs/{id}/fork", tag = "runs",
    params(("id" = String, Path, description = "The run to fork"), WaitParam),
    request_body = ForkRun,
    responses(
        (status = 201, description = "The fork ended or suspended within `wait`", body = RunView),
        (status = 202, description = "The fork goes on", body = Accepted),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "No such entry to fork at (`$.at`: past the end, a failed attempt, an entry of an earlier FSM of a chain), or the event was refused (`$.event`); nothing was stored", body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn fork(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(wait): Query<WaitParam>,
    JsonBody(body): JsonBody<ForkRun>,
) -> Result<Response, Problem> {
    let record = find_run(&state, &id).await?;
    let engine = state.engine();
    let fsm = engine
        .stored_fsm(state.store.as_ref(), &record)
        .await
        .map_err(|e| Problem::from_run(&e, "$.event"))?;
    let work = Work::Fork {
        from: id,
        at: ForkAt {
            seq: body.at,
            event: body.event,
        },
    };
    let launched = launch(&state, engine, fsm, work, RunOptions::default(), "$.event").await?;
    answer(
        &state,
        launched,
        wait_duration(wait.wait),
        StatusCode::CREATED,
    )
    .await
}

/// Interrupts a run: a suspended run (or one whose process is gone) stops at once; a
/// running one at its next heartbeat.
#[utoipa::path(
    post, path = "/runs/{id}/interrupt", tag = "runs",
    params(("id" = String, Path, description = "The run's id")),
    responses(
        (status = 202, description = "Interrupted, or asked to stop", body = RunSummary),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The run already ended", body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn interrupt(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let record = claij_engine::interrupt(state.store.as_ref(), &id)
        .await
        .map_err(|e| Problem::from_run(&e, "$"))?;
    Ok((StatusCode::ACCEPTED, Json(RunSummary::from(&record))).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_bad_ones_are_refused() {
        let cursor = RunCursor {
            created_at: SystemTime::UNIX_EPOCH
                + std::time::Duration::from_micros(1_700_000_000_123_456),
            id: "019a.1.2".into(),
        };
        let text = encode_cursor(&cursor);
        assert_eq!(text, "1700000000123456.019a.1.2");
        assert_eq!(decode_cursor(&text).ok(), Some(cursor));
        for bad in ["", "abc", "12", "x.y", "12."] {
            assert!(decode_cursor(bad).is_err(), "{bad}");
        }
    }
}
