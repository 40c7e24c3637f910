//! The client side of a connection as rmcp sees it: what we advertise, the requests a
//! server sends us (sampling, elicitation, roots) and its notifications (progress, logs,
//! list changes).
//!
//! Sampling, roots and logging are deprecated by the newest spec draft (SEP-2577) but are
//! what servers speaking 2025-11-25 use, so they are supported.
#![allow(deprecated)]

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use rmcp::ClientHandler;
use rmcp::model::{
    ClientConfig, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
    ElicitResult, ErrorData, ListRootsResult, LoggingMessageNotificationParam,
    ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use serde_json::{Value, json};
use std::sync::RwLock;

use tokio::sync::watch;

use claij_core::{Answer, Question};

use crate::catalog::{Catalog, ListKind};
use crate::hooks::{Caller, ElicitationHandler, SamplingHandler};

/// Notifications kept until a request collects them, at most (the oldest are dropped).
const MAX_PENDING_NOTES: usize = 1000;

/// What a connection shares with its handler.
pub(crate) struct Shared {
    pub name: String,
    pub roots: Vec<String>,
    /// The only tools kept in the catalog, when given.
    pub tools: Option<Vec<String>>,
    pub sampling: Option<Arc<dyn SamplingHandler>>,
    pub elicitation: Option<Arc<dyn ElicitationHandler>>,
    /// How long a question's request is held open for a durable run's answer.
    pub hold_questions: std::time::Duration,
    pub catalog: RwLock<Catalog>,
    /// Bumped whenever the catalog changes.
    pub generation: watch::Sender<u64>,
    /// Notifications (progress, logs) not yet collected by a request.
    pub notes: Mutex<Vec<Value>>,
    /// On whose behalf the requests in flight were made, oldest first.
    pub callers: Mutex<Vec<OnBehalf>>,
    /// Serialises refreshes.
    pub refreshing: tokio::sync::Mutex<()>,
}

/// A request in flight: its id, its caller, and who answers the sampling requests the
/// server makes meanwhile when not the connection's hook (the caller's model layer).
pub(crate) struct OnBehalf {
    pub id: u64,
    pub caller: Caller,
    pub sampling: Option<Arc<dyn SamplingHandler>>,
}

impl Shared {
    fn note(&self, note: Value) {
        let mut notes = self.notes.lock().unwrap_or_else(|p| p.into_inner());
        if notes.len() >= MAX_PENDING_NOTES {
            notes.remove(0);
        }
        notes.push(note);
    }

    /// Re-lists `kinds` (all when empty) from the server and bumps the generation.
    /// When tools were listed and the server's entry names tools (`tools`) that the
    /// server does not offer, says which (and what it offers).
    pub(crate) async fn refresh(
        &self,
        peer: &rmcp::Peer<RoleClient>,
        kinds: &[ListKind],
    ) -> Result<(), String> {
        let _one_at_a_time = self.refreshing.lock().await;
        let caps = peer
            .peer_info()
            .and_then(|info| serde_json::to_value(&info.capabilities).ok())
            .unwrap_or(Value::Null);
        let wants = |k: ListKind| kinds.is_empty() || kinds.contains(&k);
        let mut next = self
            .catalog
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut mismatch = Ok(());
        next.completions = caps.get("completions").is_some();
        if wants(ListKind::Tools) {
            let listed = if caps.get("tools").is_some() {
                match peer.list_all_tools().await {
                    Ok(tools) => Some(to_values(tools)),
                    Err(e) => {
                        tracing::warn!(server = %self.name, "tools/list failed: {e}");
                        None
                    }
                }
            } else {
                Some(Vec::new())
            };
            if let Some(mut tools) = listed {
                if let Some(allowed) = &self.tools {
                    let missing: Vec<&str> = allowed
                        .iter()
                        .map(String::as_str)
                        .filter(|a| !tools.iter().any(|t| t["name"] == *a))
                        .collect();
                    if !missing.is_empty() {
                        let offered: Vec<&str> =
                            tools.iter().filter_map(|t| t["name"].as_str()).collect();
                        mismatch = Err(format!(
                            "`tools` names {} that the server does not offer (it offers: {})",
                            quoted(&missing),
                            quoted(&offered)
                        ));
                    }
                    tools.retain(|t| allowed.iter().any(|a| t["name"] == a.as_str()));
                }
                next.tools = tools;
            }
        }
        if wants(ListKind::Resources) && caps.get("resources").is_some() {
            match peer.list_all_resources().await {
                Ok(resources) => next.resources = to_values(resources),
                Err(e) => tracing::warn!(server = %self.name, "resources/list failed: {e}"),
            }
        }
        if wants(ListKind::Prompts) && caps.get("prompts").is_some() {
            match peer.list_all_prompts().await {
                Ok(prompts) => next.prompts = to_values(prompts),
                Err(e) => tracing::warn!(server = %self.name, "prompts/list failed: {e}"),
            }
        }
        *self.catalog.write().unwrap_or_else(|p| p.into_inner()) = next;
        self.generation.send_modify(|g| *g += 1);
        mismatch
    }
}

/// `a`, `b` (or "none").
fn quoted(names: &[&str]) -> String {
    if names.is_empty() {
        return "none".into();
    }
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn to_values<T: serde::Serialize>(items: Vec<T>) -> Vec<Value> {
    items
        .into_iter()
        .filter_map(|i| serde_json::to_value(i).ok())
        .collect()
}

fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// The rmcp client handler of one connection.
#[derive(Clone)]
pub(crate) struct Handler {
    pub shared: Arc<Shared>,
}

impl Handler {
    fn refresh_later(&self, peer: rmcp::Peer<RoleClient>, kind: ListKind) {
        let shared = self.shared.clone();
        // Not on the service's own task: listing needs it to read the answers.
        tokio::spawn(async move {
            if let Err(mismatch) = shared.refresh(&peer, &[kind]).await {
                tracing::warn!(server = %shared.name, "after a list change: {mismatch}");
            }
        });
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        let mut caps = serde_json::Map::new();
        if !self.shared.roots.is_empty() {
            caps.insert("roots".into(), json!({"listChanged": false}));
        }
        if self.shared.sampling.is_some() {
            caps.insert("sampling".into(), json!({}));
        }
        if self.shared.elicitation.is_some() {
            caps.insert("elicitation".into(), json!({"form": {}}));
        }
        let info = json!({
            "protocolVersion": rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE,
            "capabilities": caps,
            "clientInfo": {"name": "claij", "version": env!("CARGO_PKG_VERSION")},
        });
        serde_json::from_value(info).unwrap_or_default()
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        if self.shared.sampling.is_none() {
            return Err(ErrorData::invalid_request(
                "sampling is not supported",
                None,
            ));
        }
        let request = serde_json::to_value(&params)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        self.shared
            .note(json!({"kind": "sampling", "at": now(), "request": request}));
        let (caller, answering) = self
            .shared
            .callers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .last()
            .map(|on| (Some(on.caller.clone()), on.sampling.clone()))
            .unwrap_or_default();
        // The caller's own model layer when it has one, else the connection's.
        let Some(sampling) = answering.or_else(|| self.shared.sampling.clone()) else {
            return Err(ErrorData::invalid_request(
                "sampling is not supported",
                None,
            ));
        };
        let answer = sampling
            .create_message(&self.shared.name, caller.as_ref(), request)
            .await
            .map_err(|e| ErrorData::internal_error(e, None))?;
        serde_json::from_value(answer.clone()).map_err(|e| {
            ErrorData::internal_error(
                format!("the sampling handler's answer is not a CreateMessageResult: {e}"),
                Some(answer),
            )
        })
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let Some(elicitation) = &self.shared.elicitation else {
            return serde_json::from_value(json!({"action": "decline"}))
                .map_err(|e| ErrorData::internal_error(e.to_string(), None));
        };
        let request = serde_json::to_value(&request)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        if request
            .get("mode")
            .and_then(Value::as_str)
            .is_some_and(|m| m != "form")
        {
            return Err(ErrorData::invalid_params(
                "only form elicitation is supported",
                None,
            ));
        }
        let message = request["message"].as_str().unwrap_or_default().to_owned();
        let schema = request["requestedSchema"].clone();
        let caller = self
            .shared
            .callers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .last()
            .map(|on| (on.caller.questions.clone(), on.caller.deadline))
            .filter(|(q, _)| q.wait_for_answers());
        let answer = match caller {
            // A durable run: answered from the run's answers, or the run waits on it while
            // the request is held open (an answer given meanwhile comes back here), or
            // stops for it (the request is ended with `cancel`; the attempt made again once
            // it is answered asks again and gets the answer).
            Some((questions, deadline)) => {
                let question = Question {
                    server: self.shared.name.clone(),
                    message: message.clone(),
                    schema,
                };
                match questions.answer_for(&question) {
                    Some(answer) => answer,
                    None => {
                        let window = match deadline {
                            Some(at) => self.shared.hold_questions.min(
                                at.saturating_duration_since(std::time::Instant::now())
                                    .saturating_sub(std::time::Duration::from_secs(1)),
                            ),
                            None => self.shared.hold_questions,
                        };
                        questions
                            .hold(question, window)
                            .await
                            .unwrap_or(Answer::Cancel)
                    }
                }
            }
            None => elicitation
                .elicit(&self.shared.name, &message, &schema)
                .await
                .map_err(|e| ErrorData::internal_error(e, None))?,
        };
        self.shared.note(json!({
            "kind": "elicitation", "at": now(), "message": message, "answer": answer.to_result()
        }));
        serde_json::from_value(answer.to_result())
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let roots: Vec<Value> = self
            .shared
            .roots
            .iter()
            .map(|uri| json!({"uri": uri}))
            .collect();
        serde_json::from_value(json!({"roots": roots}))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let mut note = serde_json::to_value(&params).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut note {
            map.insert("kind".into(), json!("progress"));
            map.insert("at".into(), json!(now()));
        }
        self.shared.note(note);
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let mut note = serde_json::to_value(&params).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut note {
            map.insert("kind".into(), json!("log"));
            map.insert("at".into(), json!(now()));
        }
        tracing::debug!(server = %self.shared.name, "log notification: {note}");
        self.shared.note(note);
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        self.refresh_later(context.peer, ListKind::Tools);
    }

    async fn on_resource_list_changed(&self, context: NotificationContext<RoleClient>) {
        self.refresh_later(context.peer, ListKind::Resources);
    }

    async fn on_prompt_list_changed(&self, context: NotificationContext<RoleClient>) {
        self.refresh_later(context.peer, ListKind::Prompts);
    }
}
