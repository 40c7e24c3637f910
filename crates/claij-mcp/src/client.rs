//! The runtime registry of MCP connections: servers declared (by documents or by hand),
//! connected on first use, shared by every run, reconnected when they went away, and shut
//! down together.
//!
//! Whose document declares a server decides which connection it gets. The operator's
//! documents (and servers declared by hand) share one namespace: a name is one server,
//! declared once, connected with the operator's stored credentials. An API client's
//! document never touches it: its servers are known by name *and* settings together,
//! connected on their own as the engine's [`Policy`] allows ([`Access::of`]: pinned to
//! the addresses checked, without the operator's credentials unless
//! `--allow-credentials` names the server) — so it cannot use a connection the
//! operator's document opened, cannot take a name before the operator's document
//! declares it, and reaches only the servers its own document declares.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

use claij_core::{Fsm, Owner};
use claij_engine::Policy;

use claij_engine::cassette::{Cassette, Kind};
use serde_json::json;

use crate::access::Access;
use crate::catalog::Catalog;
use crate::connection::{ClientHooks, Connection};
use crate::error::McpError;
use crate::process::Ending;
use crate::spec::ServerSpec;

/// MCP servers by name and their live connections. Non-serialisable: it lives beside the
/// engine (held by the `mcp` action and the schema provider), never in a run's context.
pub struct McpClient {
    hooks: ClientHooks,
    /// The operator's servers, by name.
    declared: Mutex<BTreeMap<String, ServerSpec>>,
    /// The operator's connections, by name.
    connections: RwLock<BTreeMap<String, Arc<Connection>>>,
    /// API clients' documents' connections, each known by its name and settings.
    theirs: RwLock<Vec<Arc<Connection>>>,
    connecting: tokio::sync::Mutex<()>,
    /// Where the servers' listings are recorded, or replayed from (nothing started).
    cassette: RwLock<Option<Arc<dyn Cassette>>>,
    /// The listings replayed from the cassette, by server name.
    replayed: RwLock<BTreeMap<String, Arc<Catalog>>>,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient")
            .field("hooks", &self.hooks)
            .field("connected", &self.connected_names())
            .finish()
    }
}

impl McpClient {
    /// A client with nothing declared, offering servers `hooks` (sampling, elicitation).
    pub fn new(hooks: ClientHooks) -> Arc<Self> {
        Arc::new(Self {
            hooks,
            declared: Mutex::new(BTreeMap::new()),
            connections: RwLock::new(BTreeMap::new()),
            theirs: RwLock::new(Vec::new()),
            connecting: tokio::sync::Mutex::new(()),
            cassette: RwLock::new(None),
            replayed: RwLock::new(BTreeMap::new()),
        })
    }

    /// Records the listings of the servers [`connect_document`](Self::connect_document)
    /// connects on `cassette`; or, when it replays, takes them from it and starts no
    /// server (the `mcp` action answers its requests from the cassette too).
    pub fn set_cassette(&self, cassette: Arc<dyn Cassette>) {
        *self.cassette.write().unwrap_or_else(|p| p.into_inner()) = Some(cassette);
    }

    /// The listing of `name` replayed from the cassette, if any.
    pub fn replayed_catalog(&self, name: &str) -> Option<Arc<Catalog>> {
        self.replayed
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }

    /// Declares server `name`. Declaring it again with the same spec is a no-op; with
    /// another spec it is an error (names are global to the client).
    pub fn declare(&self, name: &str, spec: ServerSpec) -> Result<(), McpError> {
        let mut declared = self.declared.lock().unwrap_or_else(|p| p.into_inner());
        match declared.get(name) {
            Some(existing) if *existing != spec => Err(McpError::Spec {
                server: name.to_owned(),
                message: "declared twice with different settings".to_owned(),
            }),
            Some(_) => Ok(()),
            None => {
                declared.insert(name.to_owned(), spec);
                Ok(())
            }
        }
    }

    /// Declares the servers of a loaded document (its `servers`, hats included): the
    /// operator's in the shared namespace; an API client's are only checked (they are
    /// connected on their own, see the module's text).
    pub fn declare_fsm(&self, fsm: &Fsm) -> Result<Vec<String>, McpError> {
        let mut names = Vec::new();
        for (name, value) in &fsm.servers {
            let spec = ServerSpec::from_value(name, value)?;
            if fsm.owner == Owner::Operator {
                self.declare(name, spec)?;
            }
            names.push(name.clone());
        }
        Ok(names)
    }

    /// Declares and connects every server of `fsm`, so its dynamic schemas resolve
    /// before the first state asks for them. An API client's document's servers are
    /// refused here: [`connect_document`](Self::connect_document) takes the policy that
    /// allows them.
    pub async fn connect_fsm(&self, fsm: &Fsm) -> Result<(), McpError> {
        self.connect_document(fsm, &Policy::nothing()).await
    }

    /// Declares and connects every server of `fsm` as its owner may reach them by
    /// `policy`.
    ///
    /// With a cassette ([`set_cassette`](Self::set_cassette)) each server's listing is
    /// recorded as `{server, method: "catalog"}`, its reply the catalog's JSON; replaying,
    /// the listings come from the cassette and no server is started.
    pub async fn connect_document(&self, fsm: &Fsm, policy: &Policy) -> Result<(), McpError> {
        let cassette = self
            .cassette
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for name in self.declare_fsm(fsm)? {
            let asked = json!({"server": name, "method": "catalog", "params": {}});
            let failed = |message: String| McpError::Cassette {
                server: name.clone(),
                message,
            };
            match &cassette {
                Some(c) if c.replaying() => {
                    let listed = c.replay(Kind::Mcp, &fsm.id, &asked).map_err(failed)?;
                    self.replayed
                        .write()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(name.clone(), Arc::new(Catalog::from_json(&listed)));
                }
                _ => {
                    let connection = self.connect_for(fsm, &name, policy).await?;
                    if let Some(c) = &cassette {
                        c.record(Kind::Mcp, &fsm.id, &asked, &connection.catalog().to_json())
                            .map_err(failed)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The live connection to the server `name` of `fsm`, for its owner: the operator's
    /// by name ([`connect`](Self::connect)); an API client's own, as `policy` allows.
    pub async fn connect_for(
        &self,
        fsm: &Fsm,
        name: &str,
        policy: &Policy,
    ) -> Result<Arc<Connection>, McpError> {
        if fsm.owner == Owner::Operator {
            return self.connect(name).await;
        }
        let value = fsm
            .servers
            .get(name)
            .ok_or_else(|| McpError::UnknownServer(name.to_owned()))?;
        let spec = ServerSpec::from_value(name, value)?;
        // Asked again at every connection: the policy, and what a name resolves to, may
        // have changed.
        let access = Access::of(fsm.owner, policy, name, &spec).await?;
        let _one_at_a_time = self.connecting.lock().await;
        let live = {
            let theirs = self.theirs.read().unwrap_or_else(|p| p.into_inner());
            theirs
                .iter()
                .find(|c| c.name() == name && *c.spec() == spec && !c.is_closed())
                .cloned()
        };
        if let Some(c) = live {
            return Ok(c);
        }
        let gone: Vec<Arc<Connection>> = {
            let mut theirs = self.theirs.write().unwrap_or_else(|p| p.into_inner());
            let (gone, kept) = std::mem::take(&mut *theirs)
                .into_iter()
                .partition(|c| c.is_closed());
            *theirs = kept;
            gone
        };
        for old in gone {
            // Reap what is left of an old process before starting a new one.
            old.shutdown().await;
        }
        let connection =
            Arc::new(Connection::connect_as(name, &spec, self.hooks.clone(), &access).await?);
        self.theirs
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(connection.clone());
        Ok(connection)
    }

    /// The live connection to `name`, connecting (or reconnecting, when the last one went
    /// away) as needed.
    pub async fn connect(&self, name: &str) -> Result<Arc<Connection>, McpError> {
        if let Some(c) = self.connection(name).filter(|c| !c.is_closed()) {
            return Ok(c);
        }
        let _one_at_a_time = self.connecting.lock().await;
        let stale = self.connection(name);
        if let Some(c) = stale.as_ref().filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        if let Some(old) = stale {
            // Reap what is left of the old process before starting a new one.
            old.shutdown().await;
        }
        let spec = self
            .declared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
            .ok_or_else(|| McpError::UnknownServer(name.to_owned()))?;
        let connection = Arc::new(Connection::connect(name, &spec, self.hooks.clone()).await?);
        self.connections
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_owned(), connection.clone());
        Ok(connection)
    }

    /// The connection to `name`, if connected: the operator's, else the newest open one
    /// of an API client's document (for the `mcp:…` schemas, which are named by server).
    pub fn connection(&self, name: &str) -> Option<Arc<Connection>> {
        let operators = self
            .connections
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned();
        operators.or_else(|| {
            self.theirs
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .rev()
                .find(|c| c.name() == name && !c.is_closed())
                .cloned()
        })
    }

    /// The names of the connected servers (and of those whose listings were replayed).
    pub fn connected_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .connections
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect();
        for c in self.theirs.read().unwrap_or_else(|p| p.into_inner()).iter() {
            if !names.iter().any(|n| n == c.name()) {
                names.push(c.name().to_owned());
            }
        }
        for name in self
            .replayed
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
        {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        names
    }

    /// Shuts every connection down (see [`Connection::shutdown`]); the processes are
    /// reaped when this returns.
    pub async fn shutdown(&self) -> Vec<(String, Option<Ending>)> {
        let all = std::mem::take(&mut *self.connections.write().unwrap_or_else(|p| p.into_inner()));
        let theirs = std::mem::take(&mut *self.theirs.write().unwrap_or_else(|p| p.into_inner()));
        let mut out = Vec::new();
        for (name, connection) in all {
            out.push((name, connection.shutdown().await));
        }
        for connection in theirs {
            out.push((connection.name().to_owned(), connection.shutdown().await));
        }
        out
    }
}
