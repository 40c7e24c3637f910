//! `claij mcp …`: serve workflows as MCP tools, list what an MCP server offers, or call
//! one of its tools.

use super::{mcp_call, mcp_serve, mcp_tools};
use crate::cli::McpCommand;

/// Runs a `claij mcp` subcommand.
pub(super) async fn mcp(command: McpCommand) -> u8 {
    match command {
        McpCommand::Serve(args) => mcp_serve::serve(args).await,
        McpCommand::Tools { url, json, command } => mcp_tools::tools(url, json, command).await,
        McpCommand::Call {
            tool,
            args,
            url,
            elicit,
            json,
            command,
        } => {
            let spec = match mcp_tools::server_spec(url, command) {
                Some(spec) => spec,
                None => return crate::EXIT_USAGE,
            };
            mcp_call::call(spec, &tool, args.as_deref(), elicit.as_deref(), json).await
        }
    }
}
