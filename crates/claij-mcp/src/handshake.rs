//! The handshake with a server: `initialize` first, `server/discover` on a fresh
//! connection for a server that answers it with anything else; the process of a stdio
//! server started for each try. Over HTTP, reqwest (built with `rustls-no-provider`)
//! takes the process's TLS provider: the binary installs it, this crate never does.

use std::time::Duration;

use rmcp::model::ProtocolVersion;
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService,
};

use crate::access::Access;
use crate::error::McpError;
use crate::handler::Handler;
use crate::process::{ServerProcess, StderrTail};
use crate::spec::{ServerSpec, Transport};

/// How long the handshake may take (whatever the request timeout).
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// A started session and, for a stdio server, its process.
pub(crate) type Started = (RunningService<RoleClient, Handler>, Option<ServerProcess>);

/// Why a handshake failed, and whether the server answered at all.
struct HandshakeFailure {
    message: String,
    stderr: Option<StderrTail>,
    /// The server answered the handshake, with something other than what it asks for
    /// (a JSON-RPC error, an empty result): another handshake may suit it.
    answered: bool,
}

/// The handshake: `initialize` offering 2025-11-25 (every server in the field speaks it;
/// a server of 2026-07-28 may answer it with its own version), and when the server
/// answers that with an error or anything but an initialize result, `server/discover`
/// (2026-07-28, stateless) on a fresh connection. `initialize` goes first because a
/// server that does not know `server/discover` may not survive being asked: the
/// TypeScript SDK's stateless streamable HTTP servers answer its version header with
/// 400 and refuse every later request.
pub(crate) async fn handshake(
    name: &str,
    spec: &ServerSpec,
    handler: &Handler,
    access: &Access,
) -> Result<Started, McpError> {
    let connect_error = |failure: HandshakeFailure| McpError::Connect {
        server: name.to_owned(),
        message: failure.message,
        stderr: failure
            .stderr
            .as_ref()
            .map(StderrTail::text)
            .unwrap_or_default(),
    };
    let legacy = match start(spec, handler, ClientLifecycleMode::Initialize, access).await {
        Ok(started) => return Ok(started),
        Err(failure) if failure.answered => failure,
        Err(failure) => return Err(connect_error(failure)),
    };
    let discover = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::LATEST],
    };
    match start(spec, handler, discover, access).await {
        Ok(started) => Ok(started),
        Err(failure) => Err(connect_error(HandshakeFailure {
            message: format!(
                "`initialize` failed: {}; `server/discover` failed: {}",
                legacy.message, failure.message
            ),
            stderr: failure.stderr.or(legacy.stderr),
            answered: failure.answered,
        })),
    }
}

/// Connects once with `lifecycle` (starting the process for a stdio server), as `access`
/// allows.
async fn start(
    spec: &ServerSpec,
    handler: &Handler,
    lifecycle: ClientLifecycleMode,
    access: &Access,
) -> Result<Started, HandshakeFailure> {
    let failed = |message: String, stderr: Option<StderrTail>, answered: bool| HandshakeFailure {
        message,
        stderr,
        answered,
    };
    let answered = |e: &ClientInitializeError| {
        matches!(
            e,
            ClientInitializeError::JsonRpcError(_) | ClientInitializeError::ExpectedInitResult(_)
        )
    };
    match &spec.transport {
        Transport::Stdio { command, .. } => {
            let (mut process, stdout, stdin) =
                ServerProcess::spawn_with(&spec.transport, access)
                    .map_err(|e| failed(format!("cannot run `{command}`: {e}"), None, false))?;
            let started = tokio::time::timeout(
                CONNECT_TIMEOUT,
                handler
                    .clone()
                    .serve_with_lifecycle((stdout, stdin), lifecycle),
            )
            .await;
            match started {
                Ok(Ok(service)) => Ok((service, Some(process))),
                failure => {
                    let (message, was_answered) = match failure {
                        Ok(Err(e)) => (e.to_string(), answered(&e)),
                        _ => (
                            format!("no answer to the handshake within {CONNECT_TIMEOUT:?}"),
                            false,
                        ),
                    };
                    process.shutdown(Duration::from_millis(200)).await;
                    Err(failed(message, Some(process.stderr()), was_answered))
                }
            }
        }
        Transport::Http { url } => {
            let credentials = crate::auth::CredentialsFile::default_location();
            // An API client's connection: to the addresses checked, nowhere else.
            let pinned = access.pinned_client().map_err(|e| failed(e, None, false))?;
            let authorized = if access.credentials {
                crate::auth::authorized_client(url, &credentials, pinned.clone())
                    .await
                    .map_err(|e| failed(e.to_string(), None, false))?
            } else {
                None
            };
            let target = access
                .route
                .as_ref()
                .map_or(url.as_str(), |r| r.url.as_str());
            let config = || {
                rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                    target,
                )
            };
            let started = match (authorized, pinned) {
                (Some(client), _) => {
                    let transport = rmcp::transport::StreamableHttpClientTransport::with_client(
                        client,
                        config(),
                    );
                    tokio::time::timeout(
                        CONNECT_TIMEOUT,
                        handler.clone().serve_with_lifecycle(transport, lifecycle),
                    )
                    .await
                }
                (None, Some(client)) => {
                    let transport = rmcp::transport::StreamableHttpClientTransport::with_client(
                        client,
                        config(),
                    );
                    tokio::time::timeout(
                        CONNECT_TIMEOUT,
                        handler.clone().serve_with_lifecycle(transport, lifecycle),
                    )
                    .await
                }
                (None, None) => {
                    let transport =
                        rmcp::transport::StreamableHttpClientTransport::from_uri(target);
                    tokio::time::timeout(
                        CONNECT_TIMEOUT,
                        handler.clone().serve_with_lifecycle(transport, lifecycle),
                    )
                    .await
                }
            };
            match started {
                Ok(Ok(service)) => Ok((service, None)),
                Ok(Err(e)) if e.auth_challenge().is_some() && !access.credentials => Err(failed(
                    format!(
                        "{url} requires authorization; a document registered over the API reaches it without the operator's stored credentials (unless `--allow-credentials` names it)"
                    ),
                    None,
                    false,
                )),
                Ok(Err(e)) if e.auth_challenge().is_some() => Err(failed(
                    format!(
                        "{url} requires authorization: run `claij mcp login {url}` once (tokens kept in {})",
                        credentials.path().display()
                    ),
                    None,
                    false,
                )),
                Ok(Err(e)) => {
                    let was_answered = answered(&e);
                    Err(failed(e.to_string(), None, was_answered))
                }
                Err(_) => Err(failed(
                    format!("no answer from {url} within {CONNECT_TIMEOUT:?}"),
                    None,
                    false,
                )),
            }
        }
    }
}
