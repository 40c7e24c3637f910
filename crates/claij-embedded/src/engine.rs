//! Either engine behind one type: [`LocalModel::load`] runs a GGUF with llama.cpp when
//! the crate is built with the `llama-cpp` feature (every architecture llama.cpp runs,
//! qwen2 included), and with the candle engine ([`EmbeddedModel`], llama-family only)
//! otherwise.

use std::path::Path;
use std::time::Duration;

use claij_core::prompts::Message;

use crate::constraint::Constraint;
use crate::error::{GenerateError, LoadError};
use crate::model::{EmbeddedModel, GenerateOptions, Generation};

/// A loaded local model, run by one of the engines.
#[derive(Debug)]
pub enum LocalModel {
    /// The candle engine.
    Candle(Box<EmbeddedModel>),
    /// The llama.cpp engine.
    #[cfg(feature = "llama-cpp")]
    LlamaCpp(Box<crate::llama_cpp::LlamaCppModel>),
}

impl LocalModel {
    /// Loads `path` with the llama.cpp engine when it is built in, else with candle.
    pub fn load(path: &Path) -> Result<Self, LoadError> {
        #[cfg(feature = "llama-cpp")]
        return crate::llama_cpp::LlamaCppModel::load(path).map(|m| Self::LlamaCpp(Box::new(m)));
        #[cfg(not(feature = "llama-cpp"))]
        return EmbeddedModel::load(path).map(|m| Self::Candle(Box::new(m)));
    }

    /// The engine's name: `candle` or `llama.cpp`.
    pub fn engine(&self) -> &'static str {
        match self {
            Self::Candle(_) => "candle",
            #[cfg(feature = "llama-cpp")]
            Self::LlamaCpp(_) => "llama.cpp",
        }
    }

    /// How long loading took.
    pub fn load_duration(&self) -> Duration {
        match self {
            Self::Candle(m) => m.load_duration(),
            #[cfg(feature = "llama-cpp")]
            Self::LlamaCpp(m) => m.load_duration(),
        }
    }

    /// The prompt text the chat template makes of `messages`.
    pub fn render(&self, messages: &[Message]) -> Result<String, GenerateError> {
        match self {
            Self::Candle(m) => m.render(messages),
            #[cfg(feature = "llama-cpp")]
            Self::LlamaCpp(m) => m.render(messages),
        }
    }

    /// Generates the assistant's answer (see [`EmbeddedModel::generate`]).
    pub fn generate(
        &mut self,
        messages: &[Message],
        options: &GenerateOptions,
        constraint: Option<&Constraint>,
        on_token: &mut dyn FnMut(&str),
    ) -> Result<Generation, GenerateError> {
        match self {
            Self::Candle(m) => m.generate(messages, options, constraint, on_token),
            #[cfg(feature = "llama-cpp")]
            Self::LlamaCpp(m) => m.generate(messages, options, constraint, on_token),
        }
    }
}
