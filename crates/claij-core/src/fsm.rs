//! The checked, compiled form of an FSM document: what the engine runs.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::schema::CompiledSchema;

/// The implicit entry pseudo-state every run starts from.
pub const START: &str = "start";

/// The action whose states are terminal.
pub const END_ACTION: &str = "end";

/// Attempts per state when neither the state nor the FSM says otherwise.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;

/// The most steps (transitions) a run takes when its FSM's `config.max_steps` does not say
/// ([`Fsm::max_steps`]).
pub const DEFAULT_MAX_STEPS: u64 = 10_000;

/// Index of a state in [`Fsm::states`].
pub type StateIdx = usize;
/// Index of a transition in [`Fsm::transitions`].
pub type TransitionIdx = usize;

/// A loaded, checked FSM with its schemas compiled. Cheap to share (`Arc<Fsm>`), never
/// mutated once built.
#[derive(Debug)]
pub struct Fsm {
    /// The FSM's id.
    pub id: Arc<str>,
    /// The FSM's version.
    pub version: u32,
    /// What it does, for people.
    pub description: Option<String>,
    /// Prompts for every `llm` state.
    pub prompts: Vec<String>,
    /// Shared schema definitions (exposed to transition schemas as `$defs`).
    pub schemas: Map<String, Value>,
    /// MCP servers by name (the top-level `servers`, plus those given on states), as
    /// written: the MCP client parses them.
    pub servers: Map<String, Value>,
    /// FSM-wide defaults.
    pub settings: FsmSettings,
    /// The states, in document order.
    pub states: Vec<State>,
    /// The transitions, in document order.
    pub transitions: Vec<Transition>,
    /// Transitions leaving `start`, in document order.
    pub entries: Vec<TransitionIdx>,
    /// Where the document came from (file name or `<stdin>`).
    pub source: String,
    /// The document as loaded (JSON), for storage, hashing and display.
    pub document: Value,
    /// The SHA-256 of the document's compact JSON (hex): runs are pinned to it.
    pub hash: String,
    /// The topics whose events start runs of this FSM.
    pub triggers: Vec<Trigger>,
    /// Who gave the document: what its states may touch outside the run depends on it
    /// ([`Owner`]). The loaders make every document the operator's; a document registered
    /// over the network, or read back from a store that says so, is a client's.
    pub owner: Owner,
    pub(crate) state_index: HashMap<Arc<str>, StateIdx>,
}

/// Who gave a document, which decides what its states may touch outside the run (files,
/// programs, hosts, credentials): see claij-engine's `capability` module and
/// docs/SECURITY.md.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Deserialize, serde::Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Owner {
    /// The operator: a document named on a command line, added with `claij defs add`, or
    /// given in code. Its states may touch whatever the process can.
    Operator,
    /// An API client: a document registered over the network (`POST /definitions`). Its
    /// states touch only what the operator's policy allows. The default, so that a
    /// definition whose owner is not known is never trusted.
    #[default]
    Client,
}

impl Owner {
    /// `operator` or `client`.
    pub fn as_str(self) -> &'static str {
        match self {
            Owner::Operator => "operator",
            Owner::Client => "client",
        }
    }

    /// Parses the stored word; anything else is `None`.
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "operator" => Some(Owner::Operator),
            "client" => Some(Owner::Client),
            _ => None,
        }
    }
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A topic an FSM subscribes to (`triggers` in the document): a published event on it that
/// satisfies `schema` starts one run, with the event as its input.
#[derive(Debug, Clone)]
pub struct Trigger {
    /// The topic.
    pub topic: String,
    /// What an event must satisfy, as written (`true` when absent).
    pub schema: Value,
    /// The schema compiled (the shared `schemas` beside it); `None` only in a document
    /// with errors.
    pub compiled: Option<Arc<crate::CompiledSchema>>,
    /// The entry transition an event without `id` takes.
    pub entry: Option<TransitionIdx>,
}

impl Trigger {
    /// The input a run started by `event` gets: the event with the trigger's entry `id`
    /// added when it has none; `Err` with the problems when the event does not satisfy the
    /// trigger's schema.
    pub fn input_for(&self, fsm: &Fsm, event: &Value) -> Result<Value, String> {
        if let Some(compiled) = &self.compiled
            && let Err(issues) = compiled.check(event)
        {
            return Err(issues
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "));
        }
        let mut input = event.clone();
        if let (Some(t), Value::Object(map)) = (self.entry, &mut input)
            && !map.contains_key("id")
        {
            map.insert("id".into(), fsm.transitions[t].id_value.clone());
        }
        Ok(input)
    }
}

/// FSM-wide defaults (`config` at the top of the document).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FsmSettings {
    /// Attempts per state unless a state says otherwise.
    pub max_attempts: Option<u32>,
    /// Timeout of one attempt unless a state says otherwise (`none`: no limit).
    pub timeout: Option<crate::timeout::Timeout>,
    /// Deadline of a whole run.
    pub deadline: Option<Duration>,
    /// The most steps (transitions) a run takes (`config.max_steps`; see
    /// [`Fsm::max_steps`]).
    pub max_steps: Option<u64>,
    /// What a run and its children may spend together (`config.budget`).
    pub budget: Option<crate::budget::Budget>,
    /// What registering this version does to the parked runs of older versions
    /// (`config.on_new_version`).
    pub on_new_version: OnNewVersion,
    /// The name of the one plain MCP tool `claij mcp serve` also serves the FSM as
    /// (`config.mcp_tool`).
    pub mcp_tool: Option<String>,
}

/// What registering a new version of an FSM does to its parked runs (suspended, queued,
/// or left by a process that died) on older versions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnNewVersion {
    /// They stay on the version they started with (the default).
    #[default]
    Keep,
    /// Those that can move to it do (as `claij runs migrate` moves them, states keeping
    /// their names); the others stay, and are reported.
    Migrate,
}

/// One state.
#[derive(Debug)]
pub struct State {
    /// The state's id.
    pub id: Arc<str>,
    /// The action it runs.
    pub action: Arc<str>,
    /// What it does, for people.
    pub description: Option<String>,
    /// Prompts loaded when an `llm` state is entered.
    pub prompts: Vec<String>,
    /// Example answers, shown to a model as earlier turns of the conversation (each
    /// checked on load against the schema of the transition it names).
    pub examples: Vec<Example>,
    /// How the state's finished visits show in later prompts (`keep`), when the document
    /// says; see [`Fsm::keep`] for the default.
    pub keep: Option<Keep>,
    /// What the state's model is asked when it leaves the state, for the summary later
    /// prompts read in place of its visit (`keep: {summary: PROMPT}`; an `llm` state's
    /// only). `None`: the summary is claij's own line.
    pub summary_prompt: Option<String>,
    /// The action's configuration with the engine's own keys removed.
    pub config: Value,
    /// The engine's own keys from `config`.
    pub settings: StateSettings,
    /// Transitions leaving this state, in document order.
    pub outgoing: Vec<TransitionIdx>,
    /// Transitions entering this state, in document order.
    pub incoming: Vec<TransitionIdx>,
}

impl State {
    /// Whether runs end here.
    pub fn is_terminal(&self) -> bool {
        &*self.action == END_ACTION
    }
}

/// How a state's finished visits show in the prompts of later steps (`keep` in the
/// document). The trail keeps everything; only the projection changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Keep {
    /// Everything: the request, every attempt, every tool round, the result.
    Full,
    /// The result only: the transition that left the state.
    Result,
    /// A summary of what happened inside, then the result: the one its model wrote when
    /// it left the state (`keep: {summary: PROMPT}`, recorded in the trail entry's
    /// `summary`), else a line claij writes from the trail (its tool calls, its failed
    /// attempts).
    Summary,
}

/// An example answer of a state: what the state's output looks like for an input.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Example {
    /// The document answered (optional: an example may show the answer alone).
    #[serde(default)]
    pub input: Option<Value>,
    /// The answer, with the `id` of the transition it takes.
    pub output: Value,
}

/// The engine's keys of a state's `config`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StateSettings {
    /// Attempts before giving up (state > FSM > 3).
    pub max_attempts: Option<u32>,
    /// Timeout of one attempt (`none`: no limit).
    pub timeout: Option<crate::timeout::Timeout>,
    /// Where to go when attempts run out.
    pub on_failure: Option<Arc<str>>,
    /// Where to go, instead of suspending, when the run's budget would be exceeded.
    pub on_budget: Option<Arc<str>>,
}

/// What an event taking a transition must look like.
#[derive(Debug, Clone, PartialEq)]
pub enum TransitionSchema {
    /// Anything (absent or `true`); only `id` is checked.
    Any,
    /// A JSON Schema written in the document.
    Static(Value),
    /// A schema computed at transition time by a registered provider.
    Dynamic(String),
}

/// One transition.
#[derive(Debug)]
pub struct Transition {
    /// The source state (`start` for entries).
    pub from: Arc<str>,
    /// The target state.
    pub to: Arc<str>,
    /// The target state's index in [`Fsm::states`] (`None` only in documents that failed
    /// to load), so routing needs no lookup by name.
    pub to_idx: Option<StateIdx>,
    /// The `id` value events carry to take it: `[from, to]`.
    pub id_value: Value,
    /// The schema as written.
    pub schema: TransitionSchema,
    /// The effective schema (with `id == [from, to]` added), for prompts and display;
    /// refers to shared schemas by `$ref` and carries no `$defs`. `None` for dynamic
    /// schemas, which are only known at transition time.
    pub effective: Option<Value>,
    /// The compiled effective schema (static schemas only).
    pub compiled: Option<Arc<CompiledSchema>>,
    /// What it means, for people and models.
    pub description: Option<String>,
    /// Prompts shown when a state is entered through this transition.
    pub prompts: Vec<String>,
    /// Short label for graphs.
    pub label: Option<String>,
    /// true: never shown in prompts.
    pub omit: bool,
}

impl Transition {
    /// Whether this transition leaves `start`.
    pub fn is_entry(&self) -> bool {
        &*self.from == START
    }
}

impl Fsm {
    /// A state by id.
    pub fn state(&self, id: &str) -> Option<&State> {
        self.state_index.get(id).map(|&i| &self.states[i])
    }

    /// The `mcp` state of `state`'s tool-use loop: a state with action `mcp` that
    /// `state` leads to and that leads back to `state` (the MCP hat's `S.mcp`, or one
    /// written by hand).
    pub fn tool_loop(&self, state: &str) -> Option<&State> {
        self.outgoing(state)
            .map(|t| &*t.to)
            .filter(|to| *to != state)
            .filter_map(|to| self.state(to))
            .find(|h| {
                &*h.action == crate::hat::MCP_ACTION && self.transition(&h.id, state).is_some()
            })
    }

    /// How `state`'s finished visits show in later prompts: what the document says, else
    /// [`Keep::Summary`] for a state with a [tool-use loop](Self::tool_loop) (its rounds,
    /// file contents and all, would otherwise stay in every later prompt) and
    /// [`Keep::Full`] for the others.
    pub fn keep(&self, state: &str) -> Keep {
        match self.state(state) {
            Some(State { keep: Some(k), .. }) => *k,
            _ if self.tool_loop(state).is_some() => Keep::Summary,
            _ => Keep::Full,
        }
    }

    /// The index of a state by id.
    pub fn state_idx(&self, id: &str) -> Option<StateIdx> {
        self.state_index.get(id).copied()
    }

    /// The transition `[from, to]`, if it exists.
    pub fn transition(&self, from: &str, to: &str) -> Option<&Transition> {
        self.transition_idx(from, to).map(|i| &self.transitions[i])
    }

    /// The index of transition `[from, to]`, if it exists.
    pub fn transition_idx(&self, from: &str, to: &str) -> Option<TransitionIdx> {
        let candidates: &[TransitionIdx] = if from == START {
            &self.entries
        } else {
            &self.state(from)?.outgoing
        };
        candidates
            .iter()
            .copied()
            .find(|&i| &*self.transitions[i].to == to)
    }

    /// The `[from, to]` pairs of the transitions leaving `from` (a run's wait there).
    pub fn outgoing_pairs(&self, from: &str) -> Vec<(String, String)> {
        self.outgoing(from)
            .map(|t| (t.from.to_string(), t.to.to_string()))
            .collect()
    }

    /// The transitions an event may take from `from` (`start` for entries).
    pub fn outgoing(&self, from: &str) -> impl Iterator<Item = &Transition> {
        let list: &[TransitionIdx] = if from == START {
            &self.entries
        } else {
            self.state(from)
                .map(|s| s.outgoing.as_slice())
                .unwrap_or(&[])
        };
        list.iter().map(|&i| &self.transitions[i])
    }

    /// Attempts allowed in a state: the state's, else the FSM's, else 3.
    pub fn max_attempts(&self, state: &State) -> u32 {
        state
            .settings
            .max_attempts
            .or(self.settings.max_attempts)
            .unwrap_or(DEFAULT_MAX_ATTEMPTS)
    }

    /// The most steps a run takes: transitions in its trail (a chain's earlier runs'
    /// included, since its trail carries them), the input's entry included. A run that
    /// enters a state other than a terminal one with none left ends there `failed`, with a
    /// `steps` failure. `config.max_steps`, else [`DEFAULT_MAX_STEPS`].
    pub fn max_steps(&self) -> u64 {
        self.settings.max_steps.unwrap_or(DEFAULT_MAX_STEPS)
    }

    /// The limit of one attempt in `state`: the state's timeout, else the FSM's, else
    /// `operator`'s (the operator's default for the state's action), else `built_in`
    /// (the action's own default; `None`: unbounded). See [`crate::timeout`].
    pub fn attempt_limit(
        &self,
        state: &State,
        operator: Option<crate::timeout::Timeout>,
        built_in: Option<Duration>,
    ) -> crate::timeout::AttemptLimit {
        crate::timeout::AttemptLimit::resolve(
            state.settings.timeout,
            self.settings.timeout,
            operator,
            built_in,
        )
    }

    /// `schemas` as a `$defs` object, to put beside schemas that refer into it.
    pub fn defs(&self) -> &Map<String, Value> {
        &self.schemas
    }

    /// The schema an answer from `state` must satisfy: the union (`oneOf`) of its
    /// outgoing transitions' effective schemas (dynamic ones appear by name).
    pub fn output_schema(&self, state: &str) -> Value {
        let branches: Vec<Value> = self
            .outgoing(state)
            .map(|t| {
                t.effective.clone().unwrap_or_else(|| match &t.schema {
                    TransitionSchema::Dynamic(name) => {
                        serde_json::json!({"x-dynamic-schema": name, "properties": {"id": {"const": t.id_value}}})
                    }
                    _ => Value::Bool(true),
                })
            })
            .collect();
        match branches.len() {
            1 => branches.into_iter().next().unwrap_or(Value::Bool(true)),
            _ => serde_json::json!({ "oneOf": branches }),
        }
    }
}
