//! [`RunOutcome`]: how a run ended (or suspended), with its trail and context.

use std::time::Duration;

use claij_core::TrailEntry;
use claij_core::store::{RunRecord, RunStore, StoreError, Wait};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use claij_core::store::RunStatus;

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
    /// What the run itself spent (its own trail's model calls, its time running and
    /// waiting; a store's [`tree_spend`](claij_core::store::Spending::tree_spend) adds its
    /// children's).
    pub spend: claij_core::Spend,
}

impl RunOutcome {
    /// A run another process drives (a worker, or the process holding open the request
    /// of the question it was answered on), once it ends or suspends — or as it stands
    /// when `stop` is cancelled first. Looked at after 50 ms, then less and less often (at
    /// most every second).
    pub async fn settled(
        store: &dyn RunStore,
        run_id: &str,
        stop: &CancellationToken,
    ) -> Result<Self, StoreError> {
        let mut pause = Duration::from_millis(50);
        loop {
            let record = store.run(run_id).await?;
            if record.status != RunStatus::Running || stop.is_cancelled() {
                return Self::stored(store, record).await;
            }
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = stop.cancelled() => {}
            }
            pause = (pause * 3 / 2).min(Duration::from_secs(1));
        }
    }

    /// A stored run as it stands, with its whole trail (its result when it completed): for
    /// callers that report runs another process drives.
    pub async fn stored(store: &dyn RunStore, record: RunRecord) -> Result<Self, StoreError> {
        let trail = store.trail(&record.id, 0).await?;
        let result = (record.status == RunStatus::Completed)
            .then(|| claij_core::trail::last_event(&trail).cloned())
            .flatten();
        Ok(RunOutcome {
            run_id: record.id,
            status: record.status,
            trail,
            context: record.context,
            result,
            state: record.state,
            wait: record.wait,
            parent: None,
            spend: record.spend,
        })
    }
}
