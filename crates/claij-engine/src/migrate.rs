//! Moving parked runs to another version of their FSM ([`Engine::plan_migration`]): for
//! each run a [`Plan`] — the state it moves to (same name, or renamed by a map), what
//! changes for it, and every reason it cannot move, each naming its place — and, for a
//! run that can move, the [`Migration`] the store writes in one transaction
//! ([`Runs::migrate_run`](claij_core::store::Runs::migrate_run)).
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
use claij_core::compat::{Compat, compare};
use claij_core::migration::{MigrationEvent, Pin, StateMap, entered_by, renamed};
use claij_core::store::{Definition, Migration, RunFilter, RunRecord, RunStore, StoreError, Wait};
use claij_core::{
    Failure, FailureKind, Fsm, OnNewVersion, RunStatus, State, TrailEntry, TransitionSchema,
};
use serde::Serialize;
use serde_json::Value;

use crate::actions::child::child_refs;
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
    /// The moves of its child runs whose definitions changed too (made before its own).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Plan>,
    /// What the store writes (`None` when refused, or already there).
    #[serde(skip)]
    migration: Option<Migration>,
    /// The definition it moves to, stored before the move.
    #[serde(skip)]
    definition: Option<Definition>,
}

/// What [`Engine::carry_out`] did with a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moved {
    /// The run (and the children its plan carries) moved.
    Moved,
    /// It was on the target already.
    Current,
    /// It was refused: by its plan, or because it changed since (the plan's refusals say).
    Refused,
}

impl Plan {
    /// A plan for `record` to move to `new` that nothing has been checked for yet.
    fn new(record: &RunRecord, new: &Fsm, target: String, map: &StateMap) -> Self {
        Plan {
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
                state: target,
            },
            map: map.clone(),
            changes: Vec::new(),
            refusals: Vec::new(),
            children: Vec::new(),
            migration: None,
            definition: None,
        }
    }

    /// A plan refused before it could be made (the run's own definition no longer loads).
    fn refused(record: &RunRecord, new: &Fsm, why: Finding) -> Self {
        let mut plan = Plan::new(record, new, record.state.clone(), &StateMap::new());
        plan.refusals.push(why);
        plan
    }

    /// Whether the run is on the target definition already (nothing to do).
    pub fn is_current(&self) -> bool {
        self.from.hash == self.to.hash
    }

    /// The move, for [`Runs::migrate_run`](claij_core::store::Runs::migrate_run): `None`
    /// when refused, or already there.
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
        store: &Arc<dyn RunStore>,
        record: &RunRecord,
        old: &Fsm,
        new: &Fsm,
        map: &StateMap,
    ) -> Result<Plan, RunError> {
        let target = map
            .get(&record.state)
            .cloned()
            .unwrap_or_else(|| record.state.clone());
        let mut plan = Plan::new(record, new, target.clone(), map);
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
        if let Some(wait) = &wait
            && plan.refusals.is_empty()
        {
            Box::pin(self.plan_children(store, &wait.children, new, to_state, &mut plan)).await?;
        }
        if plan.refusals.is_empty() {
            plan.definition = Some(Definition::of(new));
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

    /// The moves of the child runs a parent waits for: each unfinished child goes to the
    /// definition its parent's new version names for its FSM, when that changed (its
    /// states keep their names); a child whose FSM the state no longer names, or that
    /// cannot move, refuses its parent.
    async fn plan_children(
        &self,
        store: &Arc<dyn RunStore>,
        children: &[String],
        new: &Fsm,
        state: &State,
        plan: &mut Plan,
    ) -> Result<(), RunError> {
        if children.is_empty() {
            return Ok(());
        }
        let mut named = Vec::new();
        for r in child_refs(state) {
            match r.load_from(self, new, Some(store), &state.id).await {
                Ok(fsm) => named.push(fsm),
                Err(e) => plan.refusals.push(Finding::new(
                    format!("state `{}`", state.id),
                    format!(
                        "a child FSM it names in v{} does not load: {}",
                        new.version, e.message
                    ),
                )),
            }
        }
        for id in children {
            let child = store.run(id).await?;
            if child.status.is_final() {
                continue;
            }
            let at = format!("child `{id}`");
            let Some(target) = named.iter().find(|f| *f.id == child.fsm_id) else {
                plan.refusals.push(Finding::new(
                    at,
                    format!(
                        "runs `{}`, which `{}` no longer names in v{}",
                        child.fsm_id, state.id, new.version
                    ),
                ));
                continue;
            };
            if target.hash == child.hash {
                continue;
            }
            let old = self.stored_fsm(store.as_ref(), &child).await?;
            let moved = self
                .plan_migration(store, &child, &old, target, &StateMap::new())
                .await?;
            for refusal in &moved.refusals {
                plan.refusals.push(Finding::new(
                    format!("{at}: {}", refusal.at),
                    format!(
                        "{} (move it on its own, with --map where its states were renamed)",
                        refusal.message
                    ),
                ));
            }
            plan.children.push(moved);
        }
        Ok(())
    }

    /// Carries a plan out: stores the definitions it moves to, moves the child runs it
    /// carries, then the run, each in one transaction. A run changed since it was planned
    /// is not moved (the conflict is added to the plan's refusals); children moved before
    /// it stay moved (each is whole on its new version).
    pub async fn carry_out(
        &self,
        store: &Arc<dyn RunStore>,
        plan: &mut Plan,
    ) -> Result<Moved, RunError> {
        if plan.is_current() {
            return Ok(Moved::Current);
        }
        let (Some(migration), Some(definition)) = (plan.migration.clone(), plan.definition.clone())
        else {
            return Ok(Moved::Refused);
        };
        for child in &mut plan.children {
            if Box::pin(self.carry_out(store, child)).await? == Moved::Refused {
                let why = child
                    .refusals
                    .last()
                    .map_or_else(String::new, |r| r.message.clone());
                plan.refusals
                    .push(Finding::new(format!("child `{}`", child.run), why));
                return Ok(Moved::Refused);
            }
        }
        store.put_definition(&definition).await?;
        match store.migrate_run(&migration).await {
            Ok(()) => Ok(Moved::Moved),
            Err(StoreError::Conflict { reason, .. }) => {
                plan.refusals.push(Finding::new("run", reason));
                Ok(Moved::Refused)
            }
            Err(e) => Err(e.into()),
        }
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
        let rename = |s: &str| renamed(s, [map]);
        let (new_from, new_to) = (rename(&from), rename(&to));
        let Some(t) = new.transition_idx(&new_from, &new_to) else {
            let renamed = if (&*new_from, &*new_to) == (&*from, &*to) {
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
        let rename = |s: &str| renamed(s, [map]);
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
                && let Some(how) = schema_change(old, o, new, t)
            {
                plan.changes.push(Finding::new(
                    format!("transition `{}`", pair(&new_from, &new_to)),
                    how,
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
            transitions: new.outgoing_pairs(&to_state.id),
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

/// What registering a definition did to the parked runs of older versions, under its
/// `on_new_version` policy: each run it tried to move, with its plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct VersionPolicy {
    /// The runs moved to the new version.
    pub moved: Vec<Plan>,
    /// The runs that could not move (their plans say why).
    pub refused: Vec<Plan>,
}

impl Engine {
    /// Registers `fsm` in the store, then applies its `on_new_version` policy: with
    /// `migrate`, every unfinished run of an older version of the FSM that can move to it
    /// does (states keeping their names; as [`carry_out`](Self::carry_out) moves it), and
    /// those that cannot are reported; with `keep` (the default) nothing else happens.
    pub async fn register_version(
        &self,
        store: &Arc<dyn RunStore>,
        fsm: &Fsm,
    ) -> Result<VersionPolicy, StoreError> {
        store.put_definition(&Definition::of(fsm)).await?;
        let mut out = VersionPolicy::default();
        if fsm.settings.on_new_version != OnNewVersion::Migrate {
            return Ok(out);
        }
        let filter = RunFilter {
            statuses: vec![RunStatus::Suspended, RunStatus::Running],
            fsm_id: Some(fsm.id.to_string()),
            ..RunFilter::default()
        };
        let mut runs = store.runs(&filter).await?;
        runs.reverse();
        for listed in runs.iter().filter(|r| r.version < fsm.version) {
            // Read again: a run carried over as another's child is moved already.
            let record = store.run(&listed.id).await?;
            if record.version >= fsm.version || record.status.is_final() {
                continue;
            }
            let planned = match self.stored_fsm(store.as_ref(), &record).await {
                Ok(old) => {
                    self.plan_migration(store, &record, &old, fsm, &StateMap::new())
                        .await
                }
                Err(e) => Err(e),
            };
            let mut plan = match planned {
                Ok(plan) => plan,
                Err(RunError::Store(e)) => return Err(e),
                Err(e) => {
                    out.refused.push(Plan::refused(
                        &record,
                        fsm,
                        Finding::new("run", e.to_string()),
                    ));
                    continue;
                }
            };
            match self.carry_out(store, &mut plan).await {
                Ok(Moved::Moved) => out.moved.push(plan),
                Ok(Moved::Refused) => out.refused.push(plan),
                Ok(Moved::Current) => {}
                Err(RunError::Store(e)) => return Err(e),
                Err(e) => {
                    plan.refusals.push(Finding::new("run", e.to_string()));
                    out.refused.push(plan);
                }
            }
        }
        Ok(out)
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

/// How the answers transition `t` of `new` accepts differ from those `o` of `old` did,
/// when they do: its schema as written compared (the `id` the engine adds names the
/// transition, renamed or not), or the shared schemas it refers to changed.
fn schema_change(old: &Fsm, o: usize, new: &Fsm, t: usize) -> Option<String> {
    let written = |s: &TransitionSchema| match s {
        TransitionSchema::Any => Some(Value::Bool(true)),
        TransitionSchema::Static(v) => Some(v.clone()),
        TransitionSchema::Dynamic(_) => None,
    };
    let (a, b) = (&old.transitions[o].schema, &new.transitions[t].schema);
    let mut refs = Vec::new();
    if let TransitionSchema::Static(schema) = a {
        shared_refs(schema, &mut refs);
    }
    let shared_changed = refs
        .iter()
        .any(|name| old.schemas.get(name) != new.schemas.get(name));
    let compared = match (written(a), written(b)) {
        (Some(a), Some(b)) => compare(&a, &b),
        _ if a == b => Compat::Same,
        _ => Compat::Undecided,
    };
    let v = new.version;
    match (compared, shared_changed) {
        (Compat::Same, false) => None,
        (Compat::Wider, false) => Some(format!(
            "its schema widened in v{v}: every answer it accepted still passes"
        )),
        (Compat::Narrower(places), false) => Some(format!(
            "its schema narrowed in v{v} ({}): an answer the old one accepted may be refused",
            places.join("; ")
        )),
        _ => Some(format!(
            "its schema changed in v{v} in ways not compared: the answer must satisfy v{v}'s"
        )),
    }
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
        votes: None,
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
