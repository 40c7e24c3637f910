//! Observers: told of each trail entry as it is appended (progress now, streaming later).

use claij_core::{State, TrailEntry};

use crate::run::RunStatus;

/// Receives a run's events as they happen. Every method has a no-op default. Observers
/// are called on the run's task: keep them quick.
pub trait Observer: Send + Sync {
    /// An attempt of `state` is starting.
    fn attempt_started(&self, _run_id: &str, _state: &State, _attempt: u32) {}

    /// An entry was appended to the trail.
    fn entry_appended(&self, _run_id: &str, _entry: &TrailEntry) {}

    /// The run ended.
    fn run_finished(&self, _run_id: &str, _status: RunStatus) {}
}
