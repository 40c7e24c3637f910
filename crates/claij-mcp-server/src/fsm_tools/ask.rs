//! A person asked through the MCP client. When a workflow served as a plain tool
//! (`config.mcp_tool`) waits for a person — a `human` state with one way on — and the
//! client takes elicitation requests (form mode), the server asks there: the state's
//! prompt as the message, the transition's schema (less `id`) as the form. The answer
//! goes on as the run's input, checked against the schema like any other (a refused one
//! is asked again with the reason), and the tool answers once the run ends. The run is
//! suspended in the store all the while: declined, cancelled, or a client gone, it stays
//! waiting, answerable with `ID_continue` or any other way a run is answered.

use std::sync::Arc;

use claij_core::{Fsm, RunStatus};
use claij_engine::{BoxFuture, RunOutcome};
use rmcp::model::ElicitationSchema;
use serde_json::{Map, Value, json};

use super::{RunWatch, Runtime, resumed, started, tool_answer};
use crate::tool::ToolOutput;

/// How many times one tool call asks (each answer a person's step of the run, or a
/// refused answer asked again).
const MOST_ASKS: usize = 16;

/// What a person answered.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Asked {
    /// The form, filled in.
    Accepted(Value),
    /// They said no.
    Declined,
    /// They dismissed the question.
    Cancelled,
    /// The question could not be put (the client refused the request, or went away).
    Failed(String),
}

/// Asks a person a question with a form, as the client shows it.
pub(crate) trait PersonAsker: Send + Sync {
    /// Asks `message`, the answer to fill `form` (an elicitation's requested schema).
    fn ask<'a>(&'a self, message: String, form: Value) -> BoxFuture<'a, Asked>;
}

/// Asks through the client of an MCP session, in form mode.
pub(crate) struct PeerAsker(rmcp::Peer<rmcp::RoleServer>);

impl PeerAsker {
    /// An asker for `peer`, when its client takes form elicitations.
    pub(crate) fn of(peer: &rmcp::Peer<rmcp::RoleServer>) -> Option<Arc<dyn PersonAsker>> {
        peer.supported_elicitation_modes()
            .contains(&rmcp::service::ElicitationMode::Form)
            .then(|| Arc::new(PeerAsker(peer.clone())) as Arc<dyn PersonAsker>)
    }
}

impl PersonAsker for PeerAsker {
    fn ask<'a>(&'a self, message: String, form: Value) -> BoxFuture<'a, Asked> {
        Box::pin(async move {
            let requested_schema = match serde_json::from_value::<ElicitationSchema>(form) {
                Ok(schema) => schema,
                Err(e) => return Asked::Failed(format!("not a form: {e}")),
            };
            let params = rmcp::model::ElicitRequestParams::FormElicitationParams {
                meta: None,
                message,
                requested_schema,
            };
            match self.0.create_elicitation(params).await {
                Ok(result) => match result.action {
                    rmcp::model::ElicitationAction::Accept => {
                        Asked::Accepted(result.content.unwrap_or_else(|| json!({})))
                    }
                    rmcp::model::ElicitationAction::Decline => Asked::Declined,
                    rmcp::model::ElicitationAction::Cancel => Asked::Cancelled,
                    other => Asked::Failed(format!("an answer claij does not know: {other:?}")),
                },
                Err(e) => Asked::Failed(e.to_string()),
            }
        })
    }
}

/// What a waiting run asks: its message, the form, and the transition an answer takes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PersonQuestion {
    /// The state's prompt, or what the state is.
    pub(crate) message: String,
    /// The form: the transition's schema without `id`.
    pub(crate) form: Value,
    /// The transition `[from, to]`.
    pub(crate) transition: (String, String),
}

/// The question of a run suspended in a `human` state with one way on whose schema a
/// form can hold; `None` for any other outcome (ended, a server's question, children, a
/// budget, several ways on, a schema no form can hold).
pub(crate) fn question(fsm: &Fsm, outcome: &RunOutcome) -> Option<PersonQuestion> {
    if outcome.status != RunStatus::Suspended {
        return None;
    }
    let wait = outcome.wait.as_ref()?;
    if wait.question.is_some() || !wait.takes_input() || wait.transitions.len() != 1 {
        return None;
    }
    let (from, to) = &wait.transitions[0];
    let state = fsm.state(from)?;
    if &*state.action != "human" {
        return None;
    }
    let schema = fsm.transition(from, to)?.effective.as_ref()?;
    let message = wait
        .prompt
        .clone()
        .or_else(|| state.description.clone())
        .unwrap_or_else(|| format!("`{from}` of `{}` waits for your answer.", fsm.id));
    Some(PersonQuestion {
        message,
        form: form(schema)?,
        transition: (from.clone(), to.clone()),
    })
}

/// `schema` as a form: its properties and requirements less `id`; `None` when it is not
/// a flat object of the kinds a form holds (as the MCP's elicitation schema allows them).
fn form(schema: &Value) -> Option<Value> {
    let mut properties = schema.get("properties")?.as_object()?.clone();
    properties.remove("id");
    let required: Vec<Value> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|r| r.as_str() != Some("id"))
        .cloned()
        .collect();
    let mut form = Map::new();
    form.insert("type".into(), json!("object"));
    form.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        form.insert("required".into(), Value::Array(required));
    }
    let form = Value::Object(form);
    serde_json::from_value::<ElicitationSchema>(form.clone()).ok()?;
    Some(form)
}

/// A run of `fsm` from `input`, answered as a plain tool answers; its person's steps
/// asked through `watch.asker`, when there is one.
pub(crate) async fn run_as_tool(
    runtime: &Runtime,
    fsm: &Arc<Fsm>,
    input: Value,
    watch: RunWatch,
) -> ToolOutput {
    let mut outcome = match started(runtime, fsm, input, watch.clone()).await {
        Ok(outcome) => outcome,
        Err(refused) => return refused,
    };
    let Some(asker) = watch.asker.clone() else {
        return tool_answer(&outcome);
    };
    let mut refusal: Option<String> = None;
    for _ in 0..MOST_ASKS {
        let Some(asked) = question(fsm, &outcome) else {
            break;
        };
        let message = match refusal.take() {
            Some(why) => format!("{}\n\n(Your last answer was refused: {why})", asked.message),
            None => asked.message,
        };
        let mut answer = match asker.ask(message, asked.form).await {
            Asked::Accepted(Value::Object(answer)) => answer,
            other => {
                // Declined, cancelled, or not asked: the run waits, as stored.
                tracing::debug!(run = %outcome.run_id, answer = ?other, "the person's step was not answered through the client");
                break;
            }
        };
        let (from, to) = asked.transition;
        answer.insert("id".into(), json!([from, to]));
        let input = Value::Object(answer);
        match resumed(runtime, fsm.clone(), &outcome.run_id, input, watch.clone()).await {
            Ok(next) => outcome = next,
            // Nothing changed: asked again, saying why.
            Err(ToolOutput::Error(why)) => refusal = Some(why),
            Err(other) => return other,
        }
    }
    tool_answer(&outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fsm_tools::{FsmVerb, call};
    use crate::test_bots::{fsm, runtime};

    /// Answers with what it was given, in order (declining when it runs out), and keeps
    /// what it was asked.
    struct Scripted {
        answers: std::sync::Mutex<Vec<Asked>>,
        asked: std::sync::Mutex<Vec<(String, Value)>>,
    }

    impl PersonAsker for Scripted {
        fn ask<'a>(&'a self, message: String, form: Value) -> BoxFuture<'a, Asked> {
            self.asked
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((message, form));
            let mut answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
            let next = if answers.is_empty() {
                Asked::Declined
            } else {
                answers.remove(0)
            };
            Box::pin(async move { next })
        }
    }

    const GREET: &str = r#"
id: greet
config: {mcp_tool: greet}
states:
  - id: ask
    action: human
    config: {prompt: "Who are you?"}
  - id: done
    action: end
xitions:
  - id: [start, ask]
  - id: [ask, done]
    schema:
      type: object
      properties: {name: {type: string, minLength: 2, description: Your name}}
      required: [name]
"#;

    async fn greet(answers: Vec<Asked>) -> (ToolOutput, Vec<(String, Value)>) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let runtime = runtime(dir.path()).await;
        let fsm = fsm(dir.path(), "greet.yaml", GREET);
        let asker = Arc::new(Scripted {
            answers: std::sync::Mutex::new(answers),
            asked: std::sync::Mutex::new(Vec::new()),
        });
        let watch = RunWatch {
            asker: Some(asker.clone()),
            ..RunWatch::default()
        };
        let output = call(&runtime, &fsm, FsmVerb::Tool, Map::new(), watch).await;
        let asked = asker
            .asked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        (output, asked)
    }

    #[tokio::test]
    async fn the_person_is_asked_through_the_client_and_a_refused_answer_is_asked_again() {
        let (output, asked) = greet(vec![
            Asked::Accepted(json!({"name": "A"})),
            Asked::Accepted(json!({"name": "Ada"})),
        ])
        .await;
        let ToolOutput::Json(result) = output else {
            panic!("{output:?}");
        };
        assert_eq!(result["name"], "Ada");
        assert_eq!(result["id"], json!(["ask", "done"]));
        assert_eq!(asked.len(), 2);
        assert_eq!(asked[0].0, "Who are you?");
        assert_eq!(
            asked[0].1,
            json!({"type": "object", "required": ["name"],
                "properties": {"name": {"type": "string", "minLength": 2, "description": "Your name"}}})
        );
        assert!(
            asked[1].0.contains("refused") && asked[1].0.contains("name"),
            "{}",
            asked[1].0
        );
    }

    #[tokio::test]
    async fn a_declined_question_leaves_the_run_waiting_for_id_continue() {
        let (output, asked) = greet(vec![Asked::Declined]).await;
        let ToolOutput::Json(run) = output else {
            panic!("{output:?}");
        };
        assert_eq!(asked.len(), 1);
        assert_eq!(run["status"], "suspended");
        assert_eq!(run["waiting_for"], json!([["ask", "done"]]));
        assert!(run["run_id"].is_string());
    }

    #[test]
    fn a_form_is_the_schema_less_its_id_when_a_form_can_hold_it() {
        let schema = json!({
            "type": "object",
            "properties": {
                "id": {"const": ["ask", "done"]},
                "name": {"type": "string", "default": "John Doe"},
                "age": {"type": "integer", "default": 30},
                "status": {"type": "string", "enum": ["active", "inactive"]}
            },
            "required": ["name", "id"]
        });
        assert_eq!(
            form(&schema),
            Some(json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "default": "John Doe"},
                    "age": {"type": "integer", "default": 30},
                    "status": {"type": "string", "enum": ["active", "inactive"]}
                },
                "required": ["name"]
            }))
        );
        // A nested object is not a form's.
        let nested = json!({"type": "object", "properties": {"address": {"type": "object"}}});
        assert_eq!(form(&nested), None);
        assert_eq!(form(&json!({"type": "object"})), None);
    }
}
