//! `GET /runs/{id}/events`: a run's life as server-sent events.
//!
//! - `entry` (with `id:` its sequence number): each trail entry, read from the store a page
//!   at a time, so a client that reconnects with `Last-Event-ID: N` gets every entry after
//!   N exactly once — across a restart of the server too;
//! - `status` (no id): the run's status, state and wait, whenever they change;
//! - `attempt` (no id): an attempt of a state starting, for runs this server drives;
//! - `token` (no id): text a model is producing in a state (`{"state", "text"}`), as it
//!   comes, for runs this server drives on a model that streams (the embedded one);
//! - `end` (no id): the run is finished and every entry was sent; the stream closes.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::{broadcast, mpsc};
use utoipa::IntoParams;

use crate::live::LiveEvent;
use crate::problem::{PlacedError, Problem};
use crate::state::AppState;

/// How often a stream looks at the store when nothing rings (runs driven by another
/// process: a `claij runs resume`, a worker).
const POLL: Duration = Duration::from_millis(500);

/// The entries read from the store at a time.
const PAGE: u64 = 256;

/// Where a stream starts when there is no `Last-Event-ID`.
#[derive(Debug, Clone, Deserialize, IntoParams)]
pub(crate) struct EventParams {
    /// The first entry's sequence number (default 0: the whole trail).
    pub from: Option<u64>,
}

/// A run's events as server-sent events.
#[utoipa::path(
    get, path = "/runs/{id}/events", tag = "runs",
    params(
        ("id" = String, Path, description = "The run's id"),
        ("Last-Event-ID" = Option<String>, Header, description = "The last entry received: the stream continues after it"),
        EventParams,
    ),
    responses(
        (status = 200, description = "`text/event-stream`: `entry`, `status`, `attempt` and `end` events", content_type = "text/event-stream", body = String),
        (status = 404, body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn events(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(params): Query<EventParams>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, Problem> {
    state
        .store
        .run(&id)
        .await
        .map_err(|e| Problem::from_store(&e))?;
    let next = match headers.get("last-event-id") {
        Some(value) => {
            let last: u64 = value
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(|| {
                    Problem::bad_request("`Last-Event-ID` is not an entry's sequence number")
                        .with_errors(vec![PlacedError::at(
                            "header.last-event-id",
                            "expected a non-negative integer",
                        )])
                })?;
            // The next entry's number; none follows the largest (never wrap to 0).
            last.checked_add(1).ok_or_else(|| {
                Problem::bad_request(format!(
                    "`Last-Event-ID: {last}` names no entry a run can have: no entry follows it"
                ))
                .with_errors(vec![PlacedError::at(
                    "header.last-event-id",
                    "out of range",
                )])
            })?
        }
        None => params.from.unwrap_or(0),
    };
    let permit = state.streams.open().map_err(|full| {
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too-many-streams",
            "Too many event streams",
            format!("{full}; close one, or try again later"),
        )
    })?;
    let (tx, rx) = mpsc::channel::<Event>(64);
    let bell = state.live.subscribe();
    tokio::spawn(follow(state, id, next, bell, tx));
    // The stream keeps its place among the server's streams while it lasts.
    let stream = futures_util::stream::unfold((rx, permit), |(mut rx, permit)| async move {
        rx.recv().await.map(|event| (Ok(event), (rx, permit)))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// Sends the run's events to `tx` until the run is finished and sent, the client goes
/// away, or the server stops.
async fn follow(
    state: AppState,
    id: String,
    mut next: u64,
    mut bell: broadcast::Receiver<(std::sync::Arc<str>, LiveEvent)>,
    tx: mpsc::Sender<Event>,
) {
    let mut last_status = None;
    loop {
        // The entries not sent yet, a page at a time: a long trail is never read whole.
        loop {
            let entries = match state.store.trail_page(&id, next, PAGE).await {
                Ok(e) => e,
                Err(e) => {
                    let _ = tx.send(error_event(&e.to_string())).await;
                    return;
                }
            };
            let full = entries.len() as u64 == PAGE;
            for entry in entries {
                let seq = entry.seq;
                let event = Event::default()
                    .event("entry")
                    .id(seq.to_string())
                    .json_data(&entry);
                next = seq + 1;
                let Ok(event) = event else { continue };
                if tx.send(event).await.is_err() {
                    return;
                }
            }
            if !full {
                break;
            }
        }
        let record = match state.store.run(&id).await {
            Ok(r) => r,
            Err(e) => {
                let _ = tx.send(error_event(&e.to_string())).await;
                return;
            }
        };
        let status = (record.status, record.state.clone(), record.trail_len);
        if last_status.as_ref() != Some(&status) {
            let data = json!({
                "status": record.status.as_str(),
                "state": record.state,
                "trail_len": record.trail_len,
                "wait": record.wait.as_ref().map(|w| json!({
                    "state": w.state,
                    "transitions": w.transitions,
                    "prompt": w.prompt,
                    "budget": w.budget,
                })),
            });
            if let Ok(event) = Event::default().event("status").json_data(&data)
                && tx.send(event).await.is_err()
            {
                return;
            }
            last_status = Some(status);
        }
        if record.status.is_final() && next >= record.trail_len {
            let _ = tx
                .send(Event::default().event("end").data(record.status.as_str()))
                .await;
            return;
        }
        // Wait for this run's doorbell, or look again after a while.
        let sleep = tokio::time::sleep(POLL);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                rung = bell.recv() => match rung {
                    Ok((run, event)) if *run == *id => {
                        let (kind, data) = match event {
                            LiveEvent::Attempt { state: s, attempt } => {
                                ("attempt", json!({"state": s, "attempt": attempt}))
                            }
                            LiveEvent::Text { state: s, text } => {
                                ("token", json!({"state": s, "text": text}))
                            }
                            _ => break,
                        };
                        if let Ok(event) = Event::default().event(kind).json_data(&data)
                            && tx.send(event).await.is_err()
                        {
                            return;
                        }
                    }
                    Ok(_) => continue,
                    Err(broadcast::error::RecvError::Lagged(_)) => break,
                    Err(broadcast::error::RecvError::Closed) => {
                        (&mut sleep).await;
                        break;
                    }
                },
                () = &mut sleep => break,
                () = tx.closed() => return,
                () = state.shutdown.cancelled() => return,
            }
        }
    }
}

fn error_event(message: &str) -> Event {
    Event::default().event("error").data(message)
}
