//! `claij runs migrate`: move parked runs to another version of their FSM — a plan per
//! run, printed; then, unless `--dry-run`, each run that can move is moved, atomically.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use claij_core::migration::StateMap;
use claij_core::store::{RunFilter, RunRecord, RunStore, StoreError};
use claij_core::{Fsm, RunStatus};
use claij_engine::Engine;
use claij_engine::migrate::{Moved, Plan};
use serde_json::json;

use crate::app::App;
use crate::cli::MigrateArgs;
use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE};

/// What became of one run.
enum Verdict {
    Moved,
    WouldMove,
    Current,
    Refused,
}

/// Runs `claij runs migrate`.
pub(super) async fn migrate(app: &App, store: Arc<dyn RunStore>, args: MigrateArgs) -> Result<u8> {
    let engine = app.default_engine();
    let target = match target(store.as_ref(), &engine, &args.to).await {
        Ok(found) => found,
        Err(e) => {
            note!("claij: {e:#}");
            return Ok(EXIT_USAGE);
        }
    };
    let map: StateMap = args.map.iter().cloned().collect();
    if let Some((old, new)) = map.iter().find(|(_, new)| target.state(new).is_none()) {
        note!(
            "claij: --map {old}={new}: v{} of `{}` has no state `{new}`",
            target.version,
            target.id
        );
        return Ok(EXIT_USAGE);
    }
    app.mcp().connect(&target).await?;
    let runs = selected(store.as_ref(), &args).await?;
    if runs.is_empty() {
        note!("claij: no runs to move");
        return Ok(EXIT_OK);
    }
    let (mut moved, mut refused, mut current) = (0, 0, 0);
    for run in runs {
        let record = match run {
            Ok(record) => record,
            Err(missing) => {
                refused += 1;
                report_missing(&missing, args.json)?;
                continue;
            }
        };
        let old = engine.stored_fsm(store.as_ref(), &record).await?;
        let mut plan = engine
            .plan_migration(&store, &record, &old, &target, &map)
            .await?;
        let verdict = match (args.dry_run, plan.migration().is_some()) {
            (true, true) => Verdict::WouldMove,
            (true, false) if plan.is_current() => Verdict::Current,
            (true, false) => Verdict::Refused,
            (false, _) => match engine.carry_out(&store, &mut plan).await? {
                Moved::Moved => Verdict::Moved,
                Moved::Current => Verdict::Current,
                Moved::Refused => Verdict::Refused,
            },
        };
        match verdict {
            Verdict::Moved | Verdict::WouldMove => moved += 1,
            Verdict::Current => current += 1,
            Verdict::Refused => refused += 1,
        }
        report(&plan, &verdict, args.json)?;
    }
    if !args.json {
        let verb = if args.dry_run { "would move" } else { "moved" };
        out!(
            "{verb} {moved} run(s) to {} v{}; refused {refused}; already there {current}",
            target.id,
            target.version
        )?;
    }
    Ok(if refused == 0 { EXIT_OK } else { EXIT_FAILED })
}

/// The definition to move to: a document, or a stored definition.
async fn target(store: &dyn RunStore, engine: &Engine, to: &str) -> Result<Arc<Fsm>> {
    let path = Path::new(to);
    if path.is_file() {
        let fsm = crate::commands::load(engine.registry(), path)
            .map_err(|d| anyhow::anyhow!("--to {to}:\n{d}"))?;
        return Ok(Arc::new(fsm));
    }
    let (id, version) = match to.rsplit_once('@') {
        Some((id, version)) => {
            let version: u32 = version
                .parse()
                .with_context(|| format!("--to {to}: `{version}` is not a version number"))?;
            (id, Some(version))
        }
        None => (to, None),
    };
    let newest = store
        .definitions()
        .await?
        .into_iter()
        .filter(|d| d.fsm_id == id && version.is_none_or(|v| d.version == v))
        .max_by_key(|d| (d.version, d.created_at));
    let Some(definition) = newest else {
        bail!(
            "--to {to}: no such file, and no stored definition of `{id}`{} (see `claij defs list`)",
            version.map(|v| format!(" v{v}")).unwrap_or_default()
        );
    };
    Ok(engine
        .stored_definition(store, id, definition.version, &definition.hash)
        .await?)
}

/// The runs asked for, in order: a named run that is not in the store is reported, not
/// fatal.
async fn selected(
    store: &dyn RunStore,
    args: &MigrateArgs,
) -> Result<Vec<Result<RunRecord, String>>> {
    if let Some(fsm) = &args.fsm {
        let statuses = if args.statuses.is_empty() {
            vec![RunStatus::Suspended, RunStatus::Running]
        } else {
            args.statuses.clone()
        };
        let filter = RunFilter {
            statuses,
            fsm_id: Some(fsm.clone()),
            ..RunFilter::default()
        };
        let mut runs = store.runs(&filter).await?;
        // Oldest first: the order they were parked in.
        runs.reverse();
        return Ok(runs.into_iter().map(Ok).collect());
    }
    let mut out = Vec::new();
    for id in &args.runs {
        match store.run(id).await {
            Ok(record) => out.push(Ok(record)),
            Err(StoreError::NotFound { .. }) => out.push(Err(id.clone())),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(out)
}

fn report(plan: &Plan, verdict: &Verdict, as_json: bool) -> Result<()> {
    let word = match verdict {
        Verdict::Moved => "moved",
        Verdict::WouldMove => "would move",
        Verdict::Current => "already there",
        Verdict::Refused => "refused",
    };
    if as_json {
        let mut line = serde_json::to_value(plan)?;
        line["outcome"] = json!(word);
        out!("{line}")?;
        return Ok(());
    }
    let state = if plan.from.state == plan.to.state {
        plan.from.state.clone()
    } else {
        format!("{} → {}", plan.from.state, plan.to.state)
    };
    out!(
        "{}  {}  v{} → v{}  {state}  {word}",
        plan.run,
        plan.status,
        plan.from.version,
        plan.to.version
    )?;
    for change in &plan.changes {
        out!("  + {}: {}", change.at, change.message)?;
    }
    for refusal in &plan.refusals {
        out!("  ✗ {}: {}", refusal.at, refusal.message)?;
    }
    for child in &plan.children {
        out!(
            "  child {}  v{} → v{}  {}",
            child.run,
            child.from.version,
            child.to.version,
            child.to.state
        )?;
        for change in &child.changes {
            out!("    + {}: {}", change.at, change.message)?;
        }
    }
    Ok(())
}

fn report_missing(run: &str, as_json: bool) -> Result<()> {
    let message = "is not in the store";
    if as_json {
        out!(
            "{}",
            json!({"run": run, "outcome": "refused", "refusals": [{"at": "run", "message": message}]})
        )?;
    } else {
        out!("{run}  refused\n  ✗ run: {message}")?;
    }
    Ok(())
}
