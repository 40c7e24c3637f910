//! claij's embedded local model: a GGUF file (SmolLM2-135M-Instruct, Qwen2.5-Coder, any
//! architecture llama.cpp runs) run in process by llama.cpp, with schema-constrained
//! decoding through llguidance, so a workflow runs with no API key and no network.
//!
//! The engine is the cargo feature `llama-cpp` (on by default). Without it the catalog,
//! fetching and constraints work, and [`LocalModel::load`] says the build has no engine.
//!
//! ```no_run
//! use claij_embedded::{Constraint, GenerateOptions, LocalModel, Message, cache_root, fetch};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let path = fetch(&cache_root())?;
//! let mut model = LocalModel::load(&path)?;
//! let schema = serde_json::json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
//! let constraint = Constraint::from_schema(&schema)?;
//! let out = model.generate(&[Message::user("Is water wet?")], &GenerateOptions::default(),
//!                          Some(&constraint), &mut |t| print!("{t}"))?;
//! # Ok(()) }
//! ```

pub mod chat;
pub mod constraint;
mod engine;
pub mod error;
pub mod fetch;
pub mod generation;
#[cfg(feature = "llama-cpp")]
pub mod llama_cpp;
pub mod token_choice;

pub use chat::Message;
pub use constraint::{Constraint, ConstraintError, unsupported_features};
pub use engine::LocalModel;
pub use error::{GenerateError, LoadError};
pub use fetch::{
    CATALOG, DEFAULT_MODEL, Engine, FetchError, KnownModel, Progress, cache_root, fetch,
    fetch_model, fetched, known, model_path, ready_path,
};
pub use generation::{CONTEXT_TOKENS, GenerateOptions, Generation};
#[cfg(feature = "llama-cpp")]
pub use llama_cpp::LlamaCppModel;
