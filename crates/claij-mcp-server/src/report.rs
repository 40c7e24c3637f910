//! What a client hears while a run it started or continued moves: one
//! `notifications/progress` per transition for the request's progress token, and — at or
//! above the level the client chose with `logging/setLevel` — `notifications/message`
//! for each transition (info) and each failed attempt (warning).
//!
//! MCP logging is deprecated from protocol 2026-07-28 (SEP-2577); the 2025-11-25 clients
//! of today use it, so claij serves it.
#![allow(deprecated)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use claij_core::TrailEntry;
use claij_engine::Observer;
use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
};
use rmcp::{Peer, RoleServer};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The logger name on claij's log notifications.
const LOGGER: &str = "claij";

/// The log level one MCP session asked for (`None`: no log notifications).
#[derive(Clone, Default)]
pub(crate) struct LogLevel(Arc<Mutex<Option<LoggingLevel>>>);

impl LogLevel {
    /// The level one request asked for in its `_meta` (2026-07-28 and later: there is no
    /// `logging/setLevel` there), else this session's.
    pub(crate) fn for_request(&self, asked: Option<LoggingLevel>) -> LogLevel {
        match asked {
            Some(level) => LogLevel(Arc::new(Mutex::new(Some(level)))),
            None => self.clone(),
        }
    }

    /// Sets the level (`logging/setLevel`).
    pub(crate) fn set(&self, level: LoggingLevel) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(level);
    }

    /// Whether a message at `level` is to be sent.
    fn allows(&self, level: LoggingLevel) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|floor| rank(level) >= rank(floor))
    }
}

/// Severity, lowest first (RFC 5424's order, as the spec says).
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

enum Notice {
    Progress(ProgressNotificationParam),
    Log(LoggingMessageNotificationParam),
}

/// An [`Observer`] of one run that tells the client of its moves, through a task that
/// sends the notifications in order; [`finish`](Self::finish) waits until they are sent,
/// so they reach the client before the tool's result.
pub(crate) struct RunReporter {
    notices: Mutex<Option<mpsc::UnboundedSender<Notice>>>,
    progress: Option<ProgressToken>,
    level: LogLevel,
    steps: AtomicU64,
    sender: Mutex<Option<JoinHandle<()>>>,
}

impl RunReporter {
    /// A reporter to `peer`, for a request with `progress` token (if any), at the
    /// session's log `level`; `None` when there is nothing to report to (no token, no
    /// level set).
    pub(crate) fn start(
        peer: Peer<RoleServer>,
        progress: Option<ProgressToken>,
        level: LogLevel,
    ) -> Option<Arc<Self>> {
        if progress.is_none() && !level.allows(LoggingLevel::Emergency) {
            return None;
        }
        let (tx, mut rx) = mpsc::unbounded_channel();
        let sender = tokio::spawn(async move {
            while let Some(notice) = rx.recv().await {
                // A client that went away hears nothing; the run goes on.
                let _ = match notice {
                    Notice::Progress(p) => peer.notify_progress(p).await,
                    Notice::Log(l) => peer.notify_logging_message(l).await,
                };
            }
        });
        Some(Arc::new(Self {
            notices: Mutex::new(Some(tx)),
            progress,
            level,
            steps: AtomicU64::new(0),
            sender: Mutex::new(Some(sender)),
        }))
    }

    fn send(&self, notice: Notice) {
        if let Some(tx) = &*self.notices.lock().unwrap_or_else(|p| p.into_inner()) {
            let _ = tx.send(notice);
        }
    }

    fn log(&self, level: LoggingLevel, data: serde_json::Value) {
        if self.level.allows(level) {
            let mut param = LoggingMessageNotificationParam::new(level, data);
            param.logger = Some(LOGGER.to_owned());
            self.send(Notice::Log(param));
        }
    }

    /// Stops reporting and waits until every notification is sent.
    pub(crate) async fn finish(&self) {
        self.notices
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let sender = self.sender.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(sender) = sender {
            let _ = sender.await;
        }
    }
}

impl Observer for RunReporter {
    fn entry_appended(&self, run_id: &str, entry: &TrailEntry) {
        match (&entry.to, &entry.failure) {
            (Some(to), _) => {
                let steps = self.steps.fetch_add(1, Ordering::Relaxed) + 1;
                let moved = format!("{} → {to}", entry.from);
                if let Some(token) = &self.progress {
                    let mut param = ProgressNotificationParam::new(token.clone(), steps as f64);
                    param.message = Some(moved.clone());
                    self.send(Notice::Progress(param));
                }
                self.log(
                    LoggingLevel::Info,
                    json!({"run_id": run_id, "transition": [&*entry.from, &**to], "step": steps,
                           "message": format!("run {run_id}: {moved}")}),
                );
            }
            (None, Some(failure)) => self.log(
                LoggingLevel::Warning,
                json!({"run_id": run_id, "state": &*entry.from, "attempt": entry.attempt,
                       "kind": failure.kind.to_string(), "message": format!(
                           "run {run_id}: attempt {} of `{}` failed ({}): {}",
                           entry.attempt, entry.from, failure.kind, failure.message)}),
            ),
            (None, None) => {}
        }
    }
}
