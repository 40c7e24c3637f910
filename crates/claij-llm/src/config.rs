//! The model configuration: named providers and models, prices, and where it is found.
//!
//! Looked up in this order (the first that exists wins; none is fine):
//! 1. the path given explicitly (`claij run --config FILE`);
//! 2. `$CLAIJ_CONFIG`;
//! 3. `./claij.toml`;
//! 4. `$XDG_CONFIG_HOME/claij/claij.toml` (`~/.config/claij/claij.toml`).
//!
//! ```toml
//! default_model = "local"            # or $CLAIJ_MODEL
//! fallback = ["gpt"]                 # escalation after repeated validation failures
//!
//! [providers.llama]
//! kind = "openai"                    # openai (any OpenAI-compatible API) | anthropic | gemini
//! base_url = "http://127.0.0.1:8080/v1"
//! json_flavour = "json_object"       # llama.cpp: response_format json_object + schema
//! # api_key_env = "LLAMA_KEY"        # the key's environment variable (preferred)
//! # api_key = "…"                    # or the key itself (keep the file private)
//!
//! [models.local]
//! provider = "llama"
//! name = "smollm2"                   # the provider's model id
//! price = { input = 0.0, output = 0.0 }   # USD per million tokens (cached = …)
//!
//! [models.mine]
//! provider = "embedded"              # the embedded engine, on a local GGUF file
//! path = "models/my-model.gguf"      # relative to this file's directory
//!
//! [models.small]
//! provider = "embedded"              # without a path: a catalog model by name
//! name = "qwen2.5-coder-0.5b"        # (`claij model fetch NAME`); neither: the default
//!
//! [timeouts]                         # the engine's: one attempt's limit, by action,
//! command = "2m"                     # when neither state nor document sets one
//! ```
//!
//! Without a config file, providers whose key is in the environment exist by
//! themselves: `openai` (`OPENAI_API_KEY`, `OPENAI_BASE_URL`), `openrouter`
//! (`OPENROUTER_API_KEY`), `anthropic` (`ANTHROPIC_API_KEY`), `gemini`
//! (`GEMINI_API_KEY` or `GOOGLE_API_KEY`). A model is named by a `[models]` key, or as
//! `PROVIDER/MODEL-ID` (e.g. `anthropic/claude-sonnet-4-5`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::enforce::Mode;
use crate::secret::Secret;

/// The environment variable naming the config file.
pub const CONFIG_ENV: &str = "CLAIJ_CONFIG";
/// The environment variable naming the default model.
pub const MODEL_ENV: &str = "CLAIJ_MODEL";

/// The wire format a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// Any OpenAI-compatible chat completions API.
    Openai,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini `generateContent`.
    Gemini,
}

/// How an OpenAI-compatible server takes a JSON Schema for structured output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JsonFlavour {
    /// `response_format: {"type": "json_schema", "json_schema": {…}}` (OpenAI, vLLM,
    /// OpenRouter, Ollama).
    #[default]
    JsonSchema,
    /// `response_format: {"type": "json_object", "schema": …}` (llama.cpp and
    /// llama-cpp-python, which reject `json_schema`).
    JsonObject,
    /// No structured output: only `prompt` (and `tools`, when supported).
    None,
}

/// One provider as configured.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// Its wire format.
    pub kind: ProviderKind,
    /// The API's base URL (default: the vendor's public endpoint).
    #[serde(default)]
    pub base_url: Option<String>,
    /// The environment variable holding the key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// The key itself (prefer `api_key_env`).
    #[serde(default)]
    pub api_key: Option<String>,
    /// OpenAI-compatible only: how structured output is asked for.
    #[serde(default)]
    pub json_flavour: Option<JsonFlavour>,
    /// Whether the provider takes tools (default true).
    #[serde(default)]
    pub tools: Option<bool>,
    /// OpenAI-compatible only: whether answers may be streamed (`stream: true`) when
    /// something watches a run's tokens (`claij serve`'s event streams); default true. A
    /// server that sends no usage with a streamed answer (llama-cpp-python's) leaves such
    /// steps without token counts: `stream = false` keeps them.
    #[serde(default)]
    pub stream: Option<bool>,
    /// Seconds before a request is abandoned (default 120).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// Transient failures retried per call (default 4).
    #[serde(default)]
    pub max_retries: Option<u32>,
}

/// Price per million tokens, in US dollars.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Input (prompt) tokens.
    #[serde(default)]
    pub input: f64,
    /// Output (completion) tokens.
    #[serde(default)]
    pub output: f64,
    /// Cached input tokens (default: the input price).
    #[serde(default)]
    pub cached: Option<f64>,
}

impl Price {
    /// The cost of a call.
    pub fn cost(&self, input: u64, output: u64, cached: u64) -> f64 {
        let cached = cached.min(input);
        let fresh = input - cached;
        (fresh as f64 * self.input
            + cached as f64 * self.cached.unwrap_or(self.input)
            + output as f64 * self.output)
            / 1_000_000.0
    }
}

/// One named model.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// The provider's name (a `[providers]` key or a built-in one).
    pub provider: String,
    /// The model id the provider knows it by (default: the name of this entry).
    #[serde(default)]
    pub name: Option<String>,
    /// Its price.
    #[serde(default)]
    pub price: Option<Price>,
    /// The enforcement mode to use with it (default: chosen from capabilities).
    #[serde(default)]
    pub enforce: Option<Mode>,
    /// Whether an answer that keeps failing validation is asked for again in a stronger
    /// mode the provider supports before the fallback models (default true; false keeps
    /// `enforce` however often it fails, say for a server whose grammar is slow).
    #[serde(default)]
    pub escalate_enforce: Option<bool>,
    /// How many answers decide a route by majority, for the `llm` states that do not
    /// say (their `config.vote`; default 1: [`crate::vote`]).
    #[serde(default)]
    pub vote: Option<u32>,
    /// Default temperature (a state's `config` overrides it; likewise below).
    #[serde(default)]
    pub temperature: Option<f32>,
    /// Default top-p.
    #[serde(default)]
    pub top_p: Option<f32>,
    /// Default seed.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Default output token limit.
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// A local GGUF file, for a model whose provider is `embedded` (relative to the
    /// config file's directory): `[models.mine] provider = "embedded", path = "m.gguf"`.
    #[serde(default)]
    pub path: Option<PathBuf>,
}

impl ModelConfig {
    /// Its decoding defaults.
    pub fn decoding(&self) -> crate::request::Decoding {
        crate::request::Decoding {
            temperature: self.temperature,
            top_p: self.top_p,
            seed: self.seed,
            max_tokens: self.max_tokens,
        }
    }
}

/// The whole file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmConfig {
    /// The model used when neither state, event nor run names one.
    #[serde(default)]
    pub default_model: Option<String>,
    /// Models to escalate to, in order, after repeated validation failures.
    #[serde(default)]
    pub fallback: Vec<String>,
    /// Providers by name.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Models by name.
    #[serde(default)]
    pub models: BTreeMap<String, ModelConfig>,
    /// Prices by model id (`PROVIDER/MODEL-ID` or a `[models]` key), for models not
    /// listed under `[models]`.
    #[serde(default)]
    pub prices: BTreeMap<String, Price>,
    /// Not the models' but the engine's: the operator's attempt timeout for each action
    /// (`[timeouts] command = "2s"`; a duration, seconds, or `"none"`), used when neither
    /// a state nor its document sets one.
    #[serde(default)]
    pub timeouts: BTreeMap<String, claij_core::Timeout>,
}

/// The configuration could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read the model configuration {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid.
    #[error("the model configuration {path} is invalid: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Why (TOML's message, with line and column).
        message: String,
    },
}

impl LlmConfig {
    /// Parses TOML text (`path` names it in errors, and models' relative `path`s are
    /// taken from its directory).
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let mut config: Self = toml::from_str(text).map_err(|e| ConfigError::Invalid {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        let dir = path.parent().unwrap_or(Path::new(""));
        for (name, model) in &config.models {
            if let Some(k) = model
                .vote
                .filter(|k| !(1..=crate::vote::MAX_VOTES).contains(k))
            {
                return Err(ConfigError::Invalid {
                    path: path.to_owned(),
                    message: format!(
                        "[models.{name}] vote = {k}: a vote takes 1 to {} answers",
                        crate::vote::MAX_VOTES
                    ),
                });
            }
        }
        for model in config.models.values_mut() {
            if let Some(file) = model.path.as_mut()
                && file.is_relative()
            {
                *file = dir.join(&*file);
            }
        }
        Ok(config)
    }

    /// Reads a file.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Finds and reads the configuration in the documented order; an empty one when
    /// there is none. Returns where it was found.
    pub fn discover(explicit: Option<&Path>) -> Result<(Self, Option<PathBuf>), ConfigError> {
        if let Some(path) = explicit {
            return Ok((Self::read(path)?, Some(path.to_owned())));
        }
        if let Some(path) = std::env::var_os(CONFIG_ENV).filter(|p| !p.is_empty()) {
            let path = PathBuf::from(path);
            return Ok((Self::read(&path)?, Some(path)));
        }
        for path in Self::candidates() {
            if path.is_file() {
                return Ok((Self::read(&path)?, Some(path)));
            }
        }
        Ok((Self::default(), None))
    }

    /// The files looked at when no path is given and `$CLAIJ_CONFIG` is unset.
    pub fn candidates() -> Vec<PathBuf> {
        let mut out = vec![PathBuf::from("claij.toml")];
        let config_home = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
        if let Some(dir) = config_home {
            out.push(dir.join("claij").join("claij.toml"));
        }
        out
    }
}

/// A key from the environment or the config, never printed.
pub(crate) fn resolve_key(
    provider: &str,
    config: &ProviderConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<Secret> {
    if let Some(var) = &config.api_key_env {
        return env(var).filter(|k| !k.is_empty()).map(Secret::new);
    }
    if let Some(key) = &config.api_key {
        return Some(Secret::new(key.clone()));
    }
    default_key_vars(provider, config.kind)
        .iter()
        .find_map(|v| env(v).filter(|k| !k.is_empty()))
        .map(Secret::new)
}

/// The environment variables a provider's key is looked for in, when the config names
/// none.
pub(crate) fn default_key_vars(name: &str, kind: ProviderKind) -> &'static [&'static str] {
    match (name, kind) {
        ("openrouter", _) => &["OPENROUTER_API_KEY"],
        (_, ProviderKind::Openai) if name == "openai" => &["OPENAI_API_KEY"],
        (_, ProviderKind::Anthropic) => &["ANTHROPIC_API_KEY"],
        (_, ProviderKind::Gemini) => &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
        _ => &[],
    }
}

/// The providers that exist without a config file when their key is set.
pub(crate) fn builtin_providers() -> Vec<(&'static str, ProviderConfig)> {
    let p = |kind, base_url: &str| ProviderConfig {
        kind,
        base_url: Some(base_url.to_owned()),
        api_key_env: None,
        api_key: None,
        json_flavour: None,
        tools: None,
        stream: None,
        timeout_secs: None,
        max_retries: None,
    };
    vec![
        (
            "openai",
            p(ProviderKind::Openai, "https://api.openai.com/v1"),
        ),
        (
            "openrouter",
            p(ProviderKind::Openai, "https://openrouter.ai/api/v1"),
        ),
        (
            "anthropic",
            p(ProviderKind::Anthropic, "https://api.anthropic.com/v1"),
        ),
        (
            "gemini",
            p(
                ProviderKind::Gemini,
                "https://generativelanguage.googleapis.com/v1beta",
            ),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_file_parses_and_prices_compute() {
        let c = LlmConfig::parse(
            r#"
default_model = "local"
[providers.llama]
kind = "openai"
base_url = "http://127.0.0.1:1/v1"
json_flavour = "json_object"
[models.local]
provider = "llama"
name = "smollm2"
price = { input = 1.0, output = 2.0, cached = 0.5 }
"#,
            Path::new("claij.toml"),
        )
        .unwrap();
        assert_eq!(c.default_model.as_deref(), Some("local"));
        let p = c.models["local"].price.unwrap();
        assert!((p.cost(1_000_000, 1_000_000, 500_000) - (0.5 + 0.25 + 2.0)).abs() < 1e-9);
        assert_eq!(
            c.providers["llama"].json_flavour,
            Some(JsonFlavour::JsonObject)
        );
    }

    #[test]
    fn a_model_s_vote_is_one_to_nine_answers_and_a_wrong_one_is_named() {
        let parse = |k: u32| {
            LlmConfig::parse(
                &format!("[models.q]\nprovider = \"embedded\"\nvote = {k}\n"),
                Path::new("claij.toml"),
            )
        };
        assert_eq!(parse(3).unwrap().models["q"].vote, Some(3));
        for wrong in [0, 10] {
            let message = parse(wrong).unwrap_err().to_string();
            assert!(
                message.contains(&format!("[models.q] vote = {wrong}"))
                    && message.contains("claij.toml"),
                "{message}"
            );
        }
    }

    #[test]
    fn a_model_path_is_taken_from_the_config_files_directory() {
        let c = LlmConfig::parse(
            "[models.a]\nprovider = \"embedded\"\npath = \"models/a.gguf\"\n[models.b]\nprovider = \"embedded\"\npath = \"/abs/b.gguf\"\n",
            Path::new("/etc/claij/claij.toml"),
        )
        .unwrap();
        assert_eq!(
            c.models["a"].path.as_deref(),
            Some(Path::new("/etc/claij/models/a.gguf"))
        );
        assert_eq!(
            c.models["b"].path.as_deref(),
            Some(Path::new("/abs/b.gguf"))
        );
    }

    #[test]
    fn unknown_keys_are_refused_with_the_file_named() {
        let e = LlmConfig::parse(
            "[providers.x]\nkind = \"openai\"\nbase = 1\n",
            Path::new("c.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("c.toml") && e.contains("base"), "{e}");
    }

    #[test]
    fn keys_come_from_the_named_variable_first() {
        let cfg = ProviderConfig {
            api_key_env: Some("MY_KEY".into()),
            api_key: Some("from-file".into()),
            ..builtin_providers().remove(0).1
        };
        let env = |v: &str| (v == "MY_KEY").then(|| "sk-env".to_owned());
        assert_eq!(resolve_key("x", &cfg, &env).unwrap().expose(), "sk-env");
        let key = resolve_key("x", &cfg, &env).unwrap();
        assert_eq!(format!("{key:?} {key}"), "<redacted> <redacted>");
    }
}
