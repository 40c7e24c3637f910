//! What every route shares: the assembled engine and the store's roles (given by the
//! binary), the definitions served, the live runs of this process, the settings.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock, RwLock};

use claij_core::Owner;
use claij_core::store::RunStore;
use claij_core::{Diagnostics, Fsm};
use claij_engine::migrate::VersionPolicy;
use claij_engine::{BoxFuture, Engine, Need, Refused};
use claij_store::roles::{Webhooks, WorkQueue};
use tokio_util::sync::CancellationToken;

use crate::config::ServerConfig;
use crate::live::Live;
use crate::webhook::Callbacks;

/// What the binary assembles once and hands to the server: the engine every run is
/// driven by (one model layer for all of them: a run's model is one of its options), and
/// how an FSM is made ready to run.
pub trait Assembly: Send + Sync {
    /// The engine.
    fn engine(&self) -> Arc<Engine>;

    /// Whether `model` (a request's run model) is one the engine's model layer knows;
    /// the reason when not.
    fn check_model(&self, model: &str) -> Result<(), String>;

    /// Makes `fsm` ready to run: the MCP servers it declares connected.
    fn prepare<'a>(&'a self, fsm: &'a Fsm) -> BoxFuture<'a, Result<(), String>>;
}

/// The roles of the store the server uses, handed over by the binary (which opens the
/// store: the server never does). One store, seen through each role.
#[derive(Clone)]
pub struct Stores {
    /// Runs, trails, definitions, spend, events: what the engine needs.
    pub runs: Arc<dyn RunStore>,
    /// Resume links, completion callbacks and their deliveries.
    pub webhooks: Arc<dyn Webhooks>,
    /// The workers' queue, shown at `/queue` (the server claims nothing from it).
    pub work_queue: Arc<dyn WorkQueue>,
}

/// An FSM the server runs.
#[derive(Clone)]
pub(crate) struct Served {
    /// The compiled FSM; its owner says whether it came from the operator (named on the
    /// command line, or the store says so) or from an API client.
    pub fsm: Arc<Fsm>,
}

impl Served {
    /// Whether the operator gave it: what its states touch is not limited.
    pub(crate) fn trusted(&self) -> bool {
        self.fsm.owner == Owner::Operator
    }
}

/// The shared state of the routes.
#[derive(Clone)]
pub(crate) struct AppState {
    /// The engine, and how FSMs are made ready.
    pub assembly: Arc<dyn Assembly>,
    /// Where runs are kept.
    pub store: Arc<dyn RunStore>,
    /// Where resume links, callbacks and deliveries are kept.
    pub webhooks: Arc<dyn Webhooks>,
    /// The workers' queue (read only).
    pub work_queue: Arc<dyn WorkQueue>,
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
    /// It would touch what the operator's policy does not allow API clients' documents.
    Refused(Vec<(Need, Refused)>),
    /// Its id is the operator's FSM's, which API clients may not replace.
    Owned {
        /// The FSM id.
        id: String,
    },
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

    /// The engine (every document is loaded with its registry).
    pub(crate) fn engine(&self) -> Arc<Engine> {
        self.assembly.engine()
    }

    /// Adds an FSM to those served.
    pub(crate) fn serve(&self, fsm: Arc<Fsm>) {
        let mut all = self.definitions.write().unwrap_or_else(|p| p.into_inner());
        all.entry(fsm.id.to_string())
            .or_default()
            .insert(fsm.version, Served { fsm });
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
    /// are not served yet. Those that no longer load, and API clients' that would touch
    /// what the policy no longer allows, are skipped with a warning.
    pub(crate) async fn load_stored(&self) -> Result<usize, claij_core::StoreError> {
        let engine = self.engine();
        let mut loaded = 0;
        for definition in self.store.definitions().await? {
            if self
                .find(&definition.fsm_id, Some(definition.version))
                .is_some()
            {
                continue;
            }
            let name = format!("{}@v{} (stored)", definition.fsm_id, definition.version);
            match claij_core::load_definition(&definition, engine.registry()) {
                Ok(fsm) => {
                    let refused = engine.policy().refusals(&fsm, engine.registry());
                    if let Some((need, why)) = refused.first() {
                        tracing::warn!(
                            "stored definition {name} is not served: at {}, {why}",
                            need.path
                        );
                        continue;
                    }
                    self.serve(Arc::new(fsm));
                    loaded += 1;
                }
                Err(d) => tracing::warn!("stored definition {name} does not load: {d}"),
            }
        }
        Ok(loaded)
    }

    /// Registers a document that arrived over the network, as an API client's: loaded and
    /// checked as `claij validate` does, refused if it would touch what the engine's
    /// policy does not allow or takes the id of an operator's FSM (unless the settings
    /// allow new versions of it), then stored (its `on_new_version` policy applied to the
    /// parked runs of older versions: what it moved and refused is returned) and served.
    pub(crate) async fn register(
        &self,
        document: serde_json::Value,
    ) -> Result<(Served, VersionPolicy), RegisterError> {
        let engine = self.engine();
        let mut fsm = claij_core::load_value("<request>", document, engine.registry())
            .map_err(RegisterError::Invalid)?;
        fsm.owner = Owner::Client;
        let refused = engine.policy().refusals(&fsm, engine.registry());
        if !refused.is_empty() {
            return Err(RegisterError::Refused(refused));
        }
        if !self.config.allows_new_versions_of(&fsm.id) && self.operator_owns(&fsm.id).await? {
            return Err(RegisterError::Owned {
                id: fsm.id.to_string(),
            });
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
        self.serve(fsm.clone());
        Ok((Served { fsm }, policy))
    }

    /// Whether a version of the FSM `id` is the operator's: served as such, or stored.
    async fn operator_owns(&self, id: &str) -> Result<bool, RegisterError> {
        let served = {
            let all = self.definitions.read().unwrap_or_else(|p| p.into_inner());
            all.get(id)
                .is_some_and(|versions| versions.values().any(Served::trusted))
        };
        if served {
            return Ok(true);
        }
        let stored = self
            .store
            .definitions()
            .await
            .map_err(RegisterError::Store)?;
        Ok(stored
            .iter()
            .any(|d| d.fsm_id == id && d.owner == Owner::Operator))
    }
}
