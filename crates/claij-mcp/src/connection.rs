//! One live connection to a server: connected through the handshake (`initialize`, then
//! `server/discover` for a server that needs it), the catalog kept fresh, requests with
//! timeouts and cancellation, the server entry's log level, and a shutdown that leaves no
//! process behind.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::ClientRequest;
use rmcp::service::{PeerRequestOptions, RoleClient, RunningService, ServiceError};
use serde_json::{Value, json};
use std::sync::RwLock;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::access::Access;
use crate::catalog::Catalog;
use crate::error::McpError;
use crate::handler::{Handler, OnBehalf, Shared};
use crate::handshake::handshake;
use crate::hooks::{Caller, ElicitationHandler, SamplingHandler};
use crate::process::{DEFAULT_GRACE, Ending, ServerProcess, StderrTail};
use crate::spec::ServerSpec;

/// What a client offers servers beyond plain requests.
#[derive(Clone, Default)]
pub struct ClientHooks {
    /// Answers sampling requests (advertised only when set).
    pub sampling: Option<Arc<dyn SamplingHandler>>,
    /// Answers elicitation requests (advertised only when set).
    pub elicitation: Option<Arc<dyn ElicitationHandler>>,
}

impl std::fmt::Debug for ClientHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientHooks")
            .field("sampling", &self.sampling.is_some())
            .field("elicitation", &self.elicitation.is_some())
            .finish()
    }
}

/// A server's answer to one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// The result (for `tools/call` it may carry `isError: true`).
    Result(Value),
    /// A JSON-RPC error.
    Error {
        /// The JSON-RPC error code.
        code: i64,
        /// The server's message.
        message: String,
        /// Its data, if any.
        data: Option<Value>,
    },
    /// No answer in time; the request was cancelled (`notifications/cancelled`).
    Timeout(Duration),
}

/// One request's reply and the notifications that arrived while it ran (progress, logs,
/// sampling and elicitation exchanges).
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    /// The reply.
    pub reply: Reply,
    /// Notifications, in arrival order, each with `kind` and `at`.
    pub notifications: Vec<Value>,
}

/// Keeps a caller registered while its request is in flight (removed on drop, so also
/// when the request is cancelled).
struct CallerGuard {
    shared: Arc<Shared>,
    id: u64,
}

impl CallerGuard {
    fn push(
        shared: &Arc<Shared>,
        caller: Caller,
        sampling: Option<Arc<dyn SamplingHandler>>,
    ) -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        shared
            .callers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(OnBehalf {
                id,
                caller,
                sampling,
            });
        Self {
            shared: shared.clone(),
            id,
        }
    }
}

impl Drop for CallerGuard {
    fn drop(&mut self) {
        self.shared
            .callers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|on| on.id != self.id);
    }
}

/// A live connection to one MCP server.
pub struct Connection {
    name: String,
    spec: ServerSpec,
    service: tokio::sync::Mutex<Option<RunningService<RoleClient, Handler>>>,
    peer: rmcp::Peer<RoleClient>,
    process: tokio::sync::Mutex<Option<ServerProcess>>,
    pid: Option<u32>,
    stderr: Option<StderrTail>,
    shared: Arc<Shared>,
    generation: watch::Receiver<u64>,
    protocol: String,
    server_info: Value,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("name", &self.name)
            .field("pid", &self.pid)
            .field("protocol", &self.protocol)
            .finish()
    }
}

impl Connection {
    /// Connects to `spec` (starting the process for a stdio server), performs the
    /// handshake and lists the server's tools, resources and prompts.
    pub async fn connect(
        name: &str,
        spec: &ServerSpec,
        hooks: ClientHooks,
    ) -> Result<Self, McpError> {
        Self::connect_as(name, spec, hooks, &Access::operator()).await
    }

    /// [`connect`](Self::connect) as `access` allows (an API client's document's server:
    /// see [`Access::of`]).
    pub async fn connect_as(
        name: &str,
        spec: &ServerSpec,
        hooks: ClientHooks,
        access: &Access,
    ) -> Result<Self, McpError> {
        let (generation_tx, generation) = watch::channel(0);
        let shared = Arc::new(Shared {
            name: name.to_owned(),
            roots: spec.roots.clone(),
            tools: spec.tools.clone(),
            sampling: hooks.sampling,
            elicitation: hooks.elicitation,
            hold_questions: spec.hold_questions,
            catalog: RwLock::new(Catalog::default()),
            generation: generation_tx,
            notes: Mutex::new(Vec::new()),
            callers: Mutex::new(Vec::new()),
            refreshing: tokio::sync::Mutex::new(()),
        });
        let handler = Handler {
            shared: shared.clone(),
        };
        let (service, process) = handshake(name, spec, &handler, access).await?;
        let peer = service.peer().clone();
        let info = peer
            .peer_info()
            .and_then(|info| serde_json::to_value(&*info).ok())
            .unwrap_or(Value::Null);
        let protocol = info["protocolVersion"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let listed = shared.refresh(&peer, &[]).await;
        let connection = Self {
            name: name.to_owned(),
            spec: spec.clone(),
            pid: process.as_ref().map(ServerProcess::pid),
            stderr: process.as_ref().map(ServerProcess::stderr),
            service: tokio::sync::Mutex::new(Some(service)),
            process: tokio::sync::Mutex::new(process),
            peer,
            shared,
            generation,
            protocol,
            server_info: info,
        };
        let configured = match listed {
            Ok(()) => connection.apply_log_level().await,
            Err(message) => Err(message),
        };
        if let Err(message) = configured {
            connection.shutdown().await;
            return Err(McpError::Spec {
                server: name.to_owned(),
                message,
            });
        }
        Ok(connection)
    }

    /// Asks the server for log messages from the entry's `log_level` up, when it has one.
    async fn apply_log_level(&self) -> Result<(), String> {
        let Some(level) = &self.spec.log_level else {
            return Ok(());
        };
        if self.server_info["capabilities"].get("logging").is_none() {
            return Err(format!(
                "log_level `{level}`: the server does not offer logging"
            ));
        }
        let exchange = self
            .request(
                "logging/setLevel",
                json!({"level": level}),
                &CancellationToken::new(),
            )
            .await
            .map_err(|e| format!("log_level `{level}`: {e}"))?;
        match exchange.reply {
            Reply::Result(_) => Ok(()),
            Reply::Error { message, .. } => Err(format!(
                "log_level `{level}`: the server refused it: {message}"
            )),
            Reply::Timeout(after) => {
                Err(format!("log_level `{level}`: no answer within {after:?}"))
            }
        }
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How it was reached.
    pub fn spec(&self) -> &ServerSpec {
        &self.spec
    }

    /// The child's process id, for a stdio server.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The negotiated protocol version (library API: what a caller may rely on in its
    /// requests; `server_info` has it too).
    pub fn protocol_version(&self) -> &str {
        &self.protocol
    }

    /// What the server said about itself (protocol version, capabilities, `serverInfo`).
    pub fn server_info(&self) -> &Value {
        &self.server_info
    }

    /// The tail of the server's stderr (stdio servers).
    pub fn stderr_tail(&self) -> String {
        self.stderr
            .as_ref()
            .map(StderrTail::text)
            .unwrap_or_default()
    }

    /// The server's catalog, as last listed.
    pub fn catalog(&self) -> Catalog {
        self.shared
            .catalog
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Bumped on every catalog refresh (first listing included).
    pub fn generation(&self) -> u64 {
        *self.generation.borrow()
    }

    /// Waits until the catalog has been refreshed after generation `seen` (library API:
    /// how a caller waits for a `list_changed` to be applied, with [`Self::generation`]).
    pub async fn changed_since(&self, seen: u64) {
        let mut rx = self.generation.clone();
        let _ = rx.wait_for(|g| *g > seen).await;
    }

    /// Lists everything again now.
    pub async fn refresh(&self) {
        if let Err(mismatch) = self.shared.refresh(&self.peer, &[]).await {
            tracing::warn!(server = %self.name, "{mismatch}");
        }
    }

    /// Sends one request (`tools/call`, `resources/read`, `prompts/get`, or any other
    /// client request by its method) and waits for the reply, the server's timeout or
    /// `cancel`. Timeouts and cancellation send `notifications/cancelled`. A broken
    /// connection is an error carrying the tail of the server's stderr.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        cancel: &CancellationToken,
    ) -> Result<Exchange, McpError> {
        self.request_for(method, params, cancel, None).await
    }

    /// [`request`](Self::request) on behalf of `caller` (what a [`SamplingHandler`] is
    /// told while the request is in flight, see there).
    pub async fn request_for(
        &self,
        method: &str,
        params: Value,
        cancel: &CancellationToken,
        caller: Option<Caller>,
    ) -> Result<Exchange, McpError> {
        self.request_answered_by(method, params, cancel, caller, None)
            .await
    }

    /// [`request_for`](Self::request_for) with the sampling requests the server makes
    /// while it is in flight answered by `sampling` (the caller's model layer), not by
    /// the client's hook; `None`: by the hook.
    pub async fn request_answered_by(
        &self,
        method: &str,
        params: Value,
        cancel: &CancellationToken,
        caller: Option<Caller>,
        sampling: Option<Arc<dyn SamplingHandler>>,
    ) -> Result<Exchange, McpError> {
        let mut options = PeerRequestOptions::with_timeout(self.spec.timeout);
        let mut meta = rmcp::model::RequestMetaObject::default();
        if let Some(traceparent) = caller.as_ref().and_then(|c| c.traceparent.clone()) {
            meta.0
                .insert("traceparent".to_owned(), Value::String(traceparent));
        }
        if let Some(key) = caller.as_ref().and_then(|c| c.idempotency_key.clone()) {
            meta.0.insert(
                crate::hooks::IDEMPOTENCY_KEY_META.to_owned(),
                Value::String(key),
            );
        }
        if !meta.0.is_empty() {
            options.meta = Some(meta);
        }
        let _on_behalf = caller.map(|caller| CallerGuard::push(&self.shared, caller, sampling));
        let request: ClientRequest =
            serde_json::from_value(json!({"method": method, "params": params}))
                .map_err(|e| McpError::BadRequest(format!("`{method}`: {e}")))?;
        if let ClientRequest::CustomRequest(_) = request {
            return Err(McpError::BadRequest(format!("unknown method `{method}`")));
        }
        let handle = self
            .peer
            .send_cancellable_request(request, options)
            .await
            .map_err(|e| self.gone(method, e.to_string()))?;
        let token = serde_json::to_value(&handle.progress_token).unwrap_or(Value::Null);
        let id = handle.id.clone();
        let outcome = tokio::select! {
            r = handle.await_response() => r,
            () = cancel.cancelled() => {
                let note = serde_json::from_value::<rmcp::model::ClientNotification>(json!({
                    "method": "notifications/cancelled",
                    "params": {"requestId": id, "reason": "the run was interrupted"},
                }));
                if let Ok(note) = note {
                    let _ = self.peer.send_notification(note).await;
                }
                Err(ServiceError::Cancelled { reason: Some("the run was interrupted".into()) })
            }
        };
        let reply = match outcome {
            Ok(result) => Reply::Result(serde_json::to_value(&result).unwrap_or(Value::Null)),
            Err(ServiceError::McpError(e)) => Reply::Error {
                code: i64::from(e.code.0),
                message: e.message.to_string(),
                data: e.data,
            },
            Err(ServiceError::Timeout { timeout }) => Reply::Timeout(timeout),
            Err(ServiceError::Cancelled { reason }) => {
                return Err(McpError::Cancelled {
                    server: self.name.clone(),
                    method: method.to_owned(),
                    reason: reason.unwrap_or_default(),
                });
            }
            Err(ServiceError::TransportSend(e))
                if let Some((challenge, scope)) =
                    crate::auth::scopes::insufficient_scope_in(e.error.as_ref()) =>
            {
                return Err(McpError::InsufficientScope {
                    server: self.name.clone(),
                    url: match &self.spec.transport {
                        crate::spec::Transport::Http { url } => url.clone(),
                        crate::spec::Transport::Stdio { command, .. } => command.clone(),
                    },
                    method: method.to_owned(),
                    scope,
                    challenge,
                });
            }
            Err(e) => return Err(self.gone_after_exit(method, e.to_string()).await),
        };
        Ok(Exchange {
            reply,
            notifications: self.take_notes(&token),
        })
    }

    /// Takes the notifications that belong to this request: progress for its `token`,
    /// and every log, sampling and elicitation note (those of a concurrent request may
    /// land here too); progress for other requests stays for them.
    fn take_notes(&self, token: &Value) -> Vec<Value> {
        let mut notes = self.shared.notes.lock().unwrap_or_else(|p| p.into_inner());
        let (mine, others): (Vec<Value>, Vec<Value>) = std::mem::take(&mut *notes)
            .into_iter()
            .partition(|n| n["kind"] != "progress" || &n["progressToken"] == token);
        *notes = others;
        mine
    }

    fn gone(&self, method: &str, message: String) -> McpError {
        McpError::Gone {
            server: self.name.clone(),
            method: method.to_owned(),
            message,
            stderr: self.stderr_tail(),
        }
    }

    /// The connection broke: give the process a moment to exit so its last words are read.
    async fn gone_after_exit(&self, method: &str, message: String) -> McpError {
        let mut message = message;
        if let Some(process) = self.process.lock().await.as_mut() {
            for _ in 0..40 {
                if let Some(status) = process.try_exited() {
                    message = format!("{message} (the server exited: {status})");
                    process.drain_stderr(Duration::from_millis(500)).await;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        }
        self.gone(method, message)
    }

    /// Whether the connection is closed (the server went away or it was shut down).
    pub fn is_closed(&self) -> bool {
        self.peer.is_transport_closed()
    }

    /// Closes the connection: ends the session, closes the server's input, then
    /// `SIGTERM` and `SIGKILL` to a process that does not exit within the grace period
    /// (2 s each). The process is reaped when this returns.
    pub async fn shutdown(&self) -> Option<Ending> {
        self.shutdown_with_grace(DEFAULT_GRACE).await
    }

    /// [`shutdown`](Self::shutdown) with another grace period (library API: for callers
    /// whose servers need longer, or less, to stop).
    pub async fn shutdown_with_grace(&self, grace: Duration) -> Option<Ending> {
        if let Some(mut service) = self.service.lock().await.take() {
            let _ = tokio::time::timeout(grace, service.close()).await;
        }
        let mut process = self.process.lock().await.take()?;
        Some(process.shutdown(grace).await)
    }
}
