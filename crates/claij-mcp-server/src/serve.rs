//! The transports: stdio (the MCP client starts the server as a child process) and
//! streamable HTTP (at `http://ADDR/mcp`; binds 127.0.0.1 unless told otherwise).

use std::net::SocketAddr;
use std::sync::Arc;

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

/// Serves streamable HTTP at `http://ADDR/mcp` until `shutdown` is cancelled.
/// `on_bound` is told the address actually bound (port 0 picks a free port). Requests are
/// accepted when their `Host` is a loopback name, the bound address, or one of
/// `allowed_hosts` (names or `name:port`): a guard against DNS rebinding.
pub async fn serve_http(
    server: McpServer,
    addr: SocketAddr,
    allowed_hosts: &[String],
    shutdown: CancellationToken,
    on_bound: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| ServeError::Bind { addr, source })?;
    let router = http_router(server, bound, allowed_hosts, shutdown.clone());
    on_bound(bound);
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { shutdown.cancelled_owned().await })
        .await
        .map_err(|e| ServeError::Stopped(e.to_string()))
}

/// The MCP endpoint as an axum router (at [`HTTP_PATH`]), for a server that serves it
/// beside other routes (`claij serve`). `bound` is the address listened on; requests are
/// accepted when their `Host` is a loopback name, that address, or one of
/// `allowed_hosts`. Sessions end when `shutdown` is cancelled.
pub fn http_router(
    server: McpServer,
    bound: SocketAddr,
    allowed_hosts: &[String],
    shutdown: CancellationToken,
) -> axum::Router {
    let mut config = StreamableHttpServerConfig::default();
    config.cancellation_token = shutdown.child_token();
    // Loopback names are allowed by default; a server bound elsewhere also answers to
    // the address it was given.
    if !bound.ip().is_loopback() {
        config.allowed_hosts.push(bound.ip().to_string());
        config.allowed_hosts.push(bound.to_string());
    }
    config.allowed_hosts.extend(allowed_hosts.iter().cloned());
    let service = StreamableHttpService::new(
        move || Ok(server.for_session()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    axum::Router::new().nest_service(HTTP_PATH, service)
}
