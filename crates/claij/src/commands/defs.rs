//! `claij defs`: the FSM definitions runs are pinned to.

use anyhow::{Result, bail};
use claij_core::store::RunStore;
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
    }
}
