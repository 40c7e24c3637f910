//! The MCP client of a command: one for the whole command (its connections shared by every
//! engine the command assembles, see [`crate::app`]), registered in each engine's registry
//! (the `mcp` action and the `mcp:…` schemas), connected to a document's servers once it
//! is loaded, shut down (processes reaped) before the process exits. Servers' sampling
//! requests during a run's call are answered by the model layer of the engine that made
//! the call (its configuration, its run's model, its tape); their elicitation requests ask
//! at the terminal.

use std::sync::Arc;

use claij_core::Fsm;
use claij_engine::{ActionRegistry, BoxFuture, Meter};
use claij_llm::{Decoding, LlmLayer, TextRequest};
use claij_mcp::{
    Caller, ClientHooks, HumanElicitation, McpClient, SamplingHandler, SamplingRequest,
    sampling_result,
};
use serde_json::Value;

/// A command's MCP client.
#[derive(Debug, Clone)]
pub(crate) struct Mcp {
    client: Arc<McpClient>,
}

impl Mcp {
    /// A client offering servers sampling when given `layer` (which answers the sampling
    /// requests no engine's call is waiting on), and elicitation at the terminal.
    pub(crate) fn new(layer: Option<Arc<LlmLayer>>) -> Mcp {
        Mcp {
            client: McpClient::new(ClientHooks {
                sampling: layer
                    .map(|layer| Arc::new(ModelSampling { layer }) as Arc<dyn SamplingHandler>),
                elicitation: Some(Arc::new(HumanElicitation::terminal())),
            }),
        }
    }

    /// Adds the `mcp` action and the `mcp:…` schema provider to `registry`; `layer` (the
    /// model layer of the engine `registry` is for) answers the sampling requests servers
    /// make during the action's calls.
    pub(crate) fn register(&self, registry: &mut ActionRegistry, layer: &Arc<LlmLayer>) {
        let sampling = Arc::new(ModelSampling {
            layer: layer.clone(),
        });
        if let Err(e) = claij_mcp::register_answering_sampling(registry, &self.client, sampling) {
            note!("claij: the MCP client could not be registered: {e}");
        }
    }

    /// Adds the `mcp` action and the `mcp:…` schema provider to `registry`, for reading
    /// documents (no engine runs them).
    pub(crate) fn register_for_reading(&self, registry: &mut ActionRegistry) {
        if let Err(e) = claij_mcp::register(registry, &self.client) {
            note!("claij: the MCP client could not be registered: {e}");
        }
    }

    /// Records the listings of the servers it connects on `cassette`, or, replaying,
    /// takes them from it and starts none (see `McpClient::set_cassette`).
    pub(crate) fn set_cassette(&self, cassette: Arc<dyn claij_engine::Cassette>) {
        self.client.set_cassette(cassette);
    }

    /// Starts the servers `fsm` declares (none: nothing to do); an API client's
    /// document's are refused (see [`connect_governed`](Self::connect_governed)).
    pub(crate) async fn connect(&self, fsm: &Fsm) -> Result<(), claij_mcp::McpError> {
        self.connect_governed(fsm, &claij_engine::Policy::nothing())
            .await
    }

    /// Starts the servers `fsm` declares as its owner may reach them by `policy`: an API
    /// client's document on connections of its own (see `claij_mcp::client`).
    pub(crate) async fn connect_governed(
        &self,
        fsm: &Fsm,
        policy: &claij_engine::Policy,
    ) -> Result<(), claij_mcp::McpError> {
        if fsm.servers.is_empty() {
            return Ok(());
        }
        self.client.connect_document(fsm, policy).await
    }

    /// Shuts every server down.
    pub(crate) async fn shutdown(&self) {
        self.client.shutdown().await;
    }
}

/// Answers servers' sampling requests with a model layer: the asking state's
/// `config.model` when it has one, else the first of the server's model hints that is a
/// configured model, else the run's model, the command's or the default
/// ([`LlmLayer::for_run`]).
struct ModelSampling {
    layer: Arc<LlmLayer>,
}

impl SamplingHandler for ModelSampling {
    fn create_message<'a>(
        &'a self,
        server: &'a str,
        caller: Option<&'a Caller>,
        request: Value,
    ) -> BoxFuture<'a, Result<Value, String>> {
        Box::pin(async move {
            let layer = &self.layer;
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
                        run_model: caller
                            .and_then(|c| c.info["model"].as_str())
                            .map(str::to_owned),
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
