//! `claij mcp call`: one tool call, from the shell.

use std::sync::Arc;

use claij_mcp::{
    ClientHooks, Connection, ElicitationHandler, HumanElicitation, Reply, ScriptedElicitation,
    ServerSpec,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::input::json_argument;
use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE};

/// `claij mcp call`: calls `tool` of the server `spec` with `args` (JSON, @FILE or -),
/// answering elicitations with `elicit` when given, else on the terminal.
pub(super) async fn call(
    spec: ServerSpec,
    tool: &str,
    args: Option<&str>,
    elicit: Option<&str>,
    as_json: bool,
) -> u8 {
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
    let connection = match Connection::connect("server", &spec, hooks).await {
        Ok(c) => c,
        Err(e) => {
            note!("claij: {e}");
            return EXIT_USAGE;
        }
    };
    let params = json!({"name": tool, "arguments": arguments});
    let exchange = connection
        .request("tools/call", params, &CancellationToken::new())
        .await;
    connection.shutdown().await;
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
