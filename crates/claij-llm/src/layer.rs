//! The model layer: the configuration made live (providers built, models resolved), the
//! run's model choice, the default model, and record/replay. One per process (or per
//! `claij run`); the `llm` action holds it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use claij_core::prompts::Prompting;
use claij_engine::TextSink;

use crate::config::{
    ConfigError, JsonFlavour, LlmConfig, MODEL_ENV, ModelConfig, Price, ProviderConfig,
    builtin_providers, resolve_key,
};
use crate::enforce::Mode;
use crate::http::Http;
use crate::provider::{Provider, ProviderError};
use crate::providers::HttpProvider;
use crate::providers::embedded::EMBEDDED_PROVIDER;
use crate::record::{RecordError, Tape};
use crate::request::{Decoding, ModelRequest, ModelResponse};
use crate::retry::{RetryPolicy, complete_with_retries};

/// The message of the error an `llm` state gets when no model is configured.
pub const NO_MODEL_CONFIGURED: &str = "no model is configured for this `llm` state. Configure one: \
set `config.model` in the state, pass `claij run --model NAME`, set $CLAIJ_MODEL, or set \
`default_model` in claij.toml (looked up at --config, $CLAIJ_CONFIG, ./claij.toml, \
~/.config/claij/claij.toml). A model is a [models] entry of claij.toml or PROVIDER/MODEL-ID, \
e.g. `openai/gpt-4o-mini` with OPENAI_API_KEY set; see README.md, \"Models\"";

/// The id the embedded model at `path` goes by (`embedded/ID`): its catalog name when it
/// is a file `claij model fetch` makes (`qwen2.5-coder-1.5b`, the default), else the
/// file's name without `.gguf`.
pub fn embedded_model_id(path: &std::path::Path) -> String {
    let file = path
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or_default();
    claij_embedded::CATALOG
        .iter()
        .find(|m| m.file == file)
        .map(|m| m.name.to_owned())
        .unwrap_or_else(|| file.strip_suffix(".gguf").unwrap_or(file).to_owned())
}

/// A model ready to be called.
#[derive(Clone)]
pub struct ResolvedModel {
    /// The name the run uses for it (recorded in the trail).
    pub name: String,
    /// The provider's model id.
    pub model_id: String,
    /// The provider.
    pub provider: Arc<dyn Provider>,
    /// Its price, when known.
    pub price: Option<Price>,
    /// The mode configured for it, if any.
    pub enforce: Option<Mode>,
    /// Whether repeated validation failures move it to a stronger mode (`escalate_enforce`).
    pub escalate_enforce: bool,
    /// How many answers decide a route by majority where a state does not say (`vote`).
    pub vote: Option<u32>,
    /// How its transient failures are retried.
    pub retry: RetryPolicy,
    /// Its decoding defaults.
    pub decoding: Decoding,
}

impl std::fmt::Debug for ResolvedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedModel")
            .field("name", &self.name)
            .field("model_id", &self.model_id)
            .field("provider", &self.provider.name())
            .finish()
    }
}

/// A model could not be found or called.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    /// The configuration is bad.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The record/replay file failed.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// A provider could not be set up.
    #[error(transparent)]
    Provider(#[from] ProviderError),
}

/// The model layer.
#[derive(Default)]
pub struct LlmLayer {
    config: LlmConfig,
    providers: BTreeMap<String, Arc<dyn Provider>>,
    provider_retry: BTreeMap<String, RetryPolicy>,
    /// The command's model (`claij run --model`, `claij worker --model`): what runs use
    /// when neither their state, their event nor their own options name one.
    preferred: Option<String>,
    /// The model used when nothing names one: the single place the default lives.
    default: Option<ResolvedModel>,
    tape: Option<Arc<Tape>>,
    retry_override: Option<RetryPolicy>,
    /// The embedded models of `[models]` entries with a `path`, by entry name, and the
    /// fetched catalog models other than the default, as `embedded/NAME` (one provider per
    /// file, each loaded on first use, once).
    embedded_files: BTreeMap<String, Arc<dyn Provider>>,
    /// How models are asked: claij's projection, or the plain baseline (`claij eval
    /// --baseline plain`).
    prompting: Prompting,
}

impl std::fmt::Debug for LlmLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmLayer")
            .field("providers", &self.providers.keys().collect::<Vec<_>>())
            .field("models", &self.config.models.keys().collect::<Vec<_>>())
            .field("preferred", &self.preferred)
            .finish()
    }
}

impl LlmLayer {
    /// A layer from `config`, keys from the process environment.
    pub fn new(config: LlmConfig) -> Result<Self, LayerError> {
        Self::with_env(config, &|v| std::env::var(v).ok())
    }

    /// A layer from `config`, keys (and `$CLAIJ_MODEL`) from `env`.
    pub fn with_env(
        config: LlmConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, LayerError> {
        let mut layer = Self::default();
        let mut configs: BTreeMap<String, ProviderConfig> = BTreeMap::new();
        for (name, c) in builtin_providers() {
            // Built-in providers exist when their key is set.
            if resolve_key(name, &c, env).is_some() {
                configs.insert(name.to_owned(), c);
            }
        }
        if let Some(base) = env("OPENAI_BASE_URL").filter(|b| !b.is_empty())
            && let Some(openai) = configs.get_mut("openai")
        {
            openai.base_url = Some(base);
        }
        for (name, c) in &config.providers {
            configs.insert(name.clone(), c.clone());
        }
        for (name, c) in configs {
            let timeout = Duration::from_secs(c.timeout_secs.unwrap_or(120));
            let http = Http::new(timeout)?;
            let default_base = builtin_providers()
                .into_iter()
                .find(|(_, b)| b.kind == c.kind)
                .and_then(|(_, b)| b.base_url)
                .unwrap_or_default();
            let provider = HttpProvider {
                key: resolve_key(&name, &c, env),
                name: name.clone(),
                kind: c.kind,
                base_url: c
                    .base_url
                    .clone()
                    .unwrap_or(default_base)
                    .trim_end_matches('/')
                    .to_owned(),
                json_flavour: c.json_flavour.unwrap_or(JsonFlavour::JsonSchema),
                tools: c.tools.unwrap_or(true),
                stream: c.stream.unwrap_or(true),
                http,
            };
            layer.provider_retry.insert(
                name.clone(),
                RetryPolicy {
                    max_retries: c.max_retries.unwrap_or(4),
                    ..RetryPolicy::default()
                },
            );
            layer.providers.insert(name, Arc::new(provider));
        }
        let mut by_file: BTreeMap<std::path::PathBuf, Arc<dyn Provider>> = BTreeMap::new();
        for (name, m) in &config.models {
            if let Some(file) = m.path.as_ref().filter(|_| m.provider == EMBEDDED_PROVIDER) {
                let provider = by_file.entry(file.clone()).or_insert_with(|| {
                    Arc::new(crate::providers::embedded::EmbeddedProvider::new(
                        file.clone(),
                    ))
                });
                layer
                    .embedded_files
                    .insert(name.clone(), Arc::clone(provider));
            }
        }
        let default_name = config
            .default_model
            .clone()
            .or_else(|| env(MODEL_ENV).filter(|m| !m.is_empty()));
        layer.config = config;
        if let Some(name) = default_name {
            layer.default = layer.resolve(&name).ok();
            if layer.default.is_none() {
                // Kept as the preferred model so that using it reports why it does not
                // resolve.
                layer.preferred = Some(name);
            }
        }
        Ok(layer)
    }

    /// Reads the configuration in the documented order and builds the layer.
    pub fn discover(explicit: Option<&std::path::Path>) -> Result<Self, LayerError> {
        let (config, _) = LlmConfig::discover(explicit)?;
        Self::new(config)
    }

    /// Makes the embedded local model (the GGUF file at `path`, loaded on first use) the
    /// model used when nothing names one, unless the configuration or `$CLAIJ_MODEL`
    /// chose a default. It is also reachable as `embedded/NAME`, and so is every other
    /// catalog model fetched into the cache (`claij model fetch NAME`). Returns the
    /// default's name when the embedded model became the default.
    pub fn default_to_embedded(&mut self, path: std::path::PathBuf) -> Option<String> {
        use crate::providers::embedded::EmbeddedProvider;
        let model_id = embedded_model_id(&path);
        let cache = claij_embedded::cache_root();
        for known in claij_embedded::CATALOG
            .iter()
            .filter(|m| m.name != model_id)
        {
            if let Some(file) = claij_embedded::fetch::fetched(&cache, known) {
                let provider: Arc<dyn Provider> = Arc::new(EmbeddedProvider::new(file));
                self.embedded_files
                    .entry(format!("{EMBEDDED_PROVIDER}/{}", known.name))
                    .or_insert(provider);
            }
        }
        let provider: Arc<dyn Provider> = Arc::new(EmbeddedProvider::new(path));
        self.providers
            .entry(EMBEDDED_PROVIDER.to_owned())
            .or_insert_with(|| Arc::clone(&provider));
        self.embedded_files
            .entry(format!("{EMBEDDED_PROVIDER}/{model_id}"))
            .or_insert_with(|| Arc::clone(&provider));
        if self.default.is_some() {
            return None;
        }
        let name = format!("{EMBEDDED_PROVIDER}/{model_id}");
        self.default = Some(ResolvedModel {
            name: name.clone(),
            model_id,
            provider,
            price: Some(Price::default()),
            enforce: None,
            escalate_enforce: true,
            vote: None,
            retry: RetryPolicy::default(),
            decoding: Decoding::default(),
        });
        Some(name)
    }

    /// A layer over the same providers (an embedded model shared, so loaded once
    /// whichever layer uses it first), configuration, command's model and retries, with
    /// no tape and claij's own prompting: for commands that ask several ways in one
    /// process (`claij eval`'s models, each with its tape, and its plain baseline).
    pub fn sibling(&self) -> LlmLayer {
        LlmLayer {
            config: self.config.clone(),
            providers: self.providers.clone(),
            provider_retry: self.provider_retry.clone(),
            preferred: self.preferred.clone(),
            default: self.default.clone(),
            tape: None,
            retry_override: self.retry_override,
            embedded_files: self.embedded_files.clone(),
            prompting: Prompting::default(),
        }
    }

    /// Whether the command named its model (`--model`, see [`prefer`](Self::prefer)).
    pub fn has_preferred(&self) -> bool {
        self.preferred.is_some()
    }

    /// Makes `model` the command's model (`claij run --model`, `claij worker --model`):
    /// used by every run through this layer whose state, event and options name none.
    /// `None` leaves the layer as it is. A run's own model is one of its options
    /// (`RunOptions::model`), not the layer's: one layer serves runs of many models.
    pub fn prefer(&mut self, model: Option<String>) {
        if model.is_some() {
            self.preferred = model;
        }
    }

    /// Asks models through this layer as `prompting` says: claij's projection (the
    /// default) or the plain baseline `claij eval --baseline plain` compares it with.
    pub fn set_prompting(&mut self, prompting: Prompting) {
        self.prompting = prompting;
    }

    /// How models are asked through this layer ([`set_prompting`](Self::set_prompting)).
    pub fn prompting(&self) -> Prompting {
        self.prompting
    }

    /// Records or replays every exchange through `tape`.
    pub fn set_tape(&mut self, tape: Tape) {
        self.tape = Some(Arc::new(tape));
    }

    /// The tape exchanges are recorded on or replayed from, if any: the run's cassette,
    /// which the engine's programs and MCP servers share (see
    /// [`claij_engine::cassette`]).
    pub fn tape(&self) -> Option<Arc<Tape>> {
        self.tape.clone()
    }

    /// Overrides the retry policy of every provider.
    ///
    /// `claij.toml` sets only a provider's `max_retries`; the backoff
    /// ([`RetryPolicy::default`]: half a second, doubling, up to a minute) can be changed
    /// only here. Nothing in the workspace calls it but the retry tests, which must not
    /// wait seconds per retry; it stays for programs that embed the layer.
    pub fn set_retry_policy(&mut self, policy: RetryPolicy) {
        self.retry_override = Some(policy);
    }

    /// The configuration.
    pub fn config(&self) -> &LlmConfig {
        &self.config
    }

    /// Whether `name` names a configured model (a `[models]` entry, or
    /// `PROVIDER/MODEL-ID` of a configured provider).
    pub fn knows(&self, name: &str) -> bool {
        self.resolve(name).is_ok()
    }

    /// The model of a run whose state and event name none: the run's own (`run_model`,
    /// from its options), else the command's ([`prefer`](Self::prefer)), else the default.
    pub fn for_run(&self, run_model: Option<&str>) -> Result<ResolvedModel, String> {
        if let Some(name) = run_model.or(self.preferred.as_deref()) {
            return self.resolve(name);
        }
        self.default
            .clone()
            .ok_or_else(|| NO_MODEL_CONFIGURED.to_owned())
    }

    /// The provider of an embedded model named without a `path`: `embedded/NAME`
    /// (`entry_name` `None`), or a `[models]` entry whose `name` is a catalog model
    /// (`Some(Some(NAME))`) — that model's file, the default's or one fetched into the
    /// cache, or an error, never another model than the one named. An entry with neither
    /// (`Some(None)`) is the default embedded model.
    fn embedded_by_name(
        &self,
        name: &str,
        entry_name: Option<Option<&str>>,
    ) -> Result<Option<Arc<dyn Provider>>, String> {
        let wanted = match entry_name {
            Some(None) => return Ok(self.providers.get(EMBEDDED_PROVIDER).cloned()),
            Some(Some(id)) => id.strip_prefix("embedded/").unwrap_or(id),
            None => name.strip_prefix("embedded/").unwrap_or(name),
        };
        if let Some(p) = self
            .embedded_files
            .get(&format!("{EMBEDDED_PROVIDER}/{wanted}"))
        {
            return Ok(Some(Arc::clone(p)));
        }
        let catalog = claij_embedded::CATALOG
            .iter()
            .map(|m| m.name)
            .collect::<Vec<_>>()
            .join(", ");
        if !claij_embedded::CATALOG.iter().any(|m| m.name == wanted) {
            return Err(format!(
                "model `{name}`: `{wanted}` is not an embedded catalog model (one of {catalog}); a `[models]` entry with a `path` runs any GGUF, and one with neither `name` nor `path` the default embedded model"
            ));
        }
        let fetched: Vec<&String> = self
            .embedded_files
            .keys()
            .filter(|k| k.starts_with("embedded/"))
            .collect();
        Err(format!(
            "model `{name}`: the embedded model `{wanted}` is not in the cache (the default is {}; fetched: {}); `claij model fetch {wanted}` fetches it, and a `[models]` entry with a `path` runs any GGUF",
            self.default
                .as_ref()
                .filter(|d| d.provider.name() == EMBEDDED_PROVIDER)
                .map_or("not embedded", |d| d.name.as_str()),
            list(fetched.into_iter()),
        ))
    }

    /// Resolves a model name.
    pub fn resolve(&self, name: &str) -> Result<ResolvedModel, String> {
        if let Some(d) = self.default.as_ref().filter(|d| d.name == name) {
            return Ok(d.clone());
        }
        let (provider_name, model_id, entry): (&str, String, Option<&ModelConfig>) = match self
            .config
            .models
            .get(name)
        {
            Some(m) => (
                &m.provider,
                m.name.clone().unwrap_or_else(|| name.to_owned()),
                Some(m),
            ),
            None => match name.split_once('/') {
                Some((p, id)) if self.providers.contains_key(p) => (p, id.to_owned(), None),
                _ => {
                    return Err(format!(
                        "unknown model `{name}`: configured models are {}; a model is a [models] entry of claij.toml or PROVIDER/MODEL-ID with PROVIDER one of {}",
                        list(self.config.models.keys()),
                        list(self.providers.keys())
                    ));
                }
            },
        };
        if let Some(m) = entry.filter(|m| m.path.is_some())
            && m.provider != EMBEDDED_PROVIDER
        {
            return Err(format!(
                "model `{name}` has a `path`, which only a model whose provider is `{EMBEDDED_PROVIDER}` takes (its provider is `{provider_name}`)"
            ));
        }
        let provider = match self.embedded_files.get(name) {
            Some(p) => Some(Arc::clone(p)),
            None if provider_name == EMBEDDED_PROVIDER => {
                self.embedded_by_name(name, entry.map(|m| m.name.as_deref()))?
            }
            None => self.providers.get(provider_name).cloned(),
        };
        let provider = provider.ok_or_else(|| {
            format!(
                "model `{name}` uses provider `{provider_name}`, which is not configured (providers: {}; a built-in provider needs its key in the environment)",
                list(self.providers.keys())
            )
        })?;
        let price = entry
            .and_then(|m| m.price)
            .or_else(|| self.config.prices.get(name).copied())
            // A catalog model run in process costs nothing.
            .or_else(|| {
                (entry.is_none() && provider_name == EMBEDDED_PROVIDER).then(Price::default)
            });
        Ok(ResolvedModel {
            name: name.to_owned(),
            model_id,
            price,
            enforce: entry.and_then(|m| m.enforce),
            escalate_enforce: entry.and_then(|m| m.escalate_enforce).unwrap_or(true),
            vote: entry.and_then(|m| m.vote),
            decoding: entry.map(ModelConfig::decoding).unwrap_or_default(),
            retry: self
                .retry_override
                .or_else(|| self.provider_retry.get(provider_name).copied())
                .unwrap_or_default(),
            provider,
        })
    }

    /// Calls `model`: from the tape when replaying, else through the provider with
    /// transient failures retried (and its answer or failure recorded when recording);
    /// the answer's text goes to `on_text` as it is produced, where the provider streams.
    pub async fn call(
        &self,
        model: &ResolvedModel,
        request: &ModelRequest,
        state: &str,
        on_text: Option<&TextSink>,
    ) -> Result<ModelResponse, ProviderError> {
        if let Some(tape) = &self.tape
            && let Some(answer) = tape.answer(request, state)
        {
            return answer;
        }
        let on_retry = |n: u32, e: &ProviderError, delay: Duration| {
            tracing::warn!(
                state,
                model = %model.name,
                retry = n,
                delay_ms = delay.as_millis() as u64,
                "transient model failure, retrying: {e}"
            );
        };
        let policy = self.retry_override.unwrap_or(model.retry);
        let outcome =
            complete_with_retries(model.provider.as_ref(), request, policy, &on_retry, on_text)
                .await;
        if let Some(tape) = &self.tape {
            tape.store(request, state, &outcome)
                .map_err(|e| ProviderError::Permanent {
                    provider: model.provider.name().to_owned(),
                    message: e.to_string(),
                })?;
        }
        outcome
    }
}

fn list<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let names: Vec<&str> = names.map(String::as_str).collect();
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn an_embedded_model_with_a_path_resolves_to_its_own_file() {
        let config = LlmConfig::parse(
            "default_model = \"mine\"\n[models.mine]\nprovider = \"embedded\"\npath = \"a.gguf\"\n[models.same]\nprovider = \"embedded\"\npath = \"a.gguf\"\n[models.other]\nprovider = \"embedded\"\npath = \"b.gguf\"\n",
            Path::new("/cfg/claij.toml"),
        )
        .unwrap();
        let layer = LlmLayer::with_env(config, &|_| None).unwrap();
        let mine = layer.for_run(None).unwrap();
        assert_eq!(mine.name, "mine");
        assert_eq!(mine.provider.name(), EMBEDDED_PROVIDER);
        let same = layer.resolve("same").unwrap();
        let other = layer.resolve("other").unwrap();
        assert!(
            Arc::ptr_eq(&mine.provider, &same.provider),
            "one file, one model"
        );
        assert!(!Arc::ptr_eq(&mine.provider, &other.provider));
    }

    #[test]
    fn a_path_on_a_model_of_another_provider_is_refused() {
        let config = LlmConfig::parse(
            "[providers.llama]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n[models.x]\nprovider = \"llama\"\npath = \"a.gguf\"\n",
            Path::new("c.toml"),
        )
        .unwrap();
        let layer = LlmLayer::with_env(config, &|_| None).unwrap();
        let e = layer.resolve("x").unwrap_err();
        assert!(
            e.contains("`x` has a `path`") && e.contains("`embedded`"),
            "{e}"
        );
    }

    /// Issue 36's finding: an entry that names a catalog model other than the default
    /// ran the default, silently. Now it runs the model named or is refused.
    #[test]
    fn an_embedded_model_named_by_catalog_name_is_that_model_or_refused() {
        let config = LlmConfig::parse(
            "[models.big]\nprovider = \"embedded\"\nname = \"qwen2.5-coder-1.5b\"\n\
             [models.small]\nprovider = \"embedded\"\nname = \"qwen2.5-coder-0.5b\"\n\
             [models.plain]\nprovider = \"embedded\"\n\
             [models.nonesuch]\nprovider = \"embedded\"\nname = \"qwen9\"\n",
            Path::new("/cfg/claij.toml"),
        )
        .unwrap();
        let mut layer = LlmLayer::with_env(config, &|_| None).unwrap();
        let file = claij_embedded::CATALOG
            .iter()
            .find(|m| m.name == "qwen2.5-coder-1.5b")
            .map(|m| m.file)
            .unwrap();
        let named = layer.default_to_embedded(Path::new("/models").join(file));
        assert_eq!(named.as_deref(), Some("embedded/qwen2.5-coder-1.5b"));
        let default = layer.for_run(None).unwrap();
        let big = layer.resolve("big").unwrap();
        assert!(
            Arc::ptr_eq(&default.provider, &big.provider),
            "the default, named"
        );
        let plain = layer.resolve("plain").unwrap();
        assert!(
            Arc::ptr_eq(&default.provider, &plain.provider),
            "neither name nor path: the default"
        );
        // The 0.5B model is another file: its own provider when fetched into this
        // machine's cache, else an error saying how to fetch it; never the default.
        match layer.resolve("small") {
            Ok(small) => assert!(!Arc::ptr_eq(&default.provider, &small.provider)),
            Err(e) => assert!(
                e.contains("not in the cache")
                    && e.contains("claij model fetch qwen2.5-coder-0.5b"),
                "{e}"
            ),
        }
        let e = layer.resolve("nonesuch").unwrap_err();
        assert!(
            e.contains("`qwen9` is not an embedded catalog model")
                && e.contains("qwen2.5-coder-1.5b"),
            "{e}"
        );
        let e = layer.resolve("embedded/qwen9").unwrap_err();
        assert!(
            e.contains("`qwen9` is not an embedded catalog model"),
            "{e}"
        );
    }
}
