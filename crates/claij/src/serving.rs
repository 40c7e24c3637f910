//! What the commands that serve share: the documents named (files and folders), the
//! secrets given by file or environment (the API token), stopping on signals, and the
//! registration of the documents a server starts with.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use claij_core::Fsm;
use claij_core::store::RunStore;
use claij_engine::Engine;
use claij_engine::migrate::VersionPolicy;
use claij_server::ApiToken;
use tokio_util::sync::CancellationToken;

use crate::cli::TokenArgs;

/// The documents named: files, and the `*.yaml`, `*.yml` and `*.json` files of folders.
pub(crate) fn documents(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.is_file()
                        && p.extension()
                            .and_then(|e| e.to_str())
                            .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
                })
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

/// A secret from its file (`--…-file`) or its environment variable, if given.
pub(crate) fn secret(
    file: Option<&Path>,
    env: Option<&String>,
    what: &str,
) -> anyhow::Result<Option<String>> {
    match (file, env) {
        (Some(file), _) => std::fs::read_to_string(file)
            .map(Some)
            .map_err(|e| anyhow::anyhow!("cannot read the {what} file {}: {e}", file.display())),
        (None, env) => Ok(env.cloned()),
    }
}

/// The API token from --token-file or CLAIJ_API_TOKEN (`claij serve`, `claij mcp serve`).
pub(crate) fn token(args: &TokenArgs) -> anyhow::Result<Option<ApiToken>> {
    let secret = secret(args.token_file.as_deref(), args.token_env.as_ref(), "token")?;
    Ok(secret.map(|s| ApiToken::new(&s)).transpose()?)
}

/// Ctrl-C or SIGTERM stop the HTTP server gracefully.
pub(crate) fn stop_on_signals(shutdown: CancellationToken) {
    tokio::spawn(async move {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term => {}
        }
        shutdown.cancel();
    });
}

/// What a registration's `on_new_version` policy did, as lines for people.
pub(crate) fn policy_lines(fsm: &Fsm, policy: &VersionPolicy) -> Vec<String> {
    let mut lines = Vec::new();
    if !policy.moved.is_empty() {
        let runs: Vec<&str> = policy.moved.iter().map(|p| p.run.as_str()).collect();
        lines.push(format!(
            "moved {} parked run(s) to v{}: {}",
            runs.len(),
            fsm.version,
            runs.join(", ")
        ));
    }
    for plan in &policy.refused {
        lines.push(format!(
            "{} stays on v{}: {}",
            plan.run,
            plan.from.version,
            plan.refusals
                .iter()
                .map(|r| format!("{}: {}", r.at, r.message))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    lines
}

/// Registers the documents a server was started with whose `on_new_version` is
/// `migrate`, so that their policy reaches the parked runs of older versions; what it did
/// is said on stderr. Other documents are stored when their runs start, as before.
pub(crate) async fn register_served(
    engine: &Engine,
    store: &Arc<dyn RunStore>,
    fsms: &[Arc<Fsm>],
) -> Result<()> {
    for fsm in fsms
        .iter()
        .filter(|f| f.settings.on_new_version == claij_core::OnNewVersion::Migrate)
    {
        let policy = engine.register_version(store, fsm).await?;
        for line in policy_lines(fsm, &policy) {
            note!("claij: {} v{}: {line}", fsm.id, fsm.version);
        }
    }
    Ok(())
}
