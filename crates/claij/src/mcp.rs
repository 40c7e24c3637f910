//! The MCP client of this process: one for every command, registered in every engine's
//! registry (the `mcp` action and the `mcp:…` schemas), connected to a document's servers
//! once it is loaded, shut down (processes reaped) before the process exits. Servers'
//! sampling requests are answered by the model layer of the run; their elicitation
//! requests ask at the terminal.

use std::sync::{Arc, OnceLock};

use claij_core::Fsm;
use claij_engine::{ActionRegistry, BoxFuture, Meter};
use claij_llm::{Decoding, LlmLayer, TextRequest};
use claij_mcp::{
    Caller, ClientHooks, HumanElicitation, McpClient, SamplingHandler, SamplingRequest,
    sampling_result,
};
use serde_json::Value;

fn client() -> &'static Arc<McpClient> {
    static CLIENT: OnceLock<Arc<McpClient>> = OnceLock::new();
    CLIENT.get_or_init(|| {
        McpClient::new(ClientHooks {
            sampling: Some(Arc::new(ModelSampling)),
            elicitation: Some(Arc::new(HumanElicitation::terminal())),
        })
    })
}

/// The model layer sampling requests go to: the first one an engine of this process was
/// built with (a process runs one command).
static SAMPLING_LAYER: OnceLock<Arc<LlmLayer>> = OnceLock::new();

/// Answers servers' sampling requests with the model layer: the asking state's
/// `config.model` when it has one, else the first of the server's model hints that is a
/// configured model, else the run's model or the default.
struct ModelSampling;

impl SamplingHandler for ModelSampling {
    fn create_message<'a>(
        &'a self,
        server: &'a str,
        caller: Option<&'a Caller>,
        request: Value,
    ) -> BoxFuture<'a, Result<Value, String>> {
        Box::pin(async move {
            let layer = SAMPLING_LAYER
                .get()
                .ok_or("this claij command runs no models")?;
            let asked = SamplingRequest::from_params(&request)?;
            let unmetered = Meter::unmetered();
            let state_model = caller
                .and_then(|c| c.info["config"]["model"].as_str())
                .map(str::to_owned);
            let model = state_model.or_else(|| {
                asked
                    .model_hints
                    .iter()
                    .find(|hint| layer.knows(hint))
                    .cloned()
            });
            let on_behalf_of = match caller.and_then(|c| c.info["state"].as_str()) {
                Some(state) => format!("{state} (sampling for `{server}`)"),
                None => format!("sampling for `{server}`"),
            };
            let answer = layer
                .complete_text(
                    TextRequest {
                        model,
                        messages: asked.messages,
                        decoding: Decoding {
                            temperature: asked.temperature,
                            max_tokens: asked.max_tokens,
                            ..Decoding::default()
                        },
                    },
                    &on_behalf_of,
                    caller.map_or(&unmetered, |c| &c.meter),
                    false,
                )
                .await?;
            Ok(sampling_result(&answer.text, &answer.model))
        })
    }
}

/// Adds the `mcp` action and the `mcp:…` schema provider to `registry`; `layer` answers
/// the servers' sampling requests.
pub(crate) fn register(registry: &mut ActionRegistry, layer: &Arc<LlmLayer>) {
    let _first_wins = SAMPLING_LAYER.set(layer.clone());
    if let Err(e) = claij_mcp::register(registry, client()) {
        note!("claij: the MCP client could not be registered: {e}");
    }
}

/// Starts the servers `fsm` declares (none: nothing to do); an API client's document's
/// are refused (see [`connect_governed`]).
pub(crate) async fn connect(fsm: &Fsm) -> Result<(), claij_mcp::McpError> {
    connect_governed(fsm, &claij_engine::Policy::nothing()).await
}

/// Starts the servers `fsm` declares as its owner may reach them by `policy`: an API
/// client's document on connections of its own (see `claij_mcp::client`).
pub(crate) async fn connect_governed(
    fsm: &Fsm,
    policy: &claij_engine::Policy,
) -> Result<(), claij_mcp::McpError> {
    if fsm.servers.is_empty() {
        return Ok(());
    }
    client().connect_document(fsm, policy).await
}

/// Shuts every server down.
pub(crate) async fn shutdown() {
    client().shutdown().await;
}
