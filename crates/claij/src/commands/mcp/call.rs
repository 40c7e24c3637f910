//! `claij mcp call`: one tool call, from the shell.

use std::sync::Arc;

use claij_mcp::auth::{ClientIdentity, Consent, CredentialsFile};
use claij_mcp::{
    ClientHooks, Connection, ElicitationHandler, Exchange, HumanElicitation, McpError, Reply,
    ScriptedElicitation, ServerSpec,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::input::json_argument;
use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE};

/// What `claij mcp call` was asked to do.
pub(super) struct ToolCall<'a> {
    /// The tool.
    pub tool: &'a str,
    /// Its arguments (JSON, @FILE or -).
    pub args: Option<&'a str>,
    /// The answer to the server's elicitations, else they are asked on the terminal.
    pub elicit: Option<&'a str>,
    /// Print the whole result as JSON.
    pub as_json: bool,
    /// How consent is obtained when the server asks for more scope.
    pub consent: Consent,
}

/// `claij mcp call`: calls the tool of the server `spec`, answering elicitations as
/// asked; a refusal for want of scope is met by authorizing again, once.
pub(super) async fn call(spec: ServerSpec, call: &ToolCall<'_>) -> u8 {
    let ToolCall {
        tool,
        args,
        elicit,
        as_json,
        consent,
    } = *call;
    let arguments = match args.map(|a| json_argument("arguments", a)).transpose() {
        Ok(Some(Value::Object(map))) => Value::Object(map),
        Ok(None) => json!({}),
        Ok(Some(other)) => {
            note!("claij: the arguments are a JSON object, not {other}");
            return EXIT_USAGE;
        }
        Err(e) => {
            note!("claij: {e:#}");
            return EXIT_USAGE;
        }
    };
    let elicitation: Arc<dyn ElicitationHandler> = match elicit {
        None => Arc::new(HumanElicitation::terminal()),
        Some(text) => {
            let scripted = json_argument("elicitation answer", text)
                .map_err(|e| format!("{e:#}"))
                .and_then(ScriptedElicitation::new);
            match scripted {
                Ok(handler) => Arc::new(handler),
                Err(e) => {
                    note!("claij: --elicit: {e}");
                    return EXIT_USAGE;
                }
            }
        }
    };
    let hooks = ClientHooks {
        elicitation: Some(elicitation),
        ..ClientHooks::default()
    };
    let params = json!({"name": tool, "arguments": arguments});
    let mut exchange = call_once(&spec, &hooks, &params).await;
    if let Err(McpError::InsufficientScope {
        url,
        scope,
        challenge,
        ..
    }) = &exchange
    {
        note!(
            "claij: {url} asks for more scope to call `{tool}`{}: authorizing again",
            scope
                .as_deref()
                .map(|s| format!(" (`{s}`)"))
                .unwrap_or_default()
        );
        let client = ClientIdentity {
            client_secret: super::client_secret(None).unwrap_or_default(),
            ..ClientIdentity::default()
        };
        let file = CredentialsFile::default_location();
        let stepped =
            claij_mcp::auth::step_up(url, &file, &client, consent, challenge, scope.as_deref())
                .await;
        exchange = match stepped {
            Ok(()) => call_once(&spec, &hooks, &params).await,
            Err(e) => Err(e),
        };
    }
    let reply = match exchange {
        Ok(exchange) => exchange.reply,
        Err(e) => {
            note!("claij: {e}");
            return EXIT_USAGE;
        }
    };
    match reply {
        Reply::Result(result) => {
            let failed = result["isError"] == json!(true);
            let text = if as_json {
                serde_json::to_string_pretty(&result).unwrap_or_default()
            } else {
                content_text(&result)
            };
            // A reader that went away (`| head`) has nothing more to read.
            let _ = out!("{text}");
            if failed { EXIT_FAILED } else { EXIT_OK }
        }
        Reply::Error { code, message, .. } => {
            note!("claij: `{tool}` refused ({code}): {message}");
            EXIT_FAILED
        }
        Reply::Timeout(after) => {
            note!("claij: `{tool}` gave no answer within {after:?}; the call was cancelled");
            EXIT_FAILED
        }
    }
}

/// Connects to `spec`, calls `tools/call` with `params` and shuts the connection down.
async fn call_once(
    spec: &ServerSpec,
    hooks: &ClientHooks,
    params: &Value,
) -> Result<Exchange, McpError> {
    let connection = Connection::connect("server", spec, hooks.clone()).await?;
    let exchange = connection
        .request("tools/call", params.clone(), &CancellationToken::new())
        .await;
    connection.shutdown().await;
    exchange
}

/// A result's content as text: each text block as it is, other blocks as a line saying
/// what they are; the structured content, as JSON, when there is no text.
fn content_text(result: &Value) -> String {
    let blocks: Vec<String> = result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|block| match block["type"].as_str() {
            Some("text") => block["text"].as_str().unwrap_or_default().to_owned(),
            Some("resource_link") => format!("[resource {}]", block["uri"].as_str().unwrap_or("?")),
            Some("resource") => match block["resource"]["text"].as_str() {
                Some(text) => text.to_owned(),
                None => format!(
                    "[resource {}]",
                    block["resource"]["uri"].as_str().unwrap_or("?")
                ),
            },
            Some(kind) => format!(
                "[{kind} {}]",
                block["mimeType"].as_str().unwrap_or("without a type")
            ),
            None => block.to_string(),
        })
        .collect();
    if blocks.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        return serde_json::to_string_pretty(structured).unwrap_or_default();
    }
    blocks.join("\n")
}
