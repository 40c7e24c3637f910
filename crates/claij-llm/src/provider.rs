//! The `Provider` trait: one model API behind one interface.

use std::time::Duration;

use claij_core::prompts::Message;
use claij_engine::{BoxFuture, TextSink};

use crate::enforce::Mode;
use crate::request::{Decoding, ModelRequest, ModelResponse};

/// What a provider supports, from which the enforcement mode is chosen when a state
/// names none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Structured output constrained by a JSON Schema.
    pub json_schema: bool,
    /// Tool (function) calls.
    pub tools: bool,
    /// Token-level constrained decoding (the embedded model).
    pub grammar: bool,
}

impl Capabilities {
    /// Whether `mode` can be used.
    pub fn supports(&self, mode: Mode) -> bool {
        match mode {
            Mode::Prompt => true,
            Mode::JsonSchema => self.json_schema,
            Mode::Tools => self.tools,
            Mode::Grammar => self.grammar,
        }
    }

    /// `asked` when the provider supports it, else the best mode it has.
    pub fn usable(&self, asked: Option<Mode>) -> Mode {
        asked
            .filter(|m| self.supports(*m))
            .unwrap_or_else(|| self.best())
    }

    /// The modes a model is asked in, one step per run of repeated validation failures:
    /// [`usable`](Self::usable)`(asked)` first, then every stronger mode the provider
    /// supports, weakest first (strength: `prompt` < `tools` < `json_schema` < `grammar`).
    pub fn ladder(&self, asked: Option<Mode>) -> Vec<Mode> {
        let first = self.usable(asked);
        std::iter::once(first)
            .chain(
                [Mode::Tools, Mode::JsonSchema, Mode::Grammar]
                    .into_iter()
                    .filter(|m| m.strength() > first.strength() && self.supports(*m)),
            )
            .collect()
    }

    /// The best mode: `grammar`, then `json_schema`, then `tools`, then `prompt`.
    pub fn best(&self) -> Mode {
        [Mode::Grammar, Mode::JsonSchema, Mode::Tools]
            .into_iter()
            .find(|m| self.supports(*m))
            .unwrap_or(Mode::Prompt)
    }
}

/// A call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// A failure that may pass (429, 5xx, connection refused or reset, timeout).
    #[error("{provider}: {message}")]
    Transient {
        /// The provider's name.
        provider: String,
        /// What happened (never the key).
        message: String,
        /// The server's `Retry-After`, when it sent one.
        retry_after: Option<Duration>,
    },
    /// A failure that will not pass by retrying (400, 401, 404, a body that is not the
    /// documented format).
    #[error("{provider}: {message}")]
    Permanent {
        /// The provider's name.
        provider: String,
        /// What happened (never the key).
        message: String,
    },
    /// A replayed run asked something the recording does not hold.
    #[error("{0}")]
    NotRecorded(String),
}

/// One model API. Implementations build the wire request, send it, and parse the answer;
/// transient failures are retried by the caller ([`crate::retry`]).
pub trait Provider: Send + Sync {
    /// The provider's name, as configured.
    fn name(&self) -> &str;

    /// What it supports.
    fn capabilities(&self) -> Capabilities;

    /// One call, no retries.
    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ProviderError>>;

    /// One call, no retries, the answer's text sent to `on_text` as it is produced. The
    /// default sends it whole when the call returns; providers that stream override it.
    fn complete_streaming<'a>(
        &'a self,
        request: &'a ModelRequest,
        on_text: TextSink,
    ) -> BoxFuture<'a, Result<ModelResponse, ProviderError>> {
        Box::pin(sent_whole(self.complete(request), on_text))
    }

    /// The prompt tokens `messages` make for this provider's model, by its own tokenizer
    /// and chat template, one count per message (the last message's count includes the
    /// priming of the reply), when the provider knows them — the embedded models do —;
    /// `None` when it does not (an HTTP API counts only once it is called).
    fn count_prompt_tokens<'a>(
        &'a self,
        _messages: &'a [Message],
    ) -> BoxFuture<'a, Option<Result<Vec<usize>, ProviderError>>> {
        Box::pin(async { None })
    }

    /// The most prompt tokens a request with these decoding settings can carry, when the
    /// provider knows its model's context length (the embedded models): the context less
    /// the answer's `max_tokens`. The `llm` action fits a step's prompt to it unless the
    /// state sets `max_prompt_tokens`, so that a long run's history gives way instead of
    /// overflowing the context. `None` (the default): the provider says so when called.
    fn prompt_room(&self, _decoding: &Decoding) -> Option<u64> {
        None
    }
}

/// A call's answer, its text sent to `on_text` in one piece once it has come.
pub(crate) async fn sent_whole(
    call: BoxFuture<'_, Result<ModelResponse, ProviderError>>,
    on_text: TextSink,
) -> Result<ModelResponse, ProviderError> {
    let response = call.await?;
    if !response.text.is_empty() {
        on_text(&response.text);
    }
    Ok(response)
}
