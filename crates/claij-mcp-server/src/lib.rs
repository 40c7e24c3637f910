//! # claij-mcp-server
//!
//! claij workflows as MCP tools, over stdio and streamable HTTP (`rmcp`):
//!
//! - **FSMs as tools** ([`fsm_tools`]): `ID_start`, `ID_continue`, `ID_status` per FSM;
//!   runs live in the store, so they survive a restart of the server.
//! - **Bots** ([`bot_folder`], [`bot_tools`], [`workflow_state`]): the bot → behavior →
//!   action decomposition generated from a bot's folder of config, with its workflow
//!   state persisted in one file and explicit completion through a close tool.
//!
//! Build a [`McpServer`] from a [`Runtime`], FSMs and [`BotHost`]s, then
//! [`serve_stdio`] or [`serve_http`]. The formats are documented in docs/MCP-SERVER.md.
//!
//! # Modules
//!
//! - `handler`: `McpServer`, the rmcp server handler over every served FSM's and bot's
//!   tools, resources and prompts, one per session.
//! - `fsm_tools`: an FSM's tools (`ID_start`, `ID_continue`, `ID_status`, and a plain
//!   tool when its document names one) and the `Runtime` (engine and store) they run on.
//! - `tool`: tools as plain data (`ToolSpec`, `ToolOutput`), turned into rmcp types.
//! - `ask` (private): a person's step of a workflow served as a plain tool, asked
//!   through the client's elicitation.
//! - `report` (private): progress and log notifications as a tool call's run moves.
//! - `resources` (private): FSMs and runs as MCP resources.
//! - `subscriptions` (private): following runs a client subscribed to.
//! - `prompts` (private): FSMs and bots' prompts as MCP prompts, and completions.
//! - `bot_folder`: a bot's folder loaded and checked, every problem naming its file.
//! - `bot_tools`: `BotHost`, a bot's behavior and action tools.
//! - `bot_prompts`: a bot's `prompts/NAME.md` files, rendered with their arguments.
//! - `workflow_state`: a bot's workflow state, kept in one file, saved atomically.
//! - `serve`: the transports: stdio, and streamable HTTP through claij-door.

pub mod bot_folder;
pub mod bot_prompts;
pub mod bot_tools;
pub mod fsm_tools;
pub mod handler;
mod prompts;
mod report;
mod resources;
pub mod serve;
mod subscriptions;
pub mod tool;
pub mod workflow_state;

#[cfg(test)]
mod test_bots;

pub use bot_folder::{Bot, BotErrors, BotProblem, load_bot};
pub use bot_tools::BotHost;
pub use fsm_tools::Runtime;
pub use handler::{DuplicateTool, McpServer};
pub use serve::{
    Caps, DEFAULT_MAX_SESSIONS, HTTP_PATH, HttpSettings, ServeError, http_router, serve_http,
    serve_stdio,
};
pub use tool::ToolSpec;
