//! The crate's errors, each with the context a user needs to act on it.

use std::path::PathBuf;

/// Loading a GGUF model failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be opened or read.
    #[error("cannot read model file {path}: {source}")]
    Io {
        /// The model file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// llama.cpp cannot load the file: not a GGUF file, or an architecture or
    /// quantization it does not run.
    #[error("cannot load model file {path}: {reason}")]
    Model {
        /// The model file.
        path: PathBuf,
        /// What llama.cpp said.
        reason: String,
    },
    /// This build has no engine to run models with.
    #[error(
        "cannot load model file {path}: this claij was built without the embedded engine (cargo feature `llama-cpp`, on by default); build it with the feature to run local models"
    )]
    NoEngine {
        /// The model file.
        path: PathBuf,
    },
    /// The chat template does not compile.
    #[error("the model's chat template does not compile: {0}")]
    Template(String),
    /// The constrained decoder could not be set up for this tokenizer.
    #[error("cannot set up constrained decoding for this model: {0}")]
    Constraint(String),
}

/// Generating failed.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// The chat template failed to render the messages.
    #[error("the chat template failed on these messages: {0}")]
    Template(String),
    /// The prompt and `max_tokens` do not fit the model's context.
    #[error(
        "the prompt has {prompt_tokens} tokens; with max_tokens {max_tokens} it exceeds the context of {context} tokens"
    )]
    ContextFull {
        /// Tokens in the prompt.
        prompt_tokens: usize,
        /// Requested maximum of new tokens.
        max_tokens: usize,
        /// The model's context length.
        context: usize,
    },
    /// The model's forward pass failed.
    #[error("the model failed: {0}")]
    Model(String),
    /// The constraint could not be compiled for this model, or refused every token.
    #[error("constrained decoding failed: {0}")]
    Constraint(String),
    /// The generation's [`StopSignal`](crate::StopSignal) was raised (an interrupt, a
    /// timeout, a caller gone): it stopped before its answer was complete.
    #[error(
        "the generation was stopped (interrupted or timed out) after {completion_tokens} tokens"
    )]
    Stopped {
        /// Tokens generated before it stopped (0 when it stopped reading the prompt).
        completion_tokens: usize,
    },
    /// `max_tokens` ran out before the constrained output was complete.
    #[error("max_tokens ({0}) ran out before the output satisfied the schema")]
    Truncated(usize),
}
