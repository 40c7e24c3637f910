//! # claij-mcp
//!
//! claij's MCP client.

pub mod catalog;
pub mod connection;
pub mod error;
mod handler;
pub mod hooks;
pub mod process;
pub mod spec;

pub use catalog::Catalog;
pub use connection::{ClientHooks, Connection, Exchange, Reply};
pub use error::McpError;
pub use hooks::{ElicitationHandler, Elicited, HumanElicitation, SamplingHandler};
pub use spec::{ServerSpec, Transport};
