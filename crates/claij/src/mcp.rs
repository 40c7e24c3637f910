//! The MCP client of this process: one for every command, registered in every engine's
//! registry (the `mcp` action and the `mcp:…` schemas), connected to a document's servers
//! once it is loaded, shut down (processes reaped) before the process exits.

use std::sync::{Arc, OnceLock};

use claij_core::Fsm;
use claij_engine::ActionRegistry;
use claij_mcp::{ClientHooks, HumanElicitation, McpClient};

fn client() -> &'static Arc<McpClient> {
    static CLIENT: OnceLock<Arc<McpClient>> = OnceLock::new();
    CLIENT.get_or_init(|| {
        // Elicitation asks at the terminal; sampling arrives with the model layer.
        McpClient::new(ClientHooks {
            sampling: None,
            elicitation: Some(Arc::new(HumanElicitation::terminal())),
        })
    })
}

/// Adds the `mcp` action and the `mcp:…` schema provider to `registry`.
pub fn register(registry: &mut ActionRegistry) {
    if let Err(e) = claij_mcp::register(registry, client()) {
        note!("claij: the MCP client could not be registered: {e}");
    }
}

/// Starts the servers `fsm` declares (none: nothing to do).
pub async fn connect(fsm: &Fsm) -> Result<(), claij_mcp::McpError> {
    if fsm.servers.is_empty() {
        return Ok(());
    }
    client().connect_fsm(fsm).await
}

/// Shuts every server down.
pub async fn shutdown() {
    client().shutdown().await;
}
