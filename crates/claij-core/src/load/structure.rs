//! The structural checks of a document, each problem reported where it is written:
//! states (ids, reserved names, actions and their config, engine settings), transitions
//! (endpoints, duplicates), entries and terminals, routes (`on_failure` and those an
//! action's config declares) and reachability (from `start`, to a terminal).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::schemas::{SharedSchemas, transition_schema};
use super::{Prompts, RawState, RawTransition};
use crate::diagnostic::{Collector, JsonPath, Problem};
use crate::fsm::{END_ACTION, Fsm, START, State, StateSettings, Transition};
use crate::known_actions::{ConfigRoute, KnownActions};
use crate::schema::transition_id;
use crate::timeout::Timeout;

pub(super) fn clamp_u32(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A duration field: a positive number of seconds or a humantime string (`500ms`,
/// `1h 30m`). Values of another type, numbers not above zero and empty strings are left
/// to the meta-schema to report.
/// The document's `config.budget`, its counts and duration read (the meta-schema has
/// checked its shape); problems reported at their place.
pub(super) fn budget_at(
    value: Option<&Value>,
    at: &JsonPath,
    found: &mut Collector,
) -> Option<crate::budget::Budget> {
    let map = value?.as_object()?;
    // A count the meta-schema refused (its pattern is what `count` reads) is reported
    // there, once.
    let count = |key: &str| -> Option<u64> {
        match map.get(key)? {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => crate::budget::count(s).ok(),
            _ => None,
        }
    };
    let budget = crate::budget::Budget {
        tokens: count("tokens"),
        calls: count("calls"),
        cost_usd: map.get("cost").and_then(Value::as_f64),
        time_ms: duration_at(map.get("time"), &at.join("time"), found)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
    };
    (!budget.is_empty()).then_some(budget)
}

pub(super) fn duration_at(
    value: Option<&Value>,
    at: &JsonPath,
    found: &mut Collector,
) -> Option<Duration> {
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

/// A timeout (a duration or `none`) at `at`, if written; a bad one is reported. What the
/// meta-schema rejects already (a number not positive, an empty string) is not reported
/// again.
pub(super) fn timeout_at(
    value: Option<&Value>,
    at: &JsonPath,
    found: &mut Collector,
) -> Option<Timeout> {
    match value? {
        Value::Number(n) if !n.as_f64().is_some_and(|secs| secs > 0.0) => None,
        Value::String(s) if s.is_empty() => None,
        v @ (Value::Number(_) | Value::String(_)) => Timeout::parse(v)
            .map_err(|message| found.push(Problem::Format, at.clone(), message))
            .ok(),
        _ => None,
    }
}

pub(super) fn build_states(
    raw: &[RawState],
    actions: &dyn KnownActions,
    found: &mut Collector,
) -> Vec<State> {
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
            timeout: timeout_at(
                config.remove("timeout").as_ref(),
                &config_at.join("timeout"),
                found,
            ),
            on_failure: config
                .remove("on_failure")
                .as_ref()
                .and_then(Value::as_str)
                .map(Arc::from),
            on_budget: config
                .remove("on_budget")
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
        if s.keep.as_ref().is_some_and(|k| k.split().1.is_some()) && s.action != "llm" {
            found.push(
                Problem::BadConfig,
                at.join("keep").join("summary"),
                format!(
                    "a summary written by the state's model needs an `llm` state; `{}` runs `{}` \
                     (write `keep: summary` for the summary line claij writes itself)",
                    s.id, s.action
                ),
            );
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
            examples: s.examples.clone(),
            keep: s.keep.as_ref().map(|k| k.split().0),
            summary_prompt: s.keep.as_ref().and_then(|k| k.split().1),
            config,
            settings,
            outgoing: Vec::new(),
            incoming: Vec::new(),
        });
    }
    states
}

pub(super) fn build_transitions(
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

fn known_states(fsm: &Fsm) -> String {
    let ids: Vec<&str> = fsm.states.iter().map(|s| &*s.id).collect();
    format!("states are: {}", ids.join(", "))
}

/// Entries, terminals, and terminals with outgoing transitions.
pub(super) fn check_graph(fsm: &Fsm, key: &str, found: &mut Collector) {
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

/// Every route a state names, the engine's `on_failure` and `on_budget` and those its action's config
/// declares ([`ConfigRoute`]), has a transition [state, target].
pub(super) fn check_routes(fsm: &Fsm, actions: &dyn KnownActions, found: &mut Collector) {
    for (i, state) in fsm.states.iter().enumerate() {
        let config_at = JsonPath::root().join("states").join(i).join("config");
        let mut routes: Vec<ConfigRoute> = Vec::new();
        for (key, target) in [
            ("/on_failure", &state.settings.on_failure),
            ("/on_budget", &state.settings.on_budget),
        ] {
            if let Some(target) = target {
                routes.push(ConfigRoute {
                    pointer: key.to_owned(),
                    target: target.to_string(),
                });
            }
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
pub(super) fn check_reachability(fsm: &Fsm, found: &mut Collector) {
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

/// Each state's example answers: an object whose `id` names a transition leaving the
/// state, satisfying that transition's schema (dynamic schemas, resolved only at run
/// time, are not checked here).
pub(super) fn check_examples(fsm: &Fsm, found: &mut Collector) {
    for (i, state) in fsm.states.iter().enumerate() {
        for (j, example) in state.examples.iter().enumerate() {
            let at = JsonPath::root()
                .join("states")
                .join(i)
                .join("examples")
                .join(j)
                .join("output");
            let id = example.output.get("id");
            let transition = state
                .outgoing
                .iter()
                .map(|&t| &fsm.transitions[t])
                .find(|t| Some(&t.id_value) == id);
            let Some(transition) = transition else {
                let ids: Vec<String> = state
                    .outgoing
                    .iter()
                    .map(|&t| fsm.transitions[t].id_value.to_string())
                    .collect();
                found.push(
                    Problem::BadExample,
                    at.join("id"),
                    format!(
                        "an example answer of `{}` must carry the `id` of a transition leaving it ({}), not {}",
                        state.id,
                        if ids.is_empty() { "there is none".to_owned() } else { ids.join(", ") },
                        id.map_or_else(|| "none".to_owned(), Value::to_string)
                    ),
                );
                continue;
            };
            if let Some(compiled) = &transition.compiled
                && let Err(issues) = compiled.check(&example.output)
            {
                for issue in issues {
                    found.push(
                        Problem::BadExample,
                        at.join_pointer(&issue.instance_path),
                        format!(
                            "the example answer does not satisfy the schema of {}: {}",
                            transition.id_value, issue.message
                        ),
                    );
                }
            }
        }
    }
}
