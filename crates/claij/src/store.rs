//! Opening the store named on the command line.

use std::sync::Arc;

use anyhow::{Context, Result};
use claij_core::store::{Durability, RunStore};

use crate::cli::{DurabilityArg, StoreArgs};

/// The store to use: `None` for `--store memory`.
pub async fn open(args: &StoreArgs) -> Result<Option<Arc<dyn RunStore>>> {
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

/// The store that `runs` and `defs` commands need (`memory` makes no sense there).
pub async fn open_required(args: &StoreArgs) -> Result<Arc<dyn RunStore>> {
    open(args)
        .await?
        .context("this command needs a store; `--store memory` keeps nothing to look at")
}

/// A store URL without its password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
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
    }
}
