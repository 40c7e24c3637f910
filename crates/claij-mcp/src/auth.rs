//! OAuth for HTTP MCP servers that require authorization.
//!
//! [`login`] runs the authorization-code flow with PKCE, as the MCP specification has it
//! and rmcp's `OAuthState` carries it out: the server's 401 challenge, the protected
//! resource's and the authorization server's metadata, the client registered dynamically,
//! the person's consent (in a browser, sent back to a loopback address; or, with
//! [`Consent::Headless`], the authorization URL followed without one, for authorization
//! servers that grant at once), the code exchanged for tokens. The tokens are kept in a
//! [`CredentialsFile`] (owner-only), one entry per server URL; every later connection to
//! that URL sends them, refreshed as they expire.
//!
//! claij asks for the least the server names: the scopes of its challenge (a server may
//! let the handshake through and challenge the first request: [`login`] tries
//! `tools/list` to see), else those its protected resource metadata lists, else none.
//! When a request is later refused for want of scope (403 `insufficient_scope`),
//! [`step_up`] authorizes again, as the same client, for the scopes already granted and
//! those the server asked for.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::auth::{
    AuthClient, AuthError, AuthorizationCallback, AuthorizationManager, AuthorizationRequest,
    ClientCredentialsConfig, CredentialStore, OAuthState, StoredCredentials,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

pub use crate::assertion::{ClientKey, SigningAlgorithm};
use crate::error::McpError;

/// The name claij registers itself under with authorization servers.
const CLIENT_NAME: &str = "claij";

/// How long a person has to consent in a browser.
const CONSENT_TIMEOUT: Duration = Duration::from_secs(300);

/// Where the tokens of HTTP MCP servers are kept: a JSON object from server URL to its
/// credentials, readable and writable by its owner only.
#[derive(Debug, Clone)]
pub struct CredentialsFile {
    path: PathBuf,
}

impl CredentialsFile {
    /// The file at `path`.
    pub fn at(path: impl Into<PathBuf>) -> Self {
        CredentialsFile { path: path.into() }
    }

    /// `$CLAIJ_MCP_CREDENTIALS`, else `mcp-credentials.json` in claij's data folder
    /// (`$XDG_DATA_HOME/claij`, else `~/.local/share/claij`).
    pub fn default_location() -> Self {
        match std::env::var_os("CLAIJ_MCP_CREDENTIALS") {
            Some(path) if !path.is_empty() => Self::at(path),
            _ => Self::at(
                claij_core::data_home()
                    .unwrap_or_default()
                    .join("mcp-credentials.json"),
            ),
        }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> Result<BTreeMap<String, StoredCredentials>, String> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| format!("{} is not a credentials file: {e}", self.path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(e) => Err(format!("cannot read {}: {e}", self.path.display())),
        }
    }

    /// Writes `all` to a file beside it, owner-only, then moves it in place: a crash
    /// leaves the old file or the new, never half of one.
    fn write(&self, all: &BTreeMap<String, StoredCredentials>) -> Result<(), String> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let fail = |e: std::io::Error| format!("cannot write {}: {e}", self.path.display());
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(fail)?;
        }
        let text = serde_json::to_vec_pretty(all).map_err(|e| e.to_string())?;
        let temporary = self.path.with_extension("json.tmp");
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temporary)
            .map_err(fail)?;
        file.write_all(&text).map_err(fail)?;
        file.sync_all().map_err(fail)?;
        std::fs::rename(&temporary, &self.path).map_err(fail)
    }

    /// Whether the file holds credentials for the server at `url`.
    pub fn has(&self, url: &str) -> bool {
        self.read().is_ok_and(|all| all.contains_key(url))
    }

    /// Forgets the server at `url`; whether it was there.
    pub fn forget(&self, url: &str) -> Result<bool, McpError> {
        let mut all = self.read().map_err(|m| auth_failed(url, m))?;
        let was = all.remove(url).is_some();
        if was {
            self.write(&all).map_err(|m| auth_failed(url, m))?;
        }
        Ok(was)
    }

    /// The credential store of one server, for rmcp's authorization manager.
    fn store(&self, url: &str) -> ServerCredentials {
        ServerCredentials {
            file: self.clone(),
            url: url.to_owned(),
            lock: Arc::new(tokio::sync::Mutex::new(())),
        }
    }
}

/// One server's entry of a [`CredentialsFile`].
struct ServerCredentials {
    file: CredentialsFile,
    url: String,
    /// Read-modify-write of the file, one at a time in this process.
    lock: Arc<tokio::sync::Mutex<()>>,
}

fn store_error(message: String) -> AuthError {
    AuthError::InternalError(message)
}

#[async_trait::async_trait]
impl CredentialStore for ServerCredentials {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let _held = self.lock.lock().await;
        Ok(self.file.read().map_err(store_error)?.remove(&self.url))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let _held = self.lock.lock().await;
        let mut all = self.file.read().map_err(store_error)?;
        all.insert(self.url.clone(), credentials);
        self.file.write(&all).map_err(store_error)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        let _held = self.lock.lock().await;
        let mut all = self.file.read().map_err(store_error)?;
        if all.remove(&self.url).is_some() {
            self.file.write(&all).map_err(store_error)?;
        }
        Ok(())
    }
}

fn auth_failed(url: &str, message: impl std::fmt::Display) -> McpError {
    McpError::Auth {
        url: url.to_owned(),
        message: message.to_string(),
    }
}

/// Who claij is to the authorization server. By default, a client registered on the spot
/// (dynamic client registration).
#[derive(Clone, Default)]
pub struct ClientIdentity {
    /// A client registered beforehand with the authorization server.
    pub client_id: Option<String>,
    /// Its secret (a confidential client).
    pub client_secret: Option<String>,
    /// The URL of a client ID metadata document to use as the client id, where the
    /// authorization server takes them (instead of registering).
    pub metadata_url: Option<String>,
}

impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[REDACTED]"),
            )
            .field("metadata_url", &self.metadata_url)
            .finish()
    }
}

/// How the person's consent is obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consent {
    /// The authorization URL is printed (on stderr) for the person to open in a browser;
    /// the authorization server sends the browser back to a loopback port of this
    /// process, for up to 5 minutes.
    Browser,
    /// The authorization URL is followed without a browser, its redirect read for the
    /// code: for authorization servers that grant at once (development servers, test
    /// suites).
    Headless,
}

/// The `WWW-Authenticate` challenge an HTTP error carries (a 401, or a 403 for want of
/// scope), found along its chain of sources.
pub(crate) fn challenge_in<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a str> {
    use rmcp::transport::streamable_http_client::{AuthRequiredError, InsufficientScopeError};
    let mut source = Some(error);
    while let Some(current) = source {
        if let Some(e) = current.downcast_ref::<AuthRequiredError>() {
            return Some(&e.www_authenticate_header);
        }
        if let Some(e) = current.downcast_ref::<InsufficientScopeError>() {
            return Some(&e.www_authenticate_header);
        }
        source = current.source();
    }
    None
}

/// The scopes a refusal for want of scope asks for (its `insufficient_scope` error's
/// `scope`), found along its chain of sources; `None` when it is not one.
pub(crate) fn insufficient_scope_in(
    error: &(dyn std::error::Error + 'static),
) -> Option<(String, Option<String>)> {
    use rmcp::transport::streamable_http_client::InsufficientScopeError;
    let mut source = Some(error);
    while let Some(current) = source {
        if let Some(e) = current.downcast_ref::<InsufficientScopeError>() {
            return Some((e.www_authenticate_header.clone(), e.required_scope.clone()));
        }
        source = current.source();
    }
    None
}

/// The server's `WWW-Authenticate` challenge to a client without tokens: from the
/// handshake, or — a server may take the handshake unauthenticated and guard what comes
/// after — from a `tools/list`. `None` when it challenged neither.
async fn challenge(url: &str) -> Option<String> {
    use rmcp::ServiceExt as _;
    super::handshake::install_crypto_provider();
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

/// Authorizes claij with the server at `url`, as `client`, and keeps the tokens in
/// `file`. The scopes asked for are those the server names (see the module's text);
/// `more_scopes` (space-separated), when given, are asked for too, with those already
/// granted to claij's client for `url` — which is then the client that asks.
pub async fn login(
    url: &str,
    file: &CredentialsFile,
    client: &ClientIdentity,
    consent: Consent,
    more_scopes: Option<&str>,
) -> Result<(), McpError> {
    match more_scopes.filter(|s| !s.trim().is_empty()) {
        None => {
            let challenge = challenge(url).await;
            authorize(url, file, client, consent, Vec::new(), challenge).await
        }
        Some(more) => {
            let challenge = challenge(url).await;
            widen(url, file, client, consent, more, challenge).await
        }
    }
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
        .or_else(|| challenge_scope(challenge))
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

/// The `scope` parameter of a `WWW-Authenticate` challenge.
fn challenge_scope(challenge: &str) -> Option<String> {
    let at = challenge.find("scope=\"")? + "scope=\"".len();
    let rest = &challenge[at..];
    Some(rest[..rest.find('"')?].to_owned())
}

/// Authorizes for the scopes granted so far to the client that holds `url`'s tokens, and
/// `more`; that client asks again (when `client` names none).
async fn widen(
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

/// The authorization-code flow for `scopes` (none: as the server names them), seeded
/// with the server's `challenge` when there is one.
async fn authorize(
    url: &str,
    file: &CredentialsFile,
    client: &ClientIdentity,
    consent: Consent,
    scopes: Vec<String>,
    challenge: Option<String>,
) -> Result<(), McpError> {
    let fail = |e: AuthError| auth_failed(url, e);
    let mut manager = AuthorizationManager::new(url).await.map_err(fail)?;
    manager.set_credential_store(file.store(url));
    let mut oauth = OAuthState::Unauthorized(manager);
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

/// Authorizes claij with the server at `url` as a machine, with no person: the OAuth
/// client credentials grant, with a client registered beforehand (its id and secret).
/// The tokens are kept in `file`; when they expire, log in again.
pub async fn login_as_client(
    url: &str,
    file: &CredentialsFile,
    client_id: &str,
    client_secret: &str,
) -> Result<(), McpError> {
    super::handshake::install_crypto_provider();
    let fail = |e: AuthError| auth_failed(url, e);
    let mut manager = AuthorizationManager::new(url).await.map_err(fail)?;
    manager.set_credential_store(file.store(url));
    let mut oauth = OAuthState::Unauthorized(manager);
    oauth
        .authenticate_client_credentials(ClientCredentialsConfig::ClientSecret {
            client_id: client_id.to_owned(),
            client_secret: client_secret.to_owned(),
            scopes: Vec::new(),
            resource: Some(url.to_owned()),
        })
        .await
        .map_err(fail)
}

/// Authorizes claij with the server at `url` as a machine whose proof is a private key:
/// the client credentials grant with a private-key JWT (RFC 7523), for a client
/// registered beforehand with its public key. The tokens are kept in `file`; when they
/// expire, log in again.
pub async fn login_with_key(
    url: &str,
    file: &CredentialsFile,
    client_id: &str,
    key: &ClientKey,
) -> Result<(), McpError> {
    super::handshake::install_crypto_provider();
    let fail = |e: AuthError| auth_failed(url, e);
    let manager = AuthorizationManager::new(url).await.map_err(fail)?;
    let metadata = manager.resolve_metadata().await.map_err(fail)?.metadata;
    let methods = metadata
        .additional_fields
        .get("token_endpoint_auth_methods_supported")
        .and_then(serde_json::Value::as_array);
    if let Some(methods) = methods
        && !methods.iter().any(|m| m == "private_key_jwt")
    {
        return Err(auth_failed(
            url,
            format!(
                "the authorization server does not take private-key JWTs; it takes: {}",
                serde_json::Value::Array(methods.clone())
            ),
        ));
    }
    let audience = metadata
        .issuer
        .clone()
        .unwrap_or_else(|| metadata.token_endpoint.clone());
    let now = std::time::SystemTime::now();
    let assertion = key
        .assertion(client_id, &audience, now)
        .map_err(|m| auth_failed(url, m))?;
    let body = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "client_credentials")
        .append_pair(
            "client_assertion_type",
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
        )
        .append_pair("client_assertion", &assertion)
        .append_pair("resource", url)
        .finish();
    let answer = reqwest::Client::new()
        .post(&metadata.token_endpoint)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| auth_failed(url, format!("the token endpoint did not answer: {e}")))?;
    let status = answer.status();
    let bytes = answer
        .bytes()
        .await
        .map_err(|e| auth_failed(url, format!("the token endpoint's answer broke off: {e}")))?;
    let answered: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    if !status.is_success() {
        let why = ["error", "error_description"]
            .iter()
            .filter_map(|k| answered[k].as_str())
            .collect::<Vec<_>>()
            .join(": ");
        return Err(auth_failed(
            url,
            format!("the token endpoint refused the client ({status}): {why}"),
        ));
    }
    let granted = answered["scope"]
        .as_str()
        .map(|s| s.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    let token: rmcp::transport::auth::OAuthTokenResponse = serde_json::from_value(answered)
        .map_err(|e| {
            auth_failed(
                url,
                format!("the token endpoint's answer is not a token: {e}"),
            )
        })?;
    let received = now
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .ok();
    let credentials = StoredCredentials::new(client_id.to_owned(), Some(token), granted, received)
        .with_issuer(metadata.issuer.clone());
    file.store(url).save(credentials).await.map_err(fail)
}

/// Follows `authorization_url` without a browser: its redirect carries the code.
async fn follow(authorization_url: &str) -> Result<AuthorizationCallback, String> {
    super::handshake::install_crypto_provider();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| e.to_string())?;
    let answer = http
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

/// An HTTP client that sends the tokens `file` keeps for the server at `url` (refreshing
/// them as they expire), when it keeps any.
pub(crate) async fn authorized_client(
    url: &str,
    file: &CredentialsFile,
) -> Result<Option<AuthClient<reqwest::Client>>, McpError> {
    if !file.has(url) {
        return Ok(None);
    }
    super::handshake::install_crypto_provider();
    let fail = |e: AuthError| auth_failed(url, e);
    let mut manager = AuthorizationManager::new(url).await.map_err(fail)?;
    manager.set_credential_store(file.store(url));
    if !manager.initialize_from_store().await.map_err(fail)? {
        return Ok(None);
    }
    Ok(Some(AuthClient::new(reqwest::Client::default(), manager)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials(client_id: &str) -> StoredCredentials {
        // As rmcp keeps them: the JSON shape its store round-trips.
        match serde_json::from_value(serde_json::json!({
            "client_id": client_id,
            "token_response": {"access_token": "at-SECRET", "token_type": "bearer", "expires_in": 3600},
            "granted_scopes": ["mcp"],
            "token_received_at": 1_795_000_000u64,
        })) {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        }
    }

    #[tokio::test]
    async fn a_servers_credentials_are_kept_owner_only_apart_from_the_others_and_forgotten() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = CredentialsFile::at(dir.path().join("nested/mcp-credentials.json"));
        let (a, b) = ("http://127.0.0.1:1/mcp", "http://127.0.0.1:2/mcp");
        assert!(!file.has(a));
        file.store(a)
            .save(credentials("client-a"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        file.store(b)
            .save(credentials("client-b"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let loaded = file.store(a).load().await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(loaded.map(|c| c.client_id).as_deref(), Some("client-a"));
        let mode = std::fs::metadata(file.path()).map(|m| m.permissions().mode() & 0o777);
        assert_eq!(mode.ok(), Some(0o600), "owner only");
        assert!(format!("{:?}", file.store(a).load().await.ok().flatten()).contains("REDACTED"));
        assert_eq!(file.forget(a).ok(), Some(true));
        assert_eq!(file.forget(a).ok(), Some(false));
        assert!(!file.has(a) && file.has(b), "only a's entry went");
    }

    #[test]
    fn a_step_up_asks_for_the_granted_scopes_and_those_the_challenge_names() {
        let challenge = r#"Bearer scope="mcp:basic mcp:write", resource_metadata="http://x/.well-known/oauth-protected-resource/mcp", error="insufficient_scope""#;
        assert_eq!(
            challenge_scope(challenge).as_deref(),
            Some("mcp:basic mcp:write")
        );
        assert_eq!(
            challenge_scope(r#"Bearer error="insufficient_scope""#),
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

    #[tokio::test]
    async fn a_garbled_credentials_file_is_an_error_naming_it_and_is_left_alone() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("mcp-credentials.json");
        std::fs::write(&path, "{not json").unwrap_or_else(|e| panic!("{e}"));
        let file = CredentialsFile::at(&path);
        let error = match file
            .store("http://127.0.0.1:1/mcp")
            .save(credentials("c"))
            .await
        {
            Err(e) => e.to_string(),
            Ok(()) => panic!("saved over a garbled file"),
        };
        assert!(error.contains("mcp-credentials.json"), "{error}");
        assert_eq!(
            std::fs::read_to_string(&path).ok().as_deref(),
            Some("{not json")
        );
    }
}
