//! The MCP client's errors.

/// What can go wrong talking to MCP servers.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// A `servers` entry is malformed.
    #[error("server `{server}`: {message}")]
    Spec {
        /// The server's name.
        server: String,
        /// What is wrong.
        message: String,
    },
    /// Authorizing with an HTTP server failed, or it requires authorization claij does not
    /// have.
    #[error("authorization with {url}: {message}")]
    Auth {
        /// The server's URL.
        url: String,
        /// Why.
        message: String,
    },
    /// An HTTP server refused a request for want of scope (403 `insufficient_scope`): the
    /// tokens claij holds do not cover it. [`crate::auth::step_up`] authorizes again.
    #[error(
        "{url} refused `{method}` for want of scope{}: run `claij mcp login {url} --scope \"{}\"` to ask for it",
        scope.as_deref().map(|s| format!(" (it asks for `{s}`)")).unwrap_or_default(),
        scope.as_deref().unwrap_or("SCOPE")
    )]
    InsufficientScope {
        /// The server's name.
        server: String,
        /// Its URL.
        url: String,
        /// The request refused.
        method: String,
        /// The scopes it asks for, when it says.
        scope: Option<String>,
        /// Its `WWW-Authenticate` challenge.
        challenge: String,
    },
    /// The policy does not let the document's owner reach the server as its entry says
    /// (an API client's document: see [`crate::Access`]).
    #[error("server `{server}` is not reached: {message}")]
    Refused {
        /// The server's name.
        server: String,
        /// Why.
        message: String,
    },
    /// A cassette (`claij run --record` / `--replay`) could not record the server's
    /// listing, or holds none for it.
    #[error("server `{server}`: {message}")]
    Cassette {
        /// The server's name.
        server: String,
        /// What went wrong (naming the cassette).
        message: String,
    },
    /// No server of that name is declared or connected.
    #[error("no MCP server named `{0}`")]
    UnknownServer(String),
    /// The process could not be started, or the handshake failed.
    #[error("server `{server}` could not be started: {message}{}", stderr_suffix(.stderr))]
    Connect {
        /// The server's name.
        server: String,
        /// Why.
        message: String,
        /// The tail of its stderr, when it is a process.
        stderr: String,
    },
    /// The connection broke (the process exited or the stream closed) during a request.
    #[error("server `{server}` went away during `{method}`: {message}{}", stderr_suffix(.stderr))]
    Gone {
        /// The server's name.
        server: String,
        /// The request that was in flight.
        method: String,
        /// Why.
        message: String,
        /// The tail of its stderr, when it is a process.
        stderr: String,
    },
    /// The request was cancelled (the run was interrupted).
    #[error("`{method}` on `{server}` was cancelled: {reason}")]
    Cancelled {
        /// The server's name.
        server: String,
        /// The request.
        method: String,
        /// Why.
        reason: String,
    },
    /// A request is malformed (unknown method, params not an object).
    #[error("bad MCP request: {0}")]
    BadRequest(String),
}

fn stderr_suffix(stderr: &str) -> String {
    if stderr.trim().is_empty() {
        String::new()
    } else {
        format!("; its stderr ends with:\n{}", stderr.trim_end())
    }
}
