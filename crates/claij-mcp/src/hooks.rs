//! What a server may ask of the client: a model's answer (sampling) and a person's input
//! (elicitation). The binary implements [`SamplingHandler`] over the model layer of the
//! engine whose call is asked; people are asked through
//! an [`ElicitationHandler`] ([`HumanElicitation`] uses the engine's [`HumanIo`]).

use std::sync::Arc;

use claij_core::Answer;
use claij_engine::actions::HumanIo;
use claij_engine::{BoxFuture, Meter, Questions};
use serde_json::Value;

/// On whose behalf a request to a server is made, while it is in flight: what the run's
/// `mcp` action says of itself, the meter of its attempt, through which the sampling calls
/// the server asks for meanwhile are checked against the run's budget and charged, and
/// its questions, through which elicitations wait for a person durably.
#[derive(Clone)]
pub struct Caller {
    /// `{"run_id", "state", "config", "model"}`: the run, the state that asked for the
    /// call (the `llm` state wearing the hat), its config and the run's own model
    /// (`RunOptions::model`, `null` when it has none).
    pub info: Value,
    /// The asking attempt's meter.
    pub meter: Meter,
    /// The asking attempt's questions: in a durable run, a server's elicitation is
    /// answered from the run's answers at this state, or stops the run until one is given
    /// (the [`ElicitationHandler`] is not asked).
    pub questions: Questions,
    /// When the request in flight times out, if it does: a question's request is held
    /// open no later than a second before.
    pub deadline: Option<std::time::Instant>,
    /// The W3C `traceparent` of the call, when the run is traced: sent in the request's
    /// `_meta`, so that the server's spans join the run's trace.
    pub traceparent: Option<String>,
    /// The call's idempotency key (`RUN:SEQ:N`), for a `tools/call` a run makes: sent in
    /// the request's `_meta` under [`IDEMPOTENCY_KEY_META`], the same when the attempt is
    /// made again after a crash, so that a server can tell a repeated call from a new one.
    pub idempotency_key: Option<String>,
}

/// The `_meta` key a run's `tools/call` carries its idempotency key under. MCP reserves
/// `_meta` names whose prefix has `modelcontextprotocol` or `mcp` as its second label and
/// asks others to use a reverse-DNS prefix of their own, so that names from different
/// clients never collide: hence claij's `dev.claij/` prefix.
pub const IDEMPOTENCY_KEY_META: &str = "dev.claij/idempotency-key";

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

/// Answers `elicitation/create` requests (form mode) from servers.
pub trait ElicitationHandler: Send + Sync {
    /// Asks for input: `message` says what, `schema` is the requested (flat object) schema.
    fn elicit<'a>(
        &'a self,
        server: &'a str,
        message: &'a str,
        schema: &'a Value,
    ) -> BoxFuture<'a, Result<Answer, String>>;
}

/// The same answer to every elicitation, for scripts (`claij mcp call --elicit`): an
/// object accepts (the requested schema's defaults filled in), `"decline"` declines,
/// `null` cancels.
#[derive(Debug, Clone)]
pub struct ScriptedElicitation {
    answer: Answer,
}

impl ScriptedElicitation {
    /// Answers with `answer`: an object, `"decline"` or `null`; anything else is refused.
    pub fn new(answer: Value) -> Result<Self, String> {
        Ok(Self {
            answer: Answer::parse(&answer)?,
        })
    }
}

impl ElicitationHandler for ScriptedElicitation {
    fn elicit<'a>(
        &'a self,
        _server: &'a str,
        _message: &'a str,
        schema: &'a Value,
    ) -> BoxFuture<'a, Result<Answer, String>> {
        Box::pin(async move { self.answer.clone().checked(schema) })
    }
}

/// Elicitation as a human wait on the engine's [`HumanIo`] (the terminal by default): the
/// message and schema are shown, one JSON object read back accepts (the schema's defaults
/// filled in for what it leaves out; an answer the schema refuses is asked again, up to
/// three times), `"decline"` declines, `null` or end of input cancels.
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
    ) -> BoxFuture<'a, Result<Answer, String>> {
        let io = self.io.clone();
        let text = format!(
            "\nThe MCP server `{server}` asks: {message}\nAnswer with one JSON object matching\n{}\n(\"decline\" declines, null cancels)\n> ",
            serde_json::to_string_pretty(schema).unwrap_or_default()
        );
        Box::pin(async move {
            if !io.is_interactive() {
                return Err("no person can be asked here (not a terminal)".to_owned());
            }
            let mut problem = String::new();
            for _ in 0..3 {
                let io = io.clone();
                let text = if problem.is_empty() {
                    text.clone()
                } else {
                    format!("That answer does not fit: {problem}\n> ")
                };
                let answer = tokio::task::spawn_blocking(move || {
                    io.show(&text)?;
                    io.read_json()
                })
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
                let Some(answer) = answer else {
                    return Ok(Answer::Cancel);
                };
                let checked = serde_json::from_str::<Value>(&answer)
                    .map_err(|e| format!("not JSON: {e}"))
                    .and_then(|answer| Answer::parse(&answer))
                    .and_then(|answer| answer.checked(schema));
                match checked {
                    Ok(answer) => return Ok(answer),
                    Err(e) => problem = e,
                }
            }
            Err(format!(
                "no answer that fits the requested schema: {problem}"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn scripts_say_their_answer_in_json() {
        assert!(ScriptedElicitation::new(json!("decline")).is_ok());
        assert!(ScriptedElicitation::new(Value::Null).is_ok());
        assert!(ScriptedElicitation::new(json!({"name": "Ada"})).is_ok());
        let e = ScriptedElicitation::new(json!(3)).expect_err("a number is no answer");
        assert!(e.contains("not 3"), "{e}");
    }
}
