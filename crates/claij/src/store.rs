//! Opening the store named on the command line: one store, whose roles the commands hand
//! to the surfaces that use them.

use std::sync::Arc;

use anyhow::{Context, Result};
use claij_core::store::{Durability, RunStore};
use claij_store::roles::Store;

use crate::cli::{DurabilityArg, StoreArgs};

/// The store to use: `None` for `--store memory`.
pub(crate) async fn open(args: &StoreArgs) -> Result<Option<Arc<dyn Store>>> {
    let durability = match args.durability {
        DurabilityArg::Normal => Durability::Normal,
        DurabilityArg::Strict => Durability::Strict,
    };
    let url = match args.store.as_deref() {
        Some("memory") | Some("none") => return Ok(None),
        Some(url) => url.to_owned(),
        None => claij_store::default_sqlite_path().display().to_string(),
    };
    let store = claij_store::open(&url, durability)
        .await
        .with_context(|| format!("cannot open the store {}", redact(&url)))?;
    Ok(Some(store))
}

/// The store's core roles, for the commands that use nothing else (`None` for `--store
/// memory`).
pub(crate) async fn open_runs(args: &StoreArgs) -> Result<Option<Arc<dyn RunStore>>> {
    Ok(open(args)
        .await?
        .map(|store| -> Arc<dyn RunStore> { store }))
}

/// The store that `runs` and `defs` commands need (`memory` makes no sense there).
pub(crate) async fn open_required(args: &StoreArgs) -> Result<Arc<dyn Store>> {
    open(args)
        .await?
        .context("this command needs a store; `--store memory` keeps nothing to look at")
}

/// A store URL without its password, for messages: the password of the user part
/// (everything between the first `:` after `://` and the last `@`, so a password that
/// holds `@`, `/` or `?` is hidden whole) and any `password=` query parameter.
fn redact(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(scheme) = out.find("://") {
        let rest = scheme + 3;
        if let Some(at) = out[rest..].rfind('@').map(|at| rest + at)
            && let Some(colon) = out[rest..at].find(':').map(|c| rest + c)
        {
            out.replace_range(colon + 1..at, "***");
        }
    }
    let mut from = 0;
    while let Some(found) = out[from..].to_ascii_lowercase().find("password=") {
        let key = from + found;
        let value = key + "password=".len();
        let end = out[value..].find('&').map_or(out.len(), |e| value + e);
        if key > 0 && matches!(out.as_bytes()[key - 1], b'?' | b'&') {
            out.replace_range(value..end, "***");
            from = value + 3;
        } else {
            from = value;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            super::redact("postgres://ada:s3cret@db:5432/claij"),
            "postgres://ada:***@db:5432/claij"
        );
        assert_eq!(super::redact("/tmp/claij.db"), "/tmp/claij.db");
        for (url, shown) in [
            (
                "postgres://ada:p@ss/w?rd@db/claij",
                "postgres://ada:***@db/claij",
            ),
            (
                "postgres://ada@db/claij?sslmode=disable&password=s3cret&x=1",
                "postgres://ada@db/claij?sslmode=disable&password=***&x=1",
            ),
            (
                "postgresql://ada@db/claij?PASSWORD=s3cret",
                "postgresql://ada@db/claij?PASSWORD=***",
            ),
            (
                "postgres://db/claij?mypassword=x",
                "postgres://db/claij?mypassword=x",
            ),
            ("sqlite:/tmp/claij.db", "sqlite:/tmp/claij.db"),
        ] {
            assert_eq!(super::redact(url), shown, "{url}");
        }
    }
}
