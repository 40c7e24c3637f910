//! Tools as plain data, independent of the MCP SDK: what a tool is (name, description,
//! input schema) and what a call returns (a JSON value, or an error message for the
//! caller). The handler turns them into MCP messages.

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use serde_json::Value;

/// A tool as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// Its name.
    pub name: String,
    /// What it does (with trigger patterns, for bots).
    pub description: String,
    /// Its input schema (a JSON Schema object with `type: object`).
    pub input_schema: Value,
}

impl ToolSpec {
    /// The MCP tool.
    pub(crate) fn to_tool(&self) -> Tool {
        let schema: JsonObject = match &self.input_schema {
            Value::Object(m) => m.clone(),
            _ => JsonObject::default(),
        };
        Tool::new(self.name.clone(), self.description.clone(), schema)
    }
}

/// What a tool call returns.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ToolOutput {
    /// A result (also given as text, pretty JSON).
    Json(Value),
    /// MCP content blocks as they are (`text`, `image`, `audio`, `resource`,
    /// `resource_link`): what a workflow served as a plain tool answered.
    Content(Vec<Value>),
    /// A problem the caller should read (`isError: true`).
    Error(String),
}

impl ToolOutput {
    /// A JSON result.
    pub(crate) fn json(value: Value) -> Self {
        ToolOutput::Json(value)
    }

    /// An error result.
    pub(crate) fn error(message: impl Into<String>) -> Self {
        ToolOutput::Error(message.into())
    }

    /// The MCP result: structured content plus the same JSON as text, or an error.
    pub(crate) fn into_result(self) -> CallToolResult {
        match self {
            ToolOutput::Json(value) => {
                let text =
                    serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string());
                let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
                if value.is_object() {
                    result.structured_content = Some(value);
                }
                result
            }
            ToolOutput::Content(blocks) => {
                let parsed: Result<Vec<ContentBlock>, String> = blocks
                    .into_iter()
                    .enumerate()
                    .map(|(i, block)| {
                        serde_json::from_value(block).map_err(|e| {
                            format!("the workflow answered content[{i}], which is not an MCP content block: {e}")
                        })
                    })
                    .collect();
                match parsed {
                    Ok(blocks) => CallToolResult::success(blocks),
                    Err(message) => CallToolResult::error(vec![ContentBlock::text(message)]),
                }
            }
            ToolOutput::Error(message) => CallToolResult::error(vec![ContentBlock::text(message)]),
        }
    }
}

/// Whether `name` may appear in a tool name: 1–64 of `A-Z a-z 0-9 _ -`.
pub(crate) fn is_tool_word(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}
