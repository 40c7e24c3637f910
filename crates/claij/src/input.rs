//! Reading JSON arguments: inline text, @FILE or - for stdin.

use std::io::Read;

use anyhow::{Context, Result};
use serde_json::Value;

/// Parses an argument that is JSON text, `@FILE` (JSON or YAML) or `-` (stdin).
pub(crate) fn json_argument(what: &str, arg: &str) -> Result<Value> {
    let (name, text) = if arg == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .with_context(|| format!("reading the {what} from stdin"))?;
        ("<stdin>".to_owned(), text)
    } else if let Some(path) = arg.strip_prefix('@') {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the {what} from {path}"))?;
        (path.to_owned(), text)
    } else {
        return serde_json::from_str(arg).with_context(|| {
            format!("the {what} is not valid JSON (use @FILE to read it from a file)")
        });
    };
    claij_core::source::parse_text(&name, &text)
        .map_err(|d| anyhow::anyhow!("{d}"))
        .with_context(|| format!("the {what} is not valid JSON or YAML"))
}
