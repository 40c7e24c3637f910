//! [`RunOutcome`]: how a run ended (or suspended), with its trail and context.

use claij_core::TrailEntry;
use claij_core::store::Wait;
use serde_json::Value;

use super::RunStatus;

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// The run's id.
    pub run_id: String,
    /// Completed, failed or interrupted.
    pub status: RunStatus,
    /// Every entry, in order.
    pub trail: Vec<TrailEntry>,
    /// The final context.
    pub context: Value,
    /// The last event, when the run completed: its result.
    pub result: Option<Value>,
    /// The state the run ended in (for failures, the state that gave up; for suspended
    /// runs, the state that waits).
    pub state: String,
    /// What a suspended run waits for.
    pub wait: Option<Wait>,
    /// When resuming this run (a child) let its parent continue: how the parent's own
    /// resume ended.
    pub parent: Option<Box<RunOutcome>>,
}
