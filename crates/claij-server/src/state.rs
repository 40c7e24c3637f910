//! What every route shares: the assembled engines and the store (given by the binary),
//! the definitions served, the live runs of this process, the settings.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock, RwLock};

use claij_core::store::RunStore;
use claij_core::{Diagnostics, Fsm};
use claij_engine::migrate::VersionPolicy;
use claij_engine::{BoxFuture, Engine, PrivilegedUse, privileged_uses};
use tokio_util::sync::CancellationToken;

use crate::callbacks::Callbacks;
use crate::config::ServerConfig;
use crate::live::Live;

/// What the binary assembles once and hands to the server: engines (one per run model,
/// the default's for `None`) and how an FSM is made ready to run.
pub trait Engines: Send + Sync {
    /// The engine whose `llm` states use `model` as the run's model (`None`: the
    /// configured default). An unknown model is refused with the reason.
    fn engine(&self, model: Option<&str>) -> Result<Arc<Engine>, String>;

    /// Makes `fsm` ready to run: the MCP servers it declares connected.
    fn prepare<'a>(&'a self, fsm: &'a Fsm) -> BoxFuture<'a, Result<(), String>>;
}

/// An FSM the server runs, and whether it came from the operator.
#[derive(Clone)]
pub(crate) struct Served {
    /// The compiled FSM.
    pub fsm: Arc<Fsm>,
    /// Named on the command line (trusted), or registered over the network or found in
    /// the store (checked for privileged uses).
    pub trusted: bool,
}

/// The shared state of the routes.
#[derive(Clone)]
pub(crate) struct AppState {
    /// The engines.
    pub engines: Arc<dyn Engines>,
    /// Where runs are kept.
    pub store: Arc<dyn RunStore>,
    /// The definitions served, by FSM id then version.
    pub definitions: Arc<RwLock<BTreeMap<String, BTreeMap<u32, Served>>>>,
    /// Live runs of this process: the doorbell of event streams.
    pub live: Live,
    /// The settings.
    pub config: Arc<ServerConfig>,
    /// Cancelled when the server stops.
    pub shutdown: CancellationToken,
    /// Completion callbacks: runs being started, the HTTP client.
    pub callbacks: Callbacks,
    /// The address bound, once it is.
    pub bound: Arc<OnceLock<SocketAddr>>,
    /// The event streams open (`/runs/{id}/events`, `GET /mcp`), capped.
    pub streams: claij_door::Streams,
}

/// Why a document was not registered.
#[derive(Debug)]
pub(crate) enum RegisterError {
    /// It does not load.
    Invalid(Diagnostics),
    /// It uses what only the operator may allow.
    Privileged(Vec<PrivilegedUse>),
    /// That id and version are taken by a different document.
    Taken {
        /// The FSM id.
        id: String,
        /// The version.
        version: u32,
    },
    /// The store failed.
    Store(claij_core::StoreError),
}

impl AppState {
    /// The server's address as others reach it, without a trailing `/`.
    pub(crate) fn public_url(&self) -> String {
        match (&self.config.public_url, self.bound.get()) {
            (Some(url), _) => url.trim_end_matches('/').to_owned(),
            (None, Some(addr)) => format!("http://{addr}"),
            (None, None) => String::new(),
        }
    }

    /// The default engine (every document is loaded with its registry).
    pub(crate) fn default_engine(&self) -> Result<Arc<Engine>, String> {
        self.engines.engine(None)
    }

    /// Adds an FSM to those served.
    pub(crate) fn serve(&self, fsm: Arc<Fsm>, trusted: bool) {
        let mut all = self.definitions.write().unwrap_or_else(|p| p.into_inner());
        all.entry(fsm.id.to_string())
            .or_default()
            .insert(fsm.version, Served { fsm, trusted });
    }

    /// The served FSM `id` (its newest version, or `version`).
    pub(crate) fn find(&self, id: &str, version: Option<u32>) -> Option<Served> {
        let all = self.definitions.read().unwrap_or_else(|p| p.into_inner());
        let versions = all.get(id)?;
        match version {
            Some(v) => versions.get(&v).cloned(),
            None => versions.values().next_back().cloned(),
        }
    }

    /// Every served FSM, newest version of each id, by id.
    pub(crate) fn newest(&self) -> Vec<Served> {
        let all = self.definitions.read().unwrap_or_else(|p| p.into_inner());
        all.values()
            .filter_map(|versions| versions.values().next_back().cloned())
            .collect()
    }

    /// Loads the definitions the store holds (registered earlier, or run by the CLI) that
    /// are not served yet. Those that no longer load are skipped with a warning.
    pub(crate) async fn load_stored(&self) -> Result<usize, claij_core::StoreError> {
        let engine = match self.default_engine() {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!("no engine to load stored definitions with: {e}");
                return Ok(0);
            }
        };
        let mut loaded = 0;
        for definition in self.store.definitions().await? {
            if self
                .find(&definition.fsm_id, Some(definition.version))
                .is_some()
            {
                continue;
            }
            let name = format!("{}@v{} (stored)", definition.fsm_id, definition.version);
            match claij_core::load_value(&name, definition.document, engine.registry()) {
                Ok(fsm) => {
                    self.serve(Arc::new(fsm), false);
                    loaded += 1;
                }
                Err(d) => tracing::warn!("stored definition {name} does not load: {d}"),
            }
        }
        Ok(loaded)
    }

    /// Registers a document that arrived over the network: loaded and checked as
    /// `claij validate` does, refused if it uses a privilege the configuration does not
    /// allow, then stored (its `on_new_version` policy applied to the parked runs of older
    /// versions: what it moved and refused is returned) and served.
    pub(crate) async fn register(
        &self,
        document: serde_json::Value,
    ) -> Result<(Served, VersionPolicy), RegisterError> {
        let engine = self
            .default_engine()
            .map_err(|e| RegisterError::Store(claij_core::StoreError::Backend(e)))?;
        let fsm = claij_core::load_value("<request>", document, engine.registry())
            .map_err(RegisterError::Invalid)?;
        let refused: Vec<PrivilegedUse> = privileged_uses(&fsm.document)
            .into_iter()
            .filter(|u| !self.config.allow.allows(u))
            .collect();
        if !refused.is_empty() {
            return Err(RegisterError::Privileged(refused));
        }
        if let Some(existing) = self.find(&fsm.id, Some(fsm.version))
            && existing.fsm.hash != fsm.hash
        {
            return Err(RegisterError::Taken {
                id: fsm.id.to_string(),
                version: fsm.version,
            });
        }
        // Stored, then the document's `on_new_version` policy applied to older runs.
        let policy = engine
            .register_version(&self.store, &fsm)
            .await
            .map_err(RegisterError::Store)?;
        let fsm = Arc::new(fsm);
        self.serve(fsm.clone(), false);
        Ok((
            Served {
                fsm,
                trusted: false,
            },
            policy,
        ))
    }
}
