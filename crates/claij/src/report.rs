//! How the CLI tells of runs: the observers of a run (trail file, progress), Ctrl-C, the
//! outcome report (result, what a suspended run waits for and how to continue it, the
//! model usage), the runs below a waiting run, a larger budget for a stopped one, and the
//! queue in one line. Shared by `claij run`, `claij runs` and `claij worker`.

use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use claij_core::{Budget, BudgetPause, Limit, RunStore, Spend};
use claij_engine::{Observer, RunError, RunOptions, RunOutcome, RunStatus};
use serde_json::{Value, json};

use crate::progress::{Progress, TrailFile};
use crate::{EXIT_FAILED, EXIT_OK, EXIT_SUSPENDED, EXIT_USAGE};

/// A run another process drives, once it ends or suspends.
pub(crate) async fn settled(store: &dyn RunStore, run: &str) -> Result<RunOutcome, RunError> {
    let never = tokio_util::sync::CancellationToken::new();
    Ok(RunOutcome::settled(store, run, &never).await?)
}

/// The observers of a run: the trail file (starting with `earlier` entries, for resumed
/// runs) and progress on stderr.
pub(crate) fn observers(
    trail: Option<&Path>,
    quiet: bool,
    earlier: Option<&[claij_core::TrailEntry]>,
) -> Result<Vec<Arc<dyn Observer>>, u8> {
    let mut observers: Vec<Arc<dyn Observer>> = Vec::new();
    if let Some(path) = trail {
        match TrailFile::create(path) {
            Ok(t) => {
                for entry in earlier.unwrap_or_default() {
                    t.entry_appended("", entry);
                }
                observers.push(Arc::new(t));
            }
            Err(e) => {
                note!(
                    "claij: cannot create the trail file {}: {e}",
                    path.display()
                );
                return Err(EXIT_USAGE);
            }
        }
    }
    if !quiet {
        observers.push(Arc::new(Progress::new()));
    }
    Ok(observers)
}

/// Ctrl-C interrupts the run cleanly; a second one quits at once.
pub(crate) fn interrupt_on_ctrl_c(options: &RunOptions) {
    let cancel = options.cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
            note!("\nclaij: interrupting the run (Ctrl-C again to quit at once)");
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        }
    });
}

/// Prints how a run ended (the result on stdout) and returns the exit status.
/// `store` (the run's, when it has one) gives the run tree's spend and what its child runs
/// wait for; `store_hint` (e.g. ` --store sqlite:/tmp/x.db`) goes into the commands
/// suggested to resume a suspended run.
pub(crate) async fn report(
    result: Result<RunOutcome, RunError>,
    quiet: bool,
    store: Option<&dyn RunStore>,
    store_hint: &str,
) -> u8 {
    let outcome = match result {
        Ok(o) => o,
        Err(e @ RunError::Input(_)) => {
            note!("claij: {e}");
            return EXIT_USAGE;
        }
        Err(e) => {
            note!("claij: {e}");
            return EXIT_FAILED;
        }
    };
    // Pauses (for a budget, a server's question, its answer) are neither.
    let steps = outcome.trail.iter().filter(|e| e.is_transition()).count();
    let failures = outcome
        .trail
        .iter()
        .filter(|e| e.failure.is_some() && !claij_core::budget::is_pause(e))
        .count();
    if !quiet {
        note!(
            "claij: run {} {} in state `{}` after {steps} transition(s) and {failures} failed attempt(s)",
            outcome.run_id,
            outcome.status,
            outcome.state,
        );
        if let Some(totals) = usage_line(&outcome, store).await {
            note!("claij: {totals}");
        }
    }
    match outcome.status {
        RunStatus::Completed => {
            let result = outcome.result.unwrap_or(Value::Null);
            println!(
                "{}",
                serde_json::to_string_pretty(&result).unwrap_or_else(|_| result.to_string())
            );
            EXIT_OK
        }
        RunStatus::Suspended => {
            report_suspended(&outcome, quiet, store, store_hint).await;
            EXIT_SUSPENDED
        }
        _ => {
            if let Some(f) = outcome.trail.iter().rev().find_map(|e| e.failure.as_ref()) {
                note!("claij: last failure ({}): {}", f.kind, f.message);
                for e in &f.errors {
                    note!("  {e}");
                }
            }
            EXIT_FAILED
        }
    }
}

/// Prints what a suspended run waits for (JSON on stdout) and, unless `quiet`, how to
/// continue it on stderr: its input, its child runs' inputs, or a larger budget.
async fn report_suspended(
    outcome: &RunOutcome,
    quiet: bool,
    store: Option<&dyn RunStore>,
    store_hint: &str,
) {
    let pause = outcome.wait.as_ref().and_then(|w| w.budget.as_deref());
    // A run stopped for its budget takes no input: it waits for no transition.
    let waiting: Vec<Value> = outcome
        .wait
        .iter()
        .filter(|_| pause.is_none())
        .flat_map(|w| &w.transitions)
        .map(|(from, to)| json!([from, to]))
        .collect();
    let mut wait = json!({
        "run_id": outcome.run_id,
        "status": "suspended",
        "state": outcome.state,
        "prompt": outcome.wait.as_ref().and_then(|w| w.prompt.clone()),
        "waiting_for": waiting,
        "expires_at": outcome.wait.as_ref().and_then(|w| w.expires_at).map(|t| humantime::format_rfc3339_seconds(t).to_string()),
        "schema": outcome.wait.as_ref().filter(|_| pause.is_none()).map(|w| &w.schema),
    });
    let children = outcome
        .wait
        .as_ref()
        .map(|w| w.children.clone())
        .unwrap_or_default();
    if !children.is_empty() {
        // It waits for child runs (sub-FSMs, branches) waiting for a person or stopped for
        // a budget: those are what to answer, not the run itself.
        wait["children"] = json!(children);
    }
    if let Some(pause) = pause {
        wait["budget"] = serde_json::to_value(pause).unwrap_or(Value::Null);
    }
    if let Some(question) = outcome.wait.as_ref().and_then(|w| w.question.as_deref()) {
        wait["question"] = json!({"server": question.server, "message": question.message});
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&wait).unwrap_or_else(|_| wait.to_string())
    );
    if quiet {
        return;
    }
    if let Some(pause) = pause {
        note!(
            "claij: run {} stopped for a budget: {pause}",
            outcome.run_id
        );
        note!(
            "claij: raise it and continue with: claij runs resume {}{store_hint} --budget {}",
            pause.run,
            raised(pause)
        );
        return;
    }
    if let Some(question) = outcome.wait.as_ref().and_then(|w| w.question.as_deref()) {
        note!(
            "claij: the MCP server `{}` asks: {}",
            question.server,
            question.message
        );
        note!(
            "claij: answer it with: claij runs resume {}{store_hint} --input '{{…}}' (an object that fits the schema above), --input '\"decline\"' or --input null (cancel)",
            outcome.run_id
        );
        return;
    }
    if children.is_empty() {
        note!(
            "claij: continue it with: claij runs resume {}{store_hint} --input '{{\"id\": {}, …}}'",
            outcome.run_id,
            waiting.first().map(Value::to_string).unwrap_or_default()
        );
        return;
    }
    let below = match store {
        Some(store) => below(store, &children).await,
        None => Below::default(),
    };
    if below.stopped.is_empty() {
        note!(
            "claij: it waits for its child runs {}; answer each with: claij runs resume CHILD{store_hint} --input … (`claij runs show CHILD` says what it waits for); the run continues when they are done",
            children.join(", ")
        );
        return;
    }
    for (run, pause) in &below.stopped {
        note!("claij: child run {run} stopped for a budget: {pause}");
    }
    for (owner, budget) in below.raises() {
        note!(
            "claij: raise it and continue with: claij runs resume {owner}{store_hint} --budget {budget}"
        );
    }
    if !below.asking.is_empty() {
        note!(
            "claij: child runs waiting for an input: {}; answer each with: claij runs resume CHILD{store_hint} --input … (`claij runs show CHILD` says what it waits for)",
            below.asking.join(", ")
        );
    }
}

/// What the runs below a run waiting for its children wait for.
#[derive(Debug, Default)]
pub(crate) struct Below {
    /// The runs stopped for a budget, with why (the budget named in each: the run's own
    /// or an ancestor's).
    pub(crate) stopped: Vec<(String, BudgetPause)>,
    /// The runs waiting for an input (a person's answer, a webhook's call).
    pub(crate) asking: Vec<String>,
}

impl Below {
    /// For each run whose budget stopped runs below: that run and a budget that lets them
    /// all go on (each limit crossed raised, see [`raised`]).
    pub(crate) fn raises(&self) -> Vec<(String, Budget)> {
        let mut raises: Vec<(String, Budget)> = Vec::new();
        for (_, pause) in &self.stopped {
            let more = raised(pause);
            match raises.iter_mut().find(|(owner, _)| *owner == pause.run) {
                Some((_, budget)) => *budget = larger(budget, &more),
                None => raises.push((pause.run.clone(), more)),
            }
        }
        raises
    }
}

/// How many runs below a run [`below`] looks at, at most (a guard against a huge fan-out).
const BELOW_AT_MOST: usize = 1000;

/// What the runs below `children` (a waiting run's children, theirs, …) wait for, as the
/// store has them; runs it cannot read are left out.
pub(crate) async fn below(store: &dyn RunStore, children: &[String]) -> Below {
    let mut found = Below::default();
    let mut queue: std::collections::VecDeque<String> = children.iter().cloned().collect();
    let mut seen = std::collections::HashSet::new();
    while let Some(id) = queue.pop_front() {
        if seen.len() >= BELOW_AT_MOST || !seen.insert(id.clone()) {
            continue;
        }
        let Ok(record) = store.run(&id).await else {
            continue;
        };
        let Some(wait) = record
            .wait
            .filter(|_| record.status == RunStatus::Suspended)
        else {
            continue;
        };
        if let Some(pause) = wait.budget {
            found.stopped.push((id, *pause));
        } else if wait.takes_input() {
            found.asking.push(id);
        } else {
            queue.extend(wait.children);
        }
    }
    found
}

/// A budget that lets a run stopped by `pause` go on: the limit it crossed doubled (more
/// than once when that is still not more than what the run needs), the others left out
/// (`claij runs resume --budget` keeps the run's other limits).
pub(crate) fn raised(pause: &BudgetPause) -> Budget {
    let mut needed = pause.spent;
    needed.add_calls(&pause.asked);
    let limits = &pause.budget;
    let doubled = |limit: Option<u64>, floor: u64, needed: u64| {
        let mut n = limit.unwrap_or(0).max(floor);
        loop {
            n = n.saturating_mul(2);
            if n > needed || n == u64::MAX {
                return Some(n);
            }
        }
    };
    match pause.limit {
        Limit::Tokens => Budget {
            tokens: doubled(limits.tokens, 500, needed.tokens()),
            ..Budget::default()
        },
        Limit::Calls => Budget {
            calls: doubled(limits.calls, 1, needed.calls),
            ..Budget::default()
        },
        Limit::Time => Budget {
            time_ms: doubled(limits.time_ms, 500, needed.time_ms),
            ..Budget::default()
        },
        Limit::Cost => {
            // In hundredths of a cent: a limit that prints short and reads back as is.
            let units = |usd: f64| (usd * 10_000.0).clamp(0.0, 1e15);
            let limit = limits.cost_usd.map(|l| units(l).round() as u64);
            Budget {
                cost_usd: doubled(limit, 1, units(needed.cost_usd).ceil() as u64)
                    .map(|u| u as f64 / 10_000.0),
                ..Budget::default()
            }
        }
    }
}

/// Each limit of `a` and `b`, the larger where both set one.
fn larger(a: &Budget, b: &Budget) -> Budget {
    fn max<T: PartialOrd>(a: Option<T>, b: Option<T>) -> Option<T> {
        match (a, b) {
            (Some(a), Some(b)) => Some(if b > a { b } else { a }),
            (a, b) => a.or(b),
        }
    }
    Budget {
        tokens: max(a.tokens, b.tokens),
        cost_usd: max(a.cost_usd, b.cost_usd),
        calls: max(a.calls, b.calls),
        time_ms: max(a.time_ms, b.time_ms),
    }
}

/// The run's model usage in one line (`None` when no model was called): with a store,
/// the whole run tree's (the run and every run below it, from the store), else the run's
/// own trail's.
async fn usage_line(outcome: &RunOutcome, store: Option<&dyn RunStore>) -> Option<String> {
    let Some(store) = store else {
        return usage_totals(&outcome.trail);
    };
    match store.tree_spend(&outcome.run_id).await {
        Ok(tree) => tree_usage(&tree, &outcome.spend, &outcome.trail),
        Err(_) => usage_totals(&outcome.trail),
    }
}

/// The usage line of a run tree that spent `tree` (the run alone: `own`; its own trail:
/// `trail`, for what only trails keep: cached tokens, retries, calls without a price).
fn tree_usage(tree: &Spend, own: &Spend, trail: &[claij_core::TrailEntry]) -> Option<String> {
    if tree.calls == 0 && tree.tokens() == 0 {
        return None;
    }
    let mut line = format!("models: {tree}");
    if tree.calls != own.calls || tree.tokens() != own.tokens() {
        line.push_str(" (the run and the runs below it)");
    }
    let u = claij_core::trail::total_usage(trail);
    if let Some(c) = u.cached_tokens {
        line.push_str(&format!(", {c} input token(s) cached"));
    }
    if u.cost_usd.is_none() && trail.iter().any(|e| e.usage.is_some()) {
        line.push_str(", cost unknown for calls without a price (none configured)");
    }
    if let Some(r) = u.http_retries {
        line.push_str(&format!(", {r} transient failure(s) retried"));
    }
    Some(line)
}

/// The run's model usage in one line from its trail (`None` when no model was called):
/// for runs without a store.
pub(crate) fn usage_totals(trail: &[claij_core::TrailEntry]) -> Option<String> {
    let calls = trail.iter().filter(|e| e.usage.is_some()).count();
    if calls == 0 {
        return None;
    }
    let u = claij_core::trail::total_usage(trail);
    let mut line = format!("models: {calls} call(s), {} input token(s)", u.input_tokens);
    if let Some(c) = u.cached_tokens {
        line.push_str(&format!(" ({c} cached)"));
    }
    line.push_str(&format!(", {} output token(s)", u.output_tokens));
    match u.cost_usd {
        Some(c) => line.push_str(&format!(", ${c:.6}")),
        None => line.push_str(", cost unknown (no price configured)"),
    }
    if let Some(r) = u.http_retries {
        line.push_str(&format!(", {r} transient failure(s) retried"));
    }
    Some(line)
}

/// The queue in one line: `queue: 3 waiting for a worker (oldest since …), …`.
pub(crate) fn queue_line(queue: &claij_store::roles::QueueStats) -> String {
    let oldest = queue
        .oldest_queued
        .map(|t| format!(" (oldest created {})", at(t)))
        .unwrap_or_default();
    let next = queue
        .next_timer
        .map(|t| format!(", next at {}", at(t)))
        .unwrap_or_default();
    format!(
        "queue: {} waiting for a worker{oldest}, {} being driven, {} scheduled, {} timer(s) due, {} to come{next}",
        queue.queued, queue.held, queue.scheduled, queue.timers_due, queue.timers_pending
    )
}

/// `time` in RFC 3339, to the second.
pub(crate) fn at(time: SystemTime) -> String {
    humantime::format_rfc3339_seconds(time).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pause(limit: Limit, budget: Budget, spent: Spend, asked: Spend) -> BudgetPause {
        BudgetPause {
            run: "r".into(),
            limit,
            budget,
            spent,
            asked,
            model: None,
        }
    }

    #[test]
    fn a_crossed_limit_is_raised_past_what_the_run_needs_and_reads_back() {
        let cost = pause(
            Limit::Cost,
            Budget {
                cost_usd: Some(0.5),
                calls: Some(9),
                ..Budget::default()
            },
            Spend {
                cost_usd: 0.45,
                ..Spend::default()
            },
            Spend {
                cost_usd: 0.1,
                calls: 1,
                ..Spend::default()
            },
        );
        let more = raised(&cost);
        assert_eq!(more.to_string(), "cost=1");
        assert_eq!(Budget::parse(&more.to_string()), Ok(more));
        // Doubling once is not enough: 0.5 → 1 → 2 → 4 > 3.2.
        let far = pause(
            Limit::Cost,
            Budget {
                cost_usd: Some(0.5),
                ..Budget::default()
            },
            Spend {
                cost_usd: 3.2,
                ..Spend::default()
            },
            Spend::default(),
        );
        assert_eq!(raised(&far).cost_usd, Some(4.0));
        let time = pause(
            Limit::Time,
            Budget {
                time_ms: Some(600_000),
                ..Budget::default()
            },
            Spend {
                time_ms: 600_010,
                ..Spend::default()
            },
            Spend::default(),
        );
        assert_eq!(raised(&time).to_string(), "time=20m");
        let calls = pause(
            Limit::Calls,
            Budget {
                calls: Some(0),
                ..Budget::default()
            },
            Spend::default(),
            Spend {
                calls: 1,
                ..Spend::default()
            },
        );
        assert_eq!(raised(&calls).calls, Some(2));
        let tokens = pause(
            Limit::Tokens,
            Budget {
                tokens: Some(200_000),
                ..Budget::default()
            },
            Spend {
                input_tokens: 199_000,
                ..Spend::default()
            },
            Spend {
                input_tokens: 4_000,
                calls: 1,
                ..Spend::default()
            },
        );
        assert_eq!(raised(&tokens).tokens, Some(400_000));
    }

    #[test]
    fn the_usage_line_says_when_it_counts_the_runs_below() {
        let own = Spend {
            input_tokens: 10,
            output_tokens: 2,
            calls: 1,
            cost_usd: 0.001,
            time_ms: 1500,
            ..Spend::default()
        };
        let mut tree = own;
        tree.add(&Spend {
            input_tokens: 5,
            calls: 1,
            waiting_ms: 120_000,
            ..Spend::default()
        });
        let alone = tree_usage(&own, &own, &[]).unwrap_or_default();
        assert_eq!(
            alone,
            "models: 12 tokens (10 in, 2 out), $0.001000, 1 call(s), 1.5s running"
        );
        let with = tree_usage(&tree, &own, &[]).unwrap_or_default();
        assert!(
            with.starts_with("models: 17 tokens (15 in, 2 out), $0.001000, 2 call(s), 1.5s running, 2m waiting (the run and the runs below it)"),
            "{with}"
        );
        assert_eq!(tree_usage(&Spend::default(), &Spend::default(), &[]), None);
    }
}
