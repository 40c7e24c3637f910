//! `claij mcp …`: serve workflows as MCP tools, list what an MCP server offers, call one
//! of its tools, or authorize claij with one (and forget it again).

mod call;
mod serve;
mod tools;

use claij_mcp::auth::{ClientIdentity, ClientKey, Consent, CredentialsFile, SigningAlgorithm};

use crate::cli::McpCommand;

/// Runs a `claij mcp` subcommand.
pub(super) async fn mcp(app: &crate::app::App, command: McpCommand) -> u8 {
    match command {
        McpCommand::Serve(args) => serve::serve(app, args).await,
        McpCommand::Tools { url, json, command } => tools::tools(url, json, command).await,
        McpCommand::Call {
            tool,
            args,
            url,
            elicit,
            json,
            headless,
            command,
        } => {
            let spec = match tools::server_spec(url, command) {
                Some(spec) => spec,
                None => return crate::EXIT_USAGE,
            };
            let call = call::ToolCall {
                tool: &tool,
                args: args.as_deref(),
                elicit: elicit.as_deref(),
                as_json: json,
                consent: consent(headless),
            };
            call::call(spec, &call).await
        }
        McpCommand::Login {
            url,
            headless,
            client_id,
            client_secret_file,
            client_credentials,
            client_metadata_url,
            scope,
            private_key_file,
            signing_algorithm,
        } => {
            // clap: a key file goes with --client-credentials, which needs --client-id.
            if let (Some(path), Some(id)) = (&private_key_file, &client_id) {
                return login_with_key(&url, id, path, &signing_algorithm).await;
            }
            let client_secret = match client_secret(client_secret_file.as_deref()) {
                Ok(secret) => secret,
                Err(message) => {
                    note!("claij: {message}");
                    return crate::EXIT_USAGE;
                }
            };
            let client = ClientIdentity {
                client_id,
                client_secret,
                metadata_url: client_metadata_url,
            };
            login(
                &url,
                &client,
                headless,
                client_credentials,
                scope.as_deref(),
            )
            .await
        }
        McpCommand::Logout { url } => logout(&url),
    }
}

/// How the person consents: in a browser, or (`--headless`) not at all.
fn consent(headless: bool) -> Consent {
    match headless {
        true => Consent::Headless,
        false => Consent::Browser,
    }
}

/// The client secret: from `file` (its first line), else `$CLAIJ_MCP_CLIENT_SECRET`.
fn client_secret(file: Option<&std::path::Path>) -> Result<Option<String>, String> {
    let secret = match file {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the client secret from {}: {e}", path.display()))?
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned(),
        None => std::env::var("CLAIJ_MCP_CLIENT_SECRET").unwrap_or_default(),
    };
    Ok((!secret.is_empty()).then_some(secret))
}

/// `claij mcp login`.
async fn login(
    url: &str,
    client: &ClientIdentity,
    headless: bool,
    as_machine: bool,
    scope: Option<&str>,
) -> u8 {
    let file = CredentialsFile::default_location();
    let done = match (as_machine, &client.client_id, &client.client_secret) {
        (true, Some(id), Some(secret)) => {
            claij_mcp::auth::login_as_client(url, &file, id, secret).await
        }
        (true, _, _) => {
            note!(
                "claij: --client-credentials needs the client's secret: --client-secret-file FILE or $CLAIJ_MCP_CLIENT_SECRET"
            );
            return crate::EXIT_USAGE;
        }
        (false, _, _) => claij_mcp::auth::login(url, &file, client, consent(headless), scope).await,
    };
    logged_in(url, &file, done)
}

/// What a login says: where the tokens went, or why there are none.
fn logged_in(url: &str, file: &CredentialsFile, done: Result<(), claij_mcp::McpError>) -> u8 {
    match done {
        Ok(()) => {
            note!(
                "claij: authorized with {url}; tokens kept in {}",
                file.path().display()
            );
            crate::EXIT_OK
        }
        Err(e) => {
            note!("claij: {e}");
            crate::EXIT_USAGE
        }
    }
}

/// `claij mcp login --client-credentials --private-key-file`.
async fn login_with_key(url: &str, client_id: &str, path: &std::path::Path, algorithm: &str) -> u8 {
    let key = algorithm.parse::<SigningAlgorithm>().and_then(|algorithm| {
        let pem = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        ClientKey::from_pem(&pem, algorithm).map_err(|e| format!("{}: {e}", path.display()))
    });
    let key = match key {
        Ok(key) => key,
        Err(message) => {
            note!("claij: {message}");
            return crate::EXIT_USAGE;
        }
    };
    let file = CredentialsFile::default_location();
    let done = claij_mcp::auth::login_with_key(url, &file, client_id, &key).await;
    logged_in(url, &file, done)
}

/// `claij mcp logout`.
fn logout(url: &str) -> u8 {
    let file = CredentialsFile::default_location();
    match file.forget(url) {
        Ok(true) => {
            note!("claij: forgot the tokens of {url}");
            crate::EXIT_OK
        }
        Ok(false) => {
            note!(
                "claij: no tokens kept for {url} (in {})",
                file.path().display()
            );
            crate::EXIT_OK
        }
        Err(e) => {
            note!("claij: {e}");
            crate::EXIT_USAGE
        }
    }
}
