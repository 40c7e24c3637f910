//! `human` (terminal version): asks a person at the terminal for the next event.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use serde_json::{Value, json};

use claij_core::ConfigIssue;
use claij_core::known_actions::ConfigRoute;

use crate::action::{
    Action, ActionError, ActionInput, ActionOutput, BoxFuture, Outcome, Suspension,
};
use crate::capability::Field;

/// Where a person is asked: the terminal by default; tests and embedders supply their own.
pub trait HumanIo: Send + Sync {
    /// Whether a person can be asked at all here.
    fn is_interactive(&self) -> bool;

    /// Shows text to the person.
    fn show(&self, text: &str) -> std::io::Result<()>;

    /// Reads one JSON value from the person (blocking); `Ok(None)` at end of input.
    fn read_json(&self) -> std::io::Result<Option<String>>;
}

/// The process's terminal: stderr to show, stdin to read.
#[derive(Debug, Clone, Copy, Default)]
pub struct TerminalIo;

impl HumanIo for TerminalIo {
    fn is_interactive(&self) -> bool {
        std::io::stdin().is_terminal()
    }

    fn show(&self, text: &str) -> std::io::Result<()> {
        let mut err = std::io::stderr().lock();
        err.write_all(text.as_bytes())?;
        err.flush()
    }

    fn read_json(&self) -> std::io::Result<Option<String>> {
        read_json_lines(&mut std::io::stdin().lock())
    }
}

/// Reads lines until what was read parses as JSON (so an event may span lines), or until
/// end of input; `Ok(None)` when nothing at all was read.
pub(super) fn read_json_lines(input: &mut dyn BufRead) -> std::io::Result<Option<String>> {
    let mut text = String::new();
    loop {
        let mut line = String::new();
        if input.read_line(&mut line)? == 0 {
            return Ok((!text.trim().is_empty()).then_some(text));
        }
        text.push_str(&line);
        if text.trim().is_empty() {
            continue;
        }
        if serde_json::from_str::<Value>(&text).is_ok() {
            return Ok(Some(text));
        }
    }
}

/// Asks a person for the next event, in one of two ways:
///
/// - **at the terminal** ([`Human::terminal`], [`Human::with_io`]): shows the allowed
///   transitions and their schemas (and, on a retry, why the last answer was refused),
///   then reads one JSON event, which the engine validates like any other. Without a
///   terminal it is a clear, non-retryable error.
/// - **durably** ([`Human::suspending`], what claij uses with a store): the run suspends,
///   waiting on the state's outgoing transitions, until an input arrives from the CLI
///   (`claij runs resume`), a webhook or an MCP client — minutes or days later. A wait
///   may expire (`config.expires`) and then follow `config.on_expiry`.
#[derive(Clone)]
pub struct Human {
    io: Option<Arc<dyn HumanIo>>,
}

impl std::fmt::Debug for Human {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.io.is_some() {
            "Human(terminal)"
        } else {
            "Human(suspending)"
        })
    }
}

impl Human {
    /// Asks at the process's terminal.
    pub fn terminal() -> Self {
        Self::with_io(Arc::new(TerminalIo))
    }

    /// Asks through `io`.
    pub fn with_io(io: Arc<dyn HumanIo>) -> Self {
        Self { io: Some(io) }
    }

    /// Suspends the run until the input arrives from outside.
    pub fn suspending() -> Self {
        Self { io: None }
    }
}

impl Action for Human {
    fn config_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "prompt": {"type": "string", "description": "What to ask the person."},
                "expires": {
                    "anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "string", "minLength": 1}],
                    "description": "How long a suspended run waits (e.g. 3d); then it follows on_expiry, or fails."
                },
                "on_expiry": {"type": "string", "description": "Where an expired wait goes; needs a transition [state, on_expiry]."}
            },
            "additionalProperties": false
        })
    }

    /// None: a durable run's person is waited for in the store (until `expires`), not
    /// by a running attempt; the terminal's question waits as long as the person takes.
    fn default_timeout(&self) -> Option<std::time::Duration> {
        None
    }

    fn touches(&self) -> &'static [Field] {
        const FIELDS: &[Field] = &[
            Field::inert("/prompt"),
            Field::inert("/expires"),
            Field::inert("/on_expiry"),
        ];
        FIELDS
    }

    fn check_config(&self, config: &Value) -> Vec<ConfigIssue> {
        match config.get("expires").map(parse_expiry) {
            Some(Err(message)) => vec![ConfigIssue {
                pointer: "/expires".into(),
                message,
            }],
            _ => Vec::new(),
        }
    }

    fn routes(&self, config: &Value) -> Vec<ConfigRoute> {
        config
            .get("on_expiry")
            .and_then(Value::as_str)
            .map(|target| ConfigRoute {
                pointer: "/on_expiry".into(),
                target: target.to_owned(),
            })
            .into_iter()
            .collect()
    }

    fn run<'a>(&'a self, input: ActionInput<'a>) -> BoxFuture<'a, Result<Outcome, ActionError>> {
        Box::pin(async move {
            let config = &input.state.config;
            let Some(io) = &self.io else {
                return Ok(Outcome::Suspend(Suspension {
                    prompt: config
                        .get("prompt")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    expires_in: config.get("expires").and_then(|e| parse_expiry(e).ok()),
                    on_expiry: config
                        .get("on_expiry")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    children: Vec::new(),
                }));
            };
            if !io.is_interactive() {
                return Err(ActionError::fatal(format!(
                    "state `{}` asks a person, but there is no terminal to ask on; run claij interactively, or with a store so the run can wait",
                    input.state.id
                )));
            }
            let text = render_question(&input);
            let io = io.clone();
            let answer = tokio::task::spawn_blocking(move || {
                io.show(&text)?;
                io.read_json()
            })
            .await
            .map_err(|e| ActionError::fatal(format!("the terminal reader stopped: {e}")))?
            .map_err(|e| ActionError::fatal(format!("cannot read from the terminal: {e}")))?;
            let Some(answer) = answer else {
                return Err(ActionError::fatal(
                    "the person closed the input (end of file) without answering",
                ));
            };
            match serde_json::from_str::<Value>(&answer) {
                Ok(event) => Ok(ActionOutput::event(event).into()),
                Err(e) => Err(ActionError::parse(
                    format!("that is not JSON: {e}"),
                    Value::String(answer),
                )),
            }
        })
    }
}

/// `expires`: seconds as a number, or a duration string (`3d`, `12h`).
fn parse_expiry(value: &Value) -> Result<std::time::Duration, String> {
    let parsed = match value {
        Value::Number(n) => n
            .as_f64()
            .and_then(|secs| std::time::Duration::try_from_secs_f64(secs).ok())
            .ok_or_else(|| format!("{n} is not a duration")),
        Value::String(s) => humantime::parse_duration(s.trim())
            .map_err(|e| format!("`{s}` is not a duration ({e}); write e.g. `30m`, `3d`")),
        other => Err(format!("{other} is not a duration")),
    }?;
    if parsed.is_zero() {
        return Err("the wait must last longer than zero".into());
    }
    Ok(parsed)
}

fn render_question(input: &ActionInput<'_>) -> String {
    let state = input.state;
    let mut out = String::new();
    out.push_str(&format!(
        "\n── {} asks you (state `{}`",
        input.fsm.id, state.id
    ));
    if input.attempt > 1 {
        out.push_str(&format!(", attempt {}", input.attempt));
    }
    out.push_str(") ──\n");
    if let Some(prompt) = state.config.get("prompt").and_then(Value::as_str) {
        out.push_str(prompt);
        out.push('\n');
    }
    if let Some(description) = &state.description {
        out.push_str(description);
        out.push('\n');
    }
    out.push_str(&format!(
        "The input:\n{}\n",
        serde_json::to_string_pretty(input.event).unwrap_or_default()
    ));
    if let Some(last) = input.failures_here().last()
        && let Some(f) = &last.failure
    {
        out.push_str(&format!("Your last answer was refused: {}\n", f.message));
        for e in &f.errors {
            out.push_str(&format!("  - {e}\n"));
        }
    }
    out.push_str("Answer with one JSON object; its \"id\" picks what happens next:\n");
    for &t in &state.outgoing {
        let t = &input.fsm.transitions[t];
        out.push_str(&format!("  {}", t.id_value));
        if let Some(d) = t.description.as_deref().or(t.label.as_deref()) {
            out.push_str(&format!("  — {d}"));
        }
        out.push('\n');
        if let Some(schema) = &t.effective {
            out.push_str(&format!(
                "    schema: {}\n",
                serde_json::to_string(schema).unwrap_or_default()
            ));
        }
    }
    out.push_str("> ");
    out
}
