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
//! those the server asked for ([`scopes`]). A machine logs in with no person through the
//! client credentials grant: with a secret ([`login_as_client`]) or a private key
//! ([`login_with_key`], a private-key JWT: `assertion`).

mod assertion;
mod consent;
pub mod scopes;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rmcp::transport::auth::{
    AuthClient, AuthError, AuthorizationManager, ClientCredentialsConfig, CredentialStore,
    OAuthState, StoredCredentials,
};

use crate::error::McpError;
pub use assertion::{ClientKey, SigningAlgorithm, login_with_key};
pub use scopes::step_up;

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
    pub(crate) fn store(&self, url: &str) -> ServerCredentials {
        ServerCredentials {
            file: self.clone(),
            url: url.to_owned(),
            lock: Arc::new(tokio::sync::Mutex::new(())),
        }
    }
}

/// One server's entry of a [`CredentialsFile`].
pub(crate) struct ServerCredentials {
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

pub(crate) fn auth_failed(url: &str, message: impl std::fmt::Display) -> McpError {
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
    let challenge = scopes::challenge(url).await;
    match more_scopes.filter(|s| !s.trim().is_empty()) {
        None => consent::authorize(url, file, client, consent, Vec::new(), challenge).await,
        Some(more) => scopes::widen(url, file, client, consent, more, challenge).await,
    }
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
    let mut oauth = OAuthState::Unauthorized(manager(url, file).await?);
    oauth
        .authenticate_client_credentials(ClientCredentialsConfig::ClientSecret {
            client_id: client_id.to_owned(),
            client_secret: client_secret.to_owned(),
            scopes: Vec::new(),
            resource: Some(url.to_owned()),
        })
        .await
        .map_err(|e| auth_failed(url, e))
}

/// An HTTP client that sends the tokens `file` keeps for the server at `url` (refreshing
/// them as they expire), when it keeps any: `client` (default: reqwest's) with them.
pub(crate) async fn authorized_client(
    url: &str,
    file: &CredentialsFile,
    client: Option<reqwest::Client>,
) -> Result<Option<AuthClient<reqwest::Client>>, McpError> {
    if !file.has(url) {
        return Ok(None);
    }
    let mut manager = manager(url, file).await?;
    if !manager
        .initialize_from_store()
        .await
        .map_err(|e| auth_failed(url, e))?
    {
        return Ok(None);
    }
    Ok(Some(AuthClient::new(client.unwrap_or_default(), manager)))
}

/// rmcp's authorization manager for the server at `url`, keeping its tokens in `file`.
pub(crate) async fn manager(
    url: &str,
    file: &CredentialsFile,
) -> Result<AuthorizationManager, McpError> {
    let mut manager = AuthorizationManager::new(url)
        .await
        .map_err(|e| auth_failed(url, e))?;
    manager.set_credential_store(file.store(url));
    Ok(manager)
}

/// An HTTP client that follows no redirect: what it sends (a code's redirect read, a
/// client's proof) goes to the address asked for and nowhere else.
pub(crate) fn without_redirects() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| e.to_string())
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
