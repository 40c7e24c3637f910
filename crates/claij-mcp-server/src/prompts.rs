//! Each served FSM with one entry as an MCP prompt (a chat client's slash command): its
//! arguments are the entry's input fields; the prompt asks the model to start a run with
//! them through `ID_start`. Each bot's prompts ([`crate::bot_prompts`]) as `BOT_NAME`. And `completion/complete`: a prompt argument's values from its
//! field's `enum` (or `true`/`false`), a run URI's `run_id` from the latest runs.
//!
//! MCP completes only prompt and resource-template arguments, not tool arguments: the
//! prompts are how a client completes `ID_start`'s inputs.

use std::sync::Arc;

use claij_core::Fsm;
use rmcp::ErrorData;
use serde_json::{Map, Value, json};

use crate::bot_tools::BotHost;
use crate::fsm_tools::{self, Runtime};
use crate::resources;

/// How many completion values are sent at most (the spec's limit).
const MAX_VALUES: usize = 100;

/// The input fields of an FSM's only entry (`id` left out), with the names required:
/// the schema's own `properties` and those of its `allOf` members and local `$ref`s;
/// `None` for an FSM with several entries (its start schema is a `oneOf`).
fn fields(fsm: &Fsm) -> Option<(Map<String, Value>, Vec<String>)> {
    let schema = fsm_tools::start_schema(fsm);
    if schema.get("oneOf").is_some() {
        return None;
    }
    let mut properties = Map::new();
    let mut required = Vec::new();
    gather(&schema, &schema["$defs"], &mut properties, &mut required, 0);
    properties.remove("id");
    required.retain(|r| r != "id");
    Some((properties, required))
}

/// Adds the properties and required names of `schema`, its `allOf` members and the local
/// `$ref` it makes (into `defs`), a few levels deep.
fn gather(
    schema: &Value,
    defs: &Value,
    properties: &mut Map<String, Value>,
    required: &mut Vec<String>,
    depth: usize,
) {
    if depth > 8 {
        return;
    }
    if let Some(name) = schema["$ref"]
        .as_str()
        .and_then(|r| r.strip_prefix("#/$defs/"))
    {
        gather(&defs[name], defs, properties, required, depth + 1);
    }
    for member in schema["allOf"].as_array().into_iter().flatten() {
        gather(member, defs, properties, required, depth + 1);
    }
    if let Some(own) = schema["properties"].as_object() {
        for (name, property) in own {
            properties
                .entry(name.clone())
                .or_insert_with(|| property.clone());
        }
    }
    for name in schema["required"].as_array().into_iter().flatten() {
        if let Some(name) = name.as_str()
            && !required.iter().any(|r| r == name)
        {
            required.push(name.to_owned());
        }
    }
}

/// The prompts: one per FSM that has a single entry, then each bot's (`BOT_NAME`).
pub(crate) fn list(fsms: &[Arc<Fsm>], bots: &[BotHost]) -> Value {
    let mut prompts: Vec<Value> = fsms
        .iter()
        .filter_map(|fsm| {
            let (properties, required) = fields(fsm)?;
            let arguments: Vec<Value> = properties
                .iter()
                .map(|(name, p)| {
                    json!({
                        "name": name,
                        "description": p.get("description").and_then(Value::as_str)
                            .map_or_else(|| describe_type(p), str::to_owned),
                        "required": required.contains(name),
                    })
                })
                .collect();
            Some(json!({
                "name": &*fsm.id,
                "title": format!("Start {}", fsm.id),
                "description": format!(
                    "Start a run of the workflow `{}`{}.",
                    fsm.id,
                    fsm.description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default()
                ),
                "arguments": arguments,
            }))
        })
        .collect();
    for host in bots {
        let bot = host.bot();
        for prompt in &bot.prompts {
            prompts.push(json!({
                "name": format!("{}_{}", bot.name, prompt.name),
                "description": prompt.description,
                "arguments": prompt.arguments.iter().map(|a| json!({
                    "name": a.name, "description": a.description, "required": a.required,
                })).collect::<Vec<_>>(),
            }));
        }
    }
    json!({ "prompts": prompts })
}

/// Every prompt's name and where it comes from (a file), FSMs' first.
pub(crate) fn names_with_origin(fsms: &[Arc<Fsm>], bots: &[BotHost]) -> Vec<(String, String)> {
    let mut names: Vec<(String, String)> = fsms
        .iter()
        .filter(|fsm| fields(fsm).is_some())
        .map(|fsm| (fsm.id.to_string(), fsm.source.clone()))
        .collect();
    for host in bots {
        let bot = host.bot();
        for prompt in &bot.prompts {
            names.push((
                format!("{}_{}", bot.name, prompt.name),
                prompt.file.display().to_string(),
            ));
        }
    }
    names
}

/// A bot's prompt by its served name, rendered with `arguments`.
fn bot_prompt(
    bots: &[BotHost],
    name: &str,
    arguments: &Map<String, Value>,
) -> Option<Result<Value, ErrorData>> {
    bots.iter().find_map(|host| {
        let bot = host.bot();
        let prompt = bot.prompts.iter().find(|p| {
            name.strip_prefix(&*bot.name)
                .and_then(|r| r.strip_prefix('_'))
                == Some(&p.name)
        })?;
        Some(
            prompt
                .messages(arguments)
                .map(|messages| json!({"description": prompt.description, "messages": messages}))
                .map_err(|why| ErrorData::invalid_params(format!("`{name}`: {why}"), None)),
        )
    })
}

fn describe_type(property: &Value) -> String {
    match property.get("enum").and_then(Value::as_array) {
        Some(values) => format!(
            "one of {}",
            values
                .iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => property["type"].as_str().unwrap_or("a value").to_owned(),
    }
}

/// The prompt `name` with `arguments`, or why not: a bot's, or an FSM's (arguments are
/// text, as prompts take them: numbers, booleans, objects and arrays are read as JSON).
pub(crate) fn get(
    fsms: &[Arc<Fsm>],
    bots: &[BotHost],
    name: &str,
    arguments: &Map<String, Value>,
) -> Result<Value, ErrorData> {
    if let Some(rendered) = bot_prompt(bots, name, arguments) {
        return rendered;
    }
    let fsm = fsms
        .iter()
        .find(|f| &*f.id == name)
        .ok_or_else(|| ErrorData::invalid_params(format!("no prompt `{name}`"), None))?;
    let (properties, required) = fields(fsm).ok_or_else(|| {
        ErrorData::invalid_params(
            format!("`{name}` has several entries: call `{name}_start` with the input"),
            None,
        )
    })?;
    let mut input = Map::new();
    for (field, text) in arguments {
        let property = properties.get(field).ok_or_else(|| {
            ErrorData::invalid_params(
                format!(
                    "`{name}` takes no argument `{field}` (it takes {})",
                    properties.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
                None,
            )
        })?;
        input.insert(field.clone(), typed(field, property, text)?);
    }
    if let Some(missing) = required.iter().find(|r| !input.contains_key(*r)) {
        return Err(ErrorData::invalid_params(
            format!("`{name}` needs the argument `{missing}`"),
            None,
        ));
    }
    let input = serde_json::to_string_pretty(&Value::Object(input)).unwrap_or_default();
    Ok(json!({
        "description": format!("Start a run of `{name}`"),
        "messages": [{"role": "user", "content": {"type": "text", "text": format!(
            "Start a run of the workflow `{name}` v{} by calling the tool `{name}_start` with these arguments:\n\n```json\n{input}\n```\n\nThen tell me how it ended, or what it waits for.",
            fsm.version
        )}}],
    }))
}

/// A prompt argument's text as the field's type asks: text for a string (or a field of
/// no type whose values are strings), else read as JSON.
fn typed(field: &str, property: &Value, text: &Value) -> Result<Value, ErrorData> {
    let Some(text) = text.as_str() else {
        return Ok(text.clone());
    };
    let wants_text = match property["type"].as_str() {
        Some(kind) => kind == "string",
        None => property
            .get("enum")
            .and_then(Value::as_array)
            .is_none_or(|values| values.iter().all(Value::is_string)),
    };
    if wants_text {
        return Ok(json!(text));
    }
    // JSON from the client: claij's one rule (no key twice, bounded nesting).
    claij_core::source::parse_json(text.as_bytes()).map_err(|e| {
        ErrorData::invalid_params(
            match e.kind {
                claij_core::source::JsonErrorKind::Syntax => format!(
                    "the argument `{field}` is {}: `{text}` is not",
                    describe_type(property)
                ),
                _ => format!("the argument `{field}` is refused: {e} (at {})", e.place),
            },
            None,
        )
    })
}

/// `completion/complete`: values for the argument of a prompt or of the run template
/// that start with what was typed.
pub(crate) async fn complete(
    runtime: &Runtime,
    fsms: &[Arc<Fsm>],
    request: &Value,
) -> Result<Value, ErrorData> {
    let argument = request["argument"]["name"].as_str().unwrap_or_default();
    let typed = request["argument"]["value"].as_str().unwrap_or_default();
    let reference = &request["ref"];
    let candidates: Vec<String> = match reference["type"].as_str() {
        Some("ref/prompt") => {
            let name = reference["name"].as_str().unwrap_or_default();
            fsms.iter()
                .find(|f| &*f.id == name)
                .and_then(|f| fields(f))
                .and_then(|(properties, _)| properties.get(argument).cloned())
                .map(|p| choices(&p))
                .unwrap_or_default()
        }
        Some("ref/resource")
            if reference["uri"] == resources::RUN_TEMPLATE && argument == "run_id" =>
        {
            resources::latest_runs(runtime, fsms, typed)
                .await?
                .into_iter()
                .map(|r| r.id)
                .collect()
        }
        _ => Vec::new(),
    };
    let values: Vec<String> = candidates
        .into_iter()
        .filter(|c| c.starts_with(typed))
        .collect();
    let total = values.len();
    let values: Vec<String> = values.into_iter().take(MAX_VALUES).collect();
    Ok(json!({"completion": {"values": values, "total": total, "hasMore": total > MAX_VALUES}}))
}

/// The values a field can take, as text: its `enum` (strings as they are, others as
/// JSON), `true`/`false` for a boolean.
fn choices(property: &Value) -> Vec<String> {
    if let Some(values) = property.get("enum").and_then(Value::as_array) {
        return values
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .collect();
    }
    if property["type"] == "boolean" {
        return vec!["true".to_owned(), "false".to_owned()];
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_gathered_through_all_of_and_local_refs() {
        let schema = json!({
            "allOf": [{"$ref": "#/$defs/message"}],
            "properties": {"id": {"const": ["start", "a"]}, "extra": {"type": "integer"}},
            "required": ["id"],
            "$defs": {"message": {"required": ["text"], "properties": {"text": {"type": "string"}}}}
        });
        let (mut properties, mut required) = (Map::new(), Vec::new());
        gather(&schema, &schema["$defs"], &mut properties, &mut required, 0);
        // In the order met: what the schema refers to, then its own.
        assert_eq!(
            properties.keys().collect::<Vec<_>>(),
            ["text", "id", "extra"]
        );
        assert_eq!(required, ["text", "id"]);
    }

    #[test]
    fn arguments_are_typed_by_their_field_and_refused_when_they_do_not_read() {
        let int = json!({"type": "integer"});
        assert_eq!(typed("n", &int, &json!("42")).ok(), Some(json!(42)));
        let e = typed("n", &int, &json!("many")).expect_err("not a number");
        assert!(e.message.contains("`n` is integer"), "{}", e.message);
        assert_eq!(
            typed("t", &json!({"type": "string"}), &json!("42")).ok(),
            Some(json!("42"))
        );
        assert_eq!(
            typed("e", &json!({"enum": ["a", "b"]}), &json!("a")).ok(),
            Some(json!("a"))
        );
        assert_eq!(
            typed("e", &json!({"enum": [1, 2]}), &json!("2")).ok(),
            Some(json!(2))
        );
    }

    #[test]
    fn choices_come_from_the_enum_or_a_boolean() {
        assert_eq!(choices(&json!({"enum": ["x", 2]})), ["x", "2"]);
        assert_eq!(choices(&json!({"type": "boolean"})), ["true", "false"]);
        assert!(choices(&json!({"type": "string"})).is_empty());
    }
}
