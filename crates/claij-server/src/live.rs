//! The runs this process drives, as they happen: an [`Observer`] on every run the server
//! starts or resumes rings a doorbell that event streams wait on. The trail itself is
//! read from the store (so a stream resumes exactly where it left off, even across a
//! restart); what is not stored (an attempt starting) is passed along as it happens.

use std::sync::Arc;

use claij_core::RunStatus;
use claij_core::{State, TrailEntry};
use claij_engine::Observer;
use tokio::sync::{broadcast, mpsc};

/// What happened to a live run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LiveEvent {
    /// The run is under way (started, or claimed to continue).
    Started,
    /// An attempt of a state began.
    Attempt {
        /// The state.
        state: String,
        /// Its attempt number (1-based).
        attempt: u32,
    },
    /// A model produced text in a state (its tokens, as they come).
    Text {
        /// The state.
        state: String,
        /// The text.
        text: String,
    },
    /// An entry was appended (committed to the store before the next state starts).
    Entry {
        /// Its sequence number.
        seq: u64,
    },
    /// The run ended or suspended.
    Finished {
        /// How.
        status: RunStatus,
    },
}

/// The doorbell: every live run's events, to whoever listens; and each run's end, never
/// lost, to the callbacks.
#[derive(Clone)]
pub(crate) struct Live {
    sender: broadcast::Sender<(Arc<str>, LiveEvent)>,
    finished: mpsc::UnboundedSender<(String, RunStatus)>,
}

impl Live {
    /// A doorbell, and the receiver of runs' ends.
    pub(crate) fn new() -> (Self, mpsc::UnboundedReceiver<(String, RunStatus)>) {
        let (sender, _) = broadcast::channel(4096);
        let (finished, ends) = mpsc::unbounded_channel();
        (Live { sender, finished }, ends)
    }

    /// Listens to every live run (a slow listener misses events and is told so; it then
    /// reads the store).
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<(Arc<str>, LiveEvent)> {
        self.sender.subscribe()
    }

    /// The observer to give a run.
    pub(crate) fn observer(&self) -> Arc<dyn Observer> {
        Arc::new(self.clone())
    }

    fn send(&self, run_id: &str, event: LiveEvent) {
        // No listener is not an error.
        let _ = self.sender.send((Arc::from(run_id), event));
    }
}

impl Observer for Live {
    fn run_started(&self, run_id: &str) {
        self.send(run_id, LiveEvent::Started);
    }

    fn attempt_started(&self, run_id: &str, state: &State, attempt: u32) {
        self.send(
            run_id,
            LiveEvent::Attempt {
                state: state.id.to_string(),
                attempt,
            },
        );
    }

    fn wants_text(&self) -> bool {
        true
    }

    fn text_produced(&self, run_id: &str, state: &str, text: &str) {
        self.send(
            run_id,
            LiveEvent::Text {
                state: state.to_owned(),
                text: text.to_owned(),
            },
        );
    }

    fn entry_appended(&self, run_id: &str, entry: &TrailEntry) {
        self.send(run_id, LiveEvent::Entry { seq: entry.seq });
    }

    fn run_finished(&self, run_id: &str, status: RunStatus) {
        let _ = self.finished.send((run_id.to_owned(), status));
        self.send(run_id, LiveEvent::Finished { status });
    }
}
