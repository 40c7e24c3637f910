//! Loading a document: syntax, meta-schema, then the structural checks, every problem
//! reported at once; the result is a compiled [`Fsm`].
//!
//! This module reads the document into its raw form and assembles the [`Fsm`];
//! `structure` checks states, transitions, entries, terminals, routes and reachability;
//! `schemas` checks and compiles the shared and transition schemas.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::diagnostic::{Collector, Diagnostic, Diagnostics, JsonPath, Problem};
use crate::fsm::{Fsm, FsmSettings};
use crate::known_actions::KnownActions;

mod schemas;
mod structure;

use schemas::SharedSchemas;
use structure::{
    build_states, build_transitions, check_examples, check_graph, check_reachability, check_routes,
    clamp_u32, duration_at,
};

/// Reads and loads the document at `path`.
pub fn load_file(path: &Path, actions: &dyn KnownActions) -> Result<Fsm, Diagnostics> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        Diagnostics(vec![Diagnostic {
            file: name.clone(),
            path: JsonPath::root(),
            line_col: None,
            problem: Problem::Io,
            message: format!("cannot read the file: {e}"),
        }])
    })?;
    load_str(&name, &text, actions)
}

/// Loads a document from text (`name` says where it came from and, by its extension,
/// whether it is JSON or YAML).
pub fn load_str(name: &str, text: &str, actions: &dyn KnownActions) -> Result<Fsm, Diagnostics> {
    let value = crate::source::parse_text(name, text)?;
    load_value(name, value, actions)
}

/// Loads a definition read back from a store, named `ID@vN (stored)` and owned by whom
/// the store says.
pub fn load_definition(
    definition: &crate::store::Definition,
    actions: &dyn KnownActions,
) -> Result<Fsm, Diagnostics> {
    let name = format!("{}@v{} (stored)", definition.fsm_id, definition.version);
    let mut fsm = load_value(&name, definition.document.clone(), actions)?;
    fsm.owner = definition.owner;
    Ok(fsm)
}

/// Loads a document already parsed into JSON.
pub fn load_value(
    name: &str,
    mut document: Value,
    actions: &dyn KnownActions,
) -> Result<Fsm, Diagnostics> {
    let mut found = Collector::new(name);
    if let Value::Object(map) = &mut document
        && map.contains_key("xitions")
        && map.contains_key("transitions")
    {
        found.push(
            Problem::Format,
            JsonPath::root().join("transitions"),
            "both `xitions` and `transitions` are given; they are the same field, use one",
        );
        map.remove("transitions");
    }
    crate::metaschema::check(&document, &mut found);
    let expanded = crate::hat::expand(&document, &mut found);
    let raw = match RawDocument::deserialize(&expanded) {
        Ok(raw) => raw,
        Err(e) => {
            if found.is_empty() {
                found.push(Problem::Format, JsonPath::root(), e.to_string());
            }
            return Err(found.finish().err().unwrap_or(Diagnostics(Vec::new())));
        }
    };
    let fsm = build(name, raw, document, actions, &mut found);
    found.finish()?;
    Ok(fsm)
}

#[derive(Deserialize)]
struct RawDocument {
    id: String,
    #[serde(default = "one")]
    version: u32,
    description: Option<String>,
    #[serde(default)]
    prompts: Prompts,
    #[serde(default)]
    schemas: Map<String, Value>,
    #[serde(default)]
    config: Map<String, Value>,
    states: Vec<RawState>,
    #[serde(default, alias = "transitions")]
    xitions: Vec<RawTransition>,
    #[serde(default)]
    servers: Map<String, Value>,
    #[serde(default)]
    triggers: Vec<RawTrigger>,
}

#[derive(Deserialize)]
struct RawTrigger {
    on: String,
    schema: Option<Value>,
    entry: Option<(String, String)>,
}

/// The document's `triggers`: each schema checked and compiled beside the shared schemas,
/// each `entry` an entry transition.
fn build_triggers(
    fsm: &Fsm,
    raw: Vec<RawTrigger>,
    shared: &SharedSchemas,
    found: &mut Collector,
) -> Vec<crate::Trigger> {
    raw.into_iter()
        .enumerate()
        .map(|(i, t)| {
            let at = JsonPath::root().join("triggers").join(i);
            let schema = t.schema.unwrap_or(Value::Bool(true));
            let compiled = shared.compile_at(&schema, &at.join("schema"), found);
            let entry = t.entry.and_then(|(from, to)| {
                let idx = fsm
                    .entries
                    .iter()
                    .copied()
                    .find(|&e| fsm.transitions[e].from.as_ref() == from && fsm.transitions[e].to.as_ref() == to);
                if idx.is_none() {
                    found.push(
                        Problem::BadRoute,
                        at.join("entry"),
                        format!("[{from}, {to}] is not an entry transition of this FSM"),
                    );
                }
                idx
            });
            if entry.is_none() && fsm.entries.len() > 1 {
                found.push(
                    Problem::BadRoute,
                    at.clone(),
                    "this FSM has several entries: name the one events take with `entry`, or publish events with an `id`".to_owned(),
                );
            }
            crate::Trigger {
                topic: t.on,
                schema,
                compiled: compiled.map(Arc::new),
                entry: entry.or_else(|| (fsm.entries.len() == 1).then(|| fsm.entries[0])),
            }
        })
        .collect()
}

fn one() -> u32 {
    1
}

#[derive(Deserialize, Default)]
#[serde(untagged)]
enum Prompts {
    #[default]
    None,
    One(String),
    Many(Vec<String>),
}

impl Prompts {
    fn into_vec(self) -> Vec<String> {
        match self {
            Prompts::None => Vec::new(),
            Prompts::One(p) => vec![p],
            Prompts::Many(ps) => ps,
        }
    }
}

#[derive(Deserialize)]
struct RawState {
    id: String,
    action: String,
    description: Option<String>,
    #[serde(default)]
    prompts: Prompts,
    #[serde(default)]
    examples: Vec<crate::fsm::Example>,
    #[serde(default)]
    keep: Option<RawKeep>,
    #[serde(default)]
    config: Map<String, Value>,
}

/// `keep` as written: a mode, or `{summary: PROMPT}` (the state's model writes it).
#[derive(Deserialize)]
#[serde(untagged)]
enum RawKeep {
    Mode(crate::fsm::Keep),
    Written { summary: String },
}

impl RawKeep {
    /// The mode, and the prompt of a model-written summary.
    fn split(&self) -> (crate::fsm::Keep, Option<String>) {
        match self {
            RawKeep::Mode(k) => (*k, None),
            RawKeep::Written { summary } => (crate::fsm::Keep::Summary, Some(summary.clone())),
        }
    }
}

#[derive(Deserialize)]
struct RawTransition {
    id: (String, String),
    schema: Option<Value>,
    description: Option<String>,
    #[serde(default)]
    prompts: Prompts,
    label: Option<String>,
    #[serde(default)]
    omit: bool,
}

fn build(
    name: &str,
    raw: RawDocument,
    document: Value,
    actions: &dyn KnownActions,
    found: &mut Collector,
) -> Fsm {
    let root = JsonPath::root();
    let settings = FsmSettings {
        max_attempts: raw
            .config
            .get("max_attempts")
            .and_then(Value::as_u64)
            .map(clamp_u32),
        timeout: structure::timeout_at(
            raw.config.get("timeout"),
            &root.join("config").join("timeout"),
            found,
        ),
        deadline: duration_at(
            raw.config.get("deadline"),
            &root.join("config").join("deadline"),
            found,
        ),
        // The meta-schema admits only 1 to 1,000,000.
        max_steps: raw.config.get("max_steps").and_then(Value::as_u64),
        budget: structure::budget_at(
            raw.config.get("budget"),
            &root.join("config").join("budget"),
            found,
        ),
        // The meta-schema admits only the two words.
        on_new_version: raw
            .config
            .get("on_new_version")
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default(),
        // The meta-schema admits only a tool word.
        mcp_tool: raw
            .config
            .get("mcp_tool")
            .and_then(|v| v.as_str())
            .map(str::to_owned),
    };

    let states = build_states(&raw.states, actions, found);
    let state_index: HashMap<Arc<str>, usize> = states
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.clone(), i))
        .collect();

    let shared = SharedSchemas::check(&raw.schemas, found);
    let xitions_key = if document.get("transitions").is_some() {
        "transitions"
    } else {
        "xitions"
    };
    let mut fsm = Fsm {
        id: Arc::from(raw.id.as_str()),
        version: raw.version,
        description: raw.description,
        prompts: raw.prompts.into_vec(),
        schemas: raw.schemas,
        servers: raw.servers,
        settings,
        states,
        transitions: Vec::new(),
        entries: Vec::new(),
        source: name.to_owned(),
        hash: crate::store::content_hash(&document),
        document,
        triggers: Vec::new(),
        owner: crate::fsm::Owner::Operator,
        state_index,
    };
    build_transitions(&mut fsm, raw.xitions, xitions_key, &shared, actions, found);
    fsm.triggers = build_triggers(&fsm, raw.triggers, &shared, found);
    check_graph(&fsm, xitions_key, found);
    check_routes(&fsm, actions, found);
    check_examples(&fsm, found);
    check_reachability(&fsm, found);
    fsm
}
