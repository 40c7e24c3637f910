//! FSMs as tools: for an FSM `ID`, `ID_start` (its input schema is the union of the
//! FSM's entry transitions), `ID_continue` (a suspended run, given the input it waits
//! for) and `ID_status` (a run's status, what it waits for, and its trail); and, when the
//! document says `config.mcp_tool: NAME`, the plain tool `NAME`: a run answered as a tool
//! answers (the final event's `content` blocks, or the event; a failed run an error).
//! Runs live in the store, so they survive a restart of the server. A plain tool whose
//! run waits for a person asks them through the client (`ask`).

pub(crate) mod ask;

use std::sync::Arc;
use std::time::SystemTime;

use claij_core::store::{RunFilter, RunRecord, RunStore, StoreError};
use claij_core::{Fsm, RunStatus};
use claij_engine::{Engine, Observer, RunError, RunOptions, RunOutcome};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::tool::{ToolOutput, ToolSpec};

/// What FSM runs need: the engine (with the durable registry) and the store.
#[derive(Clone)]
pub struct Runtime {
    /// Runs FSMs; `human` states suspend the run.
    pub engine: Arc<Engine>,
    /// Where runs are kept.
    pub store: Arc<dyn RunStore>,
}

/// Which FSM tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FsmVerb {
    /// `ID_start`.
    Start,
    /// `ID_continue`.
    Continue,
    /// `ID_status`.
    Status,
    /// The plain tool `config.mcp_tool` names.
    Tool,
}

impl FsmVerb {
    /// Every verb, in tool order.
    pub(crate) const ALL: [FsmVerb; 3] = [FsmVerb::Start, FsmVerb::Continue, FsmVerb::Status];

    fn suffix(self) -> &'static str {
        match self {
            FsmVerb::Start => "start",
            FsmVerb::Continue => "continue",
            FsmVerb::Status => "status",
            FsmVerb::Tool => "tool",
        }
    }
}

/// The verbs an FSM is served with: the three, and the plain tool when it names one.
pub(crate) fn verbs(fsm: &Fsm) -> impl Iterator<Item = FsmVerb> + '_ {
    FsmVerb::ALL
        .into_iter()
        .chain(fsm.settings.mcp_tool.as_ref().map(|_| FsmVerb::Tool))
}

/// The name of an FSM's tool.
pub(crate) fn tool_name(fsm: &Fsm, verb: FsmVerb) -> String {
    match (verb, &fsm.settings.mcp_tool) {
        (FsmVerb::Tool, Some(name)) => name.clone(),
        _ => format!("{}_{}", fsm.id, verb.suffix()),
    }
}

fn with_defs(fsm: &Fsm, mut schema: Map<String, Value>) -> Value {
    if !fsm.schemas.is_empty() {
        schema.insert("$defs".into(), Value::Object(fsm.schemas.clone()));
    }
    Value::Object(schema)
}

/// The start tool's input schema: the union of the entry transitions' schemas (with one
/// entry, `id` may be left out: it is added).
pub(crate) fn start_schema(fsm: &Fsm) -> Value {
    let mut branches: Vec<Value> = fsm
        .entries
        .iter()
        .map(|&t| {
            fsm.transitions[t]
                .effective
                .clone()
                .unwrap_or_else(|| json!({"type": "object"}))
        })
        .collect();
    if branches.len() == 1 {
        let mut only = branches.pop().unwrap_or_else(|| json!({}));
        if let Some(Value::Array(required)) = only.get_mut("required") {
            required.retain(|r| r != "id");
        }
        let mut map = match only {
            Value::Object(m) => m,
            other => Map::from_iter([("allOf".to_owned(), json!([other]))]),
        };
        map.insert("type".into(), json!("object"));
        return with_defs(fsm, map);
    }
    let mut map = Map::new();
    map.insert("type".into(), json!("object"));
    map.insert("oneOf".into(), Value::Array(branches));
    with_defs(fsm, map)
}

/// The continue tool's input schema: a run id and the input event; the event must take
/// one of the transitions the run waits on (`ID_status` shows their schema). Transitions
/// leaving the FSM's `human` states are listed as the forms it can take.
fn continue_schema(fsm: &Fsm) -> Value {
    let waited: Vec<Value> = fsm
        .states
        .iter()
        .filter(|s| &*s.action == "human")
        .flat_map(|s| s.outgoing.iter())
        .filter_map(|&t| fsm.transitions[t].effective.clone())
        .collect();
    let mut input = Map::new();
    if fsm.servers.is_empty() {
        input.insert("type".into(), json!("object"));
        input.insert(
            "description".into(),
            json!(
                "The event the run waits for: its `id` names the transition [state, next] to take."
            ),
        );
        if !waited.is_empty() {
            input.insert("anyOf".into(), Value::Array(waited));
        }
    } else {
        // Its MCP servers may ask questions, which the run then waits on: the answer (an
        // object fitting the question's schema, "decline" or null) is an input too.
        input.insert(
            "description".into(),
            json!("The event the run waits for: its `id` names the transition [state, next] to take; or, when an MCP server's question stopped the run (`question` in its status), the answer: an object fitting the question's schema (`schema` in its status), \"decline\" or null."),
        );
        if !waited.is_empty() {
            let mut branches = waited;
            branches.push(json!({"description": "An answer to an MCP server's question."}));
            input.insert("anyOf".into(), Value::Array(branches));
        }
    }
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert(
        "properties".into(),
        json!({"run_id": {"type": "string", "description": "The run to continue."}, "input": input}),
    );
    schema.insert("required".into(), json!(["run_id", "input"]));
    with_defs(fsm, schema)
}

/// The tools of one FSM.
pub(crate) fn specs(fsm: &Fsm) -> Vec<ToolSpec> {
    let about = fsm
        .description
        .as_deref()
        .map(|d| format!(" ({d})"))
        .unwrap_or_default();
    verbs(fsm)
        .map(|verb| {
            let (description, schema) = match verb {
                FsmVerb::Tool => (
                    match &fsm.description {
                        Some(d) => d.clone(),
                        None => format!("Run the workflow `{}` v{}.", fsm.id, fsm.version),
                    },
                    start_schema(fsm),
                ),
                FsmVerb::Start => (
                    format!(
                        "Start a run of the workflow `{}` v{}{about}. The arguments are the input event; its `id` picks the entry ({}). Returns the run's id and how it ended, or what it waits for when it suspends.",
                        fsm.id,
                        fsm.version,
                        fsm.entries
                            .iter()
                            .map(|&t| fsm.transitions[t].id_value.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    start_schema(fsm),
                ),
                FsmVerb::Continue => (
                    format!(
                        "Continue a suspended run of `{}` with the input it waits for (see `{}`). An input that does not fit changes nothing and is answered with the problem.",
                        fsm.id,
                        tool_name(fsm, FsmVerb::Status)
                    ),
                    continue_schema(fsm),
                ),
                FsmVerb::Status => (
                    format!(
                        "Status of a run of `{}`: state, what it waits for (and its schema), result, and its trail. Without `run_id`, the latest runs of this workflow.",
                        fsm.id
                    ),
                    json!({"type": "object", "properties": {
                        "run_id": {"type": "string", "description": "The run."},
                        "trail": {"type": "boolean", "description": "Include the trail (default true)."}
                    }}),
                ),
            };
            ToolSpec {
                name: tool_name(fsm, verb),
                description,
                input_schema: schema,
            }
        })
        .collect()
}

/// A run's outcome as a tool result.
fn outcome_json(outcome: &RunOutcome) -> Value {
    let mut out = json!({
        "run_id": outcome.run_id,
        "status": outcome.status,
        "state": outcome.state,
        "steps": outcome.trail.iter().filter(|e| e.is_transition()).count(),
    });
    match outcome.status {
        RunStatus::Completed => out["result"] = outcome.result.clone().unwrap_or(Value::Null),
        RunStatus::Suspended => {
            if let Some(w) = &outcome.wait {
                out["waiting_for"] = json!(
                    w.transitions
                        .iter()
                        .map(|(f, t)| json!([f, t]))
                        .collect::<Vec<_>>()
                );
                out["prompt"] = json!(w.prompt);
                out["schema"] = w.schema.clone();
                if let Some(question) = &w.question {
                    out["question"] =
                        json!({"server": question.server, "message": question.message});
                }
                if let Some(held) = &w.held {
                    // The server's request is held open: an answer given by then goes
                    // straight back to it.
                    out["held_until"] = json!(at(held.until));
                }
            }
        }
        _ => {
            if let Some(f) = last_failure(outcome) {
                out["failure"] = json!(f);
            }
        }
    }
    out
}

/// The failure a run ended on (its trail's last).
fn last_failure(outcome: &RunOutcome) -> Option<&claij_core::Failure> {
    outcome
        .trail
        .iter()
        .rev()
        .find_map(|e| e.failure.as_deref())
}

fn at(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

pub(crate) fn record_json(r: &RunRecord) -> Value {
    json!({
        "run_id": r.id,
        "fsm": r.fsm_id,
        "version": r.version,
        "status": r.status,
        "state": r.state,
        "steps": r.trail_len,
        "waiting_for": r.wait.as_ref().map(|w| w.transitions.iter().map(|(f, t)| json!([f, t])).collect::<Vec<_>>()),
        "prompt": r.wait.as_ref().and_then(|w| w.prompt.clone()),
        "schema": r.wait.as_ref().map(|w| &w.schema),
        "question": r.wait.as_ref().and_then(|w| w.question.as_ref()).map(|q| json!({"server": q.server, "message": q.message})),
        "created_at": at(r.created_at),
        "updated_at": at(r.updated_at),
    })
}

/// A run error as a tool error naming the problem.
fn run_error(e: &RunError) -> ToolOutput {
    ToolOutput::error(match e {
        RunError::Input(i) => format!("input refused (nothing changed): {i}"),
        other => other.to_string(),
    })
}

/// How a tool call's run is watched: cancelled with the request, observed (progress and
/// log notifications to the client) while it moves.
#[derive(Clone, Default)]
pub(crate) struct RunWatch {
    /// Cancelled when the client cancels the request.
    pub(crate) cancel: CancellationToken,
    /// Told of the run's moves.
    pub(crate) observers: Vec<Arc<dyn Observer>>,
    /// Who asks the person, through the client, when a workflow served as a plain tool
    /// waits for one (a client that takes elicitation requests).
    pub(crate) asker: Option<Arc<dyn ask::PersonAsker>>,
}

impl RunWatch {
    /// Cancelled by `cancel`, observed by no one.
    pub(crate) fn cancelled_by(cancel: CancellationToken) -> Self {
        Self {
            cancel,
            observers: Vec::new(),
            asker: None,
        }
    }
}

/// Calls an FSM tool.
pub(crate) async fn call(
    runtime: &Runtime,
    fsm: &Arc<Fsm>,
    verb: FsmVerb,
    args: Map<String, Value>,
    watch: RunWatch,
) -> ToolOutput {
    match verb {
        FsmVerb::Start => start(runtime, fsm, Value::Object(args), watch).await,
        FsmVerb::Tool => ask::run_as_tool(runtime, fsm, Value::Object(args), watch).await,
        FsmVerb::Continue => {
            let Some(run_id) = args.get("run_id").and_then(Value::as_str) else {
                return ToolOutput::error("`run_id` (a string) is required");
            };
            let Some(input) = args.get("input").cloned() else {
                return ToolOutput::error("`input` (the event the run waits for) is required");
            };
            resume(runtime, fsm, run_id, input, watch).await
        }
        FsmVerb::Status => {
            let trail = args.get("trail").and_then(Value::as_bool).unwrap_or(true);
            match args.get("run_id").and_then(Value::as_str) {
                Some(run_id) => status(runtime, fsm, run_id, trail).await,
                None => {
                    let filter = RunFilter {
                        statuses: Vec::new(),
                        fsm_id: Some(fsm.id.to_string()),
                        limit: Some(20),
                        ..RunFilter::default()
                    };
                    match runtime.store.runs(&filter).await {
                        Ok(runs) => ToolOutput::json(json!({
                            "runs": runs.iter().map(record_json).collect::<Vec<_>>()
                        })),
                        Err(e) => ToolOutput::error(format!("the store failed: {e}")),
                    }
                }
            }
        }
    }
}

/// Starts a run of `fsm` from `input` and reports how it ended or what it waits for.
pub(crate) async fn start(
    runtime: &Runtime,
    fsm: &Arc<Fsm>,
    input: Value,
    watch: RunWatch,
) -> ToolOutput {
    let started = started(runtime, fsm, input, watch).await;
    started.map_or_else(|refused| refused, |outcome| run_answer(&outcome))
}

/// A run of `fsm` from `input`, settled ([`settle`]): its outcome, or what the tool
/// answers instead.
pub(crate) async fn started(
    runtime: &Runtime,
    fsm: &Arc<Fsm>,
    input: Value,
    watch: RunWatch,
) -> Result<RunOutcome, ToolOutput> {
    let (engine, fsm) = (runtime.engine.clone(), fsm.clone());
    settle(runtime, watch, move |options| async move {
        engine.run(fsm, input, options).await
    })
    .await
}

/// The suspended run `run_id` of `fsm` (the definition it is pinned to) given `input`,
/// settled ([`settle`]): its outcome, or what the tool answers instead.
pub(crate) async fn resumed(
    runtime: &Runtime,
    fsm: Arc<Fsm>,
    run_id: &str,
    input: Value,
    watch: RunWatch,
) -> Result<RunOutcome, ToolOutput> {
    let (engine, run_id) = (runtime.engine.clone(), run_id.to_owned());
    settle(runtime, watch, move |options| async move {
        engine.resume(fsm, &run_id, Some(input), options).await
    })
    .await
}

/// How `ID_start` and `ID_continue` answer: the run's id, status and result or wait.
fn run_answer(outcome: &RunOutcome) -> ToolOutput {
    ToolOutput::json(outcome_json(outcome))
}

/// How a workflow served as a plain tool answers: a completed run with its final event's
/// `content` (MCP content blocks), or the event itself; a failed run as an error naming
/// why; a run that waits as `ID_start` answers (`ID_continue` takes it on).
pub(crate) fn tool_answer(outcome: &RunOutcome) -> ToolOutput {
    match (outcome.status, &outcome.result) {
        (RunStatus::Completed, Some(result)) => match result.get("content") {
            Some(Value::Array(blocks)) => ToolOutput::Content(blocks.clone()),
            _ => ToolOutput::json(result.clone()),
        },
        (RunStatus::Failed, _) => {
            let why = last_failure(outcome).map_or_else(
                || "the run failed".to_owned(),
                |f| {
                    // A schema's refusal, with each place and reason.
                    let issues: Vec<String> = f.errors.iter().map(ToString::to_string).collect();
                    match issues.is_empty() {
                        true => f.message.clone(),
                        false => format!("{}: {}", f.message, issues.join("; ")),
                    }
                },
            );
            ToolOutput::error(format!("{why} (run {})", outcome.run_id))
        }
        _ => run_answer(outcome),
    }
}

/// Runs `work` (a start or a resume, given its options) on a task of its own and reports
/// the run once it ends or suspends — suspended on an MCP server's question too, while
/// the task holds the server's request open: the task then goes on in this process
/// (unbound from the tool call), and an answer given through `ID_continue` goes straight
/// back to that server. An answer handed so to the process holding the request: the run
/// is followed in the store until it ends or suspends. Cancelling the tool call while it
/// waits interrupts the run.
/// The run's outcome, or what the tool answers instead (a refused input, a store that
/// failed).
async fn settle<W, F>(runtime: &Runtime, watch: RunWatch, work: W) -> Result<RunOutcome, ToolOutput>
where
    W: FnOnce(RunOptions) -> F,
    F: std::future::Future<Output = Result<RunOutcome, RunError>> + Send + 'static,
{
    let (held_tx, held) = tokio::sync::oneshot::channel();
    let cancel = CancellationToken::new();
    let mut observers = watch.observers;
    observers.push(Arc::new(HoldSignal(std::sync::Mutex::new(Some(held_tx)))));
    let options = RunOptions {
        store: Some(runtime.store.clone()),
        cancel: cancel.clone(),
        observers,
        ..RunOptions::default()
    };
    let mut task = tokio::spawn(work(options));
    let ended = tokio::select! {
        ended = &mut task => ended,
        Ok(run_id) = held => return stored_outcome(runtime, &watch.cancel, &run_id, false).await,
        () = watch.cancel.cancelled() => {
            cancel.cancel();
            (&mut task).await
        }
    };
    match ended {
        Ok(Ok(outcome)) if outcome.status == RunStatus::Running => {
            stored_outcome(runtime, &watch.cancel, &outcome.run_id, true).await
        }
        Ok(Ok(outcome)) => Ok(outcome),
        Ok(Err(e)) => Err(run_error(&e)),
        Err(e) => Err(ToolOutput::error(format!("the run's task failed: {e}"))),
    }
}

/// The run as the store has it; with `follow`, once the run ends or suspends (another
/// process drives it), or as it is when the tool call is cancelled.
async fn stored_outcome(
    runtime: &Runtime,
    cancel: &CancellationToken,
    run_id: &str,
    follow: bool,
) -> Result<RunOutcome, ToolOutput> {
    let store = runtime.store.as_ref();
    let outcome = if follow {
        RunOutcome::settled(store, run_id, cancel).await
    } else {
        match store.run(run_id).await {
            Ok(record) => RunOutcome::stored(store, record).await,
            Err(e) => Err(e),
        }
    };
    outcome.map_err(|e| ToolOutput::error(format!("the store failed: {e}")))
}

/// Tells [`settle`], once, which run waits on a question whose request its task holds
/// open.
struct HoldSignal(std::sync::Mutex<Option<tokio::sync::oneshot::Sender<String>>>);

impl Observer for HoldSignal {
    fn question_held(&self, run_id: &str, _question: &claij_core::Question, _until: SystemTime) {
        if let Some(tx) = self.0.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = tx.send(run_id.to_owned());
        }
    }
}

async fn resume(
    runtime: &Runtime,
    fsm: &Arc<Fsm>,
    run_id: &str,
    input: Value,
    watch: RunWatch,
) -> ToolOutput {
    let record = match record(runtime, run_id).await {
        Ok(r) => r,
        Err(message) => return ToolOutput::error(message),
    };
    if record.fsm_id != *fsm.id {
        return ToolOutput::error(format!(
            "run `{run_id}` is a run of `{}`, not of `{}`",
            record.fsm_id, fsm.id
        ));
    }
    if record.status != RunStatus::Suspended {
        return ToolOutput::error(format!(
            "run `{run_id}` is {}, not suspended: it waits for no input; nothing changed",
            record.status
        ));
    }
    let pinned = match pinned(runtime, &record).await {
        Ok(f) => f,
        Err(message) => return ToolOutput::error(message),
    };
    let resumed = resumed(runtime, pinned, run_id, input, watch).await;
    resumed.map_or_else(|refused| refused, |outcome| run_answer(&outcome))
}

/// The definition a run is pinned to, from the store (loaded by the engine, cached by
/// content hash).
async fn pinned(runtime: &Runtime, record: &RunRecord) -> Result<Arc<Fsm>, String> {
    runtime
        .engine
        .stored_fsm(&*runtime.store, record)
        .await
        .map_err(|e| format!("the definition run `{}` is pinned to: {e}", record.id))
}

async fn status(runtime: &Runtime, fsm: &Fsm, run_id: &str, with_trail: bool) -> ToolOutput {
    match run_view(runtime, run_id, Some(&fsm.id), with_trail).await {
        Ok(view) => ToolOutput::json(view),
        Err(message) => ToolOutput::error(message),
    }
}

/// The record of `run_id`; what went wrong, in words, when there is none to read.
pub(crate) async fn record(runtime: &Runtime, run_id: &str) -> Result<RunRecord, String> {
    match runtime.store.run(run_id).await {
        Ok(r) => Ok(r),
        Err(StoreError::NotFound { .. }) => Err(format!("there is no run `{run_id}`")),
        Err(e) => Err(format!("the store failed: {e}")),
    }
}

/// The most trail entries a run's view shows: its latest ones.
const TRAIL_SHOWN: u64 = 100;

/// A run as `ID_status` and the run resources show it: its record, its result or last
/// failure, and (`with_trail`) its trail — the latest [`TRAIL_SHOWN`] entries, read alone
/// (`trail_from` says where they start when there are more); refused when it is not a run
/// of `fsm_id` (when given).
pub(crate) async fn run_view(
    runtime: &Runtime,
    run_id: &str,
    fsm_id: Option<&str>,
    with_trail: bool,
) -> Result<Value, String> {
    let record = record(runtime, run_id).await?;
    if let Some(fsm_id) = fsm_id
        && record.fsm_id != fsm_id
    {
        return Err(format!(
            "run `{run_id}` is a run of `{}`, not of `{fsm_id}`",
            record.fsm_id
        ));
    }
    let from = record.trail_len.saturating_sub(TRAIL_SHOWN);
    let trail = runtime
        .store
        .trail_page(run_id, from, TRAIL_SHOWN)
        .await
        .map_err(|e| format!("the store failed: {e}"))?;
    let mut out = record_json(&record);
    if record.status == RunStatus::Completed {
        out["result"] = trail
            .iter()
            .rev()
            .find(|e| e.is_transition())
            .map(|e| e.event.clone())
            .unwrap_or(Value::Null);
    }
    if let Some(f) = trail
        .iter()
        .rev()
        .take_while(|e| !e.is_transition())
        .find_map(|e| e.failure.as_deref())
    {
        out["last_failure"] = json!(f);
    }
    if with_trail {
        out["trail"] = json!(trail);
        if from > 0 {
            out["trail_from"] = json!(from);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::test_bots::{TITLE_FSM, registry};

    fn load(yaml: &str) -> Fsm {
        let document: Value = serde_yaml_ng::from_str(yaml).expect("YAML");
        claij_core::load_value("test", document, &registry()).unwrap_or_else(|d| panic!("{d}"))
    }

    /// Two entries: `[start, a]` (a shared schema) and `[start, b]` (inline).
    const TWO_ENTRIES: &str = "\
id: two
schemas:
  person: {type: object, required: [name], properties: {name: {type: string}}}
states:
  - {id: a, action: end}
  - {id: b, action: end}
xitions:
  - id: [start, a]
    schema: {$ref: '#/$defs/person'}
  - id: [start, b]
    schema: {type: object, required: [count], properties: {count: {type: integer}}}
";

    #[test]
    fn the_start_schema_is_the_union_of_the_entries() {
        let fsm = load(TWO_ENTRIES);
        let schema = start_schema(&fsm);
        assert_eq!(schema["type"], "object");
        let branches = schema["oneOf"].as_array().expect("oneOf");
        assert_eq!(branches.len(), 2);
        // Each branch is its entry's effective schema: `id` names the entry.
        assert_eq!(
            branches[0]["properties"]["id"]["const"],
            json!(["start", "a"])
        );
        assert_eq!(branches[0]["allOf"], json!([{"$ref": "#/$defs/person"}]));
        assert_eq!(
            branches[1]["properties"]["id"]["const"],
            json!(["start", "b"])
        );
        assert_eq!(
            branches[1]["properties"]["count"],
            json!({"type": "integer"})
        );
        // The shared schemas come along, so the `$ref` resolves.
        assert_eq!(schema["$defs"]["person"]["required"], json!(["name"]));
    }

    #[test]
    fn with_one_entry_the_start_schema_is_that_entry_with_id_optional() {
        let fsm = load(TITLE_FSM);
        let schema = start_schema(&fsm);
        assert!(schema.get("oneOf").is_none());
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["title"]));
        assert_eq!(
            schema["properties"]["id"]["const"],
            json!(["start", "done"])
        );
        assert!(schema.get("$defs").is_none());
    }

    #[test]
    fn an_fsm_has_three_tools_naming_its_entries() {
        let fsm = load(TWO_ENTRIES);
        let specs = specs(&fsm);
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["two_start", "two_continue", "two_status"]);
        assert_eq!(specs[0].input_schema, start_schema(&fsm));
        assert!(
            specs[0]
                .description
                .contains(r#"["start","a"], ["start","b"]"#),
            "{}",
            specs[0].description
        );
        assert_eq!(
            specs[1].input_schema["required"],
            json!(["run_id", "input"])
        );
        for verb in FsmVerb::ALL {
            assert_eq!(tool_name(&fsm, verb), specs[verb as usize].name);
        }
    }
}
