//! What a server may ask of the client: a model's answer (sampling) and a person's input
//! (elicitation). The model layer implements [`SamplingHandler`]; people are asked through
//! an [`ElicitationHandler`] ([`HumanElicitation`] uses the engine's [`HumanIo`]).

use std::sync::Arc;

use claij_engine::actions::HumanIo;
use claij_engine::{BoxFuture, Meter};
use serde_json::{Value, json};

/// On whose behalf a request to a server is made, while it is in flight: what the run's
/// `mcp` action says of itself, and the meter of its attempt, through which the sampling
/// calls the server asks for meanwhile are checked against the run's budget and charged.
#[derive(Clone)]
pub struct Caller {
    /// `{"run_id", "state", "config"}`: the run, the state that asked for the call (the
    /// `llm` state wearing the hat) and its config.
    pub info: Value,
    /// The asking attempt's meter.
    pub meter: Meter,
}

/// Answers `sampling/createMessage` requests from servers.
///
/// The request is the spec's `CreateMessageRequest` params as JSON (`messages`,
/// `systemPrompt`, `maxTokens`, `modelPreferences`, …); the answer is a
/// `CreateMessageResult` as JSON: `{"role": "assistant", "content": {"type": "text",
/// "text": …}, "model": …, "stopReason": …}`. An `Err` is sent to the server as a JSON-RPC
/// error carrying its message.
///
/// `caller` says on whose behalf the request in flight was made, when a run made it
/// (the `mcp` action sets it, see [`Caller`]), so the model layer can answer with that
/// state's model, charge the call to the run and refuse it when the run's budget would
/// be gone past (the run then stops for its budget).
pub trait SamplingHandler: Send + Sync {
    /// Produces the model's message for `request`.
    fn create_message<'a>(
        &'a self,
        server: &'a str,
        caller: Option<&'a Caller>,
        request: Value,
    ) -> BoxFuture<'a, Result<Value, String>>;
}

/// A person's answer to an elicitation.
#[derive(Debug, Clone, PartialEq)]
pub enum Elicited {
    /// Accepted, with the content (an object satisfying the requested schema).
    Accept(Value),
    /// Declined.
    Decline,
    /// Dismissed without a decision.
    Cancel,
}

impl Elicited {
    /// The spec's `ElicitResult` as JSON.
    pub fn to_result(&self) -> Value {
        match self {
            Elicited::Accept(content) => json!({"action": "accept", "content": content}),
            Elicited::Decline => json!({"action": "decline"}),
            Elicited::Cancel => json!({"action": "cancel"}),
        }
    }
}

/// Answers `elicitation/create` requests (form mode) from servers.
pub trait ElicitationHandler: Send + Sync {
    /// Asks for input: `message` says what, `schema` is the requested (flat object) schema.
    fn elicit<'a>(
        &'a self,
        server: &'a str,
        message: &'a str,
        schema: &'a Value,
    ) -> BoxFuture<'a, Result<Elicited, String>>;
}

/// Elicitation as a human wait on the engine's [`HumanIo`] (the terminal by default): the
/// message and schema are shown, one JSON object read back accepts, `"decline"` declines,
/// `null` or end of input cancels.
#[derive(Clone)]
pub struct HumanElicitation {
    io: Arc<dyn HumanIo>,
}

impl HumanElicitation {
    /// Asks through `io`.
    pub fn new(io: Arc<dyn HumanIo>) -> Self {
        Self { io }
    }

    /// Asks at the terminal.
    pub fn terminal() -> Self {
        Self::new(Arc::new(claij_engine::actions::TerminalIo))
    }
}

impl ElicitationHandler for HumanElicitation {
    fn elicit<'a>(
        &'a self,
        server: &'a str,
        message: &'a str,
        schema: &'a Value,
    ) -> BoxFuture<'a, Result<Elicited, String>> {
        let io = self.io.clone();
        let text = format!(
            "\nThe MCP server `{server}` asks: {message}\nAnswer with one JSON object matching\n{}\n(\"decline\" declines, null cancels)\n> ",
            serde_json::to_string_pretty(schema).unwrap_or_default()
        );
        Box::pin(async move {
            if !io.is_interactive() {
                return Err("no person can be asked here (not a terminal)".to_owned());
            }
            let answer = tokio::task::spawn_blocking(move || {
                io.show(&text)?;
                io.read_json()
            })
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
            let Some(answer) = answer else {
                return Ok(Elicited::Cancel);
            };
            match serde_json::from_str::<Value>(&answer) {
                Ok(Value::Object(content)) => Ok(Elicited::Accept(Value::Object(content))),
                Ok(Value::String(s)) if s == "decline" => Ok(Elicited::Decline),
                Ok(Value::Null) => Ok(Elicited::Cancel),
                Ok(other) => Err(format!("expected a JSON object, got {other}")),
                Err(e) => Err(format!("not JSON: {e}")),
            }
        })
    }
}
