//! The `mcp` action: runs the requests of its input event against the servers and sends
//! their results back to the state that asked.
//!
//! Input: `{"id": [caller, me], "requests": [{"server", "method", "params"}, …]}` (a
//! single request without the `requests` array is accepted too). Output:
//! `{"id": [me, caller], "results": [{"server", "method", "result" | "error",
//! "notifications"?}, …]}`, in the order of the requests. A tool result with `isError`,
//! a JSON-RPC error and a timeout are results carrying the server's message under
//! `error` (or, with `config.on_error: fail`, a failure of the attempt); a server that
//! cannot be started or goes away mid-call is a failure with the tail of its stderr.

use std::sync::Arc;

use claij_engine::capability::{Field, Need, NeedsOf, Touch};
use claij_engine::cassette::{Cassette, Kind};
use claij_engine::{Action, ActionError, ActionInput, ActionOutput, BoxFuture, Call, Outcome};
use serde_json::{Value, json};

use crate::client::McpClient;
use crate::connection::Reply;
use crate::error::McpError;
use crate::hooks::{Caller, SamplingHandler};
use crate::spec::ServerSpec;

/// The `mcp` action over an [`McpClient`].
#[derive(Clone)]
pub struct McpAction {
    client: Arc<McpClient>,
    /// Answers the sampling requests servers make during this action's calls, when not
    /// the client's hook: the model layer of the engine the action is registered in.
    sampling: Option<Arc<dyn SamplingHandler>>,
}

impl std::fmt::Debug for McpAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpAction")
            .field("client", &self.client)
            .field("sampling", &self.sampling.is_some())
            .finish()
    }
}

impl McpAction {
    /// The action, using `client`'s connections; servers' sampling requests during its
    /// calls go to the client's hook.
    pub fn new(client: Arc<McpClient>) -> Self {
        Self {
            client,
            sampling: None,
        }
    }

    /// The action with servers' sampling requests during its calls answered by
    /// `sampling` (the model layer of the engine it serves) rather than the client's
    /// hook. The client must offer sampling (a hook in its [`ClientHooks`]) for servers
    /// to ask.
    ///
    /// [`ClientHooks`]: crate::ClientHooks
    pub fn answering_sampling_with(mut self, sampling: Arc<dyn SamplingHandler>) -> Self {
        self.sampling = Some(sampling);
        self
    }
}

/// The servers a state may use: those `config.servers` names that the document declares
/// (a name it does not declare is another document's server), else every server of the
/// document.
fn usable_servers(config: &Value, fsm: &claij_core::Fsm) -> Vec<String> {
    match config["servers"].as_array() {
        Some(list) => list
            .iter()
            .filter_map(Value::as_str)
            .filter(|name| fsm.servers.contains_key(*name))
            .map(str::to_owned)
            .collect(),
        None => fsm.servers.keys().cloned().collect(),
    }
}

/// The text of a tool result's content (what `isError` results explain themselves with).
fn content_text(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

impl Action for McpAction {
    fn config_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "servers": {
                    "description": "The servers this state may call (default: every server of the document).",
                    "type": "array", "items": {"type": "string"}
                },
                "reply_to": {
                    "description": "Where results go (default: the state the request came from).",
                    "type": "string"
                },
                "on_error": {
                    "description": "`event` (default): errors are results the caller sees; `fail`: an error fails the attempt.",
                    "enum": ["event", "fail"]
                }
            },
            "additionalProperties": false
        })
    }

    /// The servers the state may use, each touching what its entry says
    /// ([`SERVER_FIELDS`](crate::spec::SERVER_FIELDS)).
    fn touches(&self) -> &'static [Field] {
        const FIELDS: &[Field] = &[
            Field::new("/servers", Touch::Servers),
            Field::inert("/reply_to"),
            Field::inert("/on_error"),
        ];
        FIELDS
    }

    /// What the servers it may use touch (every server of the document when
    /// `config.servers` does not say).
    fn needs(&self, of: NeedsOf<'_>) -> Vec<Need> {
        let mut needs = of.from_fields(self.touches());
        for name in usable_servers(of.config, of.fsm) {
            needs.extend(crate::spec::server_needs(of.fsm, &name));
        }
        needs
    }

    fn run<'a>(&'a self, input: ActionInput<'a>) -> BoxFuture<'a, Result<Outcome, ActionError>> {
        Box::pin(async move {
            let config = &input.state.config;
            let me = input.state.id.to_string();
            let reply_to = match config["reply_to"].as_str() {
                Some(to) => to.to_owned(),
                None if &*input.input_transition.from != claij_core::START => {
                    input.input_transition.from.to_string()
                }
                None => {
                    return Err(ActionError::fatal(format!(
                        "state `{me}` is entered from `start`: say where results go with `config.reply_to`"
                    )));
                }
            };
            let fail_on_error = config["on_error"] == "fail";
            self.client
                .declare_fsm(input.fsm)
                .map_err(|e| ActionError::fatal(e.to_string()))?;
            let allowed = usable_servers(config, input.fsm);
            // What the document's owner may touch, asked again now: a client's document
            // reaches only the programs, files and hosts the operator allows, however it
            // was registered.
            let policy = input.scope.engine.policy();
            for name in &allowed {
                for need in crate::spec::server_needs(input.fsm, name) {
                    policy.permit(input.fsm.owner, &need).map_err(|refused| {
                        ActionError::fatal(format!(
                            "state `{me}`, MCP server `{name}` ({}): {refused}",
                            need.path
                        ))
                    })?;
                }
            }
            let requests: Vec<Value> = match input.event.get("requests") {
                Some(Value::Array(list)) => list.clone(),
                Some(other) => {
                    return Err(ActionError::failed(format!(
                        "`requests` must be an array of requests, got {other}"
                    )));
                }
                None if input.event.get("method").is_some() => vec![input.event.clone()],
                None => {
                    return Err(ActionError::failed(
                        "the event holds no `requests` (a list of {server, method, params})",
                    ));
                }
            };
            let mut results = Vec::with_capacity(requests.len());
            for request in &requests {
                let server = match request["server"].as_str() {
                    Some(s) => s.to_owned(),
                    None if allowed.len() == 1 => allowed[0].clone(),
                    None => {
                        return Err(ActionError::failed(format!(
                            "request {request} names no `server` (one of {allowed:?})"
                        )));
                    }
                };
                let method = request["method"].as_str().unwrap_or_default().to_owned();
                let mut item = json!({"server": server, "method": method});
                if !allowed.contains(&server) {
                    item["error"] = json!({"message": format!(
                        "state `{me}` may not use the server `{server}` (allowed: {allowed:?})"
                    )});
                    results.push(item);
                    continue;
                }
                let params = request.get("params").cloned().unwrap_or_else(|| json!({}));
                // What a cassette knows the request by: without `_meta`, which carries
                // what changes from one run to the next (trace contexts, tokens).
                let asked =
                    json!({"server": server, "method": method, "params": without_meta(&params)});
                let cassette = input.scope.engine.cassette();
                let called = match cassette.filter(|c| c.replaying()) {
                    // Nothing is started: the server's answer is the cassette's.
                    Some(c) => replayed(c.as_ref(), &me, input.fsm, &asked, item),
                    None => {
                        let called = self
                            .call(
                                &input,
                                results.len(),
                                (&server, &method, params),
                                &reply_to,
                                item,
                            )
                            .await;
                        if input.questions.asked().is_some() {
                            // The run stops for the server's question; the rest of the
                            // batch is made when the attempt is made again.
                            return Err(ActionError::failed(
                                "stopped for an MCP server's question",
                            ));
                        }
                        if let Some(c) = cassette {
                            let reply = match &called {
                                Ok(item) => item.clone(),
                                Err(e) => json!({"failed": e.message, "fatal": !e.retryable}),
                            };
                            c.record(Kind::Mcp, &me, &asked, &reply)
                                .map_err(|m| ActionError::fatal(format!("state `{me}`: {m}")))?;
                        }
                        called
                    }
                };
                let item = called?;
                if fail_on_error && let Some(message) = item["error"]["message"].as_str() {
                    let mut error =
                        ActionError::failed(format!("`{method}` on `{server}`: {message}"));
                    error.output = item;
                    return Err(error);
                }
                results.push(item);
            }
            Ok(Outcome::Emit(ActionOutput::event(
                json!({"id": [me, reply_to], "results": results}),
            )))
        })
    }
}

impl McpAction {
    /// Makes the request `index` of the batch — `(server, method, params)` — to the
    /// document's server (connected as its owner may reach it): `item` with the server's
    /// `result`, or its `error`, and its `notifications`.
    async fn call(
        &self,
        input: &ActionInput<'_>,
        index: usize,
        (server, method, params): (&str, &str, Value),
        reply_to: &str,
        mut item: Value,
    ) -> Result<Value, ActionError> {
        let policy = input.scope.engine.policy();
        // The document's own server, as its owner may reach it.
        let connection = self
            .client
            .connect_for(input.fsm, server, policy)
            .await
            .map_err(|e| match e {
                McpError::Refused { .. } => ActionError::fatal(e.to_string()),
                e => ActionError::failed(e.to_string()),
            })?;
        if method == "tools/call"
            && let Some(tool) = params["name"].as_str()
            && !connection.spec().exposes_tool(tool)
        {
            item["error"] = not_exposed(tool, server, connection.spec());
            return Ok(item);
        }
        // A tool call may change the world: it carries a key of its own, the same when the
        // attempt is made again, and (durable runs) is noted in the store before it is
        // sent, so that a crash leaves a record of it.
        let idempotency_key = (method == "tools/call").then(|| input.call_key(index));
        if let Some(key) = &idempotency_key {
            input
                .meter
                .before_side_effect(claij_core::Intent {
                    kind: claij_core::IntentKind::Tool,
                    name: params["name"].as_str().unwrap_or_default().to_owned(),
                    server: Some(server.to_owned()),
                    key: key.clone(),
                })
                .await
                .map_err(|e| {
                    ActionError::failed(format!(
                        "state `{}`: the call to `{server}` could not be noted as in flight: {e}",
                        input.state.id
                    ))
                })?;
        }
        let caller = Caller {
            info: json!({
                "run_id": input.run_id,
                "state": reply_to,
                "config": input.fsm.state(reply_to).map(|s| s.config.clone()),
                "model": input.scope.model,
            }),
            meter: input.meter.clone(),
            questions: input.questions.clone(),
            deadline: Some(std::time::Instant::now() + connection.spec().timeout),
            traceparent: input.trace_context(Call::Request(index)),
            idempotency_key,
        };
        let exchange = connection
            .request_answered_by(
                method,
                params,
                input.cancel,
                Some(caller),
                self.sampling.clone(),
            )
            .await
            .map_err(|e| match e {
                // Asking again with the same tokens cannot help: a person must
                // grant more (the message says how).
                McpError::InsufficientScope { .. } => ActionError::fatal(e.to_string()),
                e => ActionError::failed(e.to_string()),
            })?;
        match exchange.reply {
            Reply::Result(result) => {
                if result["isError"] == true {
                    item["error"] = json!({"message": content_text(&result)});
                }
                item["result"] = result;
            }
            Reply::Error {
                code,
                message,
                data,
            } => {
                item["error"] = json!({"code": code, "message": message});
                if let Some(data) = data {
                    item["error"]["data"] = data;
                }
            }
            Reply::Timeout(after) => {
                item["error"] = json!({"message": format!(
                    "no answer within {}; the request was cancelled",
                    humantime::format_duration(after)
                )});
            }
        }
        if !exchange.notifications.is_empty() {
            item["notifications"] = Value::Array(exchange.notifications);
        }
        Ok(item)
    }
}

/// The error of a call to a tool the server's entry does not list in its `tools`.
fn not_exposed(tool: &str, server: &str, spec: &ServerSpec) -> Value {
    json!({"message": format!(
        "the tool `{tool}` of `{server}` is not one of its `tools` ({:?})",
        spec.tools.as_deref().unwrap_or_default()
    )})
}

/// `params` without its `_meta` (what a cassette knows a request by).
fn without_meta(params: &Value) -> Value {
    let mut params = params.clone();
    if let Value::Object(map) = &mut params {
        map.remove("_meta");
    }
    params
}

/// The result of the request `asked` as the cassette recorded it (`item` with the
/// server's `result` or `error`): a failure of the attempt when it failed then, or when
/// the cassette holds none (naming the state `me` and the request).
fn replayed(
    cassette: &dyn Cassette,
    me: &str,
    fsm: &claij_core::Fsm,
    asked: &Value,
    mut item: Value,
) -> Result<Value, ActionError> {
    let server = asked["server"].as_str().unwrap_or_default();
    if asked["method"] == "tools/call"
        && let Some(tool) = asked["params"]["name"].as_str()
        && let Some(declared) = fsm.servers.get(server)
    {
        let spec = ServerSpec::from_value(server, declared)
            .map_err(|e| ActionError::fatal(format!("state `{me}`: {e}")))?;
        if !spec.exposes_tool(tool) {
            item["error"] = not_exposed(tool, server, &spec);
            return Ok(item);
        }
    }
    let reply = cassette
        .replay(Kind::Mcp, me, asked)
        .map_err(|m| ActionError::fatal(format!("state `{me}`: {m}")))?;
    if let Some(message) = reply["failed"].as_str() {
        // Failed as recorded.
        return Err(if reply["fatal"] == true {
            ActionError::fatal(message)
        } else {
            ActionError::failed(message)
        });
    }
    match reply {
        Value::Object(_) => Ok(reply),
        other => Err(ActionError::fatal(format!(
            "state `{me}`: the cassette's reply to `{}` on `{server}` is not an object: {other}",
            asked["method"]
        ))),
    }
}
