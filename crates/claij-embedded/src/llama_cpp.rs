//! The engine (feature `llama-cpp`, on by default): any GGUF llama.cpp runs (qwen2,
//! llama, …) through the llama-cpp-2 crate, with the GGUF's chat template rendered by
//! minijinja, an optional llguidance constraint and a seeded token choice.
//!
//! The constraint is applied here, not by llama-cpp-2's `llguidance` sampler: the mask
//! is computed per step by a matcher from the model's cache of compiled constraints, over
//! a toktrie built from llama.cpp's own token bytes, and the allowed logits go to
//! [`choose`](crate::token_choice::choose), so a seed means the same thing whatever
//! llama.cpp's samplers do, and a refused token is an error, never silently skipped.
//!
//! The key/value cache of the last generation is kept: a new prompt that starts with
//! the same tokens (the system message, an earlier trail) only computes the tokens after
//! the common prefix ([`Generation::prefilled_tokens`]).

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::token::LlamaToken;
use toktrie::{ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie};

use crate::chat::{CHATML, ChatTemplate, Message};
use crate::constraint::{Constraint, MatcherCache};
use crate::error::{GenerateError, LoadError};
pub use crate::generation::CONTEXT_TOKENS;
use crate::generation::{GenerateOptions, Generation, StopSignal, emit_complete_chars};
use crate::token_choice::{Rng, next_token};

/// Tokens computed per `decode` call while reading a prompt.
const BATCH_TOKENS: usize = 512;

/// Prompt tokens computed per `decode` call while reading a prompt. A stop signal is seen
/// between calls (llama.cpp's abort callback is not reachable through llama-cpp-2), so a
/// chunk is what a stop waits for at most: 64 tokens take about half a second for
/// SmolLM2-135M on one busy core, and reading a prompt in chunks of 64 was no slower
/// than in chunks of 512.
const PREFILL_CHUNK_TOKENS: usize = 64;

/// llama.cpp's process-wide backend, set up once (it may only be initialised once).
fn backend() -> Result<&'static LlamaBackend, String> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            let mut backend = LlamaBackend::init().map_err(|e| e.to_string())?;
            backend.void_logs();
            Ok(backend)
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The context and the tokens its key/value cache holds, positions `0..cached.len()`.
struct Session<'m> {
    context: LlamaContext<'m>,
    cached: Vec<LlamaToken>,
}

self_cell::self_cell!(
    /// A model and its one context, which borrows it.
    struct Loaded {
        owner: LlamaModel,
        #[not_covariant]
        dependent: Session,
    }
);

/// A GGUF model run by llama.cpp, ready to generate. Generation needs `&mut self` (the
/// key/value cache is inside); share it behind a mutex.
pub struct LlamaCppModel {
    path: PathBuf,
    loaded: Loaded,
    /// Each token's bytes as text (empty for control tokens).
    token_bytes: Vec<Vec<u8>>,
    /// End-of-generation tokens.
    stop_tokens: Vec<u32>,
    template: ChatTemplate,
    matchers: MatcherCache,
    load_duration: Duration,
}

// SAFETY: a llama.cpp context is not tied to the thread that made it (llama.cpp's own
// server hands contexts between threads); what it must not have is two threads using it
// at once, and every use of it here goes through `&mut LlamaCppModel`. The model it
// borrows is `Send + Sync` itself. So moving the whole value to another thread is sound.
#[allow(unsafe_code)]
unsafe impl Send for LlamaCppModel {}

impl std::fmt::Debug for LlamaCppModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlamaCppModel")
            .field("path", &self.path)
            .field("vocab", &self.token_bytes.len())
            .finish()
    }
}

/// The environment variable that sets the threads llama.cpp computes with.
pub const THREADS_ENV: &str = "CLAIJ_THREADS";

/// The threads llama.cpp computes with by default: `$CLAIJ_THREADS` when it is a positive
/// number, else every core the process may use. llama.cpp's threads spin while they wait
/// for each other, so on a machine whose cores are busy with other work one thread is
/// many times faster than two (the test suite runs the models with one).
fn default_threads() -> usize {
    std::env::var(THREADS_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        })
}

/// The four bytes every GGUF file starts with.
const GGUF_MAGIC: &[u8; 4] = b"GGUF";

/// The toktrie vocabulary of `model` from llama.cpp's own token bytes (control tokens
/// carry toktrie's special marker), and each token's text bytes and the stop tokens.
fn vocabulary(model: &LlamaModel) -> (TokEnv, Vec<Vec<u8>>, Vec<u32>) {
    let vocab = model.vocab();
    let n = u32::try_from(model.n_vocab()).unwrap_or(0);
    let eot = vocab.eot();
    let eos = if eot.0 >= 0 { eot } else { vocab.eos() };
    let mut stop_tokens = vec![u32::try_from(eos.0).unwrap_or(0)];
    let mut words = Vec::with_capacity(n as usize);
    let mut token_bytes = Vec::with_capacity(n as usize);
    for id in 0..n {
        let token = LlamaToken(i32::try_from(id).unwrap_or(i32::MAX));
        if vocab.is_eog(token) && !stop_tokens.contains(&id) {
            stop_tokens.push(id);
        }
        let bytes = vocab.token_to_piece(token, false, None);
        if bytes.is_empty() {
            let special = vocab.token_to_piece(token, true, None);
            if special.is_empty() {
                words.push(Vec::new());
            } else {
                let mut marked = vec![TokTrie::SPECIAL_TOKEN_MARKER];
                marked.extend_from_slice(&special);
                words.push(marked);
            }
        } else {
            words.push(bytes.clone());
        }
        token_bytes.push(bytes);
    }
    let info = TokRxInfo::new(n, stop_tokens[0]);
    let trie = TokTrie::from(&info, &words).with_eos_tokens(&stop_tokens);
    let env: TokEnv = Arc::new(ApproximateTokEnv::new(trie));
    (env, token_bytes, stop_tokens)
}

impl LlamaCppModel {
    /// Loads a GGUF file with llama.cpp: weights, vocabulary and chat template (ChatML
    /// when the file has none). It computes with every core the process may use.
    pub fn load(path: &Path) -> Result<Self, LoadError> {
        Self::load_with_threads(path, default_threads())
    }

    /// Loads a GGUF file as [`LlamaCppModel::load`] does, computing with `threads`
    /// threads (at least one).
    pub fn load_with_threads(path: &Path, threads: usize) -> Result<Self, LoadError> {
        let started = Instant::now();
        let model_err = |reason: String| LoadError::Model {
            path: path.to_path_buf(),
            reason,
        };
        let mut magic = [0u8; 4];
        std::fs::File::open(path)
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
            .map_err(|source| LoadError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        if &magic != GGUF_MAGIC {
            return Err(model_err(format!(
                "not a GGUF file (it starts with {magic:02x?}, not `GGUF`)"
            )));
        }
        let threads = i32::try_from(threads.max(1)).unwrap_or(i32::MAX);
        let backend = backend().map_err(&model_err)?;
        let model = LlamaModel::load_from_file(backend, path, &LlamaModelParams::default())
            .map_err(|e| model_err(e.to_string()))?;
        let source = model
            .meta_val_str("tokenizer.chat_template")
            .unwrap_or_else(|_| CHATML.to_owned());
        let text_of = |token: LlamaToken| {
            if token.0 < 0 {
                return String::new();
            }
            String::from_utf8_lossy(&model.vocab().token_to_piece(token, true, None)).into_owned()
        };
        let bos = if model.vocab().should_add_bos() {
            text_of(model.vocab().bos())
        } else {
            String::new()
        };
        let template = ChatTemplate::new(&source, &bos, &text_of(model.vocab().eos()))?;
        let (env, token_bytes, stop_tokens) = vocabulary(&model);
        let matchers = MatcherCache::new(env).map_err(LoadError::Constraint)?;
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(CONTEXT_TOKENS))
            .with_n_batch(BATCH_TOKENS as u32)
            .with_n_threads(threads)
            .with_n_threads_batch(threads);
        let loaded = Loaded::try_new(model, |model| {
            model
                .new_context(backend, params)
                .map(|context| Session {
                    context,
                    cached: Vec::new(),
                })
                .map_err(|e| model_err(e.to_string()))
        })?;
        Ok(Self {
            path: path.to_path_buf(),
            loaded,
            token_bytes,
            stop_tokens,
            template,
            matchers,
            load_duration: started.elapsed(),
        })
    }

    /// The file the model was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How long [`LlamaCppModel::load`] took.
    pub fn load_duration(&self) -> Duration {
        self.load_duration
    }

    /// How many distinct constraints have been compiled for this model so far.
    pub fn compiled_constraints(&self) -> usize {
        self.matchers.len()
    }

    /// The prompt text the chat template makes of `messages`.
    pub fn render(&self, messages: &[Message]) -> Result<String, GenerateError> {
        self.template.render(messages)
    }

    /// The token ids llama.cpp makes of `text` (special tokens' texts are read as those
    /// tokens, as in a rendered prompt).
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        self.loaded
            .borrow_owner()
            .vocab()
            .tokenize(text.as_bytes(), false, true)
            .into_iter()
            .map(|t| u32::try_from(t.0).unwrap_or(0))
            .collect()
    }

    /// Forgets the cached prompt: the next generation computes its whole prompt.
    pub fn clear_cache(&mut self) {
        self.loaded.with_dependent_mut(|_, session| {
            session.context.clear_kv_cache();
            session.cached.clear();
        });
    }

    /// Generates the assistant's answer to `messages`. With a `constraint`, only tokens
    /// that keep the output a valid prefix of the schema's language are allowed, and
    /// generation ends when the JSON is complete (it is an error,
    /// [`GenerateError::Truncated`], when `max_tokens` runs out first). Text is passed to
    /// `on_token` as it is produced (whole UTF-8 characters only). The prompt's tokens in
    /// common with the previous generation's are not computed again.
    pub fn generate(
        &mut self,
        messages: &[Message],
        options: &GenerateOptions,
        constraint: Option<&Constraint>,
        on_token: &mut dyn FnMut(&str),
    ) -> Result<Generation, GenerateError> {
        self.generate_until(messages, options, constraint, &StopSignal::new(), on_token)
    }

    /// Generates as [`LlamaCppModel::generate`] does until `stop` is raised: it is checked
    /// before each new token and between the prompt's chunks of 64 tokens
    /// (one `decode` call each, which llama.cpp cannot abort through these bindings), and
    /// a raised signal ends the generation with [`GenerateError::Stopped`]. The key/value
    /// cache keeps what was computed, so the next prompt can still reuse it.
    pub fn generate_until(
        &mut self,
        messages: &[Message],
        options: &GenerateOptions,
        constraint: Option<&Constraint>,
        stop: &StopSignal,
        on_token: &mut dyn FnMut(&str),
    ) -> Result<Generation, GenerateError> {
        let stopped = |completion_tokens| GenerateError::Stopped { completion_tokens };
        if stop.is_raised() {
            return Err(stopped(0));
        }
        let started = Instant::now();
        let prompt = self.template.render(messages)?;
        let mut matcher = match constraint {
            Some(c) => Some(
                self.matchers
                    .matcher(c)
                    .map_err(GenerateError::Constraint)?,
            ),
            None => None,
        };
        let token_bytes = &self.token_bytes;
        let stop_tokens = &self.stop_tokens;
        self.loaded.with_dependent_mut(|model, session| {
            let prompt_tokens = model.vocab().tokenize(prompt.as_bytes(), false, true);
            if prompt_tokens.is_empty()
                || prompt_tokens.len() + options.max_tokens > CONTEXT_TOKENS as usize
            {
                return Err(GenerateError::ContextFull {
                    prompt_tokens: prompt_tokens.len(),
                    max_tokens: options.max_tokens,
                    context: CONTEXT_TOKENS as usize,
                });
            }
            let (logits_at, prefilled_tokens) = session.prefill(&prompt_tokens, stop)?;
            let prompt_duration = started.elapsed();
            let generating = Instant::now();

            let mut rng = Rng::new(options.seed);
            let mut out = 0usize;
            let mut pending: Vec<u8> = Vec::new();
            let mut text: Vec<u8> = Vec::new();
            let mut candidates: Vec<(u32, f32)> = Vec::with_capacity(token_bytes.len());
            let mut batch = LlamaBatch::new(1, 1);
            let mut logits_at = logits_at;
            loop {
                if let Some(m) = &matcher
                    && m.is_stopped()
                {
                    break;
                }
                if stop.is_raised() {
                    return Err(stopped(out));
                }
                if out >= options.max_tokens {
                    if matcher.is_some() {
                        return Err(GenerateError::Truncated(options.max_tokens));
                    }
                    break;
                }
                let values = session.context.get_logits_ith(logits_at);
                let token = next_token(
                    matcher.as_mut(),
                    values,
                    token_bytes.len(),
                    &mut candidates,
                    options,
                    &mut rng,
                )?;
                if stop_tokens.contains(&token) {
                    break;
                }
                if let Some(m) = &mut matcher {
                    m.consume_token(token)
                        .map_err(|e| GenerateError::Constraint(e.to_string()))?;
                }
                out += 1;
                let bytes = &token_bytes[token as usize];
                text.extend_from_slice(bytes);
                pending.extend_from_slice(bytes);
                emit_complete_chars(&mut pending, on_token);
                let llama_token = LlamaToken(i32::try_from(token).unwrap_or(0));
                batch.clear();
                batch
                    .add(llama_token, position(session.cached.len()), &[0], true)
                    .map_err(|e| GenerateError::Model(e.to_string()))?;
                session
                    .context
                    .decode(&mut batch)
                    .map_err(|e| GenerateError::Model(e.to_string()))?;
                session.cached.push(llama_token);
                logits_at = 0;
            }
            if !pending.is_empty() {
                on_token(&String::from_utf8_lossy(&pending));
            }
            Ok(Generation {
                text: String::from_utf8_lossy(&text).into_owned(),
                prompt_tokens: prompt_tokens.len(),
                prefilled_tokens,
                completion_tokens: out,
                prompt_duration,
                generate_duration: generating.elapsed(),
            })
        })
    }
}

/// A cache position as llama.cpp numbers them.
fn position(index: usize) -> i32 {
    i32::try_from(index).unwrap_or(i32::MAX)
}

impl Session<'_> {
    /// Brings the cache to exactly `prompt`: keeps the common prefix with what it holds
    /// (at least the last prompt token is computed again, for its logits) and computes the
    /// rest. Returns the batch index of the last token's logits and how many tokens were
    /// computed; stops with [`GenerateError::Stopped`] before a chunk when `stop` is
    /// raised (what was computed stays cached).
    fn prefill(
        &mut self,
        prompt: &[LlamaToken],
        stop: &StopSignal,
    ) -> Result<(i32, usize), GenerateError> {
        let model_err = |e: String| GenerateError::Model(e);
        let common = self
            .cached
            .iter()
            .zip(prompt)
            .take_while(|(a, b)| a == b)
            .count()
            .min(prompt.len() - 1);
        let kept = u32::try_from(common).unwrap_or(0);
        if self
            .context
            .kv_cache_seq_rm(0, Some(kept), None)
            .map_err(|e| model_err(e.to_string()))
            .is_err()
        {
            // A cache that cannot drop a suffix is cleared and read again from the start.
            self.context.clear_kv_cache();
            self.cached.clear();
        }
        self.cached.truncate(common.min(self.cached.len()));
        let mut batch = LlamaBatch::new(BATCH_TOKENS, 1);
        let rest = &prompt[self.cached.len()..];
        let computed = rest.len();
        let mut last = 0;
        for chunk in rest.chunks(PREFILL_CHUNK_TOKENS) {
            if stop.is_raised() {
                return Err(GenerateError::Stopped {
                    completion_tokens: 0,
                });
            }
            batch.clear();
            for (i, token) in chunk.iter().enumerate() {
                let is_last = self.cached.len() + i + 1 == prompt.len();
                batch
                    .add(*token, position(self.cached.len() + i), &[0], is_last)
                    .map_err(|e| model_err(e.to_string()))?;
            }
            self.context
                .decode(&mut batch)
                .map_err(|e| model_err(e.to_string()))?;
            self.cached.extend_from_slice(chunk);
            last = position(chunk.len() - 1);
        }
        Ok((last, computed))
    }
}
