//! Loading a document: syntax, meta-schema, then the structural checks, every problem
//! reported at once; the result is a compiled [`Fsm`].

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::diagnostic::{Collector, Diagnostic, Diagnostics, JsonPath, Problem};
use crate::fsm::{
    END_ACTION, Fsm, FsmSettings, START, State, StateSettings, Transition, TransitionSchema,
};
use crate::known_actions::{ConfigRoute, KnownActions};
use crate::schema::{
    CompiledSchema, compilable_effective, effective_schema, local_ref_resolves, meta_errors,
    refs_in, transition_id, with_defs,
};

/// The keys of a state's `config` that belong to the engine, not to the action.
pub const ENGINE_CONFIG_KEYS: [&str; 3] = ["max_attempts", "timeout", "on_failure"];

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
    config: Map<String, Value>,
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
        timeout: duration_at(
            raw.config.get("timeout"),
            &root.join("config").join("timeout"),
            found,
        ),
        deadline: duration_at(
            raw.config.get("deadline"),
            &root.join("config").join("deadline"),
            found,
        ),
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
        state_index,
    };
    build_transitions(&mut fsm, raw.xitions, xitions_key, &shared, actions, found);
    check_graph(&fsm, xitions_key, found);
    check_routes(&fsm, actions, found);
    check_reachability(&fsm, found);
    fsm
}

fn clamp_u32(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A duration field: a positive number of seconds or a humantime string (`500ms`,
/// `1h 30m`). Values of another type, numbers not above zero and empty strings are left
/// to the meta-schema to report.
fn duration_at(value: Option<&Value>, at: &JsonPath, found: &mut Collector) -> Option<Duration> {
    let (written, parsed) = match value? {
        Value::Number(n) => {
            let secs = n.as_f64().filter(|secs| *secs > 0.0)?;
            let parsed = Duration::try_from_secs_f64(secs)
                .map_err(|_| format!("`{n}` seconds is too large for a duration"));
            (n.to_string(), parsed)
        }
        Value::String(s) if !s.is_empty() => {
            let parsed = humantime::parse_duration(s.trim()).map_err(|e| {
                format!("`{s}` is not a duration ({e}); write e.g. `500ms`, `30s`, `2m`, `1h 30m`")
            });
            (s.clone(), parsed)
        }
        _ => return None,
    };
    let checked = parsed.and_then(|d| {
        if d.is_zero() {
            Err(format!(
                "`{written}` is not a positive duration; write e.g. `500ms`, `30s`, `2m`"
            ))
        } else {
            Ok(d)
        }
    });
    checked
        .map_err(|message| found.push(Problem::Format, at.clone(), message))
        .ok()
}

fn build_states(raw: &[RawState], actions: &dyn KnownActions, found: &mut Collector) -> Vec<State> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut states = Vec::with_capacity(raw.len());
    for (i, s) in raw.iter().enumerate() {
        let at = JsonPath::root().join("states").join(i);
        if s.id == START {
            found.push(
                Problem::ReservedState,
                at.join("id"),
                "`start` is the implicit entry pseudo-state and cannot be declared as a state",
            );
        }
        if let Some(first) = seen.insert(&s.id, i) {
            found.push(
                Problem::Duplicate,
                at.join("id"),
                format!(
                    "duplicate state id `{}` (first declared at $.states[{first}])",
                    s.id
                ),
            );
        }
        let config_at = at.join("config");
        let mut config = s.config.clone();
        let settings = StateSettings {
            max_attempts: config
                .remove("max_attempts")
                .as_ref()
                .and_then(Value::as_u64)
                .map(clamp_u32),
            timeout: duration_at(
                config.remove("timeout").as_ref(),
                &config_at.join("timeout"),
                found,
            ),
            on_failure: config
                .remove("on_failure")
                .as_ref()
                .and_then(Value::as_str)
                .map(Arc::from),
        };
        // `x-` keys are free for tools and people, in `config` as everywhere else.
        config.retain(|key, _| !key.starts_with("x-"));
        let config = Value::Object(config);
        if !actions.has_action(&s.action) {
            found.push(
                Problem::UnknownAction,
                at.join("action"),
                format!(
                    "unknown action `{}`; known actions: {}",
                    s.action,
                    actions.action_names().join(", ")
                ),
            );
        } else {
            for issue in actions.check_config(&s.action, &config) {
                found.push(
                    Problem::BadConfig,
                    config_at.join_pointer(&issue.pointer),
                    format!(
                        "action `{}` rejects this config: {}",
                        s.action, issue.message
                    ),
                );
            }
        }
        states.push(State {
            id: Arc::from(s.id.as_str()),
            action: Arc::from(s.action.as_str()),
            description: s.description.clone(),
            prompts: match &s.prompts {
                Prompts::None => Vec::new(),
                Prompts::One(p) => vec![p.clone()],
                Prompts::Many(ps) => ps.clone(),
            },
            config,
            settings,
            outgoing: Vec::new(),
            incoming: Vec::new(),
        });
    }
    states
}

/// The document's shared `schemas`, checked, as transition schemas see them.
struct SharedSchemas {
    /// By name.
    defs: Map<String, Value>,
    /// `{"$defs": defs}`: where local `$ref`s resolve.
    root: Value,
    /// Whether every shared schema is sound; when one is not, no transition schema is
    /// compiled (each would fail on it again).
    sound: bool,
}

impl SharedSchemas {
    /// Checks every shared schema: its `$ref`s resolve, it is a valid JSON Schema, and,
    /// when all of them are, it compiles with the others beside it.
    fn check(defs: &Map<String, Value>, found: &mut Collector) -> Self {
        let root = Value::Object(Map::from_iter([(
            "$defs".to_owned(),
            Value::Object(defs.clone()),
        )]));
        let at = |name: &str| JsonPath::root().join("schemas").join(name);
        let mut sound = true;
        for (name, schema) in defs {
            sound &= check_schema(schema, &root, &at(name), found);
        }
        if sound {
            for (name, schema) in defs {
                sound &= compile_authored(schema, defs, &at(name), found).is_some();
            }
        }
        Self {
            defs: defs.clone(),
            root,
            sound,
        }
    }
}

/// Checks a schema written at `at`: its `$ref`s resolve and it is a valid JSON Schema
/// (each bad keyword reported where it is written). Returns whether both hold.
fn check_schema(schema: &Value, root: &Value, at: &JsonPath, found: &mut Collector) -> bool {
    let refs_ok = refs_resolve(schema, root, at, found);
    let errors = meta_errors(schema);
    for e in &errors {
        found.push(
            Problem::BadSchema,
            at.join_pointer(&e.pointer),
            format!("not a valid JSON Schema: {}", e.message),
        );
    }
    refs_ok && errors.is_empty()
}

/// Compiles a schema written at `at`, the shared schemas beside it as `$defs`, reporting
/// a failure at the keyword it names (once, however many schemas share the keyword).
fn compile_authored(
    schema: &Value,
    defs: &Map<String, Value>,
    at: &JsonPath,
    found: &mut Collector,
) -> Option<CompiledSchema> {
    match CompiledSchema::compile(with_defs(schema, defs)) {
        Ok(compiled) => Some(compiled),
        Err(e) => {
            let here = match e.pointer.strip_prefix("/$defs/") {
                Some(inside) => JsonPath::root()
                    .join("schemas")
                    .join_pointer(&format!("/{inside}")),
                None => at.join_pointer(&e.pointer),
            };
            if !found.has_at(Problem::BadSchema, &here) {
                found.push(
                    Problem::BadSchema,
                    here,
                    format!("the schema does not compile: {}", e.message),
                );
            }
            None
        }
    }
}

/// Reports each `$ref` of `schema` that does not resolve; true when all do.
fn refs_resolve(schema: &Value, root: &Value, at: &JsonPath, found: &mut Collector) -> bool {
    let mut ok = true;
    for (pointer, target) in refs_in(schema) {
        let here = at.join_pointer(&pointer);
        match local_ref_resolves(&target, root) {
            Some(true) => {}
            Some(false) => {
                ok = false;
                let known: Vec<&String> = root
                    .get("$defs")
                    .and_then(Value::as_object)
                    .map(|m| m.keys().collect())
                    .unwrap_or_default();
                found.push(
                    Problem::UnresolvedRef,
                    here,
                    format!(
                        "`$ref` `{target}` does not resolve; shared schemas are referenced as `#/$defs/NAME` (defined: {})",
                        if known.is_empty() {
                            "none".to_owned()
                        } else {
                            known.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
                        }
                    ),
                );
            }
            None => {
                ok = false;
                found.push(
                    Problem::UnresolvedRef,
                    here,
                    format!("`$ref` `{target}` is not local; external schemas are not fetched, copy it into `schemas`"),
                );
            }
        }
    }
    ok
}

fn build_transitions(
    fsm: &mut Fsm,
    raw: Vec<RawTransition>,
    key: &str,
    shared: &SharedSchemas,
    actions: &dyn KnownActions,
    found: &mut Collector,
) {
    let mut seen: HashMap<(String, String), usize> = HashMap::new();
    for (i, t) in raw.into_iter().enumerate() {
        let at = JsonPath::root().join(key).join(i);
        let (from, to) = t.id.clone();
        let mut endpoints_ok = true;
        if from != START && fsm.state_idx(&from).is_none() {
            endpoints_ok = false;
            found.push(
                Problem::UnknownState,
                at.join("id").join(0),
                format!(
                    "transition from unknown state `{from}`; {}",
                    known_states(fsm)
                ),
            );
        }
        if to == START {
            endpoints_ok = false;
            found.push(
                Problem::ReservedState,
                at.join("id").join(1),
                "no transition may enter `start`; it is only an entry pseudo-state",
            );
        } else if fsm.state_idx(&to).is_none() {
            endpoints_ok = false;
            found.push(
                Problem::UnknownState,
                at.join("id").join(1),
                format!("transition to unknown state `{to}`; {}", known_states(fsm)),
            );
        }
        if let Some(first) = seen.insert(t.id.clone(), i) {
            found.push(
                Problem::Duplicate,
                at.join("id"),
                format!("duplicate transition [{from}, {to}] (first declared at $.{key}[{first}])"),
            );
            continue;
        }
        let (schema, effective, compiled) = transition_schema(
            t.schema,
            (&from, &to),
            &at.join("schema"),
            shared,
            actions,
            found,
        );
        let idx = fsm.transitions.len();
        fsm.transitions.push(Transition {
            id_value: transition_id(&from, &to),
            from: Arc::from(from.as_str()),
            to: Arc::from(to.as_str()),
            to_idx: fsm.state_idx(&to),
            schema,
            effective,
            compiled,
            description: t.description,
            prompts: t.prompts.into_vec(),
            label: t.label,
            omit: t.omit,
        });
        if !endpoints_ok {
            continue;
        }
        if from == START {
            fsm.entries.push(idx);
        } else if let Some(s) = fsm.state_idx(&from) {
            fsm.states[s].outgoing.push(idx);
        }
        if let Some(s) = fsm.state_idx(&to) {
            fsm.states[s].incoming.push(idx);
        }
    }
}

/// A transition's schema as the FSM keeps it: the authored form, the effective schema
/// (`id` added) and that compiled, each problem reported at `at`.
fn transition_schema(
    authored: Option<Value>,
    (from, to): (&str, &str),
    at: &JsonPath,
    shared: &SharedSchemas,
    actions: &dyn KnownActions,
    found: &mut Collector,
) -> (TransitionSchema, Option<Value>, Option<Arc<CompiledSchema>>) {
    match authored {
        None | Some(Value::Bool(true)) => {
            let effective = effective_schema(from, to, None);
            let compiled = shared
                .sound
                .then(|| compile_effective(&effective, shared, at, found))
                .flatten();
            (TransitionSchema::Any, Some(effective), compiled)
        }
        Some(Value::Bool(false)) => {
            found.push(
                Problem::BadSchema,
                at.clone(),
                "`schema: false` accepts no event, so this transition could never be taken; remove the transition instead",
            );
            (TransitionSchema::Static(Value::Bool(false)), None, None)
        }
        Some(Value::String(name)) => {
            // A name not of the form `provider:name` is reported by the meta-schema.
            if !found.has_at(Problem::Format, at) && !actions.has_dynamic_schema(&name) {
                found.push(
                    Problem::UnknownDynamicSchema,
                    at.clone(),
                    format!("no provider serves the dynamic schema `{name}`"),
                );
            }
            (TransitionSchema::Dynamic(name), None, None)
        }
        Some(schema) => {
            let effective = effective_schema(from, to, Some(&schema));
            let compiled = (check_schema(&schema, &shared.root, at, found) && shared.sound)
                .then(|| compile_authored(&schema, &shared.defs, at, found))
                .flatten()
                .and_then(|_| compile_effective(&effective, shared, at, found));
            (TransitionSchema::Static(schema), Some(effective), compiled)
        }
    }
}

/// Compiles a transition's effective schema. The shared schemas (and the authored one,
/// if any) compiled already, so a failure here is the engine's doing; it is reported all
/// the same.
fn compile_effective(
    effective: &Value,
    shared: &SharedSchemas,
    at: &JsonPath,
    found: &mut Collector,
) -> Option<Arc<CompiledSchema>> {
    match CompiledSchema::compile(compilable_effective(effective, &shared.defs)) {
        Ok(c) => Some(Arc::new(c)),
        Err(e) => {
            found.push(
                Problem::BadSchema,
                at.clone(),
                format!(
                    "the schema does not compile once `id` is added: {}",
                    e.message
                ),
            );
            None
        }
    }
}

fn known_states(fsm: &Fsm) -> String {
    let ids: Vec<&str> = fsm.states.iter().map(|s| &*s.id).collect();
    format!("states are: {}", ids.join(", "))
}

/// Entries, terminals, and terminals with outgoing transitions.
fn check_graph(fsm: &Fsm, key: &str, found: &mut Collector) {
    if fsm.entries.is_empty() {
        found.push(
            Problem::NoEntry,
            JsonPath::root().join(key),
            "no transition leaves `start`: add one such as `id: [start, FIRST_STATE]`",
        );
    }
    if !fsm.states.iter().any(State::is_terminal) {
        found.push(
            Problem::NoTerminal,
            JsonPath::root().join("states"),
            format!("no terminal state: add a state with `action: {END_ACTION}`"),
        );
    }
    for (i, state) in fsm.states.iter().enumerate() {
        if state.is_terminal() && !state.outgoing.is_empty() {
            found.push(
                Problem::BadRoute,
                JsonPath::root().join("states").join(i).join("id"),
                format!(
                    "terminal state `{}` has outgoing transitions, which can never be taken",
                    state.id
                ),
            );
        }
    }
}

/// Every route a state names, the engine's `on_failure` and those its action's config
/// declares ([`ConfigRoute`]), has a transition [state, target].
fn check_routes(fsm: &Fsm, actions: &dyn KnownActions, found: &mut Collector) {
    for (i, state) in fsm.states.iter().enumerate() {
        let config_at = JsonPath::root().join("states").join(i).join("config");
        let mut routes: Vec<ConfigRoute> = Vec::new();
        if let Some(target) = &state.settings.on_failure {
            routes.push(ConfigRoute {
                pointer: "/on_failure".to_owned(),
                target: target.to_string(),
            });
        }
        if actions.has_action(&state.action) {
            routes.extend(actions.config_routes(&state.action, &state.config));
        }
        for route in routes {
            let at = config_at.join_pointer(&route.pointer);
            let target = route.target.as_str();
            let routed = state
                .outgoing
                .iter()
                .any(|&t| &*fsm.transitions[t].to == target);
            // A route the action already rejected in its config is not reported again.
            if routed || found.has_at(Problem::BadConfig, &at) {
                continue;
            }
            let name = JsonPath::from_pointer(&route.pointer).to_string();
            let name = name.trim_start_matches('$').trim_start_matches('.');
            found.push(
                Problem::BadRoute,
                at,
                format!(
                    "`{name}: {target}` needs a transition [{}, {target}]",
                    state.id
                ),
            );
        }
    }
}

/// Every state can be reached from `start` (unless nothing leaves `start`) and can reach
/// a terminal state (unless there is none): those are reported once, on their own.
fn check_reachability(fsm: &Fsm, found: &mut Collector) {
    let forward = (!fsm.entries.is_empty()).then(|| {
        reach(
            fsm,
            fsm.entries.iter().map(|&t| &*fsm.transitions[t].to),
            true,
        )
    });
    let backward = fsm.states.iter().any(State::is_terminal).then(|| {
        reach(
            fsm,
            fsm.states
                .iter()
                .filter(|s| s.is_terminal())
                .map(|s| &*s.id),
            false,
        )
    });
    for (i, state) in fsm.states.iter().enumerate() {
        if &*state.id == START {
            continue; // reported as a reserved name
        }
        let at = JsonPath::root().join("states").join(i).join("id");
        if forward.as_ref().is_some_and(|f| !f.contains(&*state.id)) {
            found.push(
                Problem::Unreachable,
                at,
                format!("state `{}` cannot be reached from `start`", state.id),
            );
        } else if backward.as_ref().is_some_and(|b| !b.contains(&*state.id)) {
            found.push(
                Problem::Dead,
                at,
                format!(
                    "no terminal state can be reached from `{}`: a run entering it could never end",
                    state.id
                ),
            );
        }
    }
}

/// The states reachable from `seeds` following transitions forwards (or backwards).
fn reach<'a>(
    fsm: &'a Fsm,
    seeds: impl Iterator<Item = &'a str>,
    forward: bool,
) -> HashSet<&'a str> {
    let mut seen: HashSet<&str> = HashSet::new();
    let mut queue: VecDeque<&str> = seeds.collect();
    while let Some(id) = queue.pop_front() {
        if !seen.insert(id) {
            continue;
        }
        let Some(state) = fsm.state(id) else { continue };
        let edges = if forward {
            &state.outgoing
        } else {
            &state.incoming
        };
        for &t in edges {
            let t = &fsm.transitions[t];
            let next = if forward { &*t.to } else { &*t.from };
            if next != START && !seen.contains(next) {
                queue.push_back(next);
            }
        }
    }
    seen
}
