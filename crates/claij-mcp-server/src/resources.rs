//! The served FSMs and their runs as MCP resources: `claij://fsms/{id}` (the document as
//! loaded, JSON) and `claij://runs/{run_id}` (what `ID_status` shows, with the trail).
//! A client may subscribe to a run: `notifications/resources/updated` follows each time
//! its trail grows or its status changes — at once for the runs this server drives, within
//! [`POLL`] for those moved by another process (`claij runs resume`, a worker).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use claij_core::store::RunFilter;
use claij_core::{Fsm, RunStatus, TrailEntry};
use claij_engine::Observer;
use rmcp::{ErrorData, Peer, RoleServer};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::fsm_tools::{self, Runtime};

/// How often subscribed runs are read again from the store.
pub(crate) const POLL: Duration = Duration::from_secs(1);

/// How many of the latest runs `resources/list` shows.
const LISTED_RUNS: usize = 20;

const FSM_PREFIX: &str = "claij://fsms/";
const RUN_PREFIX: &str = "claij://runs/";

/// The template of a run's URI.
pub(crate) const RUN_TEMPLATE: &str = "claij://runs/{run_id}";

/// A run's resource URI.
pub(crate) fn run_uri(run_id: &str) -> String {
    format!("{RUN_PREFIX}{run_id}")
}

/// The listing: each FSM's document, then the latest runs of the served FSMs.
pub(crate) async fn list(runtime: &Runtime, fsms: &[Arc<Fsm>]) -> Result<Value, ErrorData> {
    let mut resources: Vec<Value> = fsms
        .iter()
        .map(|fsm| {
            json!({
                "uri": format!("{FSM_PREFIX}{}", fsm.id),
                "name": &*fsm.id,
                "title": format!("{} v{}", fsm.id, fsm.version),
                "description": fsm.description.clone().unwrap_or_else(|| "An FSM document.".to_owned()),
                "mimeType": "application/json",
            })
        })
        .collect();
    for run in latest_runs(runtime, fsms, "").await? {
        resources.push(json!({
            "uri": run_uri(&run.id),
            "name": format!("run {}", run.id),
            "description": format!("A run of {} v{}: {} in `{}`", run.fsm_id, run.version, run.status, run.state),
            "mimeType": "application/json",
        }));
    }
    Ok(json!({ "resources": resources }))
}

/// The latest runs of the served FSMs whose id starts with `prefix`.
pub(crate) async fn latest_runs(
    runtime: &Runtime,
    fsms: &[Arc<Fsm>],
    prefix: &str,
) -> Result<Vec<claij_core::store::RunRecord>, ErrorData> {
    let mut runs = Vec::new();
    for fsm in fsms {
        let filter = RunFilter {
            fsm_id: Some(fsm.id.to_string()),
            limit: Some(LISTED_RUNS as u64 * 5),
            ..RunFilter::default()
        };
        let found = runtime
            .store
            .runs(&filter)
            .await
            .map_err(|e| ErrorData::internal_error(format!("the store failed: {e}"), None))?;
        runs.extend(found.into_iter().filter(|r| r.id.starts_with(prefix)));
    }
    runs.sort_by_key(|r| std::cmp::Reverse(r.updated_at));
    runs.truncate(LISTED_RUNS);
    Ok(runs)
}

/// The templates: a run by its id.
pub(crate) fn templates() -> Value {
    json!({"resourceTemplates": [{
        "uriTemplate": RUN_TEMPLATE,
        "name": "run",
        "title": "A claij run",
        "description": "A run of a served FSM: its status, what it waits for (and the schema), its result or last failure, and its trail.",
        "mimeType": "application/json",
    }]})
}

/// What a URI names.
enum Named<'a> {
    Fsm(&'a Arc<Fsm>),
    Run(&'a str),
}

fn resolve<'a>(uri: &'a str, fsms: &'a [Arc<Fsm>]) -> Result<Named<'a>, ErrorData> {
    if let Some(id) = uri.strip_prefix(FSM_PREFIX) {
        return fsms
            .iter()
            .find(|f| &*f.id == id)
            .map(Named::Fsm)
            .ok_or_else(|| not_found(uri, "no FSM of that id is served"));
    }
    match uri.strip_prefix(RUN_PREFIX) {
        Some(run_id) if !run_id.is_empty() && !run_id.contains('/') => Ok(Named::Run(run_id)),
        _ => Err(not_found(
            uri,
            "claij serves claij://fsms/{id} and claij://runs/{run_id}",
        )),
    }
}

fn not_found(uri: &str, why: &str) -> ErrorData {
    ErrorData::resource_not_found(
        format!("no resource `{uri}`: {why}"),
        Some(json!({"uri": uri})),
    )
}

/// A resource's contents.
pub(crate) async fn read(
    runtime: &Runtime,
    fsms: &[Arc<Fsm>],
    uri: &str,
) -> Result<Value, ErrorData> {
    let body = match resolve(uri, fsms)? {
        Named::Fsm(fsm) => fsm.document.clone(),
        Named::Run(run_id) => run_of_served(runtime, fsms, uri, run_id).await?,
    };
    let text = serde_json::to_string_pretty(&body).unwrap_or_default();
    Ok(json!({"contents": [{"uri": uri, "mimeType": "application/json", "text": text}]}))
}

/// A run's view, when it is a run of a served FSM.
async fn run_of_served(
    runtime: &Runtime,
    fsms: &[Arc<Fsm>],
    uri: &str,
    run_id: &str,
) -> Result<Value, ErrorData> {
    let view = fsm_tools::run_view(runtime, run_id, None, true)
        .await
        .map_err(|why| not_found(uri, &why))?;
    let fsm_id = view["fsm"].as_str().unwrap_or_default();
    if !fsms.iter().any(|f| &*f.id == fsm_id) {
        return Err(not_found(
            uri,
            "it is not a run of an FSM this server serves",
        ));
    }
    Ok(view)
}

/// Where a run is: what a change is measured by.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
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

impl Subscriptions {
    /// Subscribes to `uri` (a run of a served FSM; an FSM document never changes while
    /// served, so subscribing to one is accepted and never notified), telling `listener`.
    pub(crate) async fn subscribe(
        self: &Arc<Self>,
        runtime: &Runtime,
        fsms: &[Arc<Fsm>],
        bell: &Doorbell,
        listener: Listener,
        uri: &str,
    ) -> Result<(), ErrorData> {
        let Named::Run(run_id) = resolve(uri, fsms)? else {
            return Ok(());
        };
        let view = run_of_served(runtime, fsms, uri, run_id).await?;
        let seen = seen_in(&view);
        self.runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(run_id.to_owned(), seen);
        let mut watching = self.watching.lock().unwrap_or_else(|p| p.into_inner());
        if !*watching {
            *watching = true;
            tokio::spawn(watch(
                Arc::downgrade(self),
                runtime.clone(),
                bell.0.subscribe(),
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

/// What a `subscriptions/listen` stream may ask for: claij's own resource URIs (the
/// runs among them are followed; the rest never change while served).
pub(crate) fn listenable(requested: &[String]) -> Vec<String> {
    requested
        .iter()
        .filter(|uri| uri.starts_with(RUN_PREFIX) || uri.starts_with(FSM_PREFIX))
        .cloned()
        .collect()
}

fn seen_in(view: &Value) -> Seen {
    Seen {
        steps: view["steps"].as_u64().unwrap_or(0),
        status: serde_json::from_value(view["status"].clone()).unwrap_or(RunStatus::Running),
    }
}

/// Tells the client of each subscribed run that moved: on the doorbell, and every
/// [`POLL`]. Ends with the session or stream (its subscriptions dropped) or the client
/// gone.
async fn watch(
    subscriptions: Weak<Subscriptions>,
    runtime: Runtime,
    mut bell: broadcast::Receiver<Arc<str>>,
    listener: Listener,
) {
    loop {
        let rang: Option<Arc<str>> = tokio::select! {
            rung = bell.recv() => match rung {
                Ok(run_id) => Some(run_id),
                // Missed rings: every subscribed run is looked at below.
                Err(broadcast::error::RecvError::Lagged(_)) => None,
                Err(broadcast::error::RecvError::Closed) => return,
            },
            () = tokio::time::sleep(POLL) => None,
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
            let now = Seen {
                steps: record.trail_len,
                status: record.status,
            };
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
