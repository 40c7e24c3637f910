//! `claij graph`: draw an FSM as DOT, Mermaid or SVG.

use std::path::Path;

use claij_engine::ActionRegistry;

use super::load;
use crate::cli::GraphFormat;
use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE};

/// Draws the FSM in `file`.
pub(super) fn graph(
    registry: &ActionRegistry,
    file: &Path,
    format: GraphFormat,
    output: Option<&Path>,
) -> u8 {
    let fsm = match load(registry, file) {
        Ok(fsm) => fsm,
        Err(d) => {
            note!("claij: {d}");
            return EXIT_USAGE;
        }
    };
    let bytes = match format {
        GraphFormat::Dot => claij_core::graph::to_dot(&fsm).into_bytes(),
        GraphFormat::Mermaid => claij_core::graph::to_mermaid(&fsm).into_bytes(),
        GraphFormat::Svg => match render_svg(&claij_core::graph::to_dot(&fsm)) {
            Ok(svg) => svg,
            Err(message) => {
                note!("claij: {message}");
                return EXIT_FAILED;
            }
        },
    };
    let written = match output {
        Some(path) => std::fs::write(path, &bytes),
        None => {
            use std::io::Write;
            std::io::stdout().write_all(&bytes)
        }
    };
    match written {
        Ok(()) => EXIT_OK,
        Err(e) => {
            note!("claij: cannot write the graph: {e}");
            EXIT_FAILED
        }
    }
}

/// Renders DOT to SVG with Graphviz's `dot`.
fn render_svg(dot: &str) -> Result<Vec<u8>, String> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => "SVG output needs Graphviz's `dot` program, which is not on PATH; install Graphviz (e.g. `apt-get install graphviz`), or use --format dot or --format mermaid".to_owned(),
            _ => format!("cannot run Graphviz `dot`: {e}"),
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(dot.as_bytes())
            .map_err(|e| format!("cannot feed Graphviz `dot`: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("Graphviz `dot` failed: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "Graphviz `dot` rejected the graph: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out.stdout)
}
