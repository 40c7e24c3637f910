//! The model in process: load a llama-family GGUF with candle, render the chat
//! template, and generate, optionally under a [`Constraint`].

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use candle_core::quantized::gguf_file;
use candle_core::{DType, Device, Tensor};
use claij_core::prompts::Message;
use toktrie::TokEnv;

use crate::chat::{CHATML, ChatTemplate};
use crate::constraint::{Constraint, MatcherCache};
use crate::error::{GenerateError, LoadError};
use crate::llama::{Llama, MAX_SEQ_LEN};
use crate::token_choice::{Rng, next_token};
use crate::tokenizer::Tokenizer;

/// How tokens are chosen, and how many.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerateOptions {
    /// Softmax temperature; `0` picks the most likely token every time.
    pub temperature: f64,
    /// Top-p: choose among the most likely tokens whose probabilities add up to this.
    pub top_p: f64,
    /// The random seed: same seed, same messages, same output.
    pub seed: u64,
    /// At most this many new tokens.
    pub max_tokens: usize,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        Self {
            temperature: 0.7,
            top_p: 0.95,
            seed: 42,
            max_tokens: 512,
        }
    }
}

/// What a generation produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// The generated text (without the end-of-turn token).
    pub text: String,
    /// Tokens in the rendered prompt.
    pub prompt_tokens: usize,
    /// Prompt tokens actually computed: fewer than `prompt_tokens` when the engine kept
    /// a common prefix from the previous generation (the llama.cpp engine does).
    pub prefilled_tokens: usize,
    /// Tokens generated.
    pub completion_tokens: usize,
    /// Time to process the prompt (prefill) and compile or fetch the constraint.
    pub prompt_duration: Duration,
    /// Time spent generating the completion tokens.
    pub generate_duration: Duration,
}

impl Generation {
    /// Completion tokens per second of generation time.
    pub fn tokens_per_second(&self) -> f64 {
        let secs = self.generate_duration.as_secs_f64();
        if secs > 0.0 {
            self.completion_tokens as f64 / secs
        } else {
            0.0
        }
    }
}

/// A loaded model, ready to generate. Generation needs `&mut self` (the attention cache
/// is inside); share it behind a mutex.
pub struct EmbeddedModel {
    path: PathBuf,
    weights: Llama,
    tokenizer: Arc<Tokenizer>,
    template: ChatTemplate,
    stop_tokens: Vec<u32>,
    matchers: MatcherCache,
    load_duration: Duration,
    device: Device,
}

impl std::fmt::Debug for EmbeddedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedModel")
            .field("path", &self.path)
            .field("vocab", &self.tokenizer.vocab_size())
            .finish()
    }
}

impl EmbeddedModel {
    /// Loads a llama-family GGUF file: weights, tokenizer and chat template (ChatML when
    /// the file has none).
    pub fn load(path: &Path) -> Result<Self, LoadError> {
        let started = Instant::now();
        let model_err = |reason: String| LoadError::Model {
            path: path.to_path_buf(),
            reason,
        };
        let file = File::open(path).map_err(|source| LoadError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mut reader = BufReader::new(file);
        let content =
            gguf_file::Content::read(&mut reader).map_err(|e| model_err(e.to_string()))?;
        let tokenizer = Arc::new(Tokenizer::from_gguf(&content)?);
        let source = match content.metadata.get("tokenizer.chat_template") {
            Some(v) => v
                .to_string()
                .map_err(|e| LoadError::BadMetadata {
                    key: "tokenizer.chat_template",
                    reason: e.to_string(),
                })?
                .clone(),
            None => CHATML.to_owned(),
        };
        let text_of = |id: Option<u32>| {
            id.map(|id| String::from_utf8_lossy(tokenizer.token_bytes(id)).into_owned())
                .unwrap_or_default()
        };
        let template = ChatTemplate::new(
            &source,
            &text_of(tokenizer.bos()),
            &text_of(Some(tokenizer.eos())),
        )?;
        let mut stop_tokens = vec![tokenizer.eos()];
        for s in ["<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end|>"] {
            if let Some(id) = tokenizer.special(s)
                && !stop_tokens.contains(&id)
            {
                stop_tokens.push(id);
            }
        }
        let device = Device::Cpu;
        let weights = Llama::from_gguf(content, &mut reader, &device)
            .map_err(|e| model_err(e.to_string()))?;
        let env: TokEnv = tokenizer.clone();
        let matchers = MatcherCache::new(env).map_err(LoadError::Constraint)?;
        Ok(Self {
            path: path.to_path_buf(),
            weights,
            tokenizer,
            template,
            stop_tokens,
            matchers,
            load_duration: started.elapsed(),
            device,
        })
    }

    /// The file the model was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How long [`EmbeddedModel::load`] took.
    pub fn load_duration(&self) -> Duration {
        self.load_duration
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// How many distinct constraints have been compiled for this model so far.
    ///
    /// Only the tests read it (tests/model.rs checks that a workflow's generations reuse
    /// one matcher per output schema): it is the only view from outside of the matcher
    /// cache's growth, which a long-lived process must be able to check.
    pub fn compiled_constraints(&self) -> usize {
        self.matchers.len()
    }

    /// The prompt text the chat template makes of `messages`.
    pub fn render(&self, messages: &[Message]) -> Result<String, GenerateError> {
        self.template.render(messages)
    }

    /// Generates the assistant's answer to `messages`. With a `constraint`, only tokens
    /// that keep the output a valid prefix of the schema's language are allowed, and
    /// generation ends when the JSON is complete. Text is passed to `on_token` as it is
    /// produced (whole UTF-8 characters only).
    pub fn generate(
        &mut self,
        messages: &[Message],
        options: &GenerateOptions,
        constraint: Option<&Constraint>,
        on_token: &mut dyn FnMut(&str),
    ) -> Result<Generation, GenerateError> {
        let started = Instant::now();
        let prompt = self.template.render(messages)?;
        let prompt_tokens = self.tokenizer.encode_with_specials(&prompt);
        if prompt_tokens.len() + options.max_tokens > MAX_SEQ_LEN {
            return Err(GenerateError::ContextFull {
                prompt_tokens: prompt_tokens.len(),
                max_tokens: options.max_tokens,
                context: MAX_SEQ_LEN,
            });
        }
        let mut matcher = match constraint {
            Some(c) => Some(
                self.matchers
                    .matcher(c)
                    .map_err(GenerateError::Constraint)?,
            ),
            None => None,
        };
        let model = |e: candle_core::Error| GenerateError::Model(e.to_string());
        self.weights.clear_cache();
        let input = Tensor::new(prompt_tokens.as_slice(), &self.device)
            .and_then(|t| t.unsqueeze(0))
            .map_err(model)?;
        let mut logits = self.weights.forward(&input, 0).map_err(model)?;
        let prompt_duration = started.elapsed();
        let generating = Instant::now();

        let mut rng = Rng::new(options.seed);
        let mut out: Vec<u32> = Vec::new();
        let mut pending: Vec<u8> = Vec::new();
        let mut text: Vec<u8> = Vec::new();
        let vocab = self.tokenizer.vocab_size();
        let mut candidates: Vec<(u32, f32)> = Vec::with_capacity(vocab);
        loop {
            if let Some(m) = &matcher
                && m.is_stopped()
            {
                break;
            }
            if out.len() >= options.max_tokens {
                if matcher.is_some() {
                    return Err(GenerateError::Truncated(options.max_tokens));
                }
                break;
            }
            let values: Vec<f32> = logits
                .squeeze(0)
                .and_then(|t| t.to_dtype(DType::F32))
                .and_then(|t| t.to_vec1())
                .map_err(model)?;
            let token = next_token(
                matcher.as_mut(),
                &values,
                vocab,
                &mut candidates,
                options,
                &mut rng,
            )?;
            if self.stop_tokens.contains(&token) {
                break;
            }
            if let Some(m) = &mut matcher {
                m.consume_token(token)
                    .map_err(|e| GenerateError::Constraint(e.to_string()))?;
            }
            out.push(token);
            let bytes = self.tokenizer.token_bytes(token);
            text.extend_from_slice(bytes);
            pending.extend_from_slice(bytes);
            emit_complete_chars(&mut pending, on_token);
            let next = Tensor::new(&[token], &self.device)
                .and_then(|t| t.unsqueeze(0))
                .map_err(model)?;
            logits = self
                .weights
                .forward(&next, prompt_tokens.len() + out.len() - 1)
                .map_err(model)?;
        }
        if !pending.is_empty() {
            on_token(&String::from_utf8_lossy(&pending));
        }
        Ok(Generation {
            text: String::from_utf8_lossy(&text).into_owned(),
            prompt_tokens: prompt_tokens.len(),
            prefilled_tokens: prompt_tokens.len(),
            completion_tokens: out.len(),
            prompt_duration,
            generate_duration: generating.elapsed(),
        })
    }
}

/// Passes on the complete UTF-8 characters at the start of `pending`, keeping an
/// unfinished one for later; invalid bytes are passed on as replacement characters.
pub(crate) fn emit_complete_chars(pending: &mut Vec<u8>, on_token: &mut dyn FnMut(&str)) {
    match std::str::from_utf8(pending) {
        Ok(s) => {
            on_token(s);
            pending.clear();
        }
        Err(e) => {
            let valid = e.valid_up_to();
            let cut = match e.error_len() {
                Some(bad) => valid + bad,
                None => valid,
            };
            if cut > 0 {
                on_token(&String::from_utf8_lossy(&pending[..cut]));
                pending.drain(..cut);
            }
        }
    }
}
