//! `claij defs`: the FSM definitions runs are pinned to.

use anyhow::{Result, bail};
use claij_core::diff::{Change, ChangeKind, diff_documents};
use claij_core::store::{Definition, RunStore};
use serde_json::json;

use crate::EXIT_OK;
use crate::cli::DefsCommand;

/// Runs a `claij defs` subcommand against `store`.
pub(super) async fn defs(store: &dyn RunStore, command: DefsCommand) -> Result<u8> {
    let all = store.definitions().await?;
    match command {
        DefsCommand::List { json } => {
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
