//! `claij mcp …`: serve workflows as MCP tools, or list what an MCP server offers.

use super::{mcp_serve, mcp_tools};
use crate::cli::McpCommand;

/// Runs a `claij mcp` subcommand.
pub(super) async fn mcp(command: McpCommand) -> u8 {
    match command {
        McpCommand::Serve(args) => mcp_serve::serve(args).await,
        McpCommand::Tools { url, json, command } => mcp_tools::tools(url, json, command).await,
    }
}
