//! `claij runs`: list, show, trail, resume (or answer for the workers: `--submit`), wait
//! for, interrupt, migrate and prune stored runs.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Result;
use claij_core::store::{RunFilter, RunRecord, RunStore, StoreError};
use claij_core::{Budget, FailureKind, Fsm, RunStatus, Spend, TrailEntry};
use claij_engine::{Engine, RunError, RunOptions, RunOutcome, is_dead_local_owner};
use claij_store::roles::Store;
use serde_json::{Value, json};

mod fork;
mod migrate;

use crate::app::App;
use crate::cli::RunsCommand;
use crate::mcp::Mcp;
use crate::report::{below, interrupt_on_ctrl_c, observers, queue_line, raised, report, settled};
use crate::{EXIT_FAILED, EXIT_OK, EXIT_SUSPENDED, EXIT_USAGE, input};

/// Runs a `claij runs` subcommand against `store`.
pub(super) async fn runs(app: &App, store: Arc<dyn Store>, command: RunsCommand) -> Result<u8> {
    match command {
        RunsCommand::List {
            statuses,
            fsm,
            limit,
            json,
        } => {
            let filter = RunFilter {
                statuses,
                fsm_id: fsm,
                limit: Some(limit),
                ..RunFilter::default()
            };
            list(store.as_ref(), &filter, json).await
        }
        RunsCommand::Show { run, json } => show(store.as_ref(), &run, json).await,
        RunsCommand::Trail { run, json } => trail(store.as_ref(), &run, json).await,
        RunsCommand::Resume {
            run: Some(run),
            input: Some(input),
            submit: true,
            quiet,
            ..
        } => answer(app, store, &run, &input, quiet).await,
        RunsCommand::Wait {
            run,
            timeout,
            until_suspended,
            json,
        } => wait(store, &run, timeout, until_suspended, json).await,
        RunsCommand::Resume {
            run: Some(run),
            input,
            trail,
            quiet,
            budget,
            llm,
            ..
        } => {
            let how = Resume {
                input: input.as_deref(),
                trail: trail.as_deref(),
                budget: budget.as_ref(),
                llm: &llm,
                quiet,
            };
            resume_one(app, store, &run, how).await
        }
        RunsCommand::Resume { quiet, .. } => resume_all(app, store, quiet).await,
        RunsCommand::Fork {
            run,
            at,
            input,
            submit,
            llm,
            quiet,
        } => {
            let how = fork::Fork {
                run: &run,
                at,
                input: input.as_deref(),
                submit,
                llm: &llm,
                quiet,
            };
            fork::fork(app, store, how).await
        }
        RunsCommand::Interrupt { run, wait } => interrupt(store.as_ref(), &run, wait).await,
        RunsCommand::Migrate(args) => migrate::migrate(app, store, args).await,
        RunsCommand::Prune {
            older_than,
            statuses,
        } => {
            let statuses = if statuses.is_empty() {
                vec![
                    RunStatus::Completed,
                    RunStatus::Failed,
                    RunStatus::Interrupted,
                ]
            } else {
                statuses
            };
            if let Some(live) = statuses.iter().find(|s| !s.is_final()) {
                note!(
                    "claij: only finished runs (completed, failed, interrupted) can be pruned, not {live} ones"
                );
                return Ok(EXIT_USAGE);
            }
            let filter = RunFilter {
                statuses,
                fsm_id: None,
                updated_before: Some(SystemTime::now() - older_than),
                ..RunFilter::default()
            };
            let pruned = store.prune(&filter).await?;
            out!("pruned {pruned} run(s)")?;
            Ok(EXIT_OK)
        }
    }
}

/// A time as RFC 3339 (seconds).
fn at(time: SystemTime) -> String {
    humantime::format_rfc3339_seconds(time).to_string()
}

/// A run's record as JSON, times in RFC 3339.
fn record_json(r: &RunRecord) -> Value {
    json!({
        "id": r.id,
        "fsm": r.fsm_id,
        "version": r.version,
        "hash": r.hash,
        "parent": r.parent,
        "forked_from": r.forked_from,
        "status": r.status,
        "state": r.state,
        "steps": r.trail_len,
        "context": r.context,
        "wait": r.wait.as_ref().map(|w| json!({
            "state": w.state,
            "waiting_for": w.transitions.iter().map(|(f, t)| json!([f, t])).collect::<Vec<_>>(),
            "prompt": w.prompt,
            "expires_at": w.expires_at.map(at),
            "on_expiry": w.on_expiry,
            "schema": w.schema,
            "children": w.children,
            "budget": w.budget,
            "question": w.question,
            "held_until": w.held.as_ref().map(|h| at(h.until)),
        })),
        "owner": r.lease.as_ref().map(|l| &l.owner),
        "interrupt_requested": r.interrupt_requested,
        "not_before": r.not_before.map(at),
        "idempotency_key": r.idempotency_key,
        "spend": r.spend,
        "budget": r.budget,
        "created_at": at(r.created_at),
        "updated_at": at(r.updated_at),
    })
}

async fn list(store: &dyn Store, filter: &RunFilter, as_json: bool) -> Result<u8> {
    let runs = store.runs(filter).await?;
    if as_json {
        for r in &runs {
            out!("{}", record_json(r))?;
        }
        return Ok(EXIT_OK);
    }
    out!(
        "{:<38} {:<28} {:<12} {:<18} {:>5} {:>9} {:>7}  UPDATED",
        "RUN",
        "FSM",
        "STATUS",
        "STATE",
        "STEPS",
        "COST",
        "TOKENS"
    )?;
    for r in &runs {
        let (cost, tokens) = spend_columns(&r.spend);
        out!(
            "{:<38} {:<28} {:<12} {:<18} {:>5} {cost:>9} {tokens:>7}  {}",
            r.id,
            format!("{} v{}", r.fsm_id, r.version),
            r.status.as_str(),
            r.state,
            r.trail_len,
            at(r.updated_at)
        )?;
    }
    if runs.is_empty() {
        let filtered = !filter.statuses.is_empty() || filter.fsm_id.is_some();
        note!(
            "no runs{} in {}",
            if filtered { " match" } else { "" },
            store.describe()
        );
    }
    // The work waiting for `claij worker` processes, when there is any.
    let queue = store.queue().await?;
    if queue != claij_store::roles::QueueStats::default() {
        note!("{}", queue_line(&queue));
    }
    Ok(EXIT_OK)
}

/// A run's own spend in the list's COST and TOKENS columns (`$0.0123`, `12.3k`; `-` when
/// it called no model).
fn spend_columns(spend: &Spend) -> (String, String) {
    if spend.calls == 0 && spend.tokens() == 0 {
        return ("-".into(), "-".into());
    }
    let cost = if spend.cost_usd >= 100.0 {
        format!("${:.0}", spend.cost_usd)
    } else {
        format!("${:.4}", spend.cost_usd)
    };
    let tokens = match spend.tokens() {
        n if n < 10_000 => n.to_string(),
        n if n < 1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        n => format!("{:.1}m", n as f64 / 1e6),
    };
    (cost, tokens)
}

async fn show(store: &dyn RunStore, run: &str, as_json: bool) -> Result<u8> {
    let record = store.run(run).await?;
    let trail = store.trail(run, 0).await?;
    let tail = &trail[trail.len().saturating_sub(8)..];
    let last_event = tail
        .iter()
        .rev()
        .find(|e| e.is_transition())
        .map(|e| &e.event);
    // A server's question and its answer are shown as such, not as failures.
    let last_failure = tail
        .iter()
        .rev()
        .take_while(|e| !e.is_transition())
        .find_map(|e| e.failure.as_deref())
        .filter(|f| {
            !matches!(
                f.kind,
                FailureKind::Question | FailureKind::Answer | FailureKind::Migrated
            )
        });
    let tree = store.tree_spend(run).await?;
    let moves = migrations(&trail);
    if as_json {
        let mut out = record_json(&record);
        out["migrations"] = Value::Array(
            moves
                .iter()
                .map(|(at_time, m)| {
                    let mut m = serde_json::to_value(m).unwrap_or_default();
                    m["at"] = json!(at(*at_time));
                    m
                })
                .collect(),
        );
        out["tree_spend"] = serde_json::to_value(tree)?;
        out["last_event"] = last_event.cloned().unwrap_or(Value::Null);
        out["last_failure"] = serde_json::to_value(last_failure)?;
        out!("{}", serde_json::to_string_pretty(&out)?)?;
        return Ok(EXIT_OK);
    }
    out!("run       {}", record.id)?;
    out!(
        "fsm       {} v{} ({})",
        record.fsm_id,
        record.version,
        &record.hash[..record.hash.len().min(12)]
    )?;
    for (when, m) in &moves {
        let renamed = if m.from.state == m.to.state {
            String::new()
        } else {
            format!(", `{}` now `{}`", m.from.state, m.to.state)
        };
        out!(
            "moved     from v{} to v{} at {}{renamed}",
            m.from.version,
            m.to.version,
            at(*when)
        )?;
    }
    if let Some(parent) = &record.parent {
        out!("parent    {parent}")?;
    }
    if let Some(fork) = &record.forked_from {
        out!(
            "forked    from {} at entry {}{}",
            fork.run,
            fork.seq,
            if fork.edited {
                ", its event replaced"
            } else {
                ""
            }
        )?;
    }
    out!("status    {}", record.status)?;
    out!("state     {}", record.state)?;
    out!("steps     {}", record.trail_len)?;
    out!("created   {}", at(record.created_at))?;
    out!("updated   {}", at(record.updated_at))?;
    if let Some(lease) = &record.lease {
        let note = if is_dead_local_owner(&lease.owner) {
            " (process gone: resume it with `claij runs resume`)"
        } else {
            ""
        };
        out!("owner     {} until {}{note}", lease.owner, at(lease.until))?;
    }
    out!("spent     {}", record.spend)?;
    if tree != record.spend {
        out!("tree      {} (this run and the runs below it)", tree)?;
    }
    if let Some(budget) = &record.budget {
        out!("budget    {budget} (this run and the runs below it, together)")?;
    }
    let wait = record.wait.as_ref();
    if let Some(pause) = wait.and_then(|w| w.budget.as_deref()) {
        out!("stopped for its budget: {pause}")?;
        out!(
            "resume    claij runs resume {} --budget {} (raise it and continue)",
            pause.run,
            raised(pause)
        )?;
    } else if let Some(wait) = wait.filter(|w| !w.children.is_empty()) {
        let below = below(store, &wait.children).await;
        if below.stopped.is_empty() {
            out!(
                "waits for child runs {} (answer them with `claij runs resume CHILD --input …`; this run continues when they are done)",
                wait.children.join(", ")
            )?;
        } else {
            out!(
                "waits for child runs {}; this run continues when they are done",
                wait.children.join(", ")
            )?;
            for (child, pause) in &below.stopped {
                out!("stopped   child run {child} for a budget: {pause}")?;
            }
            for (owner, budget) in below.raises() {
                out!(
                    "resume    claij runs resume {owner} --budget {budget} (raise it and continue)"
                )?;
            }
            if !below.asking.is_empty() {
                out!(
                    "asking    child runs {} wait for an input (`claij runs resume CHILD --input …`)",
                    below.asking.join(", ")
                )?;
            }
        }
        if let Some(prompt) = &wait.prompt {
            out!("note      {prompt}")?;
        }
    } else if let Some(question) = record.wait.as_ref().and_then(|w| w.question.as_deref()) {
        out!(
            "asked     by the MCP server `{}`: {}",
            question.server,
            question.message
        )?;
        out!("schema    {}", serde_json::to_string(&question.schema)?)?;
        if let Some(held) = record
            .wait
            .as_ref()
            .and_then(|w| w.held_at(SystemTime::now()))
        {
            out!(
                "held      the server's request is held open until {} by {}: an answer by then goes straight back to it",
                humantime::format_rfc3339_seconds(held.until),
                held.owner
            )?;
        }
        out!(
            "resume    claij runs resume {run} --input '{{…}}' (an object that fits the schema), '\"decline\"' or null"
        )?;
    } else if let Some(wait) = &record.wait {
        out!(
            "waits for {}",
            wait.transitions
                .iter()
                .map(|(f, t)| format!("[{f}, {t}]"))
                .collect::<Vec<_>>()
                .join(", ")
        )?;
        if let Some(prompt) = &wait.prompt {
            out!("asking    {prompt}")?;
        }
        if let Some(expires) = wait.expires_at {
            out!(
                "expires   {}{}",
                at(expires),
                wait.on_expiry
                    .as_deref()
                    .map(|t| format!(" (then to `{t}`)"))
                    .unwrap_or_default()
            )?;
        }
        out!("schema    {}", serde_json::to_string(&wait.schema)?)?;
    }
    if let Some(event) = last_event {
        out!("last      {}", serde_json::to_string(event)?)?;
    }
    if let Some(f) = last_failure {
        out!("failure   {}: {}", f.kind, f.message)?;
    }
    Ok(EXIT_OK)
}

/// The moves a run made between versions of its FSM (`claij runs migrate`), oldest first,
/// with when each was made.
fn migrations(trail: &[TrailEntry]) -> Vec<(SystemTime, claij_core::migration::MigrationEvent)> {
    trail
        .iter()
        .filter_map(|e| claij_core::migration::migration_of(e).map(|m| (e.at, m)))
        .collect()
}

async fn trail(store: &dyn RunStore, run: &str, as_json: bool) -> Result<u8> {
    let entries = store.trail(run, 0).await?;
    if as_json {
        for e in &entries {
            out!("{}", serde_json::to_string(e)?)?;
        }
        return Ok(EXIT_OK);
    }
    out!(
        "{:>4}  {:<20}  {:<30} {:>3} {:>8}  EVENT / FAILURE",
        "SEQ",
        "AT",
        "TRANSITION",
        "TRY",
        "MS"
    )?;
    for e in &entries {
        let hop = match (&e.to, e.failure.as_deref().map(|f| f.kind)) {
            (Some(to), _) => format!("{} → {to}", e.from),
            (None, Some(FailureKind::Question)) => format!("{} ?", e.from),
            (None, Some(FailureKind::Answer)) => format!("{} ↩", e.from),
            (None, Some(FailureKind::Migrated)) => format!("{} ⇢", e.from),
            (None, _) => format!("{} ✗", e.from),
        };
        let note = match &e.failure {
            Some(f) => format!("{}: {}", f.kind, f.message.lines().next().unwrap_or("")),
            None => clip(&serde_json::to_string(&e.event)?, 80),
        };
        out!(
            "{:>4}  {:<20}  {:<30} {:>3} {:>8}  {note}",
            e.seq,
            at(e.at),
            hop,
            e.attempt,
            e.duration_ms.map(|d| d.to_string()).unwrap_or_default(),
        )?;
    }
    Ok(EXIT_OK)
}

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let head: String = text.chars().take(max - 1).collect();
        format!("{head}…")
    }
}

/// The definition a run is pinned to, loaded and checked like any document (the engine
/// caches it by content hash), with the MCP servers it declares connected.
async fn pinned_fsm(
    store: &dyn RunStore,
    engine: &Engine,
    mcp: &Mcp,
    record: &RunRecord,
) -> Result<Arc<Fsm>> {
    let fsm = engine.stored_fsm(store, record).await?;
    mcp.connect(&fsm).await?;
    Ok(fsm)
}

/// How `claij runs resume RUN` continues the run.
struct Resume<'a> {
    /// The input event (JSON text, @FILE or -), for a run waiting for one.
    input: Option<&'a str>,
    /// Where to write the whole trail as the run goes.
    trail: Option<&'a std::path::Path>,
    /// Limits to set on the run's budget first (each replaces the run's own).
    budget: Option<&'a Budget>,
    /// The models it goes on with.
    llm: &'a crate::cli::LlmArgs,
    /// No progress on stderr.
    quiet: bool,
}

/// The event a command was given (`--input`: JSON text, @FILE or -) and the engine with
/// the models it names (`llm`), for continuing stored runs; or, when either is wrong
/// (said on stderr), the usage exit status.
fn input_and_engine(
    app: &App,
    input: Option<&str>,
    llm: &crate::cli::LlmArgs,
) -> Result<(Option<Value>, Engine), u8> {
    let input = input
        .map(|i| input::json_argument("input", i))
        .transpose()
        .map_err(|e| {
            note!("claij: {e:#}");
            EXIT_USAGE
        })?;
    let models = crate::app::run_models(llm).map_err(|e| {
        note!("claij: {e:#}");
        EXIT_USAGE
    })?;
    Ok((input, app.taped_engine(true, Arc::new(models.layer))))
}

async fn resume_one(app: &App, store: Arc<dyn RunStore>, run: &str, how: Resume<'_>) -> Result<u8> {
    let Resume {
        input,
        trail,
        budget,
        llm,
        quiet,
    } = how;
    let (input, engine) = match input_and_engine(app, input, llm) {
        Ok(both) => both,
        Err(code) => return Ok(code),
    };
    let record = store.run(run).await?;
    if let Some(refusal) = refuse_resume(&record, input.is_some())
        .or_else(|| budget.and_then(|_| refuse_budget(&record)))
    {
        note!("claij: {}", refusal.message);
        return Ok(refusal.code);
    }
    let fsm = pinned_fsm(store.as_ref(), &engine, &app.mcp(), &record).await?;
    if let Some(given) = budget {
        let budget = record.budget.unwrap_or_default().overridden_by(given);
        store.set_budget(run, Some(&budget)).await?;
        if !quiet {
            note!(
                "claij: run {run}'s budget is now {budget}{}",
                record
                    .budget
                    .map(|b| format!(" (was {b})"))
                    .unwrap_or_default()
            );
        }
    }
    let earlier = match trail {
        Some(_) => Some(store.trail(run, 0).await?),
        None => None,
    };
    let observers = match observers(trail, quiet, earlier.as_deref()) {
        Ok(o) => o,
        Err(code) => return Ok(code),
    };
    let options = RunOptions {
        store: Some(store.clone()),
        observers,
        ..RunOptions::default()
    };
    interrupt_on_ctrl_c(&options);
    let answered = input.is_some();
    if answered
        && !quiet
        && let Ok(record) = store.run(run).await
        && let Some(held) = record
            .wait
            .as_ref()
            .and_then(|w| w.held_at(SystemTime::now()))
    {
        note!(
            "claij: `{}` holds the MCP server's request open until {}: the answer goes straight back to it there (should it be gone by then, the call is made again here)",
            held.owner,
            humantime::format_rfc3339_seconds(held.until)
        );
    }
    let mut result = engine.resume(fsm, run, input, options).await;
    if let Ok(outcome) = &result
        && outcome.status == RunStatus::Running
    {
        // The answer went to the process holding the question's request open: the run
        // goes on there, and is followed here until it ends or suspends.
        result = settled(store.as_ref(), run).await;
    }
    if !quiet && let Ok(outcome) = &result {
        // Resuming a child lets the runs that waited for it continue.
        let mut parent = outcome.parent.as_deref();
        while let Some(p) = parent {
            note!(
                "claij: parent run {} continued: {} in `{}`",
                p.run_id,
                p.status,
                p.state
            );
            parent = p.parent.as_deref();
        }
    }
    // Of concurrent resumes exactly one wins; the others lose the claim, or find the run
    // no longer suspended. Say so plainly rather than with the store's words.
    if answered
        && let Err(RunError::Store(StoreError::Conflict { .. }) | RunError::NotResumable { .. }) =
            &result
        && let Ok(now) = store.run(run).await
        && now.status != RunStatus::Suspended
    {
        note!(
            "claij: run `{run}` is now {}, not suspended: another resume won; this input was not used",
            now.status
        );
        return Ok(EXIT_FAILED);
    }
    Ok(report(result, quiet, Some(store.as_ref()), "").await)
}

/// Why `claij runs resume` cannot do what it is asked with this run, before trying.
struct Refusal {
    message: String,
    code: u8,
}

/// A resume that cannot work: an input for a run that waits for none, or no input for a
/// run that waits for one.
fn refuse_resume(record: &RunRecord, has_input: bool) -> Option<Refusal> {
    let run = &record.id;
    let now = SystemTime::now();
    match (record.status, has_input) {
        (RunStatus::Suspended, false) => {
            let wait = record.wait.as_ref()?;
            // A run waiting for its children tries again (they may all be done); one
            // stopped for its budget tries again under the budget it has now.
            if wait.wakes_at().is_some_and(|at| at <= now) || !wait.takes_input() {
                return None;
            }
            if let Some(question) = &wait.question {
                return Some(Refusal {
                    message: format!(
                        "run `{run}` is suspended in `{}` on the MCP server `{}`'s question ({}); answer it with --input: an object that fits its schema (`claij runs show {run}`), \"decline\" or null",
                        wait.state, question.server, question.message
                    ),
                    code: EXIT_USAGE,
                });
            }
            Some(Refusal {
                message: format!(
                    "run `{run}` is suspended in `{}` and waits for an input taking one of: {}; give it with --input (`claij runs show {run}` shows its schema)",
                    wait.state,
                    wait.transitions
                        .iter()
                        .map(|(f, t)| format!("[{f}, {t}]"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                code: EXIT_USAGE,
            })
        }
        (RunStatus::Running, true) => {
            let why = match &record.lease {
                Some(lease) if lease.until > now && !is_dead_local_owner(&lease.owner) => {
                    format!(
                        "it is running in another process (`{}`): another resume won",
                        lease.owner
                    )
                }
                _ => format!(
                    "its process is gone; continue it without --input (`claij runs resume {run}`)"
                ),
            };
            Some(Refusal {
                message: format!(
                    "run `{run}` is running, not suspended: {why}; this input was not used"
                ),
                code: EXIT_FAILED,
            })
        }
        (RunStatus::Suspended, true) => {
            let wait = record.wait.as_ref().filter(|w| !w.takes_input())?;
            let why = match &wait.budget {
                Some(pause) => format!(
                    "stopped for a budget ({pause}), not for an input: continue it without --input (raise the budget with --budget {})",
                    raised(pause)
                ),
                None => format!(
                    "waits for its child runs ({}), not for an input: answer those (`claij runs show {run}`)",
                    wait.children.join(", ")
                ),
            };
            Some(Refusal {
                message: format!(
                    "run `{run}` is suspended in `{}` but {why}; this input was not used",
                    wait.state
                ),
                code: EXIT_USAGE,
            })
        }
        (status, true) if status.is_final() => Some(Refusal {
            message: format!(
                "run `{run}` is {status}, not suspended, so it waits for no input (another resume may have answered it first); this input was not used"
            ),
            code: EXIT_FAILED,
        }),
        _ => None,
    }
}

/// A `--budget` that cannot be set: on a finished run (nothing to spend any more), or on
/// a run stopped for an ancestor's budget (its own would not let it go on).
fn refuse_budget(record: &RunRecord) -> Option<Refusal> {
    let run = &record.id;
    if record.status.is_final() {
        return Some(Refusal {
            message: format!(
                "run `{run}` is not resumable: it is {}; its budget is left as it was",
                record.status
            ),
            code: EXIT_FAILED,
        });
    }
    if let Some(lease) = &record.lease
        && lease.until > SystemTime::now()
        && !is_dead_local_owner(&lease.owner)
    {
        return Some(Refusal {
            message: format!(
                "run `{run}` is running in another process (`{}`), which keeps the budget it started with; its budget is left as it was",
                lease.owner
            ),
            code: EXIT_FAILED,
        });
    }
    let pause = record.wait.as_ref()?.budget.as_deref()?;
    (pause.run != *run).then(|| Refusal {
        message: format!(
            "run `{run}` stopped for the budget of run `{}`, not its own: raise that one (`claij runs resume {} --budget {}`); nothing was changed",
            pause.run,
            pause.run,
            raised(pause)
        ),
        code: EXIT_USAGE,
    })
}

async fn resume_all(app: &App, store: Arc<dyn RunStore>, quiet: bool) -> Result<u8> {
    let candidates = claij_engine::runs_to_continue(store.as_ref()).await?;
    if candidates.is_empty() {
        note!("claij: nothing to resume in {}", store.describe());
        return Ok(EXIT_OK);
    }
    let engine = app.default_engine();
    let mcp = app.mcp();
    let mut worst = EXIT_OK;
    for record in candidates {
        if !quiet {
            note!(
                "claij: resuming run {} ({} in `{}`)",
                record.id,
                record.status,
                record.state
            );
        }
        let fsm = match pinned_fsm(store.as_ref(), &engine, &mcp, &record).await {
            Ok(f) => f,
            Err(e) => {
                note!("claij: run {}: {e:#}", record.id);
                worst = EXIT_FAILED;
                continue;
            }
        };
        let options = RunOptions {
            store: Some(store.clone()),
            observers: observers(None, quiet, None).unwrap_or_default(),
            ..RunOptions::default()
        };
        match engine.resume(fsm, &record.id, None, options).await {
            Ok(outcome) => out!(
                "{}",
                json!({"run_id": outcome.run_id, "status": outcome.status, "state": outcome.state})
            )?,
            Err(e) => {
                note!("claij: run {}: {e}", record.id);
                worst = EXIT_FAILED;
            }
        }
    }
    Ok(worst)
}

async fn interrupt(store: &dyn RunStore, run: &str, wait: Duration) -> Result<u8> {
    let mut record = claij_engine::interrupt(store, run).await?;
    let started = Instant::now();
    while !record.status.is_final() && started.elapsed() < wait {
        tokio::time::sleep(Duration::from_millis(100)).await;
        record = store.run(run).await?;
    }
    if record.status == RunStatus::Interrupted {
        out!("run {run} interrupted in state `{}`", record.state)?;
        Ok(EXIT_OK)
    } else {
        note!(
            "claij: run {run} is {} in `{}`; the interrupt is requested and its process will stop it at its next heartbeat",
            record.status,
            record.state
        );
        Ok(EXIT_FAILED)
    }
}

/// `claij runs resume RUN --input … --submit`: the answer checked and recorded, the run
/// left to the workers.
async fn answer(
    app: &App,
    store: Arc<dyn RunStore>,
    run: &str,
    input_text: &str,
    quiet: bool,
) -> Result<u8> {
    let input = match input::json_argument("input", input_text) {
        Ok(i) => i,
        Err(e) => {
            note!("claij: {e:#}");
            return Ok(EXIT_USAGE);
        }
    };
    let engine = app.default_engine();
    let record = store.run(run).await?;
    let fsm = engine.stored_fsm(store.as_ref(), &record).await?;
    let options = RunOptions {
        store: Some(store.clone()),
        ..RunOptions::default()
    };
    match engine.answer(fsm, run, input, options).await {
        Ok(()) => {
            if !quiet {
                note!(
                    "claij: run {run} answered and queued for a worker (follow it: claij runs wait {run})"
                );
            }
            Ok(EXIT_OK)
        }
        Err(e @ RunError::Input(_)) => {
            note!("claij: {e}");
            Ok(EXIT_USAGE)
        }
        Err(RunError::Store(StoreError::Conflict { reason, .. })) => {
            note!("claij: run `{run}` {reason}; this input was not used");
            Ok(EXIT_FAILED)
        }
        Err(e) => {
            note!("claij: {e}");
            Ok(EXIT_FAILED)
        }
    }
}

/// Whether `record` is suspended for a budget, or waits for runs below it that are: it
/// goes on only once someone raises that budget, so `claij runs wait` stops waiting.
async fn stopped_for_budget(store: &dyn RunStore, record: &claij_core::store::RunRecord) -> bool {
    let Some(wait) = record
        .wait
        .as_ref()
        .filter(|_| record.status == RunStatus::Suspended)
    else {
        return false;
    };
    wait.budget.is_some()
        || (!wait.children.is_empty() && !below(store, &wait.children).await.stopped.is_empty())
}

/// How often `claij runs wait` looks at the run.
const WAIT_POLL: Duration = Duration::from_millis(200);

/// `claij runs wait RUN`: follows the run until it ends (or suspends, when asked), then
/// reports it as `claij run` does.
async fn wait(
    store: Arc<dyn RunStore>,
    run: &str,
    timeout: Option<Duration>,
    until_suspended: bool,
    as_json: bool,
) -> Result<u8> {
    let give_up = timeout.map(|t| tokio::time::Instant::now() + t);
    let record = loop {
        let record = store.run(run).await?;
        let done = record.status.is_final()
            || (until_suspended && record.status == RunStatus::Suspended)
            || stopped_for_budget(store.as_ref(), &record).await;
        if done {
            break record;
        }
        if give_up.is_some_and(|at| tokio::time::Instant::now() >= at) {
            note!(
                "claij: run {run} is still {} in `{}` after {}",
                record.status,
                record.state,
                humantime::format_duration(timeout.unwrap_or_default())
            );
            return Ok(EXIT_SUSPENDED);
        }
        tokio::time::sleep(WAIT_POLL).await;
    };
    if as_json {
        out!("{}", serde_json::to_string(&record)?)?;
        return Ok(match record.status {
            RunStatus::Completed => EXIT_OK,
            RunStatus::Suspended => EXIT_SUSPENDED,
            _ => EXIT_FAILED,
        });
    }
    let outcome = RunOutcome::stored(store.as_ref(), record).await?;
    Ok(report(Ok(outcome), false, Some(store.as_ref()), "").await)
}
