//! `claij worker` (claij-worker, given the engine and store assembled here), `claij
//! workers list`, and the commands that leave runs to workers: `claij run --submit`,
//! `claij runs resume --submit`, `claij runs wait`.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Result;
use claij_core::Fsm;
use claij_core::store::{EventStatus, RunStatus, RunStore, StoreError};
use claij_engine::{Engine, RunError, RunOptions, RunOutcome, Submission};
use claij_worker::{Worker, WorkerConfig};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::mcp_serve::stop_on_signals;
use super::run::{below, report};
use crate::app::App;
use crate::cli::{EventsCommand, WorkerArgs, WorkersCommand};
use crate::{EXIT_FAILED, EXIT_OK, EXIT_SUSPENDED, EXIT_USAGE, input, store};

/// `claij worker`.
pub(super) async fn worker(app: &App, args: WorkerArgs) -> u8 {
    crate::logs::for_servers();
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
    let files = match super::serve::documents(&args.files) {
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
    let notices = store.describe().starts_with("postgres");
    let config = WorkerConfig {
        concurrency: args.concurrency,
        lease: args.lease,
        poll: args.poll.unwrap_or(if notices {
            Duration::from_secs(60)
        } else {
            Duration::from_secs(1)
        }),
        grace: args.grace,
    };
    let shutdown = CancellationToken::new();
    stop_on_signals(shutdown.clone());
    let worker = Worker::new(engine, store, config);
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
pub(super) async fn workers(store: Arc<dyn RunStore>, command: WorkersCommand) -> Result<u8> {
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
fn queue_json(queue: &claij_core::store::QueueStats) -> Value {
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

/// The queue in one line: `queue: 3 waiting for a worker (oldest since …), …`.
pub(super) fn queue_line(queue: &claij_core::store::QueueStats) -> String {
    let oldest = queue
        .oldest_queued
        .map(|t| format!(" (oldest created {})", at(t)))
        .unwrap_or_default();
    let next = queue
        .next_timer
        .map(|t| format!(", next at {}", at(t)))
        .unwrap_or_default();
    format!(
        "queue: {} waiting for a worker{oldest}, {} being driven, {} scheduled, {} timer(s) due, {} to come{next}",
        queue.queued, queue.held, queue.scheduled, queue.timers_due, queue.timers_pending
    )
}

fn at(time: SystemTime) -> String {
    humantime::format_rfc3339_seconds(time).to_string()
}

fn at_micros(time: SystemTime) -> String {
    humantime::format_rfc3339_micros(time).to_string()
}

/// `claij run --submit`: the run validated and queued; its id printed.
pub(super) async fn submit(
    engine: &Engine,
    fsm: Arc<Fsm>,
    input: Value,
    options: RunOptions,
    submission: Submission,
    quiet: bool,
) -> u8 {
    if options.store.is_none() {
        note!("claij: --submit queues the run in a store for workers; `--store memory` has none");
        return EXIT_USAGE;
    }
    // Nothing runs here: no progress to show.
    let options = RunOptions {
        observers: Vec::new(),
        ..options
    };
    match engine.submit(fsm, input, options, submission).await {
        Ok(submitted) => {
            if !quiet {
                if submitted.created {
                    note!(
                        "claij: run {} queued for a worker (follow it: claij runs wait {})",
                        submitted.run_id,
                        submitted.run_id
                    );
                } else {
                    note!(
                        "claij: a run with this idempotency key was submitted before: {}; nothing new was queued",
                        submitted.run_id
                    );
                }
            }
            println!("{}", submitted.run_id);
            EXIT_OK
        }
        Err(e @ RunError::Input(_)) => {
            note!("claij: {e}");
            EXIT_USAGE
        }
        Err(e) => {
            note!("claij: {e}");
            EXIT_FAILED
        }
    }
}

/// `claij run --submit --inputs FILE`: one run per JSON line, each validated and queued;
/// stops at the first line refused (those before it stay queued; the message says which
/// line).
pub(super) async fn submit_lines(
    engine: &Engine,
    fsm: Arc<Fsm>,
    inputs: &std::path::Path,
    options: RunOptions,
    submission: Submission,
    quiet: bool,
) -> u8 {
    if options.store.is_none() {
        note!("claij: --submit queues runs in a store for workers; `--store memory` has none");
        return EXIT_USAGE;
    }
    let text = match std::fs::read_to_string(inputs) {
        Ok(t) => t,
        Err(e) => {
            note!("claij: cannot read {}: {e}", inputs.display());
            return EXIT_USAGE;
        }
    };
    let mut queued = 0u64;
    let mut n = 0u64;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        n += 1;
        let place = format!("{} line {}", inputs.display(), i + 1);
        let input: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                note!("claij: {place}: not JSON: {e} ({queued} run(s) queued before it)");
                return EXIT_USAGE;
            }
        };
        let options = RunOptions {
            run_id: options.run_id.as_ref().map(|id| format!("{id}-{n}")),
            observers: Vec::new(),
            ..options.clone()
        };
        let submission = Submission {
            idempotency_key: submission
                .idempotency_key
                .as_ref()
                .map(|k| format!("{k}.{n}")),
            ..submission.clone()
        };
        match engine.submit(fsm.clone(), input, options, submission).await {
            Ok(submitted) => {
                queued += u64::from(submitted.created);
                println!("{}", submitted.run_id);
            }
            Err(e) => {
                note!("claij: {place}: {e} ({queued} run(s) queued before it)");
                return if matches!(e, RunError::Input(_)) {
                    EXIT_USAGE
                } else {
                    EXIT_FAILED
                };
            }
        }
    }
    if !quiet {
        note!("claij: {queued} run(s) queued for workers");
    }
    EXIT_OK
}

/// `claij runs resume RUN --input … --submit`: the answer checked and recorded, the run
/// left to the workers.
pub(super) async fn answer(
    app: &App,
    store: Arc<dyn RunStore>,
    run: &str,
    input_text: &str,
    quiet: bool,
) -> Result<u8> {
    let input = match input::json_argument("input", input_text) {
        Ok(i) => i,
        Err(e) => {
            note!("claij: {e:#}");
            return Ok(EXIT_USAGE);
        }
    };
    let engine = app.default_engine();
    let record = store.run(run).await?;
    let fsm = engine.stored_fsm(store.as_ref(), &record).await?;
    let options = RunOptions {
        store: Some(store.clone()),
        ..RunOptions::default()
    };
    match engine.answer(fsm, run, input, options).await {
        Ok(()) => {
            if !quiet {
                note!(
                    "claij: run {run} answered and queued for a worker (follow it: claij runs wait {run})"
                );
            }
            Ok(EXIT_OK)
        }
        Err(e @ RunError::Input(_)) => {
            note!("claij: {e}");
            Ok(EXIT_USAGE)
        }
        Err(RunError::Store(StoreError::Conflict { reason, .. })) => {
            note!("claij: run `{run}` {reason}; this input was not used");
            Ok(EXIT_FAILED)
        }
        Err(e) => {
            note!("claij: {e}");
            Ok(EXIT_FAILED)
        }
    }
}

/// Whether `record` is suspended for a budget, or waits for runs below it that are: it
/// goes on only once someone raises that budget, so `claij runs wait` stops waiting.
async fn stopped_for_budget(store: &dyn RunStore, record: &claij_core::store::RunRecord) -> bool {
    let Some(wait) = record
        .wait
        .as_ref()
        .filter(|_| record.status == RunStatus::Suspended)
    else {
        return false;
    };
    wait.budget.is_some()
        || (!wait.children.is_empty() && !below(store, &wait.children).await.stopped.is_empty())
}

/// How often `claij runs wait` looks at the run.
const WAIT_POLL: Duration = Duration::from_millis(200);

/// `claij runs wait RUN`: follows the run until it ends (or suspends, when asked), then
/// reports it as `claij run` does.
pub(super) async fn wait(
    store: Arc<dyn RunStore>,
    run: &str,
    timeout: Option<Duration>,
    until_suspended: bool,
    as_json: bool,
) -> Result<u8> {
    let give_up = timeout.map(|t| tokio::time::Instant::now() + t);
    let record = loop {
        let record = store.run(run).await?;
        let done = record.status.is_final()
            || (until_suspended && record.status == RunStatus::Suspended)
            || stopped_for_budget(store.as_ref(), &record).await;
        if done {
            break record;
        }
        if give_up.is_some_and(|at| tokio::time::Instant::now() >= at) {
            note!(
                "claij: run {run} is still {} in `{}` after {}",
                record.status,
                record.state,
                humantime::format_duration(timeout.unwrap_or_default())
            );
            return Ok(EXIT_SUSPENDED);
        }
        tokio::time::sleep(WAIT_POLL).await;
    };
    if as_json {
        out!("{}", serde_json::to_string(&record)?)?;
        return Ok(match record.status {
            RunStatus::Completed => EXIT_OK,
            RunStatus::Suspended => EXIT_SUSPENDED,
            _ => EXIT_FAILED,
        });
    }
    let outcome = RunOutcome::stored(store.as_ref(), record).await?;
    Ok(report(Ok(outcome), false, Some(store.as_ref()), "").await)
}
