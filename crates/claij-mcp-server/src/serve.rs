//! The transports: stdio (the MCP client starts the server as a child process) and
//! streamable HTTP (at `http://ADDR/mcp`, through claij's door: loopback unless there is a
//! token; connections, bodies, sessions and streams bounded).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use claij_door::{
    ApiToken, DEFAULT_BODY_LIMIT, DEFAULT_MAX_STREAMS, Door, Hosts, Limits, OpenWithoutToken,
    ParsedJson, RETRY_AFTER_SECONDS, Streams, check_exposure, require_token,
};
use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpServerConfig;
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio_util::sync::CancellationToken;

use crate::handler::McpServer;

/// The server could not serve.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The MCP handshake over stdio failed.
    #[error("the MCP session over stdio could not start: {0}")]
    Handshake(String),
    /// An address beyond loopback without a token.
    #[error(transparent)]
    Open(#[from] OpenWithoutToken),
    /// The HTTP address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The server stopped with an error.
    #[error("the MCP server stopped: {0}")]
    Stopped(String),
}

/// The path of the MCP endpoint over HTTP.
pub const HTTP_PATH: &str = "/mcp";

/// Serves over stdin/stdout until the client closes stdin.
pub async fn serve_stdio(server: McpServer) -> Result<(), ServeError> {
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| ServeError::Handshake(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| ServeError::Stopped(e.to_string()))?;
    Ok(())
}

/// The default cap on MCP sessions open at once.
pub const DEFAULT_MAX_SESSIONS: usize = 128;

/// How the HTTP endpoint is exposed: who may call it, and how much it takes.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// `Host` names answered besides loopback names and the bound address (`name` or
    /// `name:port`): a guard against DNS rebinding.
    pub allowed_hosts: Vec<String>,
    /// The API token every request needs, if any; required to bind anything but loopback.
    pub token: Option<ApiToken>,
    /// The largest request body taken, in bytes.
    pub body_limit: usize,
    /// Connections: how many at once, how long their headers may take.
    pub limits: Limits,
    /// MCP sessions open at once, at most.
    pub max_sessions: usize,
    /// Event streams (`GET /mcp`) open at once, at most.
    pub max_streams: usize,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            allowed_hosts: Vec::new(),
            token: None,
            body_limit: DEFAULT_BODY_LIMIT,
            limits: Limits::default(),
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_streams: DEFAULT_MAX_STREAMS,
        }
    }
}

/// Serves streamable HTTP at `http://ADDR/mcp` until `shutdown` is cancelled.
/// `on_bound` is told the address actually bound (port 0 picks a free port). Every
/// request goes through claij's door (`claij_door`): its `Host` a loopback name, the
/// bound address or one of `settings.allowed_hosts`; its `Origin`, if any, the server's
/// own; its body within the limit; and, with a token, `Authorization: Bearer TOKEN`. An
/// address other than loopback is refused without a token.
pub async fn serve_http(
    server: McpServer,
    addr: SocketAddr,
    settings: &HttpSettings,
    shutdown: CancellationToken,
    on_bound: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    check_exposure(addr, settings.token.as_ref())?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| ServeError::Bind { addr, source })?;
    let caps = Caps::new(settings.max_sessions, Streams::new(settings.max_streams));
    let router = http_router(server, caps, settings.body_limit, shutdown.clone()).layer(
        axum::middleware::from_fn_with_state(settings.token.clone(), require_token),
    );
    let door = Door::new(
        Hosts::new(bound, &settings.allowed_hosts),
        settings.body_limit,
    )
    .with_token(settings.token.is_some());
    on_bound(bound);
    claij_door::serve(listener, door.around(router), settings.limits, shutdown)
        .await
        .map_err(|e| ServeError::Stopped(e.to_string()))
}

/// What the MCP endpoint keeps within bounds: its sessions, and its event streams.
#[derive(Clone)]
pub struct Caps {
    max_sessions: usize,
    streams: Streams,
    sessions: Arc<LocalSessionManager>,
    /// `initialize` requests are let in one at a time, so that the count they see is
    /// the count there is.
    opening: Arc<tokio::sync::Mutex<()>>,
}

impl Caps {
    /// At most `max_sessions` sessions, and event streams as `streams` allows (shared
    /// with a server's other streams).
    pub fn new(max_sessions: usize, streams: Streams) -> Self {
        Caps {
            max_sessions,
            streams,
            sessions: Arc::new(LocalSessionManager::default()),
            opening: Arc::default(),
        }
    }
}

/// The MCP endpoint as an axum router (at [`HTTP_PATH`]), for a server that serves it
/// beside other routes (`claij serve`), within `caps` and taking bodies of at most
/// `body_limit` bytes. Put it behind a `claij_door::Door` (which checks `Host`, `Origin`
/// and bodies for every route). Sessions end when `shutdown` is cancelled.
pub fn http_router(
    server: McpServer,
    caps: Caps,
    body_limit: usize,
    shutdown: CancellationToken,
) -> axum::Router {
    // The door checks every request's Host (and Origin) for the whole server.
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_max_request_body_bytes(body_limit)
        .with_cancellation_token(shutdown.child_token());
    let service = StreamableHttpService::new(
        move || Ok(server.for_session()),
        caps.sessions.clone(),
        config,
    );
    axum::Router::new()
        .nest_service(HTTP_PATH, service)
        .layer(axum::middleware::from_fn_with_state(caps, capped))
}

/// Refuses an `initialize` beyond the sessions' cap, and a `GET` stream beyond the
/// streams' (503, `Retry-After`); holds a stream's place while it lasts.
async fn capped(State(caps): State<Caps>, request: Request, next: Next) -> Response {
    if request.method() == Method::GET {
        return match caps.streams.open() {
            Ok(permit) => claij_door::hold(next.run(request).await, permit),
            Err(full) => full.refusal().response(),
        };
    }
    let opens = request.method() == Method::POST
        && !request.headers().contains_key("mcp-session-id")
        && request
            .extensions()
            .get::<ParsedJson>()
            .is_some_and(|json| json.0["method"] == "initialize");
    if !opens {
        return next.run(request).await;
    }
    let _one_at_a_time = caps.opening.lock().await;
    if caps.sessions.sessions.read().await.len() >= caps.max_sessions {
        return claij_door::refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "too-many-sessions",
            "Too many MCP sessions",
            format!(
                "{} MCP sessions are open, as many as this server keeps at once (--max-sessions); end one (DELETE /mcp) or try again later",
                caps.max_sessions
            ),
        )
        .retry_after(RETRY_AFTER_SECONDS)
        .response();
    }
    next.run(request).await
}
