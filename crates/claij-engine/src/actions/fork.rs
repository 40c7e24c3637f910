//! `fork`: runs branches in parallel (one FSM over a list taken from the event, or a list
//! of FSMs), each a child run of its own, and joins them (`all`, `race`, or at least k),
//! emitting one batch with every branch's outcome in branch order.

use std::sync::Arc;
use std::task::Poll;

use super::child::{
    Common, FORK_TOUCHES, FsmRef, as_input, check_common, child_error, child_input, child_view,
    common_properties, fsm_of, ref_needs, ref_schema, routes, status_word, stored, timed_out,
};
use crate::action::{
    Action, ActionError, ActionInput, ActionOutput, BoxFuture, Outcome, RunScope, Suspension,
};
use crate::capability::{Field, Need, NeedsOf};
use crate::run::{RunError, RunOutcome, RunStatus};
use crate::tree::{ChildRun, content};
use claij_core::known_actions::ConfigRoute;
use claij_core::{ConfigIssue, Fsm};
use serde_json::{Value, json};

/// How a fork's branches are joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Join {
    /// Every branch must complete (a failure does not stop the running ones: every
    /// branch is reported).
    All,
    /// The first branch to complete wins; the others are interrupted.
    Race,
    /// At least k branches must complete; once they have, the others are interrupted.
    AtLeast(usize),
}

impl Join {
    fn read(config: &Value) -> Self {
        match config.get("join") {
            Some(Value::String(s)) if s == "race" => Join::Race,
            Some(Value::Object(map)) => map
                .get("at_least")
                .and_then(Value::as_u64)
                .map_or(Join::All, |k| Join::AtLeast(k as usize)),
            _ => Join::All,
        }
    }

    fn needed(self, n: usize) -> usize {
        match self {
            Join::All => n,
            Join::Race => 1.min(n),
            Join::AtLeast(k) => k.min(n),
        }
    }
}

/// Runs branches in parallel and joins them.
///
/// Config: either `fsm` (a reference as for `fsm`) with `over` (a JSON Pointer to a list
/// in the input event: one branch per item, given the item — an object, or
/// `{"item": value}`), or `fsms` (a list of references: one branch per FSM, each given
/// `input` as for `fsm`); `limit` (how many branches run at once; default all); `join`
/// (`all`, the default; `race`; `{at_least: k}`); `success_to`, `failure_to`,
/// `timeout_to`, `deadline` (each branch's), `trail` as for `fsm`.
///
/// Branch `i` is the run `PARENT.SEQ.i`. The event is
/// `{"id": [state, success_to | failure_to | timeout_to], "branches": [...]}` with one
/// object per branch in branch order, whatever order they finished in: `branch`, `run`,
/// `status` (`completed`, `failed`, `timeout`, `cancelled`: not needed, or interrupted),
/// `result` or
/// `error`, and the branch's `child` view; `race` adds `winner`. Branches suspended for a
/// person do not hold the others up: when the join needs them, the parent suspends,
/// waiting for them, and continues once enough of them are resumed and done.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fork;

impl Action for Fork {
    fn config_schema(&self) -> Value {
        let mut props = common_properties();
        props.insert("fsm".into(), ref_schema());
        props.insert(
            "over".into(),
            json!({"type": "string", "description": "A JSON Pointer to a list in the input event."}),
        );
        props.insert(
            "fsms".into(),
            json!({"type": "array", "minItems": 1, "items": ref_schema()}),
        );
        props.insert("limit".into(), json!({"type": "integer", "minimum": 1}));
        props.insert(
            "join".into(),
            json!({"anyOf": [
                {"enum": ["all", "race"]},
                {"type": "object", "required": ["at_least"], "additionalProperties": false,
                 "properties": {"at_least": {"type": "integer", "minimum": 1}}}
            ]}),
        );
        json!({
            "type": "object",
            "required": ["success_to"],
            "properties": props,
            "oneOf": [
                {"required": ["fsm", "over"], "not": {"required": ["fsms"]}},
                {"required": ["fsms"], "not": {"anyOf": [{"required": ["fsm"]}, {"required": ["over"]}]}}
            ],
            "additionalProperties": false
        })
    }

    /// A child's run: an hour, its own states bounded each.
    fn default_timeout(&self) -> Option<std::time::Duration> {
        Some(crate::action::CHILD_ATTEMPT_TIMEOUT)
    }

    /// The branches' FSM files (a stored definition touches nothing).
    fn touches(&self) -> &'static [Field] {
        &FORK_TOUCHES
    }

    fn needs(&self, of: NeedsOf<'_>) -> Vec<Need> {
        let mut needs = ref_needs(of, "fsm");
        needs.extend(ref_needs(of, "fsms"));
        needs
    }

    fn check_config(&self, config: &Value) -> Vec<ConfigIssue> {
        let mut issues = check_common(config);
        if let (Some(k), Some(n)) = (
            config.pointer("/join/at_least").and_then(Value::as_u64),
            config.get("fsms").and_then(Value::as_array).map(Vec::len),
        ) && k as usize > n
        {
            issues.push(ConfigIssue {
                pointer: "/join/at_least".into(),
                message: format!("at_least {k} of {n} branches can never be met"),
            });
        }
        issues
    }

    fn routes(&self, config: &Value) -> Vec<ConfigRoute> {
        routes(config)
    }

    fn run<'a>(&'a self, input: ActionInput<'a>) -> BoxFuture<'a, Result<Outcome, ActionError>> {
        Box::pin(run_fork(input))
    }
}

/// One branch to run: its FSM (`None` when the branch is already in the store) and input.
struct Branch {
    fsm: Option<Arc<Fsm>>,
    input: Value,
}

/// Where a branch ended (or stands).
enum Ended {
    Ran(Box<RunOutcome>),
    Error(String),
    /// Never started, or interrupted because the join was decided.
    Cancelled,
}

/// The branches, their FSMs loaded only for those not in the store yet (a parent
/// continued from the store may have no file to load them from: a map's branches then
/// share the definition of a sibling that started).
async fn branches(input: &ActionInput<'_>, prefix: &str) -> Result<Vec<Branch>, ActionError> {
    let ids = |i: usize| format!("{prefix}.{i}");
    let config = &input.state.config;
    if let Some(list) = config.get("fsms").and_then(Value::as_array) {
        let given = child_input(input)?;
        let mut out = Vec::with_capacity(list.len());
        for (i, r) in list.iter().filter_map(FsmRef::parse).enumerate() {
            let fsm = if stored(input, &ids(i)).await {
                None
            } else {
                Some(r.load(input).await?)
            };
            out.push(Branch {
                fsm,
                input: given.clone(),
            });
        }
        return Ok(out);
    }
    let (Some(r), Some(over)) = (
        config.get("fsm").and_then(FsmRef::parse),
        config.get("over").and_then(Value::as_str),
    ) else {
        return Err(ActionError::fatal(format!(
            "state `{}` names neither `fsms` nor `fsm` with `over`",
            input.state.id
        )));
    };
    let Some(items) = input.event.pointer(over).and_then(Value::as_array) else {
        return Err(ActionError::failed(format!(
            "the input event has no list at `{over}` (config.over of state `{}`)",
            input.state.id
        )));
    };
    let mut started = Vec::with_capacity(items.len());
    let mut sibling = None;
    for i in 0..items.len() {
        let id = ids(i);
        let is_stored = match input.scope.store {
            Some(store) => match store.run(&id).await {
                Ok(record) => {
                    sibling.get_or_insert(record);
                    true
                }
                Err(_) => false,
            },
            None => false,
        };
        started.push(is_stored);
    }
    let fsm = if started.iter().all(|s| *s) {
        None
    } else {
        match (r.load(input).await, &sibling, input.scope.store) {
            (Ok(fsm), _, _) => Some(fsm),
            (Err(_), Some(record), Some(store)) => Some(
                input
                    .scope
                    .engine
                    .stored_fsm(store.as_ref(), record)
                    .await
                    .map_err(|e| ActionError::failed(e.to_string()))?,
            ),
            (Err(e), _, _) => return Err(e),
        }
    };
    Ok(items
        .iter()
        .zip(started)
        .map(|(item, is_stored)| Branch {
            fsm: if is_stored { None } else { fsm.clone() },
            input: as_input(item.clone()),
        })
        .collect())
}

async fn run_fork(input: ActionInput<'_>) -> Result<Outcome, ActionError> {
    let config = &input.state.config;
    let common = Common::read(config);
    let join = Join::read(config);
    let prefix = format!("{}.{}", input.run_id, input.seq);
    let branches = branches(&input, &prefix).await?;
    let n = branches.len();
    let limit = config
        .get("limit")
        .and_then(Value::as_u64)
        .map_or(n, |l| l as usize)
        .max(1);
    let need = join.needed(n);
    let ids: Vec<String> = (0..n).map(|i| format!("{prefix}.{i}")).collect();
    let stop = input.cancel.child_token();
    let scope = input.scope;
    let start = |i: usize| -> BoxFuture<'_, (usize, Result<RunOutcome, RunError>)> {
        let child = ChildRun {
            run_id: ids[i].clone(),
            fsm: branches[i].fsm.clone(),
            input: branches[i].input.clone(),
            context: input.context.clone(),
            deadline: common.deadline,
            prior_trail: Vec::new(),
        };
        let cancel = stop.child_token();
        let parent = input.run_id;
        Box::pin(async move {
            let r = scope.engine.run_child(&scope, parent, child, cancel).await;
            (i, r)
        })
    };

    let mut ended: Vec<Option<Ended>> = (0..n).map(|_| None).collect();
    let mut winner = None;
    let mut decided = false;
    let mut next = 0;
    let mut running: Vec<BoxFuture<'_, (usize, Result<RunOutcome, RunError>)>> = Vec::new();
    loop {
        while !decided && running.len() < limit && next < n {
            running.push(start(next));
            next += 1;
        }
        let Some((i, result)) = next_done(&mut running).await else {
            // Nothing runs: decide with what suspended branches have become meanwhile
            // (a person may have answered one while the others ran).
            if !decided && refresh_suspended(&scope, &ids, &mut ended, &start).await {
                continue;
            }
            break;
        };
        let slot = match result {
            // Interrupted: by the join (a loser), or by someone else; either way the
            // branch gave no answer and is not a failure of its own.
            Ok(outcome) if outcome.status == RunStatus::Interrupted => Ended::Cancelled,
            Ok(outcome) => Ended::Ran(Box::new(outcome)),
            Err(e) => Ended::Error(e.to_string()),
        };
        if winner.is_none() && matches!(&slot, Ended::Ran(o) if o.status == RunStatus::Completed) {
            winner = Some(i);
        }
        ended[i] = Some(slot);
        let (ok, failed, _) = tally(&ended);
        let impossible = n - failed < need;
        if !decided && (ok >= need || (impossible && join != Join::All)) {
            decided = true;
            stop.cancel();
        }
    }
    if input.cancel.is_cancelled() {
        return Err(ActionError::failed("the fork was interrupted"));
    }

    let (ok, failed, suspended) = tally(&ended);
    let success = ok >= need;
    if !success && n - failed >= need && !suspended.is_empty() {
        // The join needs branches that wait (for a person, or for their budget to be
        // raised): wait for them.
        let children: Vec<String> = suspended.iter().map(|&i| ids[i].clone()).collect();
        return Ok(Outcome::Suspend(Suspension {
            prompt: Some(format!(
                "waits for {} suspended branch run(s) (for a person or a budget): {}",
                children.len(),
                children.join(", ")
            )),
            children,
            ..Suspension::default()
        }));
    }
    // Decided: branches still waiting for a person are no longer needed.
    for &i in &suspended {
        if let Some(store) = scope.store {
            crate::run::interrupt(store.as_ref(), &ids[i])
                .await
                .map_err(|e| ActionError::failed(format!("interrupting branch {i}: {e}")))?;
        }
        ended[i] = Some(Ended::Cancelled);
    }

    let report: Vec<Value> = ended
        .iter()
        .enumerate()
        .map(|(i, e)| branch_report(i, &ids[i], e.as_ref(), &branches[i], &common))
        .collect();
    let timed_out_only = !success
        && ended.iter().all(|e| match e {
            Some(Ended::Ran(o)) => o.status == RunStatus::Completed || timed_out(o),
            Some(Ended::Error(_)) => false,
            Some(Ended::Cancelled) | None => true,
        });
    let state = &*input.state.id;
    let to = if success {
        common.success_to.as_deref()
    } else {
        common.failure_target(timed_out_only)
    };
    let Some(to) = to else {
        let errors: Vec<String> = report
            .iter()
            .filter_map(|b| b.get("error").and_then(Value::as_str).map(str::to_owned))
            .collect();
        return Err(ActionError::failed(format!(
            "{ok} of {n} branches completed, {need} needed: {}",
            errors.join("; ")
        )));
    };
    let mut event = json!({"id": [state, to], "branches": report});
    if join == Join::Race
        && let Some(w) = winner.filter(|_| success)
    {
        event["winner"] = json!(w);
    }
    Ok(Outcome::Emit(ActionOutput::event(event)))
}

/// Completed, failed (or errored) and suspended branches.
fn tally(ended: &[Option<Ended>]) -> (usize, usize, Vec<usize>) {
    let (mut ok, mut failed, mut suspended) = (0, 0, Vec::new());
    for (i, e) in ended.iter().enumerate() {
        match e {
            Some(Ended::Ran(o)) => match o.status {
                RunStatus::Completed => ok += 1,
                RunStatus::Suspended => suspended.push(i),
                _ => failed += 1,
            },
            Some(Ended::Error(_)) => failed += 1,
            Some(Ended::Cancelled) | None => {}
        }
    }
    (ok, failed, suspended)
}

/// Looks again at branches that were suspended: one that ended meanwhile (resumed from
/// elsewhere) is taken in. Returns whether any changed.
async fn refresh_suspended<'a>(
    scope: &RunScope<'a>,
    ids: &[String],
    ended: &mut [Option<Ended>],
    start: &impl Fn(usize) -> BoxFuture<'a, (usize, Result<RunOutcome, RunError>)>,
) -> bool {
    let Some(store) = scope.store else {
        return false;
    };
    let mut changed = false;
    for i in tally(ended).2 {
        let now = store.run(&ids[i]).await.map(|r| r.status);
        if matches!(now, Ok(s) if s != RunStatus::Suspended) {
            let (_, result) = start(i).await;
            if let Ok(outcome) = result
                && outcome.status != RunStatus::Suspended
            {
                ended[i] = Some(Ended::Ran(Box::new(outcome)));
                changed = true;
            }
        }
    }
    changed
}

fn branch_report(
    i: usize,
    run: &str,
    ended: Option<&Ended>,
    branch: &Branch,
    common: &Common,
) -> Value {
    let fsm_id: Option<Arc<str>> = match ended {
        Some(Ended::Ran(o)) => fsm_of(o),
        _ => None,
    }
    .or_else(|| branch.fsm.as_ref().map(|f| f.id.clone()));
    let mut out = json!({"branch": i, "run": run});
    if let Some(id) = &fsm_id {
        out["fsm"] = json!(&**id);
    }
    let fsm_id = fsm_id.unwrap_or_else(|| "?".into());
    match ended {
        Some(Ended::Ran(o)) => {
            out["status"] = json!(status_word(o));
            if o.status == RunStatus::Completed {
                out["result"] = o.result.as_ref().map(content).unwrap_or(Value::Null);
            } else {
                out["error"] = json!(child_error(o));
            }
            if let Some(view) = child_view(common.mode, o, &fsm_id) {
                out["child"] = view;
            }
        }
        Some(Ended::Error(e)) => {
            out["status"] = json!("failed");
            out["error"] = json!(e);
        }
        Some(Ended::Cancelled) | None => {
            out["status"] = json!("cancelled");
        }
    }
    out
}

/// Waits for the first of `running` to finish and removes it.
async fn next_done<T>(running: &mut Vec<BoxFuture<'_, T>>) -> Option<T> {
    if running.is_empty() {
        return None;
    }
    let value = std::future::poll_fn(|cx| {
        for k in 0..running.len() {
            if let Poll::Ready(v) = running[k].as_mut().poll(cx) {
                drop(running.swap_remove(k));
                return Poll::Ready(v);
            }
        }
        Poll::Pending
    })
    .await;
    Some(value)
}
