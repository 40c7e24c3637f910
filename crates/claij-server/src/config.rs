//! How the server is set up: where it listens, the API token, the body limit and the
//! other bounds of its door, and what documents that arrive over the network may use.

use std::net::SocketAddr;
use std::time::Duration;

use claij_door::{ApiToken, Limits, check_exposure};

use crate::webhook::{DEFAULT_RETRY_DELAYS, WebhookSecret};

pub use claij_door::DEFAULT_BODY_LIMIT;

/// The server's settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where to listen (`127.0.0.1:8080` by default; port 0 picks a free one).
    pub bind: SocketAddr,
    /// The API token every route but the health check (and, later, resume hooks)
    /// requires. Required to bind anything but a loopback address.
    pub token: Option<ApiToken>,
    /// The largest request body accepted, in bytes.
    pub body_limit: usize,
    /// The FSMs of the operator (by id; `*`: all) that API clients may register new
    /// versions of. Without it, a document registered over the API may not take an id
    /// the operator's documents have: it would be what a start by id runs.
    pub new_versions: Vec<String>,
    /// `Host` names answered besides loopback names and the address bound (a guard
    /// against DNS rebinding, on every route).
    pub allowed_hosts: Vec<String>,
    /// The secret completion callbacks are signed with; runs may ask for a callback only
    /// when there is one.
    pub webhook_secret: Option<WebhookSecret>,
    /// The waits between a callback's attempts (after the last, it is given up).
    pub retry_delays: Vec<Duration>,
    /// The server's address as others reach it (`https://claij.example.com`), for the
    /// links callbacks carry; default `http://` and the address bound.
    pub public_url: Option<String>,
    /// Leave runs to `claij worker` processes sharing the store: starts and answers are
    /// queued (and followed in the store), not driven here.
    pub queue: bool,
    /// Connections: how many at once, how long their headers may take.
    pub limits: Limits,
    /// Event streams (`/runs/{id}/events`, `GET /mcp`) open at once, at most.
    pub max_streams: usize,
    /// MCP sessions open at once, at most.
    pub max_sessions: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
            token: None,
            body_limit: DEFAULT_BODY_LIMIT,
            new_versions: Vec::new(),
            allowed_hosts: Vec::new(),
            webhook_secret: None,
            retry_delays: DEFAULT_RETRY_DELAYS.to_vec(),
            public_url: None,
            queue: false,
            limits: Limits::default(),
            max_streams: claij_door::DEFAULT_MAX_STREAMS,
            max_sessions: claij_mcp_server::DEFAULT_MAX_SESSIONS,
        }
    }
}

/// The server refuses to start.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A non-loopback address without an API token.
    #[error(
        "refusing to listen on {0} without an API token: anyone who can reach it could run workflows. Give --token-file FILE or CLAIJ_API_TOKEN, or bind 127.0.0.1"
    )]
    OpenWithoutToken(SocketAddr),
}

impl ServerConfig {
    /// Checks the settings before anything is bound.
    pub fn check(&self) -> Result<(), ConfigError> {
        check_exposure(self.bind, self.token.as_ref())
            .map_err(|open| ConfigError::OpenWithoutToken(open.0))
    }
}

impl ServerConfig {
    /// Whether API clients may register new versions of the operator's FSM `id`.
    pub fn allows_new_versions_of(&self, id: &str) -> bool {
        self.new_versions.iter().any(|n| n == id || n == "*")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_address_needs_a_token() {
        let mut config = ServerConfig {
            bind: SocketAddr::from(([0, 0, 0, 0], 0)),
            ..ServerConfig::default()
        };
        assert!(matches!(
            config.check(),
            Err(ConfigError::OpenWithoutToken(_))
        ));
        config.token = ApiToken::new("0123456789abcdef0123456789abcdef").ok();
        assert!(config.check().is_ok());
        assert!(ServerConfig::default().check().is_ok());
    }
}
