//! claij's embedded local model: SmolLM2-135M-Instruct (or any llama-family GGUF) run
//! in process with candle, with schema-constrained decoding through llguidance, so a
//! workflow runs with no API key and no network.
//!
//! ```no_run
//! use claij_embedded::{Constraint, EmbeddedModel, GenerateOptions, cache_root, fetch};
//! use claij_core::prompts::Message;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let path = fetch(&cache_root())?;
//! let mut model = EmbeddedModel::load(&path)?;
//! let schema = serde_json::json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
//! let constraint = Constraint::from_schema(&schema)?;
//! let out = model.generate(&[Message::user("Is water wet?")], &GenerateOptions::default(),
//!                          Some(&constraint), &mut |t| print!("{t}"))?;
//! # Ok(()) }
//! ```

pub mod chat;
pub mod constraint;
mod decode;
mod engine;
pub mod error;
pub mod fetch;
pub mod llama;
#[cfg(feature = "llama-cpp")]
pub mod llama_cpp;
pub mod model;
pub mod requantize;
pub mod token_choice;
pub mod tokenizer;

pub use constraint::{Constraint, ConstraintError, unsupported_features};
pub use engine::LocalModel;
pub use error::{GenerateError, LoadError};
pub use fetch::{
    CATALOG, DEFAULT_MODEL, Engine, FetchError, KnownModel, Progress, cache_root, fetch,
    fetch_model, fetched, known, model_path, ready_path,
};
#[cfg(feature = "llama-cpp")]
pub use llama_cpp::LlamaCppModel;
pub use model::{EmbeddedModel, GenerateOptions, Generation};
