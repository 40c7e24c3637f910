//! What the composition actions (`fsm`, `fork`) share: references to child FSMs (a file
//! beside the parent document, or a definition in the store), the routes they name, the
//! trail modes, and the view of a finished child its parent's event carries.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use claij_core::known_actions::ConfigRoute;
use claij_core::{ConfigIssue, FailureKind, Fsm, KnownActions, TrailEntry};
use serde_json::{Map, Value, json};

use claij_core::JsonPath;

use crate::action::{ActionError, ActionHost, ActionInput};
use crate::capability::{Field, Need, NeedsOf, Touch};
use crate::run::{RunOutcome, RunStatus};
use crate::tree::content;
use claij_core::store::RunStore;

/// What the keys `fsm` and `fork` share touch: nothing (routes, pointers, durations).
macro_rules! common_touches {
    ($($more:expr),*) => {
        [
            Field::inert("/input"),
            Field::inert("/success_to"),
            Field::inert("/failure_to"),
            Field::inert("/timeout_to"),
            Field::inert("/deadline"),
            Field::inert("/trail"),
            $($more),*
        ]
    };
}

/// What an `fsm` state's config touches: the child FSMs' files.
pub(crate) const FSM_TOUCHES: [Field; 7] = common_touches!(Field::new("/fsm", Touch::File));

/// What a `fork` state's config touches: the branches' FSM files.
pub(crate) const FORK_TOUCHES: [Field; 11] = common_touches!(
    Field::new("/fsm", Touch::File),
    Field::new("/fsms", Touch::File),
    Field::inert("/over"),
    Field::inert("/limit"),
    Field::inert("/join")
);

/// The files the child references under `key` read (one reference, or a list): a
/// string, or `{file}`; a stored definition (`{id}`) reads none.
pub(crate) fn ref_needs(of: NeedsOf<'_>, key: &str) -> Vec<Need> {
    let at = of.at.join(key);
    let one = |at: JsonPath, reference: &Value| match reference {
        Value::String(file) => Some(Need {
            path: at,
            touch: Touch::File,
            value: file.clone(),
        }),
        Value::Object(map) => map.get("file").and_then(Value::as_str).map(|file| Need {
            path: at.join("file"),
            touch: Touch::File,
            value: file.to_owned(),
        }),
        _ => None,
    };
    match of.config.get(key) {
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| one(at.join(i), item))
            .collect(),
        Some(reference) => one(at, reference).into_iter().collect(),
        None => Vec::new(),
    }
}

/// The largest child FSM file read: a document, not a disk.
const MAX_CHILD_FILE: u64 = 4 << 20;

/// The config keys naming where the state goes on the child's success, failure and
/// timeout.
pub(crate) const ROUTE_KEYS: [&str; 3] = ["success_to", "failure_to", "timeout_to"];

/// The JSON Schema of a reference to a child FSM.
pub(crate) fn ref_schema() -> Value {
    json!({
        "anyOf": [
            {"type": "string", "minLength": 1, "description": "A file, relative to this document."},
            {
                "type": "object", "required": ["file"], "additionalProperties": false,
                "properties": {"file": {"type": "string", "minLength": 1}}
            },
            {
                "type": "object", "required": ["id"], "additionalProperties": false,
                "properties": {
                    "id": {"type": "string", "minLength": 1},
                    "version": {"type": "integer", "minimum": 1}
                },
                "description": "A definition in the store (the newest version when none is given)."
            }
        ]
    })
}

/// The config properties `fsm` and `fork` share.
pub(crate) fn common_properties() -> Map<String, Value> {
    let mut props = Map::new();
    props.insert(
        "input".into(),
        json!({"type": "string", "description": "A JSON Pointer into the input event: what the child is given (default: the event without its id)."}),
    );
    props.insert(
        "success_to".into(),
        json!({"type": "string", "minLength": 1}),
    );
    props.insert(
        "failure_to".into(),
        json!({"type": "string", "minLength": 1}),
    );
    props.insert(
        "timeout_to".into(),
        json!({"type": "string", "minLength": 1}),
    );
    props.insert(
        "deadline".into(),
        json!({"anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "string", "minLength": 1}],
               "description": "The child run's deadline (seconds, or e.g. 30s); past it the child fails with a timeout."}),
    );
    props.insert(
        "trail".into(),
        json!({"enum": ["omit", "summary", "full"], "description": "How much of the child's trail the parent's event carries (default summary)."}),
    );
    props
}

/// Checks of the shared keys beyond the schema.
pub(crate) fn check_common(config: &Value) -> Vec<ConfigIssue> {
    match config.get("deadline").map(parse_duration) {
        Some(Err(message)) => vec![ConfigIssue {
            pointer: "/deadline".into(),
            message,
        }],
        _ => Vec::new(),
    }
}

/// The routes named by `success_to`, `failure_to` and `timeout_to`.
pub(crate) fn routes(config: &Value) -> Vec<ConfigRoute> {
    ROUTE_KEYS
        .iter()
        .filter_map(|key| {
            config
                .get(key)
                .and_then(Value::as_str)
                .map(|target| ConfigRoute {
                    pointer: format!("/{key}"),
                    target: target.to_owned(),
                })
        })
        .collect()
}

fn parse_duration(value: &Value) -> Result<Duration, String> {
    match value {
        Value::Number(n) => n
            .as_f64()
            .filter(|s| *s > 0.0 && s.is_finite())
            .map(Duration::from_secs_f64)
            .ok_or_else(|| format!("`{n}` is not a positive number of seconds")),
        Value::String(s) => humantime::parse_duration(s).map_err(|e| format!("`{s}`: {e}")),
        other => Err(format!("`{other}` is not a duration")),
    }
}

/// How much of a child's trail its parent's event carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TrailMode {
    /// The result only.
    Omit,
    /// The child's FSM and run, its number of steps, its first and last events.
    Summary,
    /// Everything the child appended.
    Full,
}

/// The settings `fsm` and `fork` read from their config.
pub(crate) struct Common {
    pub success_to: Option<String>,
    pub failure_to: Option<String>,
    pub timeout_to: Option<String>,
    pub deadline: Option<Duration>,
    pub mode: TrailMode,
}

impl Common {
    pub(super) fn read(config: &Value) -> Self {
        let route = |key: &str| config.get(key).and_then(Value::as_str).map(str::to_owned);
        Self {
            success_to: route("success_to"),
            failure_to: route("failure_to"),
            timeout_to: route("timeout_to"),
            deadline: config.get("deadline").and_then(|d| parse_duration(d).ok()),
            mode: match config.get("trail").and_then(Value::as_str) {
                Some("omit") => TrailMode::Omit,
                Some("full") => TrailMode::Full,
                _ => TrailMode::Summary,
            },
        }
    }

    /// The target for a child that did not succeed: `timeout_to` for timeouts (when
    /// given), else `failure_to`.
    pub(super) fn failure_target(&self, timed_out: bool) -> Option<&str> {
        if timed_out && self.timeout_to.is_some() {
            return self.timeout_to.as_deref();
        }
        self.failure_to.as_deref()
    }
}

/// What a child is given: the value at the config's `input` pointer, or the event
/// without its `id`; anything but an object is wrapped as `{"item": value}`.
pub(crate) fn child_input(input: &ActionInput<'_>) -> Result<Value, ActionError> {
    let value = match input.state.config.get("input").and_then(Value::as_str) {
        Some(pointer) => input.event.pointer(pointer).cloned().ok_or_else(|| {
            ActionError::failed(format!(
                "the input event has nothing at `{pointer}` (config.input of state `{}`)",
                input.state.id
            ))
        })?,
        None => content(input.event),
    };
    Ok(as_input(value))
}

/// An object as is; anything else as `{"item": value}`.
pub(crate) fn as_input(value: Value) -> Value {
    match value {
        Value::Object(_) => value,
        other => json!({ "item": other }),
    }
}

/// A reference to a child FSM.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FsmRef {
    File(String),
    Stored { id: String, version: Option<u32> },
}

impl FsmRef {
    pub(super) fn parse(value: &Value) -> Option<Self> {
        match value {
            Value::String(file) => Some(FsmRef::File(file.clone())),
            Value::Object(map) => match (map.get("file"), map.get("id")) {
                (Some(Value::String(file)), _) => Some(FsmRef::File(file.clone())),
                (_, Some(Value::String(id))) => Some(FsmRef::Stored {
                    id: id.clone(),
                    version: map
                        .get("version")
                        .and_then(Value::as_u64)
                        .and_then(|v| u32::try_from(v).ok()),
                }),
                _ => None,
            },
            _ => None,
        }
    }

    /// Loads the FSM: a file relative to the parent document's directory (or to the
    /// working directory when the parent was loaded from the store), or the stored
    /// definition (the newest of its version, or of all).
    pub(super) async fn load(&self, input: &ActionInput<'_>) -> Result<Arc<Fsm>, ActionError> {
        self.load_from(
            input.scope.engine,
            input.fsm,
            input.scope.store,
            &input.state.id,
        )
        .await
    }

    /// [`load`](Self::load) for the state `state` of the document `parent`, with the run's
    /// store (if any). A file is read only when the engine's policy lets the parent's
    /// owner read it ([`Policy::file`](crate::capability::Policy::file)), and the child
    /// is the parent's owner's too.
    pub(crate) async fn load_from(
        &self,
        engine: &dyn ActionHost,
        parent: &Fsm,
        store: Option<&Arc<dyn RunStore>>,
        state: &str,
    ) -> Result<Arc<Fsm>, ActionError> {
        let registry = engine.known_actions();
        match self {
            FsmRef::File(file) => {
                let path = child_path(&parent.source, file);
                let path = engine
                    .policy()
                    .file(parent.owner, &path)
                    .map_err(|refused| ActionError::fatal(format!("state `{state}`: {refused}")))?;
                let mut fsm = read_child(&path, registry).map_err(|message| {
                    ActionError::fatal(format!(
                        "the child FSM `{}` (state `{state}`) does not load:\n{message}",
                        path.display()
                    ))
                })?;
                fsm.owner = parent.owner;
                Ok(Arc::new(fsm))
            }
            FsmRef::Stored { id, version } => {
                let Some(store) = store else {
                    return Err(ActionError::fatal(format!(
                        "state `{state}` names the stored FSM `{id}`, but the run has no store"
                    )));
                };
                let definitions = store
                    .definitions()
                    .await
                    .map_err(|e| ActionError::failed(e.to_string()))?;
                let found = definitions
                    .into_iter()
                    .filter(|d| d.fsm_id == *id && version.is_none_or(|v| d.version == v))
                    .max_by_key(|d| (d.version, d.created_at));
                let Some(definition) = found else {
                    return Err(ActionError::fatal(format!(
                        "no stored definition of `{id}`{} (state `{state}`)",
                        version.map(|v| format!(" v{v}")).unwrap_or_default()
                    )));
                };
                claij_core::load_definition(&definition, registry)
                    .map(Arc::new)
                    .map_err(|d| {
                        ActionError::fatal(format!(
                            "{}@v{} (stored) does not load:\n{d}",
                            definition.fsm_id, definition.version
                        ))
                    })
            }
        }
    }
}

/// The child FSMs a `fsm` or `fork` state names (`fsm`: one, or a chain; `fsms`: one per
/// branch), in order; none for other states.
pub(crate) fn child_refs(state: &claij_core::State) -> Vec<FsmRef> {
    let config = &state.config;
    match (&*state.action, config.get("fsm"), config.get("fsms")) {
        ("fsm" | "fork", Some(Value::Array(items)), _)
        | ("fork", None, Some(Value::Array(items))) => {
            items.iter().filter_map(FsmRef::parse).collect()
        }
        ("fsm" | "fork", Some(one), _) => FsmRef::parse(one).into_iter().collect(),
        _ => Vec::new(),
    }
}

/// Reads and loads the child FSM file at `path`: a regular file of at most
/// [`MAX_CHILD_FILE`] bytes (a device or a pipe would read forever).
fn read_child(path: &Path, registry: &dyn KnownActions) -> Result<Fsm, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read the file: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read the file: {e}"))?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > MAX_CHILD_FILE {
        return Err(format!(
            "{} bytes, more than the {} MiB a document may have",
            meta.len(),
            MAX_CHILD_FILE >> 20
        ));
    }
    let mut text = String::new();
    file.take(MAX_CHILD_FILE)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read the file: {e}"))?;
    claij_core::load_str(&path.display().to_string(), &text, registry).map_err(|d| d.to_string())
}

/// Whether the run's store already holds the run `run_id` (a child started by an earlier
/// attempt, before a crash or a suspension): then its FSM need not be loaded again.
pub(crate) async fn stored(input: &ActionInput<'_>, run_id: &str) -> bool {
    match input.scope.store {
        Some(store) => store.run(run_id).await.is_ok(),
        None => false,
    }
}

/// The id of the FSM a child ran, from its trail (its own entries are last).
pub(crate) fn fsm_of(outcome: &RunOutcome) -> Option<Arc<str>> {
    outcome.trail.last().map(|e| e.fsm.clone())
}

/// Where a run looks for the child FSM file `file` named by the document `source`
/// ([`Fsm::source`]): relative to that document's directory (when `source` is a file),
/// else as given (relative to the working directory).
pub fn child_path(source: &str, file: &str) -> PathBuf {
    let file = Path::new(file);
    if file.is_absolute() {
        return file.to_owned();
    }
    let source = Path::new(source);
    match source.parent() {
        Some(dir) if source.is_file() => dir.join(file),
        _ => file.to_owned(),
    }
}

/// The entries a child appended itself (after those of earlier runs it continues).
pub(crate) fn own_entries<'t>(outcome: &'t RunOutcome, fsm_id: &str) -> &'t [TrailEntry] {
    let start = outcome
        .trail
        .iter()
        .position(|e| &*e.fsm == fsm_id && e.from.as_ref() == claij_core::START)
        .unwrap_or(0);
    &outcome.trail[start..]
}

/// How a finished child is reported in its parent's event: `status`, and by trail mode
/// nothing more (`omit`), or `fsm`, `run`, `steps`, `first` and `last` events
/// (`summary`), or also the whole `trail` (`full`).
pub(crate) fn child_view(mode: TrailMode, outcome: &RunOutcome, fsm_id: &str) -> Option<Value> {
    if mode == TrailMode::Omit {
        return None;
    }
    let own = own_entries(outcome, fsm_id);
    let transitions = || own.iter().filter(|e| e.is_transition());
    let mut view = json!({
        "fsm": fsm_id,
        "run": outcome.run_id,
        "status": status_word(outcome),
        "steps": transitions().count(),
        "first": transitions().next().map(|e| content(&e.event)),
        "last": transitions().next_back().map(|e| content(&e.event)),
    });
    if mode == TrailMode::Full {
        view["trail"] = serde_json::to_value(own).unwrap_or(Value::Null);
    }
    Some(view)
}

/// `completed`, `failed`, `timeout` (failed by a timeout), `interrupted`, `suspended`.
pub(crate) fn status_word(outcome: &RunOutcome) -> &'static str {
    match outcome.status {
        RunStatus::Failed if timed_out(outcome) => "timeout",
        status => status.as_str(),
    }
}

/// Whether a failed child gave up because of a timeout (its deadline, a state timeout).
pub(crate) fn timed_out(outcome: &RunOutcome) -> bool {
    outcome
        .trail
        .iter()
        .rev()
        .find_map(|e| e.failure.as_deref())
        .is_some_and(|f| f.kind == FailureKind::Timeout)
}

/// Why a child did not complete, in words.
pub(crate) fn child_error(outcome: &RunOutcome) -> String {
    let last = outcome
        .trail
        .iter()
        .rev()
        .find_map(|e| e.failure.as_deref());
    match last {
        Some(f) => format!(
            "run {} {} in `{}`: {}",
            outcome.run_id,
            status_word(outcome),
            outcome.state,
            f.message
        ),
        None => format!(
            "run {} {} in `{}`",
            outcome.run_id,
            status_word(outcome),
            outcome.state
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_parse_in_their_three_forms() {
        assert_eq!(
            FsmRef::parse(&json!("a.yaml")),
            Some(FsmRef::File("a.yaml".into()))
        );
        assert_eq!(
            FsmRef::parse(&json!({"file": "b.json"})),
            Some(FsmRef::File("b.json".into()))
        );
        assert_eq!(
            FsmRef::parse(&json!({"id": "calc", "version": 2})),
            Some(FsmRef::Stored {
                id: "calc".into(),
                version: Some(2)
            })
        );
        assert_eq!(FsmRef::parse(&json!(3)), None);
    }

    #[test]
    fn files_are_relative_to_the_parent_document() {
        let dir = tempfile::tempdir().unwrap();
        let parent = dir.path().join("parent.yaml");
        std::fs::write(&parent, "x").unwrap();
        assert_eq!(
            child_path(&parent.display().to_string(), "child.yaml"),
            dir.path().join("child.yaml")
        );
        assert_eq!(
            child_path("calc@v1 (stored)", "child.yaml"),
            PathBuf::from("child.yaml")
        );
        assert_eq!(child_path("x", "/abs.yaml"), PathBuf::from("/abs.yaml"));
    }

    #[test]
    fn non_objects_are_wrapped() {
        assert_eq!(as_input(json!(3)), json!({"item": 3}));
        assert_eq!(as_input(json!({"a": 1})), json!({"a": 1}));
    }
}
