//! Following runs: a client subscribes to a run's resource (`resources/subscribe`,
//! 2025-11-25, or a `subscriptions/listen` stream, 2026-07-28) and
//! `notifications/resources/updated` follows each time its trail grows or its status
//! changes — at once for the runs this server drives (the [`Doorbell`]), within [`POLL`]
//! for those moved by another process (`claij runs resume`, a worker).
//!
//! A listen stream is acknowledged before the server sees it ([`Acknowledgments`]): a run
//! that moved in between is told of as soon as the stream is followed, not lost.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};

use claij_core::store::RunRecord;
use claij_core::{Fsm, RunStatus, TrailEntry};
use claij_engine::Observer;
use rmcp::{ErrorData, Peer, RoleServer};
use tokio::sync::broadcast;
use tokio::time::MissedTickBehavior;

use crate::fsm_tools::Runtime;
use crate::resources::{FSM_PREFIX, Named, RUN_PREFIX, resolve, run_uri, served_run};

/// How often subscribed runs are read again from the store.
pub(crate) const POLL: Duration = Duration::from_secs(1);

/// How far a run's last change may lie before a listen stream's acknowledgment and still
/// be told of: the store keeps times to the microsecond, and clocks of one machine may
/// step back a little.
const CLOCK_SLACK: Duration = Duration::from_millis(1);

/// An acknowledgment noted this long ago belongs to a stream that never came (its
/// acknowledgment failed to send): it is forgotten.
const ACK_FORGOTTEN: Duration = Duration::from_secs(60);

/// Where a run is: what a change is measured by. `None`: it moved since the client was
/// told it is followed, and it has not been told of that yet.
type Seen = Option<Position>;

#[derive(Debug, Clone, PartialEq)]
struct Position {
    steps: u64,
    status: RunStatus,
}

/// Rings when a run this server drives appends an entry or ends (the run's id).
#[derive(Clone)]
pub(crate) struct Doorbell(broadcast::Sender<Arc<str>>);

impl Doorbell {
    /// A doorbell nobody listens to yet.
    pub(crate) fn new() -> Self {
        Self(broadcast::channel(1024).0)
    }

    /// The observer to give a run.
    pub(crate) fn observer(&self) -> Arc<dyn Observer> {
        Arc::new(self.clone())
    }
}

impl Observer for Doorbell {
    fn entry_appended(&self, run_id: &str, _entry: &TrailEntry) {
        let _ = self.0.send(Arc::from(run_id));
    }

    fn run_finished(&self, run_id: &str, _status: RunStatus) {
        let _ = self.0.send(Arc::from(run_id));
    }
}

/// When the `subscriptions/listen` streams not yet followed were acknowledged.
///
/// rmcp acknowledges a stream (and the client goes on: continues a run, say) before the
/// server's `listen` runs, so the runs' positions read there may already include a change
/// the client must be told of. Each acknowledgment is [`noted`](Self::note) just before
/// it is sent; each stream followed takes [`since`](Self::since): the earliest noted,
/// never later than its own acknowledgment, whatever order streams arrive in (each takes
/// away the latest noted, so the earlier ones stay for the streams still to come).
#[derive(Default)]
pub(crate) struct Acknowledgments(Mutex<Vec<SystemTime>>);

impl Acknowledgments {
    /// A stream is about to be acknowledged.
    pub(crate) fn note(&self) {
        let now = SystemTime::now();
        let mut noted = self.0.lock().unwrap_or_else(|p| p.into_inner());
        noted.retain(|at| now.duration_since(*at).is_ok_and(|age| age < ACK_FORGOTTEN));
        noted.push(now);
    }

    /// For a stream about to be followed: a time no later than its acknowledgment.
    pub(crate) fn since(&self) -> SystemTime {
        let mut noted = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let earliest = noted.iter().min().copied();
        if let Some(latest) = (0..noted.len()).max_by_key(|&i| noted[i]) {
            noted.swap_remove(latest);
        }
        // Nothing noted (a stream older than ACK_FORGOTTEN): its moves since, unknown,
        // are told of once.
        earliest.unwrap_or(SystemTime::UNIX_EPOCH)
    }
}

/// Where a subscription's notifications go: the session (`resources/subscribe`,
/// 2025-11-25) or a `subscriptions/listen` stream (2026-07-28).
#[derive(Clone)]
pub(crate) enum Listener {
    /// The session's peer.
    Session(Peer<RoleServer>),
    /// The stream's sink.
    Stream(rmcp::service::SubscriptionSink),
}

impl Listener {
    /// Tells the client `uri` changed; `false` when it can no longer be told anything.
    async fn updated(&self, uri: String) -> bool {
        match self {
            Listener::Session(peer) => {
                let _ = peer
                    .notify_resource_updated(rmcp::model::ResourceUpdatedNotificationParam::new(
                        uri,
                    ))
                    .await;
                !peer.is_transport_closed()
            }
            Listener::Stream(sink) => sink.notify_resource_updated(uri).await.is_ok(),
        }
    }

    fn gone(&self) -> bool {
        match self {
            Listener::Session(peer) => peer.is_transport_closed(),
            Listener::Stream(_) => false,
        }
    }
}

/// One session's (or one stream's) subscriptions, and the task that watches them
/// (started with the first).
#[derive(Default)]
pub(crate) struct Subscriptions {
    runs: Mutex<HashMap<String, Seen>>,
    watching: Mutex<bool>,
}

/// What a subscription needs of the server.
pub(crate) struct Served<'a> {
    /// The engine and store.
    pub(crate) runtime: &'a Runtime,
    /// The served FSMs: only their runs may be followed.
    pub(crate) fsms: &'a [Arc<Fsm>],
    /// The server's doorbell.
    pub(crate) bell: &'a Doorbell,
}

impl Subscriptions {
    /// Subscribes to `uri` (a run of a served FSM; an FSM document never changes while
    /// served, so subscribing to one is accepted and never notified), telling `listener`.
    /// With `since` (a listen stream's acknowledgment), a run that changed from then on
    /// is told of at once.
    pub(crate) async fn subscribe(
        self: &Arc<Self>,
        served: &Served<'_>,
        listener: Listener,
        uri: &str,
        since: Option<SystemTime>,
    ) -> Result<(), ErrorData> {
        let Named::Run(run_id) = resolve(uri, served.fsms)? else {
            return Ok(());
        };
        let record = served_run(served.runtime, served.fsms, uri, run_id).await?;
        let seen = seen(&record, since);
        self.runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(run_id.to_owned(), seen);
        let mut watching = self.watching.lock().unwrap_or_else(|p| p.into_inner());
        if !*watching {
            *watching = true;
            tokio::spawn(watch(
                Arc::downgrade(self),
                served.runtime.clone(),
                served.bell.0.subscribe(),
                listener,
            ));
        }
        Ok(())
    }

    /// Ends the subscription to `uri` (one never made is not an error).
    pub(crate) fn unsubscribe(&self, uri: &str) {
        if let Some(run_id) = uri.strip_prefix(RUN_PREFIX) {
            self.runs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(run_id);
        }
    }
}

/// Where `record`'s run is, or `None` when it changed from `since` on.
fn seen(record: &RunRecord, since: Option<SystemTime>) -> Seen {
    let moved_since = since.is_some_and(|since| record.updated_at + CLOCK_SLACK >= since);
    (!moved_since).then(|| position(record))
}

fn position(record: &RunRecord) -> Position {
    Position {
        steps: record.trail_len,
        status: record.status,
    }
}

/// What a `subscriptions/listen` stream may ask for: claij's own resource URIs (the
/// runs among them are followed; the rest never change while served).
pub(crate) fn listenable(requested: &[String]) -> Vec<String> {
    requested
        .iter()
        .filter(|uri| uri.starts_with(RUN_PREFIX) || uri.starts_with(FSM_PREFIX))
        .cloned()
        .collect()
}

/// Tells the client of each subscribed run that moved: on the doorbell, and every
/// [`POLL`] (the first look at once). Ends with the session or stream (its
/// subscriptions dropped) or the client gone.
async fn watch(
    subscriptions: Weak<Subscriptions>,
    runtime: Runtime,
    mut bell: broadcast::Receiver<Arc<str>>,
    listener: Listener,
) {
    // A tick every POLL however often the bell rings for other runs.
    let mut poll = tokio::time::interval(POLL);
    poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        let rang: Option<Arc<str>> = tokio::select! {
            rung = bell.recv() => match rung {
                Ok(run_id) => Some(run_id),
                // Missed rings: every subscribed run is looked at below.
                Err(broadcast::error::RecvError::Lagged(_)) => None,
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = poll.tick() => None,
        };
        let Some(subscriptions) = subscriptions.upgrade() else {
            return;
        };
        if listener.gone() {
            return;
        }
        let watched: Vec<(String, Seen)> = subscriptions
            .runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(id, _)| rang.as_deref().is_none_or(|r| r == id.as_str()))
            .map(|(id, seen)| (id.clone(), seen.clone()))
            .collect();
        for (run_id, before) in watched {
            let Ok(record) = runtime.store.run(&run_id).await else {
                continue;
            };
            let now = Some(position(&record));
            if now == before {
                continue;
            }
            if let Some(seen) = subscriptions
                .runs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_mut(&run_id)
            {
                *seen = now;
            } else {
                continue;
            }
            if !listener.updated(run_uri(&run_id)).await {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, json};

    use super::*;
    use crate::fsm_tools::{FsmVerb, RunWatch, call};
    use crate::test_bots::{fsm, runtime};
    use crate::tool::ToolOutput;

    const TAKE: &str = r#"
id: take
states:
  - id: ask
    action: human
  - id: done
    action: end
xitions:
  - id: [start, ask]
  - id: [ask, done]
    schema:
      type: object
      properties: {owner: {type: string}}
      required: [owner]
"#;

    /// Where the run is in the store, as a subscription made with `since` sees it.
    async fn seen_in_store(
        runtime: &Runtime,
        fsm: &Arc<Fsm>,
        run_id: &str,
        since: Option<SystemTime>,
    ) -> Result<Seen, ErrorData> {
        let fsms = std::slice::from_ref(fsm);
        let record = served_run(runtime, fsms, &run_uri(run_id), run_id).await?;
        Ok(seen(&record, since))
    }

    #[tokio::test]
    async fn a_run_continued_after_a_streams_acknowledgment_is_told_of_once_followed() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let runtime = runtime(dir.path()).await;
        let fsm = fsm(dir.path(), "take.yaml", TAKE);
        let started = call(
            &runtime,
            &fsm,
            FsmVerb::Start,
            Map::new(),
            RunWatch::default(),
        )
        .await;
        let ToolOutput::Json(started) = started else {
            panic!("{started:?}");
        };
        let run_id = started["run_id"].as_str().unwrap_or_default().to_owned();
        assert_eq!(started["status"], "suspended");

        // Acknowledged while it waits; continued before the stream is followed.
        let acks = Acknowledgments::default();
        acks.note();
        let before_ack = seen_in_store(&runtime, &fsm, &run_id, None).await;
        let continued = call(
            &runtime,
            &fsm,
            FsmVerb::Continue,
            json!({"run_id": run_id, "input": {"id": ["ask", "done"], "owner": "ada"}})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            RunWatch::default(),
        )
        .await;
        assert!(
            matches!(&continued, ToolOutput::Json(v) if v["status"] == "completed"),
            "{continued:?}"
        );
        let since = acks.since();
        assert_eq!(
            seen_in_store(&runtime, &fsm, &run_id, Some(since))
                .await
                .ok(),
            Some(None),
            "the move is still to be told"
        );
        // Without the move (a stream acknowledged now), the position is where it ends.
        let ended = seen_in_store(
            &runtime,
            &fsm,
            &run_id,
            Some(SystemTime::now() + CLOCK_SLACK * 2),
        )
        .await;
        let Ok(Some(ended)) = ended else {
            panic!("{ended:?}");
        };
        assert_eq!(ended.status, RunStatus::Completed);
        let Ok(Some(waiting)) = before_ack else {
            panic!("{before_ack:?}");
        };
        assert_eq!(waiting.status, RunStatus::Suspended);
        assert!(ended.steps > waiting.steps, "{ended:?} {waiting:?}");
    }

    #[test]
    fn each_stream_gets_a_time_no_later_than_its_acknowledgment_in_any_order() {
        let acks = Acknowledgments::default();
        acks.note();
        let first = acks.0.lock().unwrap_or_else(|p| p.into_inner())[0];
        std::thread::sleep(Duration::from_millis(2));
        acks.note();
        let second = acks.0.lock().unwrap_or_else(|p| p.into_inner())[1];
        assert!(first < second);
        // The second stream is followed first: it gets the earliest, and the first
        // stream still finds a time no later than its own.
        assert_eq!(acks.since(), first);
        assert_eq!(acks.since(), first);
        assert!(acks.0.lock().unwrap_or_else(|p| p.into_inner()).is_empty());
    }

    #[test]
    fn a_stream_whose_acknowledgment_was_forgotten_is_told_of_every_move() {
        let acks = Acknowledgments::default();
        assert_eq!(acks.since(), SystemTime::UNIX_EPOCH);
    }

    #[test]
    fn acknowledgments_of_streams_that_never_came_are_forgotten() {
        let acks = Acknowledgments::default();
        let long_ago = SystemTime::now() - ACK_FORGOTTEN - Duration::from_secs(1);
        acks.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(long_ago);
        acks.note();
        assert_eq!(acks.0.lock().unwrap_or_else(|p| p.into_inner()).len(), 1);
        assert!(acks.since() > long_ago);
    }
}
