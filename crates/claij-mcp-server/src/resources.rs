//! The served FSMs and their runs as MCP resources: `claij://fsms/{id}` (the document as
//! loaded, JSON) and `claij://runs/{run_id}` (what `ID_status` shows, with the trail).
//! Following a run's changes is [`crate::subscriptions`]'.

use std::sync::Arc;

use claij_core::Fsm;
use claij_core::store::{RunFilter, RunRecord};
use rmcp::ErrorData;
use serde_json::{Value, json};

use crate::fsm_tools::{self, Runtime};

/// How many of the latest runs `resources/list` shows.
const LISTED_RUNS: usize = 20;

pub(crate) const FSM_PREFIX: &str = "claij://fsms/";
pub(crate) const RUN_PREFIX: &str = "claij://runs/";

/// The template of a run's URI.
pub(crate) const RUN_TEMPLATE: &str = "claij://runs/{run_id}";

/// A run's resource URI.
pub(crate) fn run_uri(run_id: &str) -> String {
    format!("{RUN_PREFIX}{run_id}")
}

/// The listing: each FSM's document, then the latest runs of the served FSMs.
pub(crate) async fn list(runtime: &Runtime, fsms: &[Arc<Fsm>]) -> Result<Value, ErrorData> {
    let mut resources: Vec<Value> = fsms
        .iter()
        .map(|fsm| {
            json!({
                "uri": format!("{FSM_PREFIX}{}", fsm.id),
                "name": &*fsm.id,
                "title": format!("{} v{}", fsm.id, fsm.version),
                "description": fsm.description.clone().unwrap_or_else(|| "An FSM document.".to_owned()),
                "mimeType": "application/json",
            })
        })
        .collect();
    for run in latest_runs(runtime, fsms, "").await? {
        resources.push(json!({
            "uri": run_uri(&run.id),
            "name": format!("run {}", run.id),
            "description": format!("A run of {} v{}: {} in `{}`", run.fsm_id, run.version, run.status, run.state),
            "mimeType": "application/json",
        }));
    }
    Ok(json!({ "resources": resources }))
}

/// The latest runs of the served FSMs whose id starts with `prefix`.
pub(crate) async fn latest_runs(
    runtime: &Runtime,
    fsms: &[Arc<Fsm>],
    prefix: &str,
) -> Result<Vec<RunRecord>, ErrorData> {
    let mut runs = Vec::new();
    for fsm in fsms {
        let filter = RunFilter {
            fsm_id: Some(fsm.id.to_string()),
            limit: Some(LISTED_RUNS as u64 * 5),
            ..RunFilter::default()
        };
        let found = runtime
            .store
            .runs(&filter)
            .await
            .map_err(|e| ErrorData::internal_error(format!("the store failed: {e}"), None))?;
        runs.extend(found.into_iter().filter(|r| r.id.starts_with(prefix)));
    }
    runs.sort_by_key(|r| std::cmp::Reverse(r.updated_at));
    runs.truncate(LISTED_RUNS);
    Ok(runs)
}

/// The templates: a run by its id.
pub(crate) fn templates() -> Value {
    json!({"resourceTemplates": [{
        "uriTemplate": RUN_TEMPLATE,
        "name": "run",
        "title": "A claij run",
        "description": "A run of a served FSM: its status, what it waits for (and the schema), its result or last failure, and its trail.",
        "mimeType": "application/json",
    }]})
}

/// What a URI names.
pub(crate) enum Named<'a> {
    /// A served FSM's document.
    Fsm(&'a Arc<Fsm>),
    /// A run (of a served FSM or not: [`run_of_served`] tells).
    Run(&'a str),
}

/// What `uri` names; an error naming it when claij serves no such URI.
pub(crate) fn resolve<'a>(uri: &'a str, fsms: &'a [Arc<Fsm>]) -> Result<Named<'a>, ErrorData> {
    if let Some(id) = uri.strip_prefix(FSM_PREFIX) {
        return fsms
            .iter()
            .find(|f| &*f.id == id)
            .map(Named::Fsm)
            .ok_or_else(|| not_found(uri, "no FSM of that id is served"));
    }
    match uri.strip_prefix(RUN_PREFIX) {
        Some(run_id) if !run_id.is_empty() && !run_id.contains('/') => Ok(Named::Run(run_id)),
        _ => Err(not_found(
            uri,
            "claij serves claij://fsms/{id} and claij://runs/{run_id}",
        )),
    }
}

fn not_found(uri: &str, why: &str) -> ErrorData {
    ErrorData::resource_not_found(
        format!("no resource `{uri}`: {why}"),
        Some(json!({"uri": uri})),
    )
}

/// A resource's contents.
pub(crate) async fn read(
    runtime: &Runtime,
    fsms: &[Arc<Fsm>],
    uri: &str,
) -> Result<Value, ErrorData> {
    let body = match resolve(uri, fsms)? {
        Named::Fsm(fsm) => fsm.document.clone(),
        Named::Run(run_id) => run_of_served(runtime, fsms, uri, run_id).await?,
    };
    let text = serde_json::to_string_pretty(&body).unwrap_or_default();
    Ok(json!({"contents": [{"uri": uri, "mimeType": "application/json", "text": text}]}))
}

/// A run's view, when it is a run of a served FSM.
async fn run_of_served(
    runtime: &Runtime,
    fsms: &[Arc<Fsm>],
    uri: &str,
    run_id: &str,
) -> Result<Value, ErrorData> {
    let view = fsm_tools::run_view(runtime, run_id, None, true)
        .await
        .map_err(|why| not_found(uri, &why))?;
    served(fsms, uri, view["fsm"].as_str().unwrap_or_default())?;
    Ok(view)
}

/// A run's record, when it is a run of a served FSM.
pub(crate) async fn served_run(
    runtime: &Runtime,
    fsms: &[Arc<Fsm>],
    uri: &str,
    run_id: &str,
) -> Result<RunRecord, ErrorData> {
    let record = fsm_tools::record(runtime, run_id)
        .await
        .map_err(|why| not_found(uri, &why))?;
    served(fsms, uri, &record.fsm_id)?;
    Ok(record)
}

/// Refuses `uri` when `fsm_id` is not served.
fn served(fsms: &[Arc<Fsm>], uri: &str, fsm_id: &str) -> Result<(), ErrorData> {
    match fsms.iter().any(|f| &*f.id == fsm_id) {
        true => Ok(()),
        false => Err(not_found(
            uri,
            "it is not a run of an FSM this server serves",
        )),
    }
}
