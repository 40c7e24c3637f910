//! The MCP server: every served FSM's and bot's tools behind one `rmcp` handler.

use std::collections::HashMap;
use std::sync::Arc;

use claij_core::Fsm;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, ServerCapabilities,
    ServerConfig, SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Map;

use crate::bot_tools::{BotHost, BotVerb};
use crate::fsm_tools::{self, FsmVerb, RunWatch, Runtime};
use crate::prompts;
use crate::report::{LogLevel, RunReporter};
use crate::resources;
use crate::subscriptions::{self, Acknowledgments, Doorbell, Listener, Served, Subscriptions};
use crate::tool::{ToolOutput, ToolSpec};

/// Two served things would have a tool (or a prompt) of the same name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("duplicate {kind} name `{name}`: from {first} and from {second}")]
pub struct DuplicateTool {
    /// What is named twice: `tool` or `prompt`.
    pub kind: &'static str,
    /// The name.
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
    /// Rings for every entry of the runs this server drives (resource subscriptions).
    bell: Doorbell,
    /// The `subscriptions/listen` streams acknowledged, not yet followed.
    acks: Acknowledgments,
}

impl Inner {
    fn served(&self) -> Served<'_> {
        Served {
            runtime: &self.runtime,
            fsms: &self.fsms,
            bell: &self.bell,
        }
    }
}

/// The claij MCP server: FSM tools and bot tools. Cheap to clone; each MCP session has
/// its own ([`for_session`](Self::for_session)).
#[derive(Clone)]
pub struct McpServer {
    inner: Arc<Inner>,
    /// The log level this session asked for.
    level: LogLevel,
    /// The runs this session subscribed to.
    subscriptions: Arc<Subscriptions>,
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
                bell: Doorbell::new(),
                acks: Acknowledgments::default(),
            }),
            level: LogLevel::default(),
            subscriptions: Arc::default(),
        };
        let tools = server
            .tools_with_origin()
            .into_iter()
            .map(|(spec, origin)| ("tool", spec.name, origin));
        let prompts = prompts::names_with_origin(&server.inner.fsms, &server.inner.bots)
            .into_iter()
            .map(|(name, origin)| ("prompt", name, origin));
        let mut seen: HashMap<(&str, String), String> = HashMap::new();
        for (kind, name, origin) in tools.chain(prompts) {
            if let Some(first) = seen.insert((kind, name.clone()), origin.clone()) {
                return Err(DuplicateTool {
                    kind,
                    name,
                    first,
                    second: origin,
                });
            }
        }
        Ok(server)
    }

    /// The server for a new MCP session: the same tools, the session's own log level
    /// and subscriptions.
    pub fn for_session(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            level: LogLevel::default(),
            subscriptions: Arc::default(),
        }
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
            for verb in fsm_tools::verbs(fsm) {
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
    pub(crate) async fn call(
        &self,
        name: &str,
        args: Map<String, serde_json::Value>,
        watch: RunWatch,
    ) -> Option<ToolOutput> {
        let output = match self.route(name)? {
            Route::Fsm(fsm, verb) => {
                fsm_tools::call(&self.inner.runtime, fsm, verb, args, watch).await
            }
            Route::Bot(bot, verb) => {
                bot.call(verb, &args, &self.inner.runtime, watch.cancel)
                    .await
            }
        };
        Some(output)
    }
}

/// An MCP result from its JSON (built as the spec writes it), marked complete: from
/// 2026-07-28 every result says so (`resultType`; rmcp leaves it out for older peers).
fn from_json<T: serde::de::DeserializeOwned>(mut value: serde_json::Value) -> Result<T, ErrorData> {
    if let serde_json::Value::Object(result) = &mut value {
        result
            .entry("resultType")
            .or_insert_with(|| serde_json::json!("complete"));
    }
    serde_json::from_value(value).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities: ServerCapabilities = serde_json::from_value(serde_json::json!({
            "tools": {"listChanged": true},
            "logging": {},
            "resources": {"subscribe": true},
            "prompts": {},
            "completions": {},
        }))
        .unwrap_or_default();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("claij", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "claij workflows as tools. FSM tools: ID_start, ID_continue, ID_status; \
             a workflow may also be one plain tool of its own name. \
             Bot tools: BOT (continue), BOT_BEHAVIOR (jump to a behavior), \
             BOT_BEHAVIOR_ACTION (run an action), BOT_close_current_action (when the \
             person agrees the current action is done), BOT_restart (reload).",
            )
    }

    #[allow(deprecated)] // logging: see crate::report
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.level.set(request.level);
        Ok(())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        from_json(resources::list(&self.inner.runtime, &self.inner.fsms).await?)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        from_json(resources::templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let contents = resources::read(&self.inner.runtime, &self.inner.fsms, &request.uri).await?;
        from_json::<ReadResourceResult>(contents).map(Into::into)
    }

    #[allow(deprecated)] // resources/subscribe: the 2025-11-25 way; rmcp marks it legacy
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscriptions
            .subscribe(
                &self.inner.served(),
                Listener::Session(context.peer.clone()),
                &request.uri,
                None,
            )
            .await
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let uris = subscriptions::listenable(requested.resource_subscriptions.as_deref()?);
        let mut accepted = SubscriptionFilter::default();
        accepted.resource_subscriptions = Some(uris);
        // rmcp acknowledges the stream next, before `listen` runs.
        self.inner.acks.note();
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        // This stream's own subscriptions: they end with it.
        let stream = Arc::new(Subscriptions::default());
        let since = self.inner.acks.since();
        let served = self.inner.served();
        let listener = Listener::Stream(context.sink().clone());
        for uri in context.accepted().resource_subscriptions.iter().flatten() {
            // Acknowledged already: a URI that names no run of a served FSM is followed
            // by nothing.
            let _ = stream
                .subscribe(&served, listener.clone(), uri, Some(since))
                .await;
        }
        context.cancelled().await;
        Ok(())
    }

    #[allow(deprecated)] // see subscribe
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscriptions.unsubscribe(&request.uri);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        from_json(prompts::list(&self.inner.fsms, &self.inner.bots))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        from_json::<GetPromptResult>(prompts::get(
            &self.inner.fsms,
            &self.inner.bots,
            &request.name,
            &arguments,
        )?)
        .map(Into::into)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let request = serde_json::to_value(&request)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        from_json(prompts::complete(&self.inner.runtime, &self.inner.fsms, &request).await?)
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

    #[allow(deprecated)] // the request's log level: see crate::report
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let reporter = RunReporter::start(
            context.peer.clone(),
            context.meta.get_progress_token(),
            self.level.for_request(context.meta.log_level()),
        );
        let watch = RunWatch {
            cancel: context.ct.clone(),
            observers: reporter
                .iter()
                .map(|r| r.clone() as Arc<dyn claij_engine::Observer>)
                .chain([self.inner.bell.observer()])
                .collect(),
            asker: crate::fsm_tools::ask::PeerAsker::of(&context.peer),
        };
        let output = self.call(&request.name, args, watch).await;
        if let Some(reporter) = reporter {
            reporter.finish().await;
        }
        match output {
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::{Value, json};

    use super::*;
    use crate::test_bots::{TITLE_FSM, fsm, helper_bot, runtime, write};

    fn bot(dir: &Path, runtime: &Runtime) -> BotHost {
        helper_bot(&dir.join("bot"));
        BotHost::load(&dir.join("bot"), &dir.join("work"), runtime)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    async fn call(server: &McpServer, name: &str, args: Value) -> Option<ToolOutput> {
        let Value::Object(args) = args else {
            panic!("arguments are an object");
        };
        server.call(name, args, RunWatch::default()).await
    }

    /// A workflow served as the plain tool `shout`: it answers its input's text, upper
    /// case, as a text block, and an image when asked; a `person` waits for someone; a
    /// `bad` answer is refused by its schema with no attempt left.
    const SHOUT_FSM: &str = r#"
id: shout
description: Says it louder.
config: {mcp_tool: shout, max_attempts: 1}
states:
  - id: say
    action: transform
    config:
      template: >-
        {% if event.text == "bad" %}{"id": ["say", "done"], "oops": true}
        {% elif event.text == "person" %}{"id": ["say", "ask"]}
        {% else %}{"id": ["say", "done"], "content": [{"type": "text", "text": {{ event.text | upper | tojson }}}
        {% if event.image %}, {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}{% endif %}]}{% endif %}
  - id: ask
    action: human
  - id: done
    action: end
xitions:
  - id: [start, say]
    schema: {type: object, required: [text], properties: {text: {type: string}, image: {type: boolean}}}
  - id: [say, done]
    schema: {type: object, required: [content]}
  - id: [say, ask]
  - id: [ask, done]
    schema: {type: object, required: [content]}
"#;

    #[tokio::test]
    async fn a_workflow_served_as_a_plain_tool_answers_as_a_tool_does() {
        let dir = tempfile::tempdir().expect("tempdir");
        let runtime = runtime(dir.path()).await;
        let shout = fsm(dir.path(), "shout.yaml", SHOUT_FSM);
        let server =
            McpServer::new(runtime, vec![shout], Vec::new()).unwrap_or_else(|e| panic!("{e}"));
        let tools = server.tools();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            ["shout_start", "shout_continue", "shout_status", "shout"]
        );
        assert_eq!(tools[3].description, "Says it louder.");
        assert_eq!(tools[3].input_schema["required"], json!(["text"]));

        // Its final event's content blocks, as they are.
        let answered = call(&server, "shout", json!({"text": "hi", "image": true})).await;
        let Some(ToolOutput::Content(blocks)) = answered.clone() else {
            panic!("{answered:?}");
        };
        assert_eq!(blocks[0], json!({"type": "text", "text": "HI"}));
        assert_eq!(blocks[1]["type"], "image");
        let result =
            serde_json::to_value(answered.map(ToolOutput::into_result)).unwrap_or_default();
        assert_eq!(result["content"][0]["text"], "HI");
        assert_eq!(result["content"][1]["mimeType"], "image/png");
        assert_ne!(result["isError"], json!(true));

        // A failed run: an error result naming why and the run.
        let Some(ToolOutput::Error(why)) = call(&server, "shout", json!({"text": "bad"})).await
        else {
            panic!("a failed run answered as a success");
        };
        assert!(why.contains("content") && why.contains("(run "), "{why}");

        // A run that waits for a person: answered as `shout_start` answers.
        let Some(ToolOutput::Json(run)) = call(&server, "shout", json!({"text": "person"})).await
        else {
            panic!("a waiting run answered otherwise");
        };
        assert_eq!(run["status"], "suspended");
        assert_eq!(run["waiting_for"], json!([["ask", "done"]]));

        // Input its schema refuses: the problem, nothing started.
        let Some(ToolOutput::Error(refused)) = call(&server, "shout", json!({"text": 3})).await
        else {
            panic!("a refused input answered as a success");
        };
        assert!(refused.contains("input refused"), "{refused}");
    }

    #[test]
    fn content_that_is_not_mcp_content_is_an_error_naming_the_block() {
        let output = ToolOutput::Content(vec![
            json!({"type": "text", "text": "fine"}),
            json!({"type": "hologram"}),
        ]);
        let result = serde_json::to_value(output.into_result()).unwrap_or_default();
        assert_eq!(result["isError"], json!(true));
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        assert!(text.contains("content[1]"), "{text}");
    }

    #[tokio::test]
    async fn fsm_tools_come_first_then_each_bots_and_each_name_reaches_its_target() {
        let dir = tempfile::tempdir().expect("tempdir");
        let runtime = runtime(dir.path()).await;
        let title = fsm(dir.path(), "title.yaml", TITLE_FSM);
        let server = McpServer::new(
            runtime.clone(),
            vec![title],
            vec![bot(dir.path(), &runtime)],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<String> = server.tools().into_iter().map(|t| t.name).collect();
        assert_eq!(names.len(), 3 + 9);
        assert_eq!(
            names[..4],
            ["title_start", "title_continue", "title_status", "helper"]
        );

        // An FSM tool runs the FSM (its result is its input).
        let Some(ToolOutput::Json(run)) = call(&server, "title_start", json!({"title": "T"})).await
        else {
            panic!("title_start answered with an error");
        };
        assert_eq!(run["status"], "completed");
        assert_eq!(run["result"]["title"], "T");
        let run_id = run["run_id"].as_str().expect("a run id");
        let Some(ToolOutput::Json(status)) = call(
            &server,
            "title_status",
            json!({"run_id": run_id, "trail": false}),
        )
        .await
        else {
            panic!("title_status answered with an error");
        };
        assert_eq!(status["run_id"], run_id);
        assert_eq!(status["result"]["title"], "T");
        assert!(status.get("trail").is_none());
        // A completed run waits for nothing: continue refuses.
        let Some(ToolOutput::Error(e)) = call(
            &server,
            "title_continue",
            json!({"run_id": run_id, "input": {}}),
        )
        .await
        else {
            panic!("a completed run was continued");
        };
        assert!(e.contains("not suspended"), "{e}");

        // A bot's action tool runs that action.
        let Some(ToolOutput::Json(out)) = call(&server, "helper_plan_write", json!({})).await
        else {
            panic!("helper_plan_write answered with an error");
        };
        assert_eq!(
            (out["behavior"].clone(), out["action"].clone()),
            (json!("plan"), json!("write"))
        );
        assert!(call(&server, "helper_nope", json!({})).await.is_none());
        assert!(call(&server, "title_stop", json!({})).await.is_none());
    }

    #[tokio::test]
    async fn a_bots_prompt_named_like_an_fsms_prompt_is_refused_naming_both_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let runtime = runtime(dir.path()).await;
        // The FSM `helper_title` is a prompt; so is the bot `helper`'s `prompts/title.md`.
        let clash = fsm(
            dir.path(),
            "helper_title.yaml",
            &TITLE_FSM.replace("id: title", "id: helper_title"),
        );
        helper_bot(&dir.path().join("bot"));
        write(
            &dir.path().join("bot"),
            "prompts/title.md",
            "Give it a title.\n",
        );
        let host = BotHost::load(&dir.path().join("bot"), &dir.path().join("work"), &runtime)
            .unwrap_or_else(|e| panic!("{e}"));
        let err = match McpServer::new(runtime, vec![clash.clone()], vec![host]) {
            Err(e) => e,
            Ok(_) => panic!("two `helper_title` prompts were served"),
        };
        assert_eq!((err.kind, err.name.as_str()), ("prompt", "helper_title"));
        assert_eq!(err.first, clash.source);
        assert!(err.second.ends_with("prompts/title.md"), "{}", err.second);
    }

    #[tokio::test]
    async fn two_tools_of_one_name_are_refused_naming_both_origins() {
        let dir = tempfile::tempdir().expect("tempdir");
        let runtime = runtime(dir.path()).await;
        // An FSM whose id is the bot's name and a behavior named `start`: `helper_start`.
        let clash = fsm(
            dir.path(),
            "helper.yaml",
            &TITLE_FSM.replace("id: title", "id: helper"),
        );
        let host = bot(dir.path(), &runtime);
        write(
            &dir.path().join("bot"),
            "behaviors/start/behavior.yaml",
            "actions: [{name: go}]\n",
        );
        write(
            &dir.path().join("bot"),
            "bot.yaml",
            "name: helper\nbehaviors: [plan, review, start]\n",
        );
        let reloaded = BotHost::load(&dir.path().join("bot"), &dir.path().join("work"), &runtime)
            .unwrap_or_else(|e| panic!("{e}"));
        drop(host);
        let err = match McpServer::new(runtime.clone(), vec![clash.clone()], vec![reloaded]) {
            Err(e) => e,
            Ok(_) => panic!("two `helper_start` tools were served"),
        };
        assert_eq!(err.name, "helper_start");
        assert_eq!(err.first, clash.source);
        assert_eq!(
            err.second,
            dir.path().join("bot/bot.yaml").display().to_string()
        );

        // Within one bot: behavior `a` with action `b_c`, behavior `a_b` with action `c`.
        let other = dir.path().join("other");
        write(&other, "bot.yaml", "name: x\nbehaviors: [a, a_b]\n");
        write(
            &other,
            "behaviors/1_a/behavior.yaml",
            "actions: [{name: b_c}]\n",
        );
        write(
            &other,
            "behaviors/2_a_b/behavior.yaml",
            "actions: [{name: c}]\n",
        );
        let host = BotHost::load(&other, &dir.path().join("work"), &runtime)
            .unwrap_or_else(|e| panic!("{e}"));
        match McpServer::new(runtime.clone(), Vec::new(), vec![host]) {
            Err(e) => assert_eq!(e.name, "x_a_b_c"),
            Ok(_) => panic!("two `x_a_b_c` tools were served"),
        }

        // The same FSM twice.
        let title = fsm(dir.path(), "title.yaml", TITLE_FSM);
        match McpServer::new(runtime, vec![title.clone(), title], Vec::new()) {
            Err(e) => assert_eq!(e.name, "title_start"),
            Ok(_) => panic!("one FSM was served twice"),
        }
    }
}
