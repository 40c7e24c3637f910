//! `human` (terminal version): asks a person at the terminal for the next event.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::action::{Action, ActionError, ActionInput, ActionOutput, BoxFuture};

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
pub fn read_json_lines(input: &mut dyn BufRead) -> std::io::Result<Option<String>> {
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

/// Shows the person the allowed transitions and their schemas (and, on a retry, why the
/// last answer was refused), then reads one JSON event, which the engine validates like
/// any other. Without a terminal it is a clear, non-retryable error; the durable version
/// that suspends the run arrives with the store.
#[derive(Clone)]
pub struct Human {
    io: Arc<dyn HumanIo>,
}

impl std::fmt::Debug for Human {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Human")
    }
}

impl Human {
    /// Asks at the process's terminal.
    pub fn terminal() -> Self {
        Self::with_io(Arc::new(TerminalIo))
    }

    /// Asks through `io`.
    pub fn with_io(io: Arc<dyn HumanIo>) -> Self {
        Self { io }
    }
}

impl Action for Human {
    fn config_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "prompt": {"type": "string", "description": "What to ask the person."}
            },
            "additionalProperties": false
        })
    }

    fn run<'a>(
        &'a self,
        input: ActionInput<'a>,
    ) -> BoxFuture<'a, Result<ActionOutput, ActionError>> {
        Box::pin(async move {
            if !self.io.is_interactive() {
                return Err(ActionError::fatal(format!(
                    "state `{}` asks a person, but there is no terminal to ask on; run claij interactively",
                    input.state.id
                )));
            }
            let text = render_question(&input);
            let io = self.io.clone();
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
                Ok(event) => Ok(ActionOutput::event(event)),
                Err(e) => Err(ActionError::parse(
                    format!("that is not JSON: {e}"),
                    Value::String(answer),
                )),
            }
        })
    }
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
