//! Moving parked runs to another version of their FSM ([`Engine::plan_migration`]): for
//! each run a [`Plan`] — the state it moves to (same name, or renamed by a map), what
//! changes for it, and every reason it cannot move, each naming its place — and, for a
//! run that can move, the [`Migration`] the store writes in one transaction
//! ([`RunStore::migrate_run`]).
//!
//! A run can move when nothing drives it (suspended; queued; or running under a lease
//! that expired, or whose process is gone), its state has a place in the new version, the
//! transition that brought it there still exists and accepts the event that did, the
//! transitions it waits on still exist, and a state waiting for child runs still runs
//! what started them.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::SystemTime;

use claij_core::budget::is_pause;
use claij_core::migration::{MigrationEvent, Pin, StateMap, entered_by};
use claij_core::store::{Migration, RunRecord, RunStore, Wait};
use claij_core::{Failure, FailureKind, Fsm, RunStatus, State, TrailEntry, TransitionSchema};
use serde::Serialize;
use serde_json::Value;

use crate::drive::to_micros;
use crate::durable::is_dead_local_owner;
use crate::run::{Engine, RunError};

/// One finding of a plan, at its place (`state `approve``, `transition `a → b``, `entry 4`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Where: the state, transition or trail entry it concerns.
    pub at: String,
    /// What, in words.
    pub message: String,
}

impl Finding {
    fn new(at: impl Into<String>, message: impl Into<String>) -> Self {
        Finding {
            at: at.into(),
            message: message.into(),
        }
    }
}

/// What moving one run would do, or why it cannot move.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// The run.
    pub run: String,
    /// Its status.
    pub status: RunStatus,
    /// Where it is.
    pub from: Pin,
    /// Where it would be (its state there, when it has one).
    pub to: Pin,
    /// The states renamed (as given).
    #[serde(skip_serializing_if = "StateMap::is_empty")]
    pub map: StateMap,
    /// What changes for it (new or changed transitions it waits on, say).
    pub changes: Vec<Finding>,
    /// Why it cannot move (empty: it can).
    pub refusals: Vec<Finding>,
    /// What the store writes (`None` when refused, or already there).
    #[serde(skip)]
    migration: Option<Migration>,
}

impl Plan {
    /// Whether the run is on the target definition already (nothing to do).
    pub fn is_current(&self) -> bool {
        self.from.hash == self.to.hash
    }

    /// The move, for [`RunStore::migrate_run`]: `None` when refused, or already there.
    pub fn migration(&self) -> Option<&Migration> {
        self.migration.as_ref()
    }
}

/// `from → to`, for messages.
fn pair(from: &str, to: &str) -> String {
    format!("{from} → {to}")
}

impl Engine {
    /// Plans moving the run `record` (pinned to `old`) to `new`, its states renamed by
    /// `map`: reads its trail, checks it against the new version, and builds the move when
    /// nothing refuses it. Nothing is written.
    pub async fn plan_migration(
        &self,
        store: &dyn RunStore,
        record: &RunRecord,
        old: &Fsm,
        new: &Fsm,
        map: &StateMap,
    ) -> Result<Plan, RunError> {
        let target = map
            .get(&record.state)
            .cloned()
            .unwrap_or_else(|| record.state.clone());
        let mut plan = Plan {
            run: record.id.clone(),
            status: record.status,
            from: Pin {
                version: record.version,
                hash: record.hash.clone(),
                state: record.state.clone(),
            },
            to: Pin {
                version: new.version,
                hash: new.hash.clone(),
                state: target.clone(),
            },
            map: map.clone(),
            changes: Vec::new(),
            refusals: Vec::new(),
            migration: None,
        };
        if plan.is_current() {
            return Ok(plan);
        }
        if record.fsm_id != *new.id {
            plan.refusals.push(Finding::new(
                "run",
                format!(
                    "is a run of `{}`, not of `{}`: a run moves only between versions of its own FSM",
                    record.fsm_id, new.id
                ),
            ));
            return Ok(plan);
        }
        if let Some(why) = not_parked(record) {
            plan.refusals.push(Finding::new("run", why));
            return Ok(plan);
        }
        let Some(to_state) = new.state(&target) else {
            let renamed = if target == record.state {
                String::new()
            } else {
                format!(" (`{}` renamed by the map)", record.state)
            };
            plan.refusals.push(Finding::new(
                format!("state `{}`", record.state),
                format!(
                    "v{} has no state `{target}`{renamed}: name where the run goes with --map {}=STATE",
                    new.version, record.state
                ),
            ));
            return Ok(plan);
        };
        if to_state.is_terminal() {
            plan.refusals.push(Finding::new(
                format!("state `{target}`"),
                format!(
                    "is a final state in v{}: a run waits in it for nothing",
                    new.version
                ),
            ));
        }
        let trail = store.trail(&record.id, 0).await?;
        self.check_entry(&trail, new, map, &mut plan);
        let wait = match &record.wait {
            Some(wait) => self.moved_wait(record, wait, old, new, to_state, map, &mut plan),
            None => None,
        };
        if plan.refusals.is_empty() {
            plan.migration = Some(Migration {
                found: record.clone(),
                version: new.version,
                hash: new.hash.clone(),
                state: target,
                wait,
                entry: migrated_entry(record, &trail, new, &plan),
            });
        }
        Ok(plan)
    }

    /// The transition that brought the run to its state must exist in `new` and accept
    /// the event that took it (its `id` renamed).
    fn check_entry(&self, trail: &[TrailEntry], new: &Fsm, map: &StateMap, plan: &mut Plan) {
        let Some((from, to)) = entered_by(trail) else {
            plan.refusals.push(Finding::new(
                "trail",
                "has no transition: the run has no position to carry over",
            ));
            return;
        };
        let old_pair = pair(&from, &to);
        let rename = |s: &str| map.get(s).cloned().unwrap_or_else(|| s.to_owned());
        let (new_from, new_to) = (rename(&from), rename(&to));
        let Some(t) = new.transition_idx(&new_from, &new_to) else {
            let renamed = if (new_from.as_str(), new_to.as_str()) == (&*from, &*to) {
                String::new()
            } else {
                format!(" (`{}` with the map)", pair(&new_from, &new_to))
            };
            plan.refusals.push(Finding::new(
                format!("transition `{old_pair}`"),
                format!(
                    "brought the run to `{to}`, and v{} has no such transition{renamed}",
                    new.version
                ),
            ));
            return;
        };
        let Some(entry) = trail.iter().rev().find(|e| e.is_transition()) else {
            return;
        };
        let transition = &new.transitions[t];
        let mut event = entry.event.clone();
        if let Some(obj) = event.as_object_mut() {
            obj.insert("id".into(), transition.id_value.clone());
        }
        let at = format!("entry {}", entry.seq);
        match self.compiled_schema(new, transition) {
            Ok(schema) => {
                if let Err(issues) = schema.check(&event) {
                    let issues: Vec<String> = issues.iter().map(ToString::to_string).collect();
                    plan.refusals.push(Finding::new(
                        at,
                        format!(
                            "the event that brought the run to `{to}` does not satisfy v{}'s schema of `{}`: {}",
                            new.version,
                            pair(&new_from, &new_to),
                            issues.join("; ")
                        ),
                    ));
                }
            }
            Err(message) => plan.refusals.push(Finding::new(
                at,
                format!(
                    "v{}'s schema of `{}` cannot be resolved to check it: {message}",
                    new.version,
                    pair(&new_from, &new_to)
                ),
            )),
        }
    }

    /// The wait the run has in `new`: what it waited on, carried over where it can be.
    #[allow(clippy::too_many_arguments)]
    fn moved_wait(
        &self,
        record: &RunRecord,
        wait: &Wait,
        old: &Fsm,
        new: &Fsm,
        to_state: &State,
        map: &StateMap,
        plan: &mut Plan,
    ) -> Option<Wait> {
        let state_at = format!("state `{}`", record.state);
        if let Some(held) = wait.held_at(SystemTime::now()) {
            plan.refusals.push(Finding::new(
                state_at.clone(),
                format!(
                    "its MCP server's question is held open by `{}` until {}: move it once the hold ends",
                    held.owner,
                    humantime::format_rfc3339_seconds(held.until)
                ),
            ));
        }
        let old_state = old.state(&wait.state);
        let same_action = old_state.is_some_and(|s| s.action == to_state.action);
        if !wait.children.is_empty() {
            let same_work = old_state
                .is_some_and(|s| s.action == to_state.action && s.config == to_state.config);
            if !same_work {
                plan.refusals.push(Finding::new(
                    state_at.clone(),
                    format!(
                        "waits for its child runs ({}), and v{} changes what `{}` runs: its children would not be found again",
                        wait.children.join(", "),
                        new.version,
                        to_state.id
                    ),
                ));
            }
        } else if wait.takes_input() && wait.question.is_none() && !same_action {
            plan.refusals.push(Finding::new(
                state_at.clone(),
                format!(
                    "waits for an input, and in v{} `{}` runs `{}` instead of `{}`",
                    new.version,
                    to_state.id,
                    to_state.action,
                    old_state.map_or("?", |s| &*s.action)
                ),
            ));
        }
        let rename = |s: &str| map.get(s).cloned().unwrap_or_else(|| s.to_owned());
        let waited_input = wait.takes_input() && wait.question.is_none();
        let mut kept = BTreeSet::new();
        for (from, to) in &wait.transitions {
            let (new_from, new_to) = (rename(from), rename(to));
            let Some(t) = new.transition_idx(&new_from, &new_to) else {
                if waited_input {
                    plan.refusals.push(Finding::new(
                        format!("transition `{}`", pair(from, to)),
                        format!(
                            "the run waits on it, and v{} has no such transition: an answer taking it would be refused",
                            new.version
                        ),
                    ));
                }
                continue;
            };
            kept.insert(t);
            if waited_input
                && let Some(o) = old.transition_idx(from, to)
                && schema_changed(old, o, new, t)
            {
                plan.changes.push(Finding::new(
                    format!("transition `{}`", pair(&new_from, &new_to)),
                    format!(
                        "its schema changed: the answer must satisfy v{}'s",
                        new.version
                    ),
                ));
            }
        }
        for &t in &to_state.outgoing {
            if waited_input && !kept.contains(&t) {
                let t = &new.transitions[t];
                plan.changes.push(Finding::new(
                    format!("transition `{}`", pair(&t.from, &t.to)),
                    format!("is new in v{}: the run can take it too", new.version),
                ));
            }
        }
        let config = |key: &str| {
            to_state
                .config
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let (prompt, on_expiry) = if same_action {
            (config("prompt"), config("on_expiry"))
        } else {
            (wait.prompt.clone(), wait.on_expiry.clone())
        };
        if wait.expires_at.is_some()
            && old_state.map(|s| s.config.get("expires")) != Some(to_state.config.get("expires"))
        {
            plan.changes.push(Finding::new(
                format!("state `{}`", to_state.id),
                format!(
                    "its `expires` changed: the run keeps the expiry it has; v{}'s applies to waits that begin from now",
                    new.version
                ),
            ));
        }
        Some(Wait {
            state: to_state.id.to_string(),
            transitions: to_state
                .outgoing
                .iter()
                .map(|&t| {
                    let t = &new.transitions[t];
                    (t.from.to_string(), t.to.to_string())
                })
                .collect(),
            schema: if wait.question.is_some() {
                wait.schema.clone()
            } else {
                new.output_schema(&to_state.id)
            },
            expires_at: wait.expires_at,
            on_expiry,
            prompt,
            children: wait.children.clone(),
            deadline_at: wait.deadline_at,
            budget: wait.budget.clone(),
            question: wait.question.clone(),
            held: None,
        })
    }
}

/// Why a run cannot move now, if it cannot: it is over, or a live process drives it.
fn not_parked(record: &RunRecord) -> Option<String> {
    match record.status {
        RunStatus::Suspended => None,
        RunStatus::Running => match &record.lease {
            Some(lease)
                if lease.until > SystemTime::now() && !is_dead_local_owner(&lease.owner) =>
            {
                Some(format!(
                    "is being driven by `{}` (its lease lasts until {}): it can move between attempts, once no process holds it",
                    lease.owner,
                    humantime::format_rfc3339_seconds(lease.until)
                ))
            }
            _ => None,
        },
        status => Some(format!(
            "is {status}: a finished run keeps the version it ran"
        )),
    }
}

/// Whether transition `o` of `old` and `t` of `new` differ in what they accept: their
/// schemas as written (the `id` the engine adds names the transition, renamed or not), or
/// the shared schemas those refer to.
fn schema_changed(old: &Fsm, o: usize, new: &Fsm, t: usize) -> bool {
    let (a, b) = (&old.transitions[o].schema, &new.transitions[t].schema);
    if a != b {
        return true;
    }
    let mut refs = Vec::new();
    if let TransitionSchema::Static(schema) = a {
        shared_refs(schema, &mut refs);
    }
    refs.iter()
        .any(|name| old.schemas.get(name) != new.schemas.get(name))
}

/// The names of the shared schemas `value` refers to (`{"$ref": "#/$defs/NAME"}`).
fn shared_refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("$ref", Value::String(target)) => {
                        if let Some(name) = target.rsplit('/').next() {
                            out.push(name.to_owned());
                        }
                    }
                    _ => shared_refs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| shared_refs(v, out)),
        _ => {}
    }
}

/// The `migrated` entry that records the move in the run's trail.
fn migrated_entry(record: &RunRecord, trail: &[TrailEntry], new: &Fsm, plan: &Plan) -> TrailEntry {
    let attempt = trail
        .iter()
        .rev()
        .take_while(|e| !e.is_transition())
        .filter(|e| !is_pause(e))
        .count() as u32
        + 1;
    let event = MigrationEvent {
        from: plan.from.clone(),
        to: plan.to.clone(),
        map: plan.map.clone(),
    };
    let renamed = if plan.from.state == plan.to.state {
        String::new()
    } else {
        format!(", `{}` now `{}`", plan.from.state, plan.to.state)
    };
    TrailEntry {
        seq: record.trail_len,
        fsm: Arc::clone(&new.id),
        version: new.version,
        from: plan.to.state.as_str().into(),
        to: None,
        event: serde_json::to_value(&event).unwrap_or(Value::Null),
        at: to_micros(SystemTime::now()),
        attempt,
        model: None,
        enforce: None,
        summary: None,
        usage: None,
        duration_ms: None,
        failure: Some(Box::new(Failure {
            kind: FailureKind::Migrated,
            message: format!(
                "moved from v{} ({}) to v{} ({}){renamed}",
                plan.from.version,
                short(&plan.from.hash),
                plan.to.version,
                short(&plan.to.hash)
            ),
            errors: Vec::new(),
            attempt,
        })),
    }
}

/// A hash's first twelve characters.
fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}
