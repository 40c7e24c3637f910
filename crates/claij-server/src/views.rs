//! What the API answers and takes: runs, waits, trails and definitions as JSON, with the
//! schemas the OpenAPI description shows.

use std::time::SystemTime;

use claij_core::store::{ForkPoint, RunRecord, Wait};
use claij_core::{Budget, BudgetPause, Fsm, Spend, TrailEntry, Usage};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

/// A time as RFC 3339 (UTC).
pub(crate) fn rfc3339(at: SystemTime) -> String {
    humantime::format_rfc3339_micros(at).to_string()
}

/// A run as the API shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct RunView {
    /// The run's id.
    pub id: String,
    /// The FSM's id.
    pub fsm: String,
    /// The FSM's version.
    pub version: u32,
    /// `running`, `suspended`, `completed`, `failed` or `interrupted`.
    pub status: String,
    /// The current state (for finished runs, the state they ended in).
    pub state: String,
    /// The parent run, for child runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// For a fork (time travel): the run and trail entry it was forked from, and whether
    /// that entry's event was replaced (`run`, `seq`, `edited`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub forked_from: Option<ForkPoint>,
    /// When it started (RFC 3339).
    pub created_at: String,
    /// When it last changed (RFC 3339).
    pub updated_at: String,
    /// How many trail entries it has.
    pub trail_len: u64,
    /// What a suspended run waits for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait: Option<WaitView>,
    /// A completed run's result: its last event.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub result: Option<Value>,
    /// Tokens, cost and calls over the run's own model calls (as in `spend`).
    #[schema(value_type = Object)]
    pub usage: Usage,
    /// What the run itself spent (its own model calls, its time running and waiting; not
    /// its child runs'): `input_tokens`, `output_tokens`, `cost_usd`, `calls`, `time_ms`,
    /// `waiting_ms`.
    #[schema(value_type = Object)]
    pub spend: Spend,
    /// What the run and its child runs may spend together, when limited: any of
    /// `tokens`, `cost_usd`, `calls`, `time_ms`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub budget: Option<Budget>,
    /// The run's context.
    #[schema(value_type = Object)]
    pub context: Value,
    /// Whether an interrupt was asked for and not yet carried out.
    pub interrupt_requested: bool,
    /// Where the run is: `/runs/{id}`.
    pub url: String,
}

/// What a suspended run waits for.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct WaitView {
    /// The state that waits.
    pub state: String,
    /// What the person is asked, if the state says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Each answer the run takes: the transition and its schema.
    pub answers: Vec<AnswerView>,
    /// The schema of any answer (the union of the answers' schemas).
    #[schema(value_type = Object)]
    pub schema: Value,
    /// When the wait ends, if it does (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// The child runs it waits for (such a run takes no answer).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<String>,
    /// Why the run stopped for a budget, when it did (such a run takes no answer: it goes
    /// on once resumed with its budget raised): `run` (whose budget), `limit` (`tokens`,
    /// `cost`, `calls` or `time`), `budget`, `spent`, `asked`, `model`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub budget: Option<BudgetPause>,
    /// The question an MCP server asked, when the run stopped for one: `server` and
    /// `message` (`schema` is the answer's; post the answer itself as the input: an object,
    /// `"decline"` or `null`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub question: Option<Value>,
    /// For a question: until when the process that asked holds the server's request open
    /// (RFC 3339); an answer given by then goes straight back to the server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_until: Option<String>,
    /// Where to post the answer: `/runs/{id}/resume`.
    pub resume_url: String,
    /// A link that answers this wait with no other credential (`/hooks/{secret}`): given
    /// when a start or an answer waited for the run to suspend, and by `POST
    /// /runs/{id}/hooks`; never shown again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hook_url: Option<String>,
}

/// One answer a waiting run takes.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct AnswerView {
    /// The transition, `[state, next]`: the answer's `id`.
    pub id: [String; 2],
    /// What the transition says of itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The schema the answer must satisfy (shared schemas under `$defs`).
    #[schema(value_type = Object)]
    pub schema: Value,
}

impl RunView {
    /// The view of `record`, with its `result` (a completed run's last event); what it
    /// spent is the record's.
    pub(crate) fn new(record: &RunRecord, result: Option<Value>, fsm: Option<&Fsm>) -> Self {
        let url = format!("/runs/{}", record.id);
        RunView {
            id: record.id.clone(),
            fsm: record.fsm_id.clone(),
            version: record.version,
            status: record.status.as_str().to_owned(),
            state: record.state.clone(),
            parent: record.parent.clone(),
            forked_from: record.forked_from.clone(),
            created_at: rfc3339(record.created_at),
            updated_at: rfc3339(record.updated_at),
            trail_len: record.trail_len,
            wait: record
                .wait
                .as_ref()
                .map(|w| WaitView::new(w, fsm, &format!("{url}/resume"))),
            result,
            usage: record.spend.as_usage(),
            spend: record.spend,
            budget: record.budget,
            context: record.context.clone(),
            interrupt_requested: record.interrupt_requested,
            url,
        }
    }
}

impl WaitView {
    /// The view of `wait`, each answer's schema taken from `fsm` (the run's definition).
    pub(crate) fn new(wait: &Wait, fsm: Option<&Fsm>, resume_url: &str) -> Self {
        let answers = wait
            .transitions
            .iter()
            .map(|(from, to)| {
                let transition = fsm.and_then(|f| {
                    f.transitions
                        .iter()
                        .find(|t| *t.from == **from && *t.to == **to)
                });
                let mut schema = transition
                    .and_then(|t| t.effective.clone())
                    .unwrap_or_else(|| serde_json::json!({"type": "object"}));
                if let (Some(f), Value::Object(map)) = (fsm, &mut schema)
                    && !f.schemas.is_empty()
                {
                    map.insert("$defs".into(), Value::Object(f.schemas.clone()));
                }
                AnswerView {
                    id: [from.clone(), to.clone()],
                    description: transition.and_then(|t| t.description.clone()),
                    schema,
                }
            })
            .collect();
        WaitView {
            state: wait.state.clone(),
            prompt: wait.prompt.clone(),
            answers,
            schema: wait.schema.clone(),
            expires_at: wait.expires_at.map(rfc3339),
            children: wait.children.clone(),
            budget: wait.budget.as_deref().cloned(),
            question: wait
                .question
                .as_deref()
                .map(|q| serde_json::json!({"server": q.server, "message": q.message})),
            held_until: wait
                .held_at(std::time::SystemTime::now())
                .map(|h| rfc3339(h.until)),
            resume_url: resume_url.to_owned(),
            hook_url: None,
        }
    }
}

/// A page of runs.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct RunPage {
    /// The runs, newest first.
    pub runs: Vec<RunSummary>,
    /// Give it as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// A run in a listing.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct RunSummary {
    /// The run's id.
    pub id: String,
    /// The FSM's id.
    pub fsm: String,
    /// The FSM's version.
    pub version: u32,
    /// Its status.
    pub status: String,
    /// Its current state.
    pub state: String,
    /// The parent run, for child runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// When it started.
    pub created_at: String,
    /// When it last changed.
    pub updated_at: String,
    /// What the run itself spent (not its child runs'), as in a run's view.
    #[schema(value_type = Object)]
    pub spend: Spend,
    /// What the run and its child runs may spend together, when limited.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub budget: Option<Budget>,
    /// Where it is.
    pub url: String,
}

impl From<&RunRecord> for RunSummary {
    fn from(r: &RunRecord) -> Self {
        RunSummary {
            id: r.id.clone(),
            fsm: r.fsm_id.clone(),
            version: r.version,
            status: r.status.as_str().to_owned(),
            state: r.state.clone(),
            parent: r.parent.clone(),
            created_at: rfc3339(r.created_at),
            updated_at: rfc3339(r.updated_at),
            spend: r.spend,
            budget: r.budget,
            url: format!("/runs/{}", r.id),
        }
    }
}

/// A page of a run's trail.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct TrailPage {
    /// The entries, in order.
    #[schema(value_type = Vec<Object>)]
    pub entries: Vec<TrailEntry>,
    /// The sequence number to ask for next (`from`); absent when the page reached the end
    /// of what is stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<u64>,
}

/// `POST /runs`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StartRun {
    /// The FSM's id (its newest version unless `version` says).
    pub fsm: String,
    /// A version of it.
    #[serde(default)]
    pub version: Option<u32>,
    /// The input event: its `id` picks the entry transition (may be left out when there
    /// is one entry).
    #[schema(value_type = Object)]
    pub input: Value,
    /// The run's initial context.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub context: Option<Value>,
    /// The model `llm` states use unless they name one (a configured model name).
    #[serde(default)]
    pub model: Option<String>,
    /// A deadline for the whole run (`30s`, `5m`, `2h`), overriding the FSM's.
    #[serde(default)]
    pub deadline: Option<String>,
    /// What the run and its child runs may spend together, as `claij run --budget` takes
    /// it (`cost=0.50,tokens=200k,calls=20,time=10m`): its limits replace the same ones of
    /// the FSM's `config.budget`. A run that would go past it suspends, waiting on
    /// `budget` (`claij runs resume RUN --budget …` raises it).
    #[serde(default)]
    pub budget: Option<String>,
    /// Where to post the run's ends (completed, failed, interrupted, suspended with a
    /// resume link), signed the Standard Webhooks way; needs the server's webhook secret.
    #[serde(default)]
    pub webhook: Option<String>,
}

/// `POST /runs/{id}/resume`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResumeRun {
    /// The answer: its `id` names the transition `[state, next]` it takes.
    #[schema(value_type = Object)]
    pub input: Value,
    /// The wait the answer is for: the run's `trail_len` as its view showed it when the
    /// answer was made. A run answered since refuses it (409), even if it waits again;
    /// without it, the answer is for the wait the run is in when it arrives.
    #[serde(default)]
    pub trail_len: Option<u64>,
}

/// `POST /runs/{id}/fork`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ForkRun {
    /// The trail entry to fork at (its `seq`): one that took a transition, not a failed
    /// attempt. The fork's trail is the run's entries before it, then this one.
    pub at: u64,
    /// An event to put in that entry's place, as if the state that made it had produced
    /// it: checked against the schema of the transition its `id` names, which must leave
    /// that state (without `id`: the entry's own). Absent: the entry as it was, and the
    /// states after it run again.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub event: Option<Value>,
}

/// `?wait=SECONDS`: answer when the run ends or suspends, or after this long (at most
/// 300 s) with 202.
#[derive(Debug, Clone, Deserialize, IntoParams)]
pub(crate) struct WaitParam {
    /// Seconds to wait for the run to end or suspend (0: answer at once).
    #[serde(default)]
    pub wait: Option<f64>,
}

/// The filters of `GET /runs`.
#[derive(Debug, Clone, Deserialize, IntoParams)]
pub(crate) struct ListParams {
    /// Only runs with this status (comma-separated for several).
    pub status: Option<String>,
    /// Only runs of this FSM.
    pub fsm: Option<String>,
    /// Only runs started at or after this time (RFC 3339).
    pub since: Option<String>,
    /// Only runs started before this time (RFC 3339).
    pub before: Option<String>,
    /// At most this many (default 50, at most 500).
    pub limit: Option<u64>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// The most entries a trail page holds (`GET /runs/{id}/trail`'s `limit`), and what a
/// run's live events read from the store at a time.
pub(crate) const MAX_TRAIL_PAGE: u64 = 1000;

/// The page of `GET /runs/{id}/trail`.
#[derive(Debug, Clone, Deserialize, IntoParams)]
pub(crate) struct TrailParams {
    /// The first sequence number (default 0).
    pub from: Option<u64>,
    /// At most this many entries (default 100, at most 1000).
    pub limit: Option<u64>,
}

/// A definition in a listing.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct DefinitionSummary {
    /// The FSM's id.
    pub id: String,
    /// Its newest version.
    pub version: u32,
    /// The document's content hash.
    pub hash: String,
    /// What the FSM says of itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Named on the server's command line (`true`), or registered over the network or
    /// found in the store.
    pub trusted: bool,
    /// Where it is: `/definitions/{id}`.
    pub url: String,
}

/// A definition.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct DefinitionView {
    /// The FSM's id.
    pub id: String,
    /// Its version.
    pub version: u32,
    /// The document's content hash.
    pub hash: String,
    /// What the FSM says of itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Named on the server's command line.
    pub trusted: bool,
    /// Each entry: the input it takes.
    pub entries: Vec<AnswerView>,
    /// The graph as Mermaid.
    pub mermaid: String,
    /// The graph as Graphviz DOT.
    pub dot: String,
    /// The document (JSON).
    #[schema(value_type = Object)]
    pub document: Value,
}

impl DefinitionView {
    /// The view of `fsm`.
    pub(crate) fn new(fsm: &Fsm, trusted: bool) -> Self {
        let entries = fsm
            .entries
            .iter()
            .map(|&t| {
                let transition = &fsm.transitions[t];
                let mut schema = transition
                    .effective
                    .clone()
                    .unwrap_or_else(|| serde_json::json!({"type": "object"}));
                if let Value::Object(map) = &mut schema
                    && !fsm.schemas.is_empty()
                {
                    map.insert("$defs".into(), Value::Object(fsm.schemas.clone()));
                }
                AnswerView {
                    id: [transition.from.to_string(), transition.to.to_string()],
                    description: transition.description.clone(),
                    schema,
                }
            })
            .collect();
        DefinitionView {
            id: fsm.id.to_string(),
            version: fsm.version,
            hash: fsm.hash.clone(),
            description: fsm.description.clone(),
            trusted,
            entries,
            mermaid: claij_core::to_mermaid(fsm),
            dot: claij_core::to_dot(fsm),
            document: fsm.document.clone(),
        }
    }

    /// The listing's line for `fsm`.
    pub(crate) fn summary(fsm: &Fsm, trusted: bool) -> DefinitionSummary {
        DefinitionSummary {
            id: fsm.id.to_string(),
            version: fsm.version,
            hash: fsm.hash.clone(),
            description: fsm.description.clone(),
            trusted,
            url: format!("/definitions/{}", fsm.id),
        }
    }
}

/// A registered definition.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct Registered {
    /// The FSM's id.
    pub id: String,
    /// Its version.
    pub version: u32,
    /// The document's content hash.
    pub hash: String,
    /// Where it is.
    pub url: String,
    /// The parked runs of older versions its `on_new_version: migrate` policy moved to it
    /// (absent under `keep`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub migrated: Vec<String>,
    /// Those it could not move, with the reasons, each naming its place.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_migrated: Vec<RefusedMove>,
}

/// A run a new version's policy could not move to it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct RefusedMove {
    /// The run.
    pub run: String,
    /// The version it stays on.
    pub version: u32,
    /// Why, each at its place (`state `approve``, `entry 4`, …).
    pub reasons: Vec<PlacedReason>,
}

/// One reason, at its place.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct PlacedReason {
    /// Where: the run, a state, a transition, a trail entry, a child run.
    pub at: String,
    /// What.
    pub message: String,
}

/// A run that was accepted and goes on (202).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct Accepted {
    /// The run's id.
    pub id: String,
    /// Its status when the answer was sent.
    pub status: String,
    /// Where to follow it: `/runs/{id}`.
    pub url: String,
    /// Its live events: `/runs/{id}/events`.
    pub events_url: String,
}

/// One event of a run posted to its callback, and how its attempts went.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct DeliveryView {
    /// The event's id (`webhook-id`).
    pub id: String,
    /// `run.completed`, `run.failed`, `run.interrupted` or `run.suspended`.
    pub kind: String,
    /// Where it is posted.
    pub url: String,
    /// `pending`, `delivered` or `failed`.
    pub status: String,
    /// Attempts made.
    pub attempts: u32,
    /// The 2xx status of the attempt that delivered it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_status: Option<u16>,
    /// Why the last attempt did not deliver it: `refused: …` (the egress policy), or `not
    /// taken` — nothing of what the receiver answered (the server's log keeps that).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When the next attempt is due.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_at: Option<String>,
    /// The body posted (a `run.suspended` one without its resume link, which is never
    /// stored).
    #[schema(value_type = Object)]
    pub payload: Value,
    /// When it was queued.
    pub created_at: String,
    /// When it last changed.
    pub updated_at: String,
}

impl From<&claij_store::roles::Delivery> for DeliveryView {
    fn from(d: &claij_store::roles::Delivery) -> Self {
        DeliveryView {
            id: d.id.clone(),
            kind: d.kind.clone(),
            url: d.url.clone(),
            status: d.status.as_str().to_owned(),
            attempts: d.attempts,
            last_status: d.last_status,
            last_error: d.last_error.clone(),
            next_at: d.next_at.map(rfc3339),
            payload: d.payload.clone(),
            created_at: rfc3339(d.created_at),
            updated_at: rfc3339(d.updated_at),
        }
    }
}
