//! `claij worker` (claij-worker, given the engine and store assembled here), `claij
//! workers list` and `claij events list`.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Result;
use claij_core::store::{EventStatus, RunStore};
use claij_store::roles::WorkQueue;
use claij_worker::{Worker, WorkerConfig};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::cli::{EventsCommand, WorkerArgs, WorkersCommand};
use crate::report::{at, queue_line};
use crate::serving::stop_on_signals;
use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, store};

/// How often an idle worker on `store` looks for due work unless told: every minute
/// where PostgreSQL's notices ring sooner, every second on SQLite (which has none).
pub(super) fn idle_poll(store: &dyn RunStore) -> Duration {
    if store.describe().starts_with("postgres") {
        Duration::from_secs(60)
    } else {
        Duration::from_secs(1)
    }
}

/// `claij worker`.
pub(super) async fn worker(app: &App, args: WorkerArgs) -> u8 {
    crate::logs::for_servers(app.tracing_layer());
    let store = match store::open(&args.store).await {
        Ok(Some(s)) => s,
        Ok(None) => {
            note!(
                "claij: `claij worker` takes runs from a store's queue; `--store memory` has none"
            );
            return EXIT_USAGE;
        }
        Err(e) => {
            note!("claij: {e:#}");
            return EXIT_USAGE;
        }
    };
    let layer = match crate::app::models(args.config.as_deref(), args.model.clone()) {
        Ok(models) => models.layer,
        Err(e) => {
            note!("claij: {e:#}");
            return EXIT_USAGE;
        }
    };
    let policy = match args.policy.policy() {
        Ok(p) => Arc::new(p),
        Err(e) => {
            note!("claij: {e}");
            return EXIT_USAGE;
        }
    };
    let engine = Arc::new(app.engine(true, Arc::new(layer)).governed_by(policy));
    // The documents named: their triggers subscribe them to topics.
    let files = match crate::serving::documents(&args.files) {
        Ok(f) => f,
        Err(e) => {
            note!("claij: cannot list the documents: {e}");
            return EXIT_USAGE;
        }
    };
    for file in &files {
        let fsm = match super::load(engine.registry(), file) {
            Ok(fsm) => fsm,
            Err(d) => {
                note!("claij: {d}");
                return EXIT_USAGE;
            }
        };
        match engine.subscribe(store.as_ref(), &fsm).await {
            Ok(0) => note!(
                "claij: {} has no triggers: its runs are started by submitting them",
                file.display()
            ),
            Ok(n) => note!("claij: {} subscribed to {n} topic(s)", fsm.id),
            Err(e) => {
                note!("claij: {e}");
                return EXIT_FAILED;
            }
        }
    }
    let config = WorkerConfig {
        concurrency: args.concurrency,
        lease: args.lease,
        poll: args.poll.unwrap_or_else(|| idle_poll(store.as_ref())),
        grace: args.grace,
    };
    let shutdown = CancellationToken::new();
    stop_on_signals(shutdown.clone());
    let worker = Worker::new(engine, store.clone(), store, config);
    note!("claij: worker {} started", worker.id());
    match worker.run(shutdown).await {
        Ok(report) => {
            note!(
                "claij: worker stopped: {} run(s) claimed, {} driven, {} handed back, {} event(s) dispatched",
                report.claimed,
                report.finished,
                report.handed_back,
                report.dispatched
            );
            EXIT_OK
        }
        Err(e) => {
            note!("claij: {e}");
            EXIT_FAILED
        }
    }
}

/// `claij workers …`.
pub(super) async fn workers(store: Arc<dyn WorkQueue>, command: WorkersCommand) -> Result<u8> {
    let WorkersCommand::List { json: as_json } = command;
    let workers = store.workers().await?;
    let queue = store.queue().await?;
    if as_json {
        out!(
            "{}",
            json!({
                "workers": workers.iter().map(|w| json!({
                    "id": w.id,
                    "host": w.host,
                    "concurrency": w.concurrency,
                    "holding": w.holding,
                    "started_at": at(w.started_at),
                    "renewed_at": at(w.renewed_at),
                })).collect::<Vec<_>>(),
                "queue": queue_json(&queue),
            })
        )?;
        return Ok(EXIT_OK);
    }
    if workers.is_empty() {
        out!("no workers")?;
    } else {
        out!(
            "{:<44} {:>8} {:>11} {:<20} {:<20}",
            "WORKER",
            "HOLDING",
            "CONCURRENCY",
            "STARTED",
            "RENEWED"
        )?;
        for w in &workers {
            out!(
                "{:<44} {:>8} {:>11} {:<20} {:<20}",
                w.id,
                w.holding,
                w.concurrency,
                at(w.started_at),
                at(w.renewed_at)
            )?;
        }
    }
    out!("{}", queue_line(&queue))?;
    Ok(EXIT_OK)
}

/// `claij events …`.
pub(super) async fn events(store: &dyn RunStore, command: EventsCommand) -> Result<u8> {
    let EventsCommand::List {
        status,
        json: as_json,
    } = command;
    let status = match status.as_deref().map(|s| (s, EventStatus::parse(s))) {
        None => None,
        Some((_, Some(status))) => Some(status),
        Some((word, None)) => {
            note!("claij: unknown event status `{word}`; one of pending, dispatched, unmatched");
            return Ok(EXIT_USAGE);
        }
    };
    let events = store.events(status).await?;
    if as_json {
        for e in &events {
            out!(
                "{}",
                json!({
                    "id": e.id,
                    "topic": e.topic,
                    "event": e.event,
                    "run_id": e.run_id,
                    "status": e.status.as_str(),
                    "runs": e.runs,
                    "note": e.note,
                    "created_at": at_micros(e.created_at),
                    "settled_at": e.settled_at.map(at_micros),
                })
            )?;
        }
        return Ok(EXIT_OK);
    }
    if events.is_empty() {
        out!("no events")?;
        return Ok(EXIT_OK);
    }
    out!(
        "{:<44} {:<20} {:<10} {:<20} RUNS / NOTE",
        "EVENT",
        "TOPIC",
        "STATUS",
        "PUBLISHED"
    )?;
    for e in &events {
        let detail = match (&e.runs[..], &e.note) {
            ([], Some(note)) => note.clone(),
            (runs, _) => runs.join(", "),
        };
        out!(
            "{:<44} {:<20} {:<10} {:<20} {detail}",
            e.id,
            e.topic,
            e.status.as_str(),
            at(e.created_at)
        )?;
    }
    Ok(EXIT_OK)
}

/// The queue as JSON (times in RFC 3339).
fn queue_json(queue: &claij_store::roles::QueueStats) -> Value {
    json!({
        "queued": queue.queued,
        "oldest_queued": queue.oldest_queued.map(at),
        "scheduled": queue.scheduled,
        "timers_due": queue.timers_due,
        "timers_pending": queue.timers_pending,
        "next_timer": queue.next_timer.map(at),
        "held": queue.held,
    })
}

fn at_micros(time: SystemTime) -> String {
    humantime::format_rfc3339_micros(time).to_string()
}
