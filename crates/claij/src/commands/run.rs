//! `claij run`: run an FSM until it ends or suspends; the pieces `runs resume` shares.

use std::path::Path;
use std::sync::Arc;

use claij_engine::{
    ActionRegistry, Engine, Observer, RunError, RunOptions, RunOutcome, RunStatus, Submission,
};
use serde_json::{Value, json};

use super::load;
use crate::cli::RunArgs;
use crate::progress::{Progress, TrailFile};
use claij_llm::providers::embedded::default_model_file;

use crate::{EXIT_FAILED, EXIT_OK, EXIT_SUSPENDED, EXIT_USAGE, input, store};

/// An engine whose `human` states suspend the run when there is a store to wait in, and
/// ask at the terminal when there is not. Its `llm` states use the model configuration
/// found in the documented places (none when it cannot be read).
pub(super) fn engine(durable: bool) -> Engine {
    let mut layer = claij_llm::LlmLayer::discover(None).unwrap_or_default();
    layer.default_to_embedded(default_model_file());
    engine_with(durable, layer)
}

/// [`engine`] with the given model layer.
pub(super) fn engine_with(durable: bool, layer: claij_llm::LlmLayer) -> Engine {
    engine_sharing(durable, Arc::new(layer))
}

/// [`engine_with`] a model layer the caller keeps too.
pub(super) fn engine_sharing(durable: bool, layer: Arc<claij_llm::LlmLayer>) -> Engine {
    let mut registry = if durable {
        ActionRegistry::durable()
    } else {
        ActionRegistry::with_builtins()
    };
    crate::mcp::register(&mut registry, &layer);
    claij_llm::register(&mut registry, layer);
    Engine::new(Arc::new(registry))
}

/// The model layer of `claij run` (the configuration from --config or the documented
/// places, the run's model, record or replay), and the embedded model's name when it is
/// the model `llm` states use because nothing else is configured.
fn llm_layer(args: &crate::cli::LlmArgs) -> anyhow::Result<(claij_llm::LlmLayer, Option<String>)> {
    let mut layer = claij_llm::LlmLayer::discover(args.exchanges.config.as_deref())?;
    layer.set_run_model(args.model.clone());
    let embedded = layer
        .default_to_embedded(default_model_file())
        .filter(|_| !layer.has_run_model());
    if let Some(path) = &args.exchanges.record {
        layer.set_tape(claij_llm::Tape::record(path));
    }
    if let Some(path) = &args.exchanges.replay {
        layer.set_tape(claij_llm::Tape::replay(path)?);
    }
    Ok((layer, embedded))
}

/// The model layer of `claij prompt`: the configuration from --config or the documented
/// places, the run's model (--model), the embedded default when nothing is configured.
pub(super) fn prompt_layer(args: &crate::cli::PromptArgs) -> anyhow::Result<claij_llm::LlmLayer> {
    let mut layer = claij_llm::LlmLayer::discover(args.config.as_deref())?;
    layer.set_run_model(args.model.clone());
    layer.default_to_embedded(default_model_file());
    Ok(layer)
}

/// Runs the FSM in `args.file`.
pub(super) async fn run(args: RunArgs) -> u8 {
    let store = match store::open(&args.store).await {
        Ok(s) => s,
        Err(e) => {
            note!("claij: {e:#}");
            return EXIT_USAGE;
        }
    };
    let (layer, embedded) = match llm_layer(&args.llm) {
        Ok(l) => l,
        Err(e) => {
            note!("claij: {e:#}");
            return EXIT_USAGE;
        }
    };
    let engine = engine_with(store.is_some(), layer);
    let mut fsms = Vec::with_capacity(1 + args.then.len());
    for file in std::iter::once(&args.file).chain(&args.then) {
        match load(&engine, file) {
            Ok(fsm) => fsms.push(Arc::new(fsm)),
            Err(d) => {
                note!("claij: {d}");
                return EXIT_USAGE;
            }
        }
    }
    if let Some(name) = embedded
        && fsms
            .iter()
            .any(|f| f.states.iter().any(|s| &*s.action == "llm"))
    {
        note!(
            "claij: no model is configured: `llm` states use the embedded model {name} ({}; no key, no network; see docs/MODELS.md)",
            default_model_file().display()
        );
    }
    for fsm in &fsms {
        if let Err(e) = crate::mcp::connect(fsm).await {
            note!("claij: {e}");
            return EXIT_USAGE;
        }
    }
    let input = match input::json_argument("input", &args.input) {
        Ok(v) => v,
        Err(e) => {
            note!("claij: {e:#}");
            return EXIT_USAGE;
        }
    };
    let context = match args
        .context
        .as_deref()
        .map(|c| input::json_argument("context", c))
    {
        None => Value::Null,
        Some(Ok(v @ Value::Object(_))) => v,
        Some(Ok(_)) => {
            note!("claij: the context must be a JSON object");
            return EXIT_USAGE;
        }
        Some(Err(e)) => {
            note!("claij: {e:#}");
            return EXIT_USAGE;
        }
    };
    let observers = match observers(args.trail.as_deref(), args.quiet, None) {
        Ok(o) => o,
        Err(code) => return code,
    };
    if !args.quiet
        && let Some(store) = &store
    {
        note!("claij: keeping the run in {}", store.describe());
    }
    let options = RunOptions {
        run_id: args.run_id,
        context,
        deadline: args.deadline,
        observers,
        store,
        ..RunOptions::default()
    };
    // When the store was named, the hint to resume names it too (described: never a
    // password).
    let store_hint = match (&args.store.store, &options.store) {
        (Some(_), Some(store)) => format!(" --store {}", store.describe()),
        _ => String::new(),
    };
    if args.submit {
        let submission = Submission {
            not_before: args
                .at
                .or_else(|| args.after.map(|d| std::time::SystemTime::now() + d)),
            idempotency_key: args.idempotency_key.clone(),
        };
        if let Some(inputs) = &args.inputs {
            return super::worker::submit_lines(
                &engine,
                fsms[0].clone(),
                inputs,
                options,
                submission,
                args.quiet,
            )
            .await;
        }
        return super::worker::submit(
            &engine,
            fsms[0].clone(),
            input,
            options,
            submission,
            args.quiet,
        )
        .await;
    }
    interrupt_on_ctrl_c(&options);
    let quiet = args.quiet;
    let result = match fsms.as_slice() {
        [fsm] => engine.run(fsm.clone(), input, options).await,
        // A chain: report each run, the last one as the outcome.
        _ => engine
            .chain(&fsms, input, options)
            .await
            .and_then(|mut outs| {
                let last = outs.pop().ok_or_else(|| RunError::NotResumable {
                    run: String::new(),
                    reason: "ran no FSM".into(),
                })?;
                if !quiet {
                    for o in &outs {
                        note!(
                            "claij: chained run {}: {} in `{}`",
                            o.run_id,
                            o.status,
                            o.state
                        );
                    }
                }
                Ok(last)
            }),
    };
    report(result, quiet, &store_hint)
}

/// The observers of a run: the trail file (starting with `earlier` entries, for resumed
/// runs) and progress on stderr.
pub(super) fn observers(
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
pub(super) fn interrupt_on_ctrl_c(options: &RunOptions) {
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
/// `store_hint` (e.g. ` --store sqlite:/tmp/x.db`) goes into the command suggested to
/// resume a suspended run.
pub(super) fn report(result: Result<RunOutcome, RunError>, quiet: bool, store_hint: &str) -> u8 {
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
    let failures = outcome.trail.iter().filter(|e| e.failure.is_some()).count();
    let steps = outcome.trail.len() - failures;
    if !quiet {
        note!(
            "claij: run {} {} in state `{}` after {steps} transition(s) and {failures} failed attempt(s)",
            outcome.run_id,
            outcome.status,
            outcome.state,
        );
        if let Some(totals) = usage_totals(&outcome.trail) {
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
            let waiting: Vec<Value> = outcome
                .wait
                .iter()
                .flat_map(|w| &w.transitions)
                .map(|(from, to)| json!([from, to]))
                .collect();
            let wait = json!({
                "run_id": outcome.run_id,
                "status": "suspended",
                "state": outcome.state,
                "prompt": outcome.wait.as_ref().and_then(|w| w.prompt.clone()),
                "waiting_for": waiting,
                "expires_at": outcome.wait.as_ref().and_then(|w| w.expires_at).map(|t| humantime::format_rfc3339_seconds(t).to_string()),
                "schema": outcome.wait.as_ref().map(|w| &w.schema),
            });
            let children = outcome
                .wait
                .as_ref()
                .map(|w| w.children.clone())
                .unwrap_or_default();
            let mut wait = wait;
            if !children.is_empty() {
                // It waits for child runs (sub-FSMs, branches) waiting for a person: those
                // are what to answer, not the run itself.
                wait["children"] = json!(children);
            }
            println!(
                "{}",
                serde_json::to_string_pretty(&wait).unwrap_or_else(|_| wait.to_string())
            );
            if !quiet && !children.is_empty() {
                note!(
                    "claij: it waits for its child runs {}; answer each with: claij runs resume CHILD{store_hint} --input … (`claij runs show CHILD` says what it waits for); the run continues when they are done",
                    children.join(", ")
                );
            } else if !quiet {
                note!(
                    "claij: continue it with: claij runs resume {}{store_hint} --input '{{\"id\": {}, …}}'",
                    outcome.run_id,
                    waiting.first().map(Value::to_string).unwrap_or_default()
                );
            }
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

/// The run's model usage in one line (`None` when no model was called).
pub(super) fn usage_totals(trail: &[claij_core::TrailEntry]) -> Option<String> {
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
