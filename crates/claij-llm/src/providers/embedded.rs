//! The embedded local model as a provider: SmolLM2-135M-Instruct (or another GGUF)
//! run in process by `claij-embedded`'s llama.cpp engine, with `grammar` enforcement, so
//! every answer parses and validates. No key, no network. In a build without the engine
//! (claij-embedded's feature `llama-cpp`) every request fails with an error that says so.
//!
//! The model is loaded on first use and kept; generation is CPU-bound and runs on a
//! blocking thread, one at a time (the key/value cache lives in the model). Compiled
//! constraints are kept per schema, so each state's union is compiled once per process.
//!
//! The future that waits for the thread holds a guard that raises the generation's
//! [`StopSignal`] when it is dropped: an interrupt, a timeout, a lost lease or a client
//! gone drops it, and the thread stops at its next token (or prompt chunk) and frees its
//! core, instead of computing an answer nobody reads up to `max_tokens`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use claij_core::prompts::Message;
use claij_embedded::{Constraint, GenerateOptions, LocalModel, StopSignal};
use claij_engine::{BoxFuture, TextSink};
use sha2::{Digest, Sha256};

use crate::enforce::Mode;
use crate::provider::{Capabilities, Provider, ProviderError};
use crate::request::{Decoding, ModelRequest, ModelResponse, Tokens};

/// The provider's name (models are `embedded/NAME`).
pub const EMBEDDED_PROVIDER: &str = "embedded";

/// The environment variable naming another GGUF file to use as the embedded model.
pub const EMBEDDED_MODEL_ENV: &str = "CLAIJ_EMBEDDED_MODEL";

/// The model file used when nothing else is named: `$CLAIJ_EMBEDDED_MODEL`, else the
/// file `claij model fetch` writes under the cache.
pub fn default_model_file() -> PathBuf {
    match std::env::var_os(EMBEDDED_MODEL_ENV).filter(|v| !v.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => claij_embedded::model_path(&claij_embedded::cache_root()),
    }
}

#[derive(Default)]
struct Loaded {
    model: Option<LocalModel>,
    constraints: HashMap<String, Constraint>,
}

/// The embedded model behind the [`Provider`] trait.
pub struct EmbeddedProvider {
    path: PathBuf,
    loaded: Arc<Mutex<Loaded>>,
}

impl EmbeddedProvider {
    /// A provider for the GGUF file at `path` (loaded on first use).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            loaded: Arc::default(),
        }
    }
}

impl std::fmt::Debug for EmbeddedProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedProvider")
            .field("path", &self.path)
            .finish()
    }
}

/// Raises its signal when dropped: held by the future waiting for a blocking thread, so
/// dropping that future stops the thread's work at its next check.
struct StopOnDrop(StopSignal);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.raise();
    }
}

/// The error of work stopped because its caller is gone (nobody reads it).
fn stopped() -> ProviderError {
    permanent("stopped: the call was interrupted or timed out".to_owned())
}

fn permanent(message: String) -> ProviderError {
    ProviderError::Permanent {
        provider: EMBEDDED_PROVIDER.to_owned(),
        message,
    }
}

fn options(decoding: &Decoding) -> GenerateOptions {
    let defaults = GenerateOptions::default();
    let s = decoding;
    GenerateOptions {
        // A workflow step wants the model's most likely answer: greedy unless the model's
        // configuration sets a temperature (sampling at 0.7 made a small model misread
        // plain facts: "34 … in Valencia" came back as 25 in "Catalina").
        temperature: s.temperature.map_or(0.0, f64::from),
        top_p: s.top_p.map_or(defaults.top_p, f64::from),
        seed: s.seed.unwrap_or(defaults.seed),
        max_tokens: s.max_tokens.map_or(defaults.max_tokens, |m| {
            usize::try_from(m).unwrap_or(usize::MAX)
        }),
    }
}

/// The model, loaded from `path` on first use and kept in `slot`.
fn ensure_loaded<'m>(
    path: &Path,
    slot: &'m mut Option<LocalModel>,
) -> Result<&'m mut LocalModel, ProviderError> {
    if slot.is_none() {
        if !path.exists() {
            return Err(permanent(format!(
                "the embedded model file {} is missing: run `claij model fetch` (or set ${EMBEDDED_MODEL_ENV} to a GGUF file)",
                path.display()
            )));
        }
        let m = LocalModel::load(path)
            .map_err(|e| permanent(format!("loading {}: {e}", path.display())))?;
        tracing::debug!(
            path = %path.display(),
            load_ms = m.load_duration().as_millis() as u64,
            "the embedded model is loaded"
        );
        *slot = Some(m);
    }
    slot.as_mut()
        .ok_or_else(|| permanent("the embedded model is not loaded".to_owned()))
}

/// The conversation as the embedded model's chat template reads it.
fn chat(messages: &[Message]) -> Vec<claij_embedded::Message> {
    messages
        .iter()
        .map(|m| claij_embedded::Message::new(m.role.to_string(), m.content.clone()))
        .collect()
}

/// The prompt tokens of each message: the conversation rendered by the model's chat
/// template one message longer at a time and tokenized, each message counting what it
/// adds (the template's reply priming goes with the last one, as in a generation).
/// Stops between messages when `stop` is raised.
fn count_prompt_tokens(
    path: &Path,
    loaded: &Mutex<Loaded>,
    messages: &[Message],
    stop: &StopSignal,
) -> Result<Vec<usize>, ProviderError> {
    let mut guard = loaded
        .lock()
        .map_err(|_| permanent("an earlier generation panicked".to_owned()))?;
    let model = ensure_loaded(path, &mut guard.model)?;
    let messages = chat(messages);
    let mut counts = Vec::with_capacity(messages.len());
    let mut before = 0;
    for end in 1..=messages.len() {
        if stop.is_raised() {
            return Err(stopped());
        }
        let text = model
            .render(&messages[..end])
            .map_err(|e| permanent(e.to_string()))?;
        let total = model.tokenize(&text).len();
        counts.push(total.saturating_sub(before));
        before = total;
    }
    Ok(counts)
}

/// One generation, on the calling (blocking) thread, until `stop` is raised.
fn generate(
    path: &Path,
    loaded: &Mutex<Loaded>,
    request: &ModelRequest,
    on_text: Option<&TextSink>,
    stop: &StopSignal,
) -> Result<ModelResponse, ProviderError> {
    let mut guard = loaded
        .lock()
        .map_err(|_| permanent("an earlier generation panicked".to_owned()))?;
    if stop.is_raised() {
        // Stopped while it waited for an earlier generation.
        return Err(stopped());
    }
    let Loaded { model, constraints } = &mut *guard;
    let model = ensure_loaded(path, model)?;
    let constraint = match request.enforcement.mode {
        Mode::Grammar => {
            let schema = &request.enforcement.schema;
            let key = format!("{:x}", Sha256::digest(schema.to_string().as_bytes()));
            if !constraints.contains_key(&key) {
                let c = Constraint::from_schema(schema)
                    .map_err(|e| permanent(format!("the answer's schema: {e}")))?;
                constraints.insert(key.clone(), c);
            }
            constraints.get(&key)
        }
        Mode::Prompt => None,
        other => {
            return Err(permanent(format!(
                "the embedded model supports `grammar` and `prompt` enforcement, not `{other}`"
            )));
        }
    };
    let generation = model
        .generate_until(
            &chat(&request.messages),
            &options(&request.decoding),
            constraint,
            stop,
            &mut |text| {
                if let Some(sink) = on_text {
                    sink(text);
                }
            },
        )
        .map_err(|e| match e {
            why @ claij_embedded::GenerateError::Stopped { .. } => {
                tracing::debug!("{why}");
                stopped()
            }
            other => permanent(other.to_string()),
        })?;
    tracing::debug!(
        prompt_tokens = generation.prompt_tokens,
        prefilled_tokens = generation.prefilled_tokens,
        completion_tokens = generation.completion_tokens,
        prompt_ms = generation.prompt_duration.as_millis() as u64,
        tokens_per_second = generation.tokens_per_second(),
        "the embedded model answered"
    );
    Ok(ModelResponse {
        text: generation.text,
        tool_call: None,
        tokens: Some(Tokens {
            input: generation.prompt_tokens as u64,
            output: generation.completion_tokens as u64,
            // Prompt tokens the engine kept from the previous generation (llama.cpp's
            // prefix reuse).
            cached: (generation.prefilled_tokens < generation.prompt_tokens)
                .then(|| (generation.prompt_tokens - generation.prefilled_tokens) as u64),
        }),
        retries: 0,
    })
}

impl Provider for EmbeddedProvider {
    fn name(&self) -> &str {
        EMBEDDED_PROVIDER
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            json_schema: false,
            tools: false,
            grammar: true,
        }
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ProviderError>> {
        self.generate_on_a_thread(request, None)
    }

    fn complete_streaming<'a>(
        &'a self,
        request: &'a ModelRequest,
        on_text: TextSink,
    ) -> BoxFuture<'a, Result<ModelResponse, ProviderError>> {
        self.generate_on_a_thread(request, Some(on_text))
    }

    fn prompt_room(&self, decoding: &Decoding) -> Option<u64> {
        let context = u64::from(claij_embedded::CONTEXT_TOKENS);
        let answer = u64::try_from(options(decoding).max_tokens).unwrap_or(u64::MAX);
        Some(context.saturating_sub(answer))
    }

    fn count_prompt_tokens<'a>(
        &'a self,
        messages: &'a [Message],
    ) -> BoxFuture<'a, Option<Result<Vec<usize>, ProviderError>>> {
        Box::pin(async move {
            let path = self.path.clone();
            let loaded = Arc::clone(&self.loaded);
            let messages = messages.to_vec();
            let stop = StopSignal::new();
            let _stop_on_drop = StopOnDrop(stop.clone());
            let counted = tokio::task::spawn_blocking(move || {
                count_prompt_tokens(&path, &loaded, &messages, &stop)
            })
            .await
            .map_err(|e| permanent(format!("the counting thread failed: {e}")))
            .and_then(|r| r);
            Some(counted)
        })
    }
}

impl EmbeddedProvider {
    /// One generation on a blocking thread (the model computes there), its text streamed
    /// to `on_text` as whole characters come; dropping the future stops the thread.
    fn generate_on_a_thread<'a>(
        &'a self,
        request: &'a ModelRequest,
        on_text: Option<TextSink>,
    ) -> BoxFuture<'a, Result<ModelResponse, ProviderError>> {
        Box::pin(async move {
            let path = self.path.clone();
            let loaded = Arc::clone(&self.loaded);
            let request = request.clone();
            let stop = StopSignal::new();
            let _stop_on_drop = StopOnDrop(stop.clone());
            tokio::task::spawn_blocking(move || {
                generate(&path, &loaded, &request, on_text.as_ref(), &stop)
            })
            .await
            .map_err(|e| permanent(format!("the generation thread failed: {e}")))?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_gets_the_context_the_answer_leaves() {
        // No file is read: the room is the context less the answer's max_tokens.
        let provider = EmbeddedProvider::new("/nonexistent/model.gguf");
        let context = u64::from(claij_embedded::CONTEXT_TOKENS);
        let default_answer = GenerateOptions::default().max_tokens as u64;
        assert_eq!(
            provider.prompt_room(&Decoding::default()),
            Some(context - default_answer)
        );
        let long_answers = Decoding {
            max_tokens: Some(1000),
            ..Decoding::default()
        };
        assert_eq!(provider.prompt_room(&long_answers), Some(context - 1000));
    }
}
