//! Scopes: what a server's challenge asks for, and asking for more later. A server may
//! refuse a request for want of scope (403 `insufficient_scope`, naming the scopes it
//! needs); [`step_up`] then authorizes again, as the client that holds the tokens, for
//! the scopes already granted and those.

use std::time::Duration;

use rmcp::transport::streamable_http_client::{AuthRequiredError, InsufficientScopeError};

use super::consent::authorize;
use super::{ClientIdentity, Consent, CredentialsFile, auth_failed};
use crate::error::McpError;

/// The first error of type `E` along `error`'s chain of sources.
fn found_in<'a, E: std::error::Error + 'static>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a E> {
    std::iter::successors(Some(error), |e| e.source()).find_map(|e| e.downcast_ref::<E>())
}

/// The `WWW-Authenticate` challenge an HTTP error carries (a 401, or a 403 for want of
/// scope), found along its chain of sources.
pub(crate) fn challenge_in<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a str> {
    found_in::<AuthRequiredError>(error)
        .map(|e| e.www_authenticate_header.as_str())
        .or_else(|| {
            found_in::<InsufficientScopeError>(error).map(|e| e.www_authenticate_header.as_str())
        })
}

/// The scopes a refusal for want of scope asks for (its `insufficient_scope` error's
/// `scope`), found along its chain of sources; `None` when it is not one.
pub(crate) fn insufficient_scope_in(
    error: &(dyn std::error::Error + 'static),
) -> Option<(String, Option<String>)> {
    found_in::<InsufficientScopeError>(error)
        .map(|e| (e.www_authenticate_header.clone(), e.required_scope.clone()))
}

/// The server's `WWW-Authenticate` challenge to a client without tokens: from the
/// handshake, or — a server may take the handshake unauthenticated and guard what comes
/// after — from a `tools/list`. `None` when it challenged neither.
pub(crate) async fn challenge(url: &str) -> Option<String> {
    use rmcp::ServiceExt as _;
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url);
    let within = Duration::from_secs(30);
    match tokio::time::timeout(within, ().serve(transport)).await {
        Ok(Ok(client)) => {
            let listed = tokio::time::timeout(within, client.list_tools(None)).await;
            let _ = client.cancel().await;
            match listed {
                Ok(Err(rmcp::ServiceError::TransportSend(e))) => {
                    challenge_in(e.error.as_ref()).map(str::to_owned)
                }
                _ => None,
            }
        }
        Ok(Err(e)) => e.auth_challenge().map(str::to_owned),
        Err(_) => None,
    }
}

/// `granted` and then those of `more` (space-separated) not among them.
fn union(granted: &[String], more: &str) -> Vec<String> {
    let mut all = granted.to_vec();
    for scope in more.split_whitespace() {
        if !all.iter().any(|s| s == scope) {
            all.push(scope.to_owned());
        }
    }
    all
}

/// Authorizes claij again with the server at `url`, which refused a request for want of
/// scope with `challenge` (its `WWW-Authenticate`), naming `scope`: for the scopes already
/// granted and those, as the client that holds the tokens `file` keeps for `url` (its
/// secret, for a confidential client, from `client`).
pub async fn step_up(
    url: &str,
    file: &CredentialsFile,
    client: &ClientIdentity,
    consent: Consent,
    challenge: &str,
    scope: Option<&str>,
) -> Result<(), McpError> {
    let more = scope
        .map(str::to_owned)
        .or_else(|| challenge_scope(challenge, url))
        .unwrap_or_default();
    widen(
        url,
        file,
        client,
        consent,
        &more,
        Some(challenge.to_owned()),
    )
    .await
}

/// The `scope` parameter of a `WWW-Authenticate` challenge of the server at `url`.
fn challenge_scope(challenge: &str, url: &str) -> Option<String> {
    let base = url::Url::parse(url).ok()?;
    rmcp::transport::auth::WWWAuthenticateParams::parse(challenge, &base).scope
}

/// Authorizes for the scopes granted so far to the client that holds `url`'s tokens, and
/// `more`; that client asks again (when `client` names none).
pub(crate) async fn widen(
    url: &str,
    file: &CredentialsFile,
    client: &ClientIdentity,
    consent: Consent,
    more: &str,
    challenge: Option<String>,
) -> Result<(), McpError> {
    let stored = file.read().map_err(|m| auth_failed(url, m))?.remove(url);
    let granted = stored
        .as_ref()
        .map(|c| c.granted_scopes.clone())
        .unwrap_or_default();
    let mut client = client.clone();
    if let Some(stored) = &stored
        && client.client_id.is_none()
        && client.metadata_url.is_none()
    {
        // A client ID metadata document's URL is an https client id.
        if stored.client_id.starts_with("https://") {
            client.metadata_url = Some(stored.client_id.clone());
        } else {
            client.client_id = Some(stored.client_id.clone());
        }
    }
    authorize(
        url,
        file,
        &client,
        consent,
        union(&granted, more),
        challenge,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_up_asks_for_the_granted_scopes_and_those_the_challenge_names() {
        let challenge = r#"Bearer scope="mcp:basic mcp:write", resource_metadata="http://x/.well-known/oauth-protected-resource/mcp", error="insufficient_scope""#;
        assert_eq!(
            challenge_scope(challenge, "http://x/mcp").as_deref(),
            Some("mcp:basic mcp:write")
        );
        assert_eq!(
            challenge_scope(r#"Bearer error="insufficient_scope""#, "http://x/mcp"),
            None
        );
        assert_eq!(
            union(
                &["mcp:basic".to_owned(), "files".to_owned()],
                "mcp:basic  mcp:write"
            ),
            ["mcp:basic", "files", "mcp:write"]
        );
        assert!(union(&[], " ").is_empty());
    }
}
