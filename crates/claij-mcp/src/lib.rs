//! # claij-mcp
//!
//! claij's MCP client: connections to MCP servers (child processes over stdio, streamable
//! HTTP) through `rmcp`, each server's [`Catalog`] (its tools, resources and prompts as
//! last listed) kept fresh by `list_changed`, the dynamic transition schemas
//! `mcp:…:request` / `mcp:…:call` / `mcp:…:response` made from the catalogs, the `mcp` action, and the hooks through which servers ask for a model
//! (sampling) or a person (elicitation).
//!
//! Wire it into a registry with [`register`], declare and connect a document's servers
//! with [`McpClient::connect_fsm`] after loading it, and [`McpClient::shutdown`] at the
//! end. See docs/MCP-CLIENT.md.
//!
//! # Modules
//!
//! - `spec`: `ServerSpec`, a `servers` entry parsed (stdio or HTTP, timeout, roots, the
//!   tools allowed).
//! - `process`: a stdio server's child process: its own process group, the stderr tail,
//!   a shutdown that always reaps it.
//! - `client`: `McpClient`, the servers by name, connected on first use, reconnected,
//!   shut down together.
//! - `connection`: one live connection: requests with timeouts, cancellation and
//!   progress, the catalog kept fresh.
//! - `handshake` (private): `initialize`, and `server/discover` for servers that need it.
//! - `handler` (private): the rmcp client handler: sampling, elicitation and roots
//!   requests, notifications.
//! - `access`: `Access`, how a connection reaches its server: as the operator, or for an
//!   API client's document as the engine's `Policy` allows.
//! - `auth`: OAuth for HTTP servers: login (authorization code with PKCE, client
//!   credentials), the credentials file, scope step-up.
//! - `assertion` (private): private-key JWT client authentication, re-exported from
//!   `auth`.
//! - `catalog`: `Catalog`, a server's tools, resources and prompts as last listed.
//! - `schemas`: `McpSchemas`, the `mcp:…` dynamic transition schemas made from the
//!   catalogs.
//! - `action`: `McpAction`, the `mcp` action.
//! - `hooks`: `Caller` and the handlers a server's sampling and elicitation requests go
//!   to.
//! - `sampling`: a `sampling/createMessage` request read into messages, and its result.
//! - `error`: `McpError`.

pub mod access;
pub mod action;
pub mod auth;
pub mod catalog;
pub mod client;
pub mod connection;
pub mod error;
mod handler;
mod handshake;
pub mod hooks;
pub mod process;
pub mod sampling;
pub mod schemas;
pub mod spec;

use std::sync::Arc;

use claij_engine::ActionRegistry;

pub use access::Access;
pub use action::McpAction;
pub use catalog::Catalog;
pub use client::McpClient;
pub use connection::{ClientHooks, Connection, Exchange, Reply};
pub use error::McpError;
pub use hooks::{
    Caller, ElicitationHandler, HumanElicitation, IDEMPOTENCY_KEY_META, SamplingHandler,
    ScriptedElicitation,
};
pub use sampling::{SamplingRequest, sampling_result};
pub use schemas::McpSchemas;
pub use spec::{LOG_LEVELS, ServerSpec, Transport};

/// Registers the `mcp` action (replacing the engine's placeholder) and the `mcp:…` schema
/// provider over `client`.
pub fn register(
    registry: &mut ActionRegistry,
    client: &Arc<McpClient>,
) -> Result<(), claij_core::SchemaError> {
    registry.register("mcp", Arc::new(McpAction::new(client.clone())))?;
    registry.register_schemas(Arc::new(McpSchemas::new(client)));
    Ok(())
}

/// [`register`] with the sampling requests servers make during the `mcp` action's calls
/// answered by `sampling` (the model layer of the engine `registry` is for), not by the
/// client's hook: engines on different model layers may share one client and its
/// connections.
pub fn register_answering_sampling(
    registry: &mut ActionRegistry,
    client: &Arc<McpClient>,
    sampling: Arc<dyn SamplingHandler>,
) -> Result<(), claij_core::SchemaError> {
    registry.register(
        "mcp",
        Arc::new(McpAction::new(client.clone()).answering_sampling_with(sampling)),
    )?;
    registry.register_schemas(Arc::new(McpSchemas::new(client)));
    Ok(())
}
