//! The runtime registry of MCP connections: servers declared (by documents or by hand),
//! connected on first use, shared by every run, reconnected when they went away, and shut
//! down together.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

use claij_core::Fsm;

use crate::connection::{ClientHooks, Connection};
use crate::error::McpError;
use crate::process::Ending;
use crate::spec::ServerSpec;

/// MCP servers by name and their live connections. Non-serialisable: it lives beside the
/// engine (held by the `mcp` action and the schema provider), never in a run's context.
pub struct McpClient {
    hooks: ClientHooks,
    declared: Mutex<BTreeMap<String, ServerSpec>>,
    connections: RwLock<BTreeMap<String, Arc<Connection>>>,
    connecting: tokio::sync::Mutex<()>,
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
            connecting: tokio::sync::Mutex::new(()),
        })
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

    /// Declares the servers of a loaded document (its `servers`, hats included).
    pub fn declare_fsm(&self, fsm: &Fsm) -> Result<Vec<String>, McpError> {
        let mut names = Vec::new();
        for (name, value) in &fsm.servers {
            self.declare(name, ServerSpec::from_value(name, value)?)?;
            names.push(name.clone());
        }
        Ok(names)
    }

    /// Declares and connects every server of `fsm`, so its dynamic schemas resolve
    /// before the first state asks for them.
    pub async fn connect_fsm(&self, fsm: &Fsm) -> Result<(), McpError> {
        for name in self.declare_fsm(fsm)? {
            self.connect(&name).await?;
        }
        Ok(())
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

    /// The connection to `name`, if connected.
    pub fn connection(&self, name: &str) -> Option<Arc<Connection>> {
        self.connections
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }

    /// The names of the connected servers.
    pub fn connected_names(&self) -> Vec<String> {
        self.connections
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    /// Shuts every connection down (see [`Connection::shutdown`]); the processes are
    /// reaped when this returns.
    pub async fn shutdown(&self) -> Vec<(String, Option<Ending>)> {
        let all = std::mem::take(&mut *self.connections.write().unwrap_or_else(|p| p.into_inner()));
        let mut out = Vec::new();
        for (name, connection) in all {
            out.push((name, connection.shutdown().await));
        }
        out
    }
}
