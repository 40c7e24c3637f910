//! The composition root: the one place the application is assembled. `main` starts an
//! [`App`] (trace export, as the environment asks) and hands it to the chosen command;
//! the command asks it for what it needs, nothing more — a registry to read documents
//! with ([`App::reader`]), engines over the model layers its flags configure
//! ([`models`], [`App::engine`]; the operator's `[timeouts]` given to each engine's
//! registry; [`App::taped_engine`] for `claij run` and `claij runs resume`, whose
//! programs and MCP servers are recorded on or replayed from the model layer's tape),
//! the MCP client its documents' servers are connected on
//! ([`App::mcp`]). Commands that run nothing (`validate`, `graph`, `model`, `schema`,
//! the store's listings) build no engine; `validate` builds a model layer only to check
//! the model names of its documents, the others none.
//!
//! A command has one MCP client, shared by every engine it assembles (one connection per
//! server, whichever engine calls it). Each engine's `mcp` action answers the sampling
//! requests servers make during its calls with that engine's model layer (its
//! configuration, the run's model, its tape); the client answers the rare request no call
//! waits on with the layer of the command's first engine (its main one).

use std::path::Path;
use std::sync::{Arc, Mutex};

use std::collections::BTreeMap;

use claij_core::Timeout;
use claij_engine::{ActionRegistry, Cassette, Engine, UnknownTimeoutAction};
use claij_llm::providers::embedded::default_model_file;
use claij_llm::{LlmConfig, LlmLayer};

use crate::cli::{ExchangeArgs, LlmArgs};
use crate::mcp::Mcp;
use crate::telemetry::Telemetry;

/// The application, as assembled for one command. Cheap to clone (one shared inside).
#[derive(Clone)]
pub(crate) struct App {
    inner: Arc<Inner>,
}

struct Inner {
    telemetry: Telemetry,
    /// The command's MCP client, made with its first engine.
    mcp: Mutex<Option<Mcp>>,
}

impl App {
    /// Starts the application: trace export as the environment asks. Outside the async
    /// runtime (the exporter's client blocks on a thread of its own).
    pub(crate) fn start() -> Result<App, String> {
        Ok(App {
            inner: Arc::new(Inner {
                telemetry: Telemetry::start()?,
                mcp: Mutex::new(None),
            }),
        })
    }

    /// An engine over `layer`: its `llm` states and the sampling requests of the MCP
    /// servers it calls use that layer; observed by the trace exporter when there is one.
    /// `durable`: its `human` states suspend the run when there is a store to wait in
    /// (else they ask at the terminal). Its registry has every layer's action: `mcp`
    /// (the command's client), `http` (claij-http) and `llm`.
    pub(crate) fn engine(&self, durable: bool, layer: Arc<LlmLayer>) -> Engine {
        let registry = self.registry(durable, &layer);
        self.assembled(registry)
    }

    /// The registry of an [`engine`](Self::engine) over `layer`.
    fn registry(&self, durable: bool, layer: &Arc<LlmLayer>) -> ActionRegistry {
        let mut registry = if durable {
            ActionRegistry::durable()
        } else {
            ActionRegistry::with_builtins()
        };
        self.client(layer).register(&mut registry, layer);
        claij_http::register(&mut registry);
        claij_llm::register(&mut registry, layer.clone());
        // Checked against the registry when the configuration was read (see `models`).
        if let Err(e) = timed(&mut registry, &layer.config().timeouts) {
            tracing::warn!("{e}");
        }
        registry
    }

    /// An engine running `registry`'s actions, observed by the trace exporter when there
    /// is one.
    fn assembled(&self, registry: ActionRegistry) -> Engine {
        self.inner
            .telemetry
            .install(Engine::new(Arc::new(registry)))
    }

    /// An [`engine`](Self::engine) whose programs and MCP servers are recorded on, or
    /// replayed from, `layer`'s tape beside its models (`claij run --record` /
    /// `--replay`; see `claij_engine::cassette`): replaying, the command's MCP client
    /// starts no server and `command` states run no program.
    pub(crate) fn taped_engine(&self, durable: bool, layer: Arc<LlmLayer>) -> Engine {
        let Some(tape) = layer.tape() else {
            return self.engine(durable, layer);
        };
        let cassette: Arc<dyn Cassette> = tape;
        let mut registry = self.registry(durable, &layer);
        registry.set_cassette(cassette.clone());
        self.client(&layer).set_cassette(cassette);
        self.assembled(registry)
    }

    /// A durable [`engine`](Self::engine) over the model configuration found in the
    /// documented places (see [`default_models`]).
    pub(crate) fn default_engine(&self) -> Engine {
        self.engine(true, Arc::new(default_models().layer))
    }

    /// A registry to read and check documents with: every action the durable engines
    /// know, with the same configuration schemas; nothing in it runs.
    pub(crate) fn reader(&self) -> ActionRegistry {
        reading_registry()
    }

    /// The command's MCP client, on which its documents' servers are connected (made
    /// with its first engine; one without sampling if it has none).
    pub(crate) fn mcp(&self) -> Mcp {
        self.lock_mcp()
            .get_or_insert_with(|| Mcp::new(None))
            .clone()
    }

    /// The command's MCP client, made now when it has none, `layer` answering the
    /// sampling requests no engine's call waits on.
    fn client(&self, layer: &Arc<LlmLayer>) -> Mcp {
        self.lock_mcp()
            .get_or_insert_with(|| Mcp::new(Some(layer.clone())))
            .clone()
    }

    fn lock_mcp(&self) -> std::sync::MutexGuard<'_, Option<Mcp>> {
        self.inner.mcp.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Shuts the command's MCP servers down (processes reaped).
    pub(crate) async fn shutdown(&self) {
        let mcp = self.lock_mcp().clone();
        if let Some(mcp) = mcp {
            mcp.shutdown().await;
        }
    }

    /// Telemetry's layer for the process's tracing subscriber ([`crate::logs`]): what
    /// the surfaces report around runs, exported with them; none without export.
    pub(crate) fn tracing_layer(&self) -> Option<crate::logs::Beside> {
        self.inner.telemetry.layer()
    }

    /// Sends the spans still buffered (after the async runtime is gone).
    pub(crate) fn finish(&self) {
        self.inner.telemetry.finish();
    }
}

/// A registry to read documents with (see [`App::reader`]).
fn reading_registry() -> ActionRegistry {
    let mut registry = ActionRegistry::durable();
    Mcp::new(None).register_for_reading(&mut registry);
    claij_http::register(&mut registry);
    claij_llm::register(&mut registry, Arc::new(LlmLayer::default()));
    registry
}

/// Gives `registry` the operator's attempt timeouts (`[timeouts]` of claij.toml);
/// fails on a name that is no action.
pub(crate) fn timed(
    registry: &mut ActionRegistry,
    timeouts: &BTreeMap<String, Timeout>,
) -> Result<(), UnknownTimeoutAction> {
    timeouts
        .iter()
        .try_for_each(|(action, t)| registry.set_default_timeout(action, *t))
}

/// The configuration from `config` (else the documented places; none is fine), its
/// `[timeouts]` checked: each names an action.
pub(crate) fn configuration(config: Option<&Path>) -> anyhow::Result<LlmConfig> {
    let (found, path) = LlmConfig::discover(config)?;
    if let Err(e) = timed(&mut reading_registry(), &found.timeouts) {
        let place = path.map_or_else(
            || "the configuration".to_owned(),
            |p| p.display().to_string(),
        );
        anyhow::bail!("{place}: [timeouts]: {e}");
    }
    Ok(found)
}

/// A command's model layer, and the embedded model's name when it is the model `llm`
/// states use because nothing else is configured (no `--model`, no default).
pub(crate) struct Models {
    /// The layer.
    pub(crate) layer: LlmLayer,
    /// The embedded default's name, when it is the one used.
    pub(crate) embedded: Option<String>,
}

/// The model layer of a command: the configuration from `config` (else the documented
/// places), `model` as the command's model (`--model`: what runs use when their states
/// name none), the embedded model as the default when nothing else is configured.
pub(crate) fn models(config: Option<&Path>, model: Option<String>) -> anyhow::Result<Models> {
    Ok(completed(LlmLayer::new(configuration(config)?)?, model))
}

/// [`models`] for commands with no model flags: the configuration found in the
/// documented places (none when it cannot be read), the embedded default.
pub(crate) fn default_models() -> Models {
    completed(LlmLayer::discover(None).unwrap_or_default(), None)
}

/// `layer` with `model` as the command's model and the embedded model as its default.
fn completed(mut layer: LlmLayer, model: Option<String>) -> Models {
    layer.prefer(model);
    let embedded = layer
        .default_to_embedded(default_model_file())
        .filter(|_| !layer.has_preferred());
    Models { layer, embedded }
}

/// The model layer of a command that runs with `LlmArgs` (`claij run`, `claij runs
/// resume`): [`models`], recording or replaying its exchanges as they say.
pub(crate) fn run_models(args: &LlmArgs) -> anyhow::Result<Models> {
    let mut models = models(args.exchanges.config.as_deref(), args.model.clone())?;
    taped(&mut models.layer, &args.exchanges)?;
    Ok(models)
}

/// Records `layer`'s exchanges to `--record`, or answers them from `--replay`.
pub(crate) fn taped(layer: &mut LlmLayer, exchanges: &ExchangeArgs) -> anyhow::Result<()> {
    if let Some(path) = &exchanges.record {
        layer.set_tape(claij_llm::Tape::record(path));
    }
    if let Some(path) = &exchanges.replay {
        layer.set_tape(claij_llm::Tape::replay(path)?);
    }
    Ok(())
}
