//! The authorization-code flow with PKCE through rmcp's `OAuthState`, and the person's
//! consent: in a browser that comes back to a loopback port, or headless (the
//! authorization URL followed, its redirect read).

use std::time::Duration;

use rmcp::transport::auth::{AuthError, AuthorizationCallback, AuthorizationRequest, OAuthState};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::{ClientIdentity, Consent, CredentialsFile, auth_failed};
use crate::error::McpError;

/// The name claij registers itself under with authorization servers.
const CLIENT_NAME: &str = "claij";

/// How long a person has to consent in a browser.
const CONSENT_TIMEOUT: Duration = Duration::from_secs(300);

/// The authorization-code flow for `scopes` (none: as the server names them), seeded
/// with the server's `challenge` when there is one.
pub(crate) async fn authorize(
    url: &str,
    file: &CredentialsFile,
    client: &ClientIdentity,
    consent: Consent,
    scopes: Vec<String>,
    challenge: Option<String>,
) -> Result<(), McpError> {
    let fail = |e: AuthError| auth_failed(url, e);
    let mut oauth = OAuthState::Unauthorized(super::manager(url, file).await?);
    let listener = match consent {
        Consent::Browser => Some(
            tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|e| auth_failed(url, format!("cannot listen for the browser: {e}")))?,
        ),
        Consent::Headless => None,
    };
    let redirect_uri = match &listener {
        Some(l) => {
            let port = l.local_addr().map_err(|e| auth_failed(url, e))?.port();
            format!("http://127.0.0.1:{port}/callback")
        }
        None => "http://127.0.0.1:1/callback".to_owned(),
    };
    let mut request = AuthorizationRequest::new(redirect_uri)
        .with_client_name(CLIENT_NAME)
        .with_initial_scope_selection();
    if !scopes.is_empty() {
        request = request.with_scopes(scopes);
    }
    if let Some(id) = &client.client_id {
        request = request.with_preregistered_client(id.clone());
    }
    if let Some(secret) = &client.client_secret {
        request = request.with_client_secret(secret.clone());
    }
    if let Some(metadata) = &client.metadata_url {
        request = request.with_client_metadata_url(metadata.clone());
    }
    if let Some(challenge) = challenge {
        request = request.with_challenge(challenge);
    }
    oauth.start_authorization(request).await.map_err(fail)?;
    let authorization_url = oauth.get_authorization_url().await.map_err(fail)?;
    let callback = match listener {
        Some(listener) => {
            eprintln!(
                "claij: open this address in a browser to let claij use {url}:\n  {authorization_url}"
            );
            tokio::time::timeout(CONSENT_TIMEOUT, browser_callback(listener))
                .await
                .map_err(|_| auth_failed(url, "no answer from the browser within 5 minutes"))?
                .map_err(|m| auth_failed(url, m))?
        }
        None => follow(&authorization_url)
            .await
            .map_err(|m| auth_failed(url, m))?,
    };
    oauth
        .handle_callback_with_issuer(
            &callback.code,
            &callback.csrf_token,
            callback.issuer.as_deref(),
        )
        .await
        .map_err(fail)?;
    Ok(())
}

/// Follows `authorization_url` without a browser: its redirect carries the code.
async fn follow(authorization_url: &str) -> Result<AuthorizationCallback, String> {
    let answer = super::without_redirects()?
        .get(authorization_url)
        .send()
        .await
        .map_err(|e| format!("the authorization server did not answer: {e}"))?;
    let location = answer
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| {
            format!(
                "the authorization server answered {} without a redirect: it wants a person (drop --headless)",
                answer.status()
            )
        })?;
    AuthorizationCallback::from_redirect_url(location).map_err(|e| e.to_string())
}

/// Waits for the browser to come back to `listener` with the code; answers it a line.
async fn browser_callback(
    listener: tokio::net::TcpListener,
) -> Result<AuthorizationCallback, String> {
    loop {
        let (mut stream, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let mut head = vec![0u8; 8192];
        let n = stream.read(&mut head).await.unwrap_or(0);
        let head = String::from_utf8_lossy(&head[..n]);
        let target = head
            .lines()
            .next()
            .and_then(|line| line.split_whitespace().nth(1))
            .unwrap_or("/");
        if !target.starts_with("/callback") {
            let _ = stream
                .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                .await;
            continue;
        }
        let parsed = AuthorizationCallback::from_redirect_url(&format!("http://127.0.0.1{target}"));
        let body: &[u8] = match &parsed {
            Ok(_) => b"claij is authorized: you may close this page.",
            Err(_) => b"claij was not authorized (no code in the answer).",
        };
        let reply = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        let _ = stream.write_all(reply.as_bytes()).await;
        let _ = stream.write_all(body).await;
        return parsed.map_err(|e| e.to_string());
    }
}
