//! How the server is set up: where it listens, the API token, the body limit, and what
//! documents that arrive over the network may use.

use std::net::SocketAddr;
use std::time::Duration;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::callbacks::{DEFAULT_RETRY_DELAYS, WebhookSecret};

/// The default request body limit: 1 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 1 << 20;

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
    /// Extra `Host` names the MCP endpoint answers to (a guard against DNS rebinding).
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
    /// The token is too short to resist guessing.
    #[error("the API token is {0} characters long; use at least 32 (e.g. `openssl rand -hex 32`)")]
    WeakToken(usize),
}

impl ServerConfig {
    /// Checks the settings before anything is bound.
    pub fn check(&self) -> Result<(), ConfigError> {
        if !self.bind.ip().is_loopback() && self.token.is_none() {
            return Err(ConfigError::OpenWithoutToken(self.bind));
        }
        Ok(())
    }
}

/// The API token, kept only as its SHA-256; a presented token is hashed and compared in
/// constant time. It never prints.
#[derive(Clone)]
pub struct ApiToken {
    hash: [u8; 32],
}

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiToken(<redacted>)")
    }
}

/// The shortest API token accepted.
pub const MIN_TOKEN_LEN: usize = 32;

impl ApiToken {
    /// The token `secret` (surrounding whitespace ignored: a token file's newline).
    pub fn new(secret: &str) -> Result<Self, ConfigError> {
        let secret = secret.trim();
        if secret.len() < MIN_TOKEN_LEN {
            return Err(ConfigError::WeakToken(secret.len()));
        }
        Ok(ApiToken {
            hash: Sha256::digest(secret.as_bytes()).into(),
        })
    }

    /// Whether `presented` is the token.
    pub fn matches(&self, presented: &str) -> bool {
        let hash: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        hash.ct_eq(&self.hash).into()
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
    fn tokens_match_only_themselves_and_never_print() {
        let secret = "0123456789abcdef0123456789abcdef";
        let token = ApiToken::new(&format!("{secret}\n")).ok();
        assert!(token.as_ref().is_some_and(|t| t.matches(secret)));
        assert!(
            token
                .as_ref()
                .is_some_and(|t| !t.matches("0123456789abcdef0123456789abcdeF"))
        );
        assert!(!format!("{token:?}").contains("0123"));
        assert!(matches!(
            ApiToken::new("short"),
            Err(ConfigError::WeakToken(5))
        ));
    }

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
