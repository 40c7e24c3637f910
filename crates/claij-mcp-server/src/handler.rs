//! The MCP server: every served FSM's and bot's tools behind one `rmcp` handler.

use std::collections::HashMap;
use std::sync::Arc;

use claij_core::Fsm;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Map;
use tokio_util::sync::CancellationToken;

use crate::bot_tools::{BotHost, BotVerb};
use crate::fsm_tools::{self, FsmVerb, Runtime};
use crate::tool::{ToolOutput, ToolSpec};

/// Two served things would have a tool of the same name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("duplicate tool name `{name}`: from {first} and from {second}")]
pub struct DuplicateTool {
    /// The tool name.
    pub name: String,
    /// Where the first one comes from (a file or folder).
    pub first: String,
    /// Where the second one comes from.
    pub second: String,
}

struct Inner {
    runtime: Runtime,
    fsms: Vec<Arc<Fsm>>,
    bots: Vec<BotHost>,
}

/// The claij MCP server: FSM tools and bot tools. Cheap to clone (one per HTTP session).
#[derive(Clone)]
pub struct McpServer {
    inner: Arc<Inner>,
}

/// What a tool name routes to.
enum Route<'a> {
    Fsm(&'a Arc<Fsm>, FsmVerb),
    Bot(&'a BotHost, BotVerb),
}

impl McpServer {
    /// A server for `fsms` and `bots`; refuses two tools of the same name.
    pub fn new(
        runtime: Runtime,
        fsms: Vec<Arc<Fsm>>,
        bots: Vec<BotHost>,
    ) -> Result<Self, DuplicateTool> {
        let server = Self {
            inner: Arc::new(Inner {
                runtime,
                fsms,
                bots,
            }),
        };
        let mut seen: HashMap<String, String> = HashMap::new();
        for (spec, origin) in server.tools_with_origin() {
            if let Some(first) = seen.insert(spec.name.clone(), origin.clone()) {
                return Err(DuplicateTool {
                    name: spec.name,
                    first,
                    second: origin,
                });
            }
        }
        Ok(server)
    }

    fn tools_with_origin(&self) -> Vec<(ToolSpec, String)> {
        let mut out = Vec::new();
        for fsm in &self.inner.fsms {
            for spec in fsm_tools::specs(fsm) {
                out.push((spec, fsm.source.clone()));
            }
        }
        for bot in &self.inner.bots {
            let origin = bot
                .bot()
                .dir
                .join(crate::bot_folder::BOT_FILE)
                .display()
                .to_string();
            for spec in bot.specs() {
                out.push((spec, origin.clone()));
            }
        }
        out
    }

    /// Every tool, in order: FSM tools, then each bot's.
    pub fn tools(&self) -> Vec<ToolSpec> {
        self.tools_with_origin()
            .into_iter()
            .map(|(s, _)| s)
            .collect()
    }

    fn route(&self, name: &str) -> Option<Route<'_>> {
        for fsm in &self.inner.fsms {
            for verb in FsmVerb::ALL {
                if fsm_tools::tool_name(fsm, verb) == name {
                    return Some(Route::Fsm(fsm, verb));
                }
            }
        }
        self.inner
            .bots
            .iter()
            .find_map(|bot| bot.route(name).map(|verb| Route::Bot(bot, verb)))
    }

    /// Calls the tool `name`; `None` when there is no such tool.
    pub async fn call(
        &self,
        name: &str,
        args: Map<String, serde_json::Value>,
        cancel: CancellationToken,
    ) -> Option<ToolOutput> {
        let output = match self.route(name)? {
            Route::Fsm(fsm, verb) => {
                fsm_tools::call(&self.inner.runtime, fsm, verb, args, cancel).await
            }
            Route::Bot(bot, verb) => bot.call(verb, &args, &self.inner.runtime, cancel).await,
        };
        Some(output)
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("claij", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "claij workflows as tools. FSM tools: ID_start, ID_continue, ID_status. \
             Bot tools: BOT (continue), BOT_BEHAVIOR (jump to a behavior), \
             BOT_BEHAVIOR_ACTION (run an action), BOT_close_current_action (when the \
             person agrees the current action is done), BOT_restart (reload).",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.tools().iter().map(ToolSpec::to_tool).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        match self.call(&request.name, args, context.ct.clone()).await {
            Some(output) => {
                if let ToolOutput::Json(v) = &output
                    && v.get("tools_changed") == Some(&serde_json::Value::Bool(true))
                {
                    let _ = context.peer.notify_tool_list_changed().await;
                }
                Ok(output.into_result().into())
            }
            None => Err(ErrorData::invalid_params(
                format!("unknown tool `{}`", request.name),
                None,
            )),
        }
    }
}
