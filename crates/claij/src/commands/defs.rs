//! `claij defs`: the FSM definitions runs are pinned to.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Result, bail};
use claij_core::diff::{Change, ChangeKind, diff_documents};
use claij_core::store::{Definition, RunStore};
use claij_engine::Engine;
use serde_json::json;

use crate::app::App;
use crate::cli::DefsCommand;
use crate::serving::policy_lines;
use crate::{EXIT_FAILED, EXIT_OK};

/// Runs a `claij defs` subcommand against `store`.
pub(super) async fn defs(app: &App, store: Arc<dyn RunStore>, command: DefsCommand) -> Result<u8> {
    match command {
        DefsCommand::Add { files, json } => add(&app.default_engine(), &store, &files, json).await,
        DefsCommand::List { json } => {
            let all = store.definitions().await?;
            if !json {
                out!("{:<28} {:>7}  {:<12}  STORED", "FSM", "VERSION", "HASH")?;
            }
            for d in &all {
                let stored = humantime::format_rfc3339_seconds(d.created_at).to_string();
                if json {
                    out!(
                        "{}",
                        json!({"fsm": d.fsm_id, "version": d.version, "hash": d.hash, "stored_at": stored})
                    )?;
                } else {
                    out!(
                        "{:<28} {:>7}  {:<12}  {stored}",
                        d.fsm_id,
                        d.version,
                        &d.hash[..d.hash.len().min(12)]
                    )?;
                }
            }
            Ok(EXIT_OK)
        }
        DefsCommand::Show { id, version, hash } => {
            let all = store.definitions().await?;
            let found = all.iter().find(|d| {
                d.fsm_id == id
                    && version.is_none_or(|v| d.version == v)
                    && hash.as_deref().is_none_or(|h| d.hash.starts_with(h))
            });
            let Some(d) = found else {
                bail!(
                    "no stored definition of `{id}`{}{}",
                    version.map(|v| format!(" v{v}")).unwrap_or_default(),
                    hash.map(|h| format!(" with hash {h}…")).unwrap_or_default()
                );
            };
            out!("{}", serde_json::to_string_pretty(&d.document)?)?;
            Ok(EXIT_OK)
        }
        DefsCommand::Diff { id, from, to, json } => {
            let all = store.definitions().await?;
            let (older, newer) = versions(&all, &id, from, to)?;
            let diff = diff_documents(&older.document, &newer.document);
            if json {
                let mut out = serde_json::to_value(&diff)?;
                out["fsm"] = json!(id);
                out["from"] = json!({"version": older.version, "hash": older.hash});
                out["to"] = json!({"version": newer.version, "hash": newer.hash});
                out!("{}", serde_json::to_string_pretty(&out)?)?;
                return Ok(EXIT_OK);
            }
            out!(
                "{id} v{} ({}) → v{} ({})",
                older.version,
                short(&older.hash),
                newer.version,
                short(&newer.hash)
            )?;
            if diff.is_empty() {
                out!("no differences")?;
            }
            for (title, changes) in [
                ("states", &diff.states),
                ("transitions", &diff.transitions),
                ("schemas", &diff.schemas),
                ("document", &diff.document),
            ] {
                if changes.is_empty() {
                    continue;
                }
                out!("{title}:")?;
                for c in changes {
                    out!("  {}", line(c))?;
                }
            }
            Ok(EXIT_OK)
        }
    }
}

/// The two stored versions of `id` to compare: `to` (default: the newest) and `from`
/// (default: the one stored before it).
fn versions<'a>(
    all: &'a [Definition],
    id: &str,
    from: Option<u32>,
    to: Option<u32>,
) -> Result<(&'a Definition, &'a Definition)> {
    let mut mine: Vec<&Definition> = all.iter().filter(|d| d.fsm_id == id).collect();
    mine.sort_by_key(|d| (d.version, d.created_at));
    let listed = || {
        let v: Vec<String> = mine.iter().map(|d| format!("v{}", d.version)).collect();
        if v.is_empty() {
            "none".to_owned()
        } else {
            v.join(", ")
        }
    };
    let pick = |version: u32| mine.iter().rev().copied().find(|d| d.version == version);
    let newer = match to {
        Some(v) => pick(v),
        None => mine.last().copied(),
    };
    let Some(newer) = newer else {
        bail!(
            "no stored definition of `{id}` to compare (stored: {})",
            listed()
        );
    };
    let older = match from {
        Some(v) => pick(v),
        None => mine
            .iter()
            .rev()
            .copied()
            .find(|d| (d.version, d.created_at) < (newer.version, newer.created_at)),
    };
    let Some(older) = older else {
        bail!(
            "no stored definition of `{id}` {} to compare with v{} (stored: {})",
            from.map(|v| format!("v{v}"))
                .unwrap_or_else(|| "before it".to_owned()),
            newer.version,
            listed()
        );
    };
    Ok((older, newer))
}

/// One change as a line: `+ escalate`, `- legacy`, `~ approve: config.prompt, timeout`.
fn line(c: &Change) -> String {
    let mark = match c.change {
        ChangeKind::Added => "+",
        ChangeKind::Removed => "-",
        ChangeKind::Changed => "~",
    };
    if c.fields.is_empty() {
        format!("{mark} {}", c.name)
    } else {
        format!("{mark} {}: {}", c.name, c.fields.join(", "))
    }
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// `claij defs add`: registers each document, applying its `on_new_version` policy.
async fn add(
    engine: &Engine,
    store: &Arc<dyn RunStore>,
    files: &[PathBuf],
    as_json: bool,
) -> Result<u8> {
    let mut failed = false;
    for file in files {
        let fsm = match super::load(engine.registry(), file) {
            Ok(fsm) => fsm,
            Err(d) => {
                note!("claij: {d}");
                failed = true;
                continue;
            }
        };
        let policy = engine.register_version(store, &fsm).await?;
        failed |= !policy.refused.is_empty();
        if as_json {
            out!(
                "{}",
                json!({
                    "fsm": &*fsm.id, "version": fsm.version, "hash": fsm.hash,
                    "on_new_version": fsm.settings.on_new_version,
                    "migrated": policy.moved, "not_migrated": policy.refused,
                })
            )?;
        } else {
            out!(
                "registered {} v{} ({})",
                fsm.id,
                fsm.version,
                short(&fsm.hash)
            )?;
            for line in policy_lines(&fsm, &policy) {
                out!("  {line}")?;
            }
        }
    }
    Ok(if failed { EXIT_FAILED } else { EXIT_OK })
}
