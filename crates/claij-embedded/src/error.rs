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
    /// The file is not a GGUF file candle can read, or its weights do not fit a llama model.
    #[error("cannot load model file {path}: {reason}")]
    Model {
        /// The model file.
        path: PathBuf,
        /// What candle said.
        reason: String,
    },
    /// A metadata key the tokenizer or template needs is missing.
    #[error("the model file has no `{0}` metadata")]
    MissingMetadata(&'static str),
    /// A metadata key has an unexpected type or content.
    #[error("the model file's `{key}` metadata is malformed: {reason}")]
    BadMetadata {
        /// The key.
        key: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The tokenizer is not a byte-level BPE (`gpt2`) one.
    #[error(
        "the model's tokenizer is `{0}`; only byte-level BPE (`gpt2`) tokenizers are supported"
    )]
    UnsupportedTokenizer(String),
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
    /// `max_tokens` ran out before the constrained output was complete.
    #[error("max_tokens ({0}) ran out before the output satisfied the schema")]
    Truncated(usize),
}
