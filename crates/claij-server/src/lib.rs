//! claij workflows as a service (`claij serve`): an HTTP API to register FSMs, start runs,
//! follow them (their trails, live as server-sent events), answer the ones that wait and
//! stop them; the MCP endpoint of `claij-mcp-server` on the same port, at `/mcp`; an
//! OpenAPI 3.1 description at `/openapi.json`. See docs/SERVER.md.
//!
//! The server is a layer like the others: the binary assembles the engine and opens
//! the store, and hands them over ([`Assembly`], the store's roles as [`Stores`]); runs go
//! on in this process, checkpointed in the store, so a restart continues them
//! ([`Server::recover`]).
//!
//! # Modules
//!
//! - `config`: `ServerConfig`: where it listens, the token, the door's bounds, what
//!   documents from the network may use, whether runs go to workers.
//! - `state`: the `Assembly` the binary hands over, and what every route shares (the
//!   engine, the store, the definitions served, the live runs).
//! - `routes`: the router and its routes: definitions, runs, events, resume links,
//!   the OpenAI-compatible endpoint, the queue.
//! - `runner`: runs started or resumed on their own tasks, answered once under way.
//! - `queued`: with `ServerConfig::queue`, starts and answers queued for workers and
//!   followed in the store.
//! - `live`: the observer of every run the server drives, feeding the event streams and
//!   the callbacks.
//! - `callbacks`: completion callbacks, signed the Standard Webhooks way, delivered
//!   through the engine's egress policy, each outcome kept.
//! - `views`: what the API takes and answers, with their OpenAPI schemas.
//! - `body`: JSON bodies, their errors placed.
//! - `problem`: errors as RFC 9457 problem details.
//! - `auth`: the token check.
//! - `page`: the web page, its assets embedded, and runs' Graphviz drawings.
//! - `openapi`: the OpenAPI 3.1 description, derived from the handlers.

use std::net::SocketAddr;
use std::sync::Arc;

use claij_core::Fsm;
use claij_mcp_server::McpServer;
use tokio_util::sync::CancellationToken;

mod auth;
mod body;
mod callbacks;
mod config;
mod idempotency;
mod links;
mod live;
mod page;
mod problem;
mod routes;
mod runner;
mod state;
mod views;
mod webhook;

pub use claij_door::{ApiToken, Limits, MIN_TOKEN_LEN, WeakToken};
pub use config::{ConfigError, DEFAULT_BODY_LIMIT, ServerConfig};
pub use problem::{PROBLEM_JSON, PlacedError, Problem};
pub use routes::openapi::openapi_json;
pub use state::{Assembly, Stores};
pub use webhook::{BadSecret, DEFAULT_RETRY_DELAYS, WebhookSecret};

/// The server could not serve.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The settings are refused.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The server stopped with an error.
    #[error("the server stopped: {0}")]
    Stopped(String),
    /// The store could not be read at start.
    #[error("the store could not be read: {0}")]
    Store(#[from] claij_core::StoreError),
}

/// A server, ready to listen.
pub struct Server {
    state: state::AppState,
    mcp: Option<McpServer>,
    ends: tokio::sync::mpsc::UnboundedReceiver<(String, claij_core::RunStatus)>,
}

impl Server {
    /// A server running the FSMs `trusted` (the operator's: what their states may touch
    /// is not limited) and those the store holds, with `assembly` (the engine) and
    /// `stores`. The engine's [`Policy`](claij_engine::Policy) decides what API clients'
    /// documents may touch.
    pub fn new(
        config: ServerConfig,
        assembly: Arc<dyn Assembly>,
        stores: Stores,
        trusted: Vec<Arc<Fsm>>,
    ) -> Result<Self, ConfigError> {
        config.check()?;
        let streams = claij_door::Streams::new(config.max_streams);
        let (live, ends) = live::Live::new();
        let state = state::AppState {
            assembly,
            store: stores.runs,
            webhooks: stores.webhooks,
            work_queue: stores.work_queue,
            definitions: Default::default(),
            live,
            config: Arc::new(config),
            shutdown: CancellationToken::new(),
            callbacks: webhook::Callbacks::new(),
            bound: Arc::default(),
            streams,
        };
        for fsm in trusted {
            state.serve(fsm);
        }
        Ok(Server {
            state,
            mcp: None,
            ends,
        })
    }

    /// What follows the runs this server drives — their event streams and completion
    /// callbacks — to give the runs another part of its process drives (a worker beside
    /// it, in plain `claij serve`), so that they are followed alike.
    pub fn run_observer(&self) -> Arc<dyn claij_engine::Observer> {
        self.state.live.observer()
    }

    /// Serves `mcp` (the FSMs as MCP tools) at `/mcp` too, behind the same token.
    pub fn with_mcp(mut self, mcp: McpServer) -> Self {
        self.mcp = Some(mcp);
        self
    }

    /// Continues the runs the store holds that can go on without input: those whose
    /// process died (a server killed mid-run), suspended ones whose wait expired, and those
    /// waiting for their children; and the callbacks still to be delivered. Each goes on in
    /// the background; returns how many runs.
    pub async fn recover(&self) -> Result<usize, ServeError> {
        self.state.load_stored().await?;
        for delivery in self.state.webhooks.pending_deliveries().await? {
            tokio::spawn(callbacks::deliver(self.state.clone(), delivery));
        }
        if self.state.config.queue {
            // The workers continue what can go on.
            return Ok(0);
        }
        let runs = claij_engine::runs_to_continue(self.state.store.as_ref()).await?;
        let mut continued = 0;
        for record in runs {
            match routes::runs::resume_with(&self.state, &record, None, "$").await {
                Ok(_) => continued += 1,
                Err(p) => tracing::warn!("run {} could not continue: {}", record.id, p.detail),
            }
        }
        Ok(continued)
    }

    /// Listens until `shutdown` is cancelled; `on_bound` is told the address bound (port
    /// 0 picks a free one).
    pub async fn serve(
        self,
        shutdown: CancellationToken,
        on_bound: impl FnOnce(SocketAddr),
    ) -> Result<(), ServeError> {
        let addr = self.state.config.bind;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind { addr, source })?;
        let bound = listener
            .local_addr()
            .map_err(|source| ServeError::Bind { addr, source })?;
        let _ = self.state.bound.set(bound);
        tokio::spawn(callbacks::dispatch(self.state.clone(), self.ends));
        let config = self.state.config.clone();
        let mut router = routes::router(self.state.clone());
        if let Some(mcp) = self.mcp {
            let caps = claij_mcp_server::Caps::new(config.max_sessions, self.state.streams.clone());
            let mcp = claij_mcp_server::http_router(mcp, caps, config.body_limit, shutdown.clone())
                .route_layer(axum::middleware::from_fn_with_state(
                    self.state.clone(),
                    auth::require_token,
                ));
            router = router.merge(mcp);
        }
        let mut names = config.allowed_hosts.clone();
        names.extend(config.public_url.clone());
        let door = claij_door::Door::new(claij_door::Hosts::new(bound, &names), config.body_limit)
            .public_url(config.public_url.clone())
            .with_token(config.token.is_some());
        on_bound(bound);
        // Runs and event streams end with the server.
        let state = self.state.clone();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            stop.cancelled().await;
            state.shutdown.cancel();
        });
        claij_door::serve(listener, door.around(router), config.limits, shutdown)
            .await
            .map_err(|e| ServeError::Stopped(e.to_string()))
    }
}
