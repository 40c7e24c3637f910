//! # claij-llm
//!
//! The model layer (for users: docs/MODELS.md; module by module: docs/ARCHITECTURE.md):
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

use std::sync::Arc;

pub use action::{LlmAction, LlmStateConfig};
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
