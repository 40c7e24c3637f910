//! # claij-llm
//!
//! The model layer (for users: docs/MODELS.md; its modules are listed below):
//! providers behind one [`Provider`] trait (any OpenAI-compatible API, Anthropic
//! Messages, Google Gemini, the embedded model), named providers and models in
//! `claij.toml` ([`config`]), the `llm` action ([`LlmAction`]), output enforcement
//! ([`enforce`]), transient-failure retries ([`retry`]), usage and cost, record/replay
//! ([`record`]), and free-text completions for MCP sampling ([`text`]).
//!
//! Register it with [`register`]:
//!
//! ```no_run
//! # use std::sync::Arc;
//! let mut registry = claij_engine::ActionRegistry::with_builtins();
//! let layer = claij_llm::LlmLayer::discover(None).expect("config");
//! claij_llm::register(&mut registry, Arc::new(layer));
//! ```
//!
//! # Modules
//!
//! - `provider`: the `Provider` trait (one call, no retries; its capabilities, token
//!   counts and context room) and `ProviderError`.
//! - `request`: `ModelRequest` and `ModelResponse`, free of any wire format.
//! - `providers`: the HTTP provider with one module per wire format (OpenAI-compatible,
//!   Anthropic, Gemini: pure build and parse functions) and the embedded model.
//! - `http`: the shared HTTP client, streamed answers, failure classification.
//! - `config`: `claij.toml`: providers, models, prices, default and fallback models.
//! - `secret`: API keys that print `<redacted>` and are scrubbed from messages.
//! - `layer`: `LlmLayer`, the configuration made live: providers built, models resolved,
//!   the preferred and default models, record and replay.
//! - `action`: `LlmAction`, the `llm` action: model and mode chosen, prompts fitted,
//!   the call, the answer extracted, usage and cost.
//! - `enforce`: enforcement modes and the enforcement a mode sends; a tool call to an
//!   event.
//! - `lower`: a transition's schema lowered to what a provider's structured output
//!   enforces, with notes of what was relaxed.
//! - `extract`: the one JSON object of an answer.
//! - `retry`: transient failures retried with backoff, jitter and `Retry-After`.
//! - `record`: tapes: every exchange recorded to a file, replayed by request digest.
//! - `text`: free-text completions (MCP sampling, summaries) outside any state's schemas.
//! - `metered`: every model call under the run's budget, through the attempt's `Meter`.
//! - `summary`: the summary a state's model writes as it leaves the state.
//! - `tokens`: prompt token counts (the model's own tokenizer, else tiktoken) and fitting
//!   a projection to a budget.
//! - `vote`: `vote: k`, a route decided by the majority of k answers.

pub mod action;
pub mod config;
pub mod enforce;
pub mod extract;
pub mod http;
pub mod layer;
pub mod lower;
pub mod metered;
pub mod provider;
pub mod providers;
pub mod record;
pub mod request;
pub mod retry;
pub mod secret;
mod summary;
pub mod text;
pub mod tokens;
pub mod vote;

use std::sync::Arc;

pub use action::{LlmAction, LlmStateConfig, ToolChoice};
pub use config::LlmConfig;
pub use enforce::Mode;
pub use layer::{LlmLayer, NO_MODEL_CONFIGURED, ResolvedModel};
pub use provider::{Capabilities, Provider, ProviderError};
pub use record::Tape;
pub use request::{Decoding, Enforcement, ModelRequest, ModelResponse, Tokens, ToolSpec};
pub use secret::Secret;
pub use text::{TextAnswer, TextRequest};

/// Registers the `llm` action over `layer` in `registry`, replacing the placeholder.
pub fn register(registry: &mut claij_engine::ActionRegistry, layer: Arc<LlmLayer>) {
    // The config schema is a constant, checked by this crate's tests.
    if let Err(e) = registry.register("llm", Arc::new(LlmAction::new(layer))) {
        tracing::error!("the `llm` config schema does not compile: {e}");
    }
}
