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
    /// This answer to a request for `schema`, checked: accepted content gets the
    /// schema's `default` for each property it leaves out (SEP-1034), then must satisfy
    /// the schema, else the reasons, each at its field. Decline and cancel are answers
    /// as they are.
    pub fn checked(self, schema: &Value) -> Result<Elicited, String> {
        let Elicited::Accept(Value::Object(mut content)) = self else {
            return match self {
                Elicited::Accept(other) => Err(format!("expected a JSON object, got {other}")),
                answer => Ok(answer),
            };
        };
        if let Some(properties) = schema["properties"].as_object() {
            for (name, property) in properties {
                if let Some(default) = property.get("default")
                    && !content.contains_key(name)
                {
                    content.insert(name.clone(), default.clone());
                }
            }
        }
        let content = Value::Object(content);
        let compiled = claij_core::schema::CompiledSchema::compile(schema.clone())
            .map_err(|e| format!("the requested schema does not compile: {e}"))?;
        compiled.check(&content).map_err(|issues| {
            issues
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        })?;
        Ok(Elicited::Accept(content))
    }

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

/// The same answer to every elicitation, for scripts (`claij mcp call --elicit`): an
/// object accepts (the requested schema's defaults filled in), `"decline"` declines,
/// `null` cancels.
#[derive(Debug, Clone)]
pub struct ScriptedElicitation {
    answer: Elicited,
}

impl ScriptedElicitation {
    /// Answers with `answer`: an object, `"decline"` or `null`; anything else is refused.
    pub fn new(answer: Value) -> Result<Self, String> {
        Ok(Self {
            answer: parse_answer(answer)?,
        })
    }
}

impl ElicitationHandler for ScriptedElicitation {
    fn elicit<'a>(
        &'a self,
        _server: &'a str,
        _message: &'a str,
        schema: &'a Value,
    ) -> BoxFuture<'a, Result<Elicited, String>> {
        Box::pin(async move { self.answer.clone().checked(schema) })
    }
}

/// An answer as written: an object accepts, `"decline"` declines, `null` cancels.
fn parse_answer(answer: Value) -> Result<Elicited, String> {
    match answer {
        Value::Object(content) => Ok(Elicited::Accept(Value::Object(content))),
        Value::String(s) if s == "decline" => Ok(Elicited::Decline),
        Value::Null => Ok(Elicited::Cancel),
        other => Err(format!(
            "an answer is a JSON object, \"decline\" or null, not {other}"
        )),
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
                    return Ok(Elicited::Cancel);
                };
                let checked = serde_json::from_str::<Value>(&answer)
                    .map_err(|e| format!("not JSON: {e}"))
                    .and_then(parse_answer)
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
    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "age": {"type": "integer", "default": 30},
                "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"}
            },
            "required": ["name"]
        })
    }

    #[test]
    fn defaults_fill_what_an_accepted_answer_leaves_out_and_nothing_else() {
        let answer = Elicited::Accept(json!({"name": "Ada", "age": 36}))
            .checked(&schema())
            .expect("fits");
        assert_eq!(
            answer,
            Elicited::Accept(json!({"name": "Ada", "age": 36, "status": "active"}))
        );
    }

    #[test]
    fn an_answer_the_schema_refuses_is_refused_at_its_field() {
        let e = Elicited::Accept(json!({"age": 36}))
            .checked(&schema())
            .expect_err("name is required");
        assert!(e.contains("\"name\" is a required property"), "{e}");
        let e = Elicited::Accept(json!({"name": "Ada", "status": "gone"}))
            .checked(&schema())
            .expect_err("not in the enum");
        assert!(e.contains("/status"), "{e}");
        let e = Elicited::Accept(json!([1]))
            .checked(&schema())
            .expect_err("not an object");
        assert!(e.contains("JSON object"), "{e}");
    }

    #[test]
    fn decline_and_cancel_are_answers_and_scripts_say_them_in_json() {
        assert_eq!(Elicited::Decline.checked(&schema()), Ok(Elicited::Decline));
        assert_eq!(Elicited::Cancel.checked(&schema()), Ok(Elicited::Cancel));
        assert!(ScriptedElicitation::new(json!("decline")).is_ok());
        assert!(ScriptedElicitation::new(Value::Null).is_ok());
        let e = ScriptedElicitation::new(json!(3)).expect_err("a number is no answer");
        assert!(e.contains("not 3"), "{e}");
    }
}
