//! `/queue`: the work waiting in the store for `claij worker` processes — runs queued,
//! the oldest of them, scheduled starts, timers — and the workers sharing it.

use axum::Json;
use axum::extract::State;
use claij_store::roles::{QueueStats, WorkerRecord};
use serde::Serialize;
use utoipa::ToSchema;

use crate::problem::Problem;
use crate::state::AppState;
use crate::views::rfc3339;

/// The queue's depth and the live workers.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct QueueView {
    /// Runs waiting for a worker now (submitted, answered, scheduled and due, or left by a
    /// dead owner whose lease expired).
    pub queued: u64,
    /// When the oldest of them was created (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oldest_queued: Option<String>,
    /// Runs held by a live lease (being driven).
    pub held: u64,
    /// Scheduled starts not due yet.
    pub scheduled: u64,
    /// Suspended runs whose wait expiry or deadline has passed.
    pub timers_due: u64,
    /// Suspended runs with a timer still to come.
    pub timers_pending: u64,
    /// The earliest timer or scheduled start to come (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_timer: Option<String>,
    /// The workers recorded in the store.
    pub workers: Vec<WorkerView>,
}

/// A `claij worker` process.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct WorkerView {
    /// Its id (`host:pid:started`): the lease owner of what it drives.
    pub id: String,
    /// Its host.
    pub host: String,
    /// Runs it drives at once, at most.
    pub concurrency: u32,
    /// Runs it drove at its last renewal.
    pub holding: u32,
    /// When it started (RFC 3339).
    pub started_at: String,
    /// When it last renewed its leases (RFC 3339).
    pub renewed_at: String,
}

impl QueueView {
    fn new(queue: QueueStats, workers: Vec<WorkerRecord>) -> Self {
        QueueView {
            queued: queue.queued,
            oldest_queued: queue.oldest_queued.map(rfc3339),
            held: queue.held,
            scheduled: queue.scheduled,
            timers_due: queue.timers_due,
            timers_pending: queue.timers_pending,
            next_timer: queue.next_timer.map(rfc3339),
            workers: workers
                .into_iter()
                .map(|w| WorkerView {
                    started_at: rfc3339(w.started_at),
                    renewed_at: rfc3339(w.renewed_at),
                    id: w.id,
                    host: w.host,
                    concurrency: w.concurrency,
                    holding: w.holding,
                })
                .collect(),
        }
    }
}

/// The queue's depth and the workers sharing the store.
#[utoipa::path(
    get, path = "/queue", tag = "runs",
    responses((status = 200, body = QueueView))
)]
pub(crate) async fn show(State(state): State<AppState>) -> Result<Json<QueueView>, Problem> {
    let queue = state
        .work_queue
        .queue()
        .await
        .map_err(|e| Problem::from_store(&e))?;
    let workers = state
        .work_queue
        .workers()
        .await
        .map_err(|e| Problem::from_store(&e))?;
    Ok(Json(QueueView::new(queue, workers)))
}
