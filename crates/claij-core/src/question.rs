//! A question an MCP server puts to a person during a run (`elicitation/create`: a message
//! and the schema of the answer it wants), and the person's answer: accepted with content,
//! declined, or cancelled. A durable run that meets a question it has no answer for stops
//! there, suspended on it; the answer, checked here, lets it go on.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::schema::CompiledSchema;

/// What a server asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Question {
    /// The server that asked (its name in the document).
    pub server: String,
    /// What it asked.
    pub message: String,
    /// The schema of the content it wants (a flat object schema).
    pub schema: Value,
}

/// A person's answer to a [`Question`].
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Accepted, with the content (an object satisfying the requested schema).
    Accept(Value),
    /// Declined.
    Decline,
    /// Dismissed without a decision.
    Cancel,
}

impl Answer {
    /// The answer as written: MCP's `ElicitResult` (`{"action": "accept", "content": …}`,
    /// `{"action": "decline"}`, `{"action": "cancel"}`), or for short an object (accepted,
    /// as the content), `"decline"`, or `null` (cancelled).
    pub fn parse(input: &Value) -> Result<Answer, String> {
        match input {
            Value::Object(map) => match map.get("action").and_then(Value::as_str) {
                Some("accept") => Ok(Answer::Accept(
                    map.get("content").cloned().unwrap_or_else(|| json!({})),
                )),
                Some("decline") => Ok(Answer::Decline),
                Some("cancel") => Ok(Answer::Cancel),
                _ => Ok(Answer::Accept(input.clone())),
            },
            Value::String(s) if s == "decline" => Ok(Answer::Decline),
            Value::Null => Ok(Answer::Cancel),
            other => Err(format!(
                "an answer is a JSON object (accepted), \"decline\" or null (cancelled), not {other}"
            )),
        }
    }

    /// This answer to a request for `schema`, checked: accepted content gets the
    /// schema's `default` for each property it leaves out (SEP-1034), then must satisfy
    /// the schema, else the reasons, each at its field. Decline and cancel are answers
    /// as they are.
    pub fn checked(self, schema: &Value) -> Result<Answer, String> {
        let Answer::Accept(Value::Object(mut content)) = self else {
            return match self {
                Answer::Accept(other) => Err(format!("expected a JSON object, got {other}")),
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
        let compiled = CompiledSchema::compile(schema.clone())
            .map_err(|e| format!("the requested schema does not compile: {e}"))?;
        compiled.check(&content).map_err(|issues| {
            issues
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        })?;
        Ok(Answer::Accept(content))
    }

    /// MCP's `ElicitResult` as JSON.
    pub fn to_result(&self) -> Value {
        match self {
            Answer::Accept(content) => json!({"action": "accept", "content": content}),
            Answer::Decline => json!({"action": "decline"}),
            Answer::Cancel => json!({"action": "cancel"}),
        }
    }
}

impl Question {
    /// `input` as an answer to this question, checked ([`Answer::parse`], then
    /// [`Answer::checked`] against the requested schema).
    pub fn answer(&self, input: &Value) -> Result<Answer, String> {
        Answer::parse(input)?.checked(&self.schema)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question() -> Question {
        Question {
            server: "forms".into(),
            message: "Who are you?".into(),
            schema: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "age": {"type": "integer", "default": 30},
                    "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"}
                },
                "required": ["name"]
            }),
        }
    }

    #[test]
    fn defaults_fill_what_an_accepted_answer_leaves_out_and_nothing_else() {
        let q = question();
        assert_eq!(
            q.answer(&json!({"name": "Ada", "age": 36})),
            Ok(Answer::Accept(
                json!({"name": "Ada", "age": 36, "status": "active"})
            ))
        );
        assert_eq!(
            q.answer(&json!({"action": "accept", "content": {"name": "Ada"}})),
            Ok(Answer::Accept(
                json!({"name": "Ada", "age": 30, "status": "active"})
            ))
        );
    }

    #[test]
    fn an_answer_the_schema_refuses_is_refused_at_its_field() {
        let q = question();
        let e = q.answer(&json!({"age": 36})).expect_err("name is required");
        assert!(e.contains("\"name\" is a required property"), "{e}");
        let e = q
            .answer(&json!({"name": "Ada", "status": "gone"}))
            .expect_err("not in the enum");
        assert!(e.contains("/status"), "{e}");
        let e = q.answer(&json!([1])).expect_err("not an object");
        assert!(e.contains("not [1]"), "{e}");
        let e = Answer::Accept(json!(3))
            .checked(&q.schema)
            .expect_err("not an object");
        assert!(e.contains("JSON object"), "{e}");
    }

    #[test]
    fn decline_and_cancel_are_answers_in_either_form() {
        let q = question();
        for (input, answer) in [
            (json!("decline"), Answer::Decline),
            (json!({"action": "decline"}), Answer::Decline),
            (Value::Null, Answer::Cancel),
            (json!({"action": "cancel"}), Answer::Cancel),
        ] {
            assert_eq!(q.answer(&input), Ok(answer.clone()));
            assert_eq!(Answer::parse(&answer.to_result()), Ok(answer));
        }
    }
}
