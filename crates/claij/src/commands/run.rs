//! `claij run`: run an FSM (or a chain of them) until it ends or suspends, or leave it to
//! workers (`--submit`).

use std::sync::Arc;

use claij_core::Fsm;
use claij_engine::{Engine, RunError, RunOptions, RunStatus, Submission};
use claij_llm::providers::embedded::default_model_file;
use serde_json::Value;

use super::load;
use crate::app::{App, Models};
use crate::cli::RunArgs;
use crate::report::{interrupt_on_ctrl_c, observers, report, settled};
use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, input, store};

/// Runs the FSM in `args.file`.
pub(super) async fn run(app: &App, args: RunArgs) -> u8 {
    let store = match store::open_runs(&args.store).await {
        Ok(s) => s,
        Err(e) => {
            note!("claij: {e:#}");
            return EXIT_USAGE;
        }
    };
    let Models { layer, embedded } = match crate::app::run_models(&args.llm) {
        Ok(m) => m,
        Err(e) => {
            note!("claij: {e:#}");
            return EXIT_USAGE;
        }
    };
    let engine = app.taped_engine(store.is_some(), Arc::new(layer));
    let mcp = app.mcp();
    let mut fsms = Vec::with_capacity(1 + args.then.len());
    for file in std::iter::once(&args.file).chain(&args.then) {
        match load(engine.registry(), file) {
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
        if let Err(e) = mcp.connect(fsm).await {
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
        budget: args.budget,
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
    // The store the report reads the run tree's spend from (the options go to the run).
    let reporting = options.store.clone();
    if args.submit {
        let submission = Submission {
            not_before: args
                .at
                .or_else(|| args.after.map(|d| std::time::SystemTime::now() + d)),
            idempotency_key: args.idempotency_key.clone(),
        };
        if let Some(inputs) = &args.inputs {
            return submit_lines(
                &engine,
                fsms[0].clone(),
                inputs,
                options,
                submission,
                args.quiet,
            )
            .await;
        }
        return submit(
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
    // Taken elsewhere while a question's request was held open (answered after the hold,
    // continued by the process that answered): followed there.
    let result = match (result, reporting.as_deref()) {
        (Ok(outcome), Some(store)) if outcome.status == RunStatus::Running => {
            if !quiet {
                note!(
                    "claij: run {} goes on in another process; following it",
                    outcome.run_id
                );
            }
            settled(store, &outcome.run_id).await
        }
        (result, _) => result,
    };
    report(result, quiet, reporting.as_deref(), &store_hint).await
}

/// `claij run --submit`: the run validated and queued; its id printed.
async fn submit(
    engine: &Engine,
    fsm: Arc<Fsm>,
    input: Value,
    options: RunOptions,
    submission: Submission,
    quiet: bool,
) -> u8 {
    if options.store.is_none() {
        note!("claij: --submit queues the run in a store for workers; `--store memory` has none");
        return EXIT_USAGE;
    }
    // Nothing runs here: no progress to show.
    let options = RunOptions {
        observers: Vec::new(),
        ..options
    };
    match engine.submit(fsm, input, options, submission).await {
        Ok(submitted) => {
            if !quiet {
                if submitted.created {
                    note!(
                        "claij: run {} queued for a worker (follow it: claij runs wait {})",
                        submitted.run_id,
                        submitted.run_id
                    );
                } else {
                    note!(
                        "claij: a run with this idempotency key was submitted before: {}; nothing new was queued",
                        submitted.run_id
                    );
                }
            }
            println!("{}", submitted.run_id);
            EXIT_OK
        }
        Err(e @ RunError::Input(_)) => {
            note!("claij: {e}");
            EXIT_USAGE
        }
        Err(e) => {
            note!("claij: {e}");
            EXIT_FAILED
        }
    }
}

/// `claij run --submit --inputs FILE`: one run per JSON line, each validated and queued;
/// stops at the first line refused (those before it stay queued; the message says which
/// line).
async fn submit_lines(
    engine: &Engine,
    fsm: Arc<Fsm>,
    inputs: &std::path::Path,
    options: RunOptions,
    submission: Submission,
    quiet: bool,
) -> u8 {
    if options.store.is_none() {
        note!("claij: --submit queues runs in a store for workers; `--store memory` has none");
        return EXIT_USAGE;
    }
    let text = match std::fs::read_to_string(inputs) {
        Ok(t) => t,
        Err(e) => {
            note!("claij: cannot read {}: {e}", inputs.display());
            return EXIT_USAGE;
        }
    };
    let mut queued = 0u64;
    let mut n = 0u64;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        n += 1;
        let place = format!("{} line {}", inputs.display(), i + 1);
        let input: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                note!("claij: {place}: not JSON: {e} ({queued} run(s) queued before it)");
                return EXIT_USAGE;
            }
        };
        let options = RunOptions {
            run_id: options.run_id.as_ref().map(|id| format!("{id}-{n}")),
            observers: Vec::new(),
            ..options.clone()
        };
        let submission = Submission {
            idempotency_key: submission
                .idempotency_key
                .as_ref()
                .map(|k| format!("{k}.{n}")),
            ..submission.clone()
        };
        match engine.submit(fsm.clone(), input, options, submission).await {
            Ok(submitted) => {
                queued += u64::from(submitted.created);
                println!("{}", submitted.run_id);
            }
            Err(e) => {
                note!("claij: {place}: {e} ({queued} run(s) queued before it)");
                return if matches!(e, RunError::Input(_)) {
                    EXIT_USAGE
                } else {
                    EXIT_FAILED
                };
            }
        }
    }
    if !quiet {
        note!("claij: {queued} run(s) queued for workers");
    }
    EXIT_OK
}
