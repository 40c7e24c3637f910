//! `claij eval`: one workflow, many models, one table. Assembles an engine per model
//! (its model layer with that run model, the tape), the store and the judges, hands them
//! to claij-eval, shows progress, prints the table and writes the reports.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use claij_core::prompts::Prompting;
use claij_engine::{CancellationToken, Engine};
use claij_eval::{CaseResult, Eval, ModelUnderTest, Progress, Report};
use claij_llm::providers::embedded::EMBEDDED_PROVIDER;
use claij_llm::{LlmLayer, Tape};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

use super::load;
use crate::app::App;
use crate::cli::{Baseline, EvalArgs};
use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, store};

/// What names a model's rows asked plainly (`--baseline plain`): `MODEL (plain)`.
const PLAIN_SUFFIX: &str = "(plain)";

/// How `--record` is done with one model layer per model: each layer records to a part
/// file of its own; the parts are merged into the tape at the end.
struct Recording {
    tape: PathBuf,
    parts: Vec<PathBuf>,
}

impl Recording {
    fn part(&mut self) -> Tape {
        let path = self
            .tape
            .with_extension(format!("part{}.json", self.parts.len()));
        let tape = Tape::record(&path);
        self.parts.push(path);
        tape
    }

    /// Writes every part's exchanges into the tape, and removes the parts.
    fn merge(&self) -> Result<usize> {
        let mut exchanges: Vec<Value> = Vec::new();
        for part in &self.parts {
            let Ok(text) = std::fs::read_to_string(part) else {
                continue; // that layer made no call
            };
            let file: Value = serde_json::from_str(&text)
                .with_context(|| format!("reading the recorded part {}", part.display()))?;
            if let Some(Value::Array(items)) = file.get("exchanges") {
                exchanges.extend(items.iter().cloned());
            }
            let _ = std::fs::remove_file(part);
        }
        let n = exchanges.len();
        let file = json!({"claij_exchanges": 1, "exchanges": exchanges});
        std::fs::write(&self.tape, serde_json::to_string_pretty(&file)? + "\n")
            .with_context(|| format!("writing the tape {}", self.tape.display()))?;
        Ok(n)
    }
}

/// One model layer: `base`'s providers and configuration (shared with the other
/// models'), `model` as its model (the default when `None`), the tape. Returns it with
/// the model's name and its provider's.
fn layer(
    args: &EvalArgs,
    base: &LlmLayer,
    model: Option<&str>,
    recording: Option<&mut Recording>,
) -> Result<(LlmLayer, String, String)> {
    let mut layer = base.sibling();
    layer.prefer(model.map(str::to_owned));
    let resolved = layer.for_run(None).map_err(anyhow::Error::msg)?;
    if let Some(recording) = recording {
        layer.set_tape(recording.part());
    }
    if let Some(path) = &args.exchanges.replay {
        layer.set_tape(Tape::replay(path)?);
    }
    Ok((layer, resolved.name, resolved.provider.name().to_owned()))
}

/// The progress of the eval on stderr: a bar on a terminal, a line per run otherwise.
struct EvalProgress {
    bar: Option<ProgressBar>,
    done: std::sync::atomic::AtomicUsize,
    total: std::sync::atomic::AtomicUsize,
}

impl EvalProgress {
    fn new() -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(0);
            bar.set_style(
                ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
                    .map(|s| s.progress_chars("=> "))
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Self {
            bar,
            done: 0.into(),
            total: 0.into(),
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Progress for EvalProgress {
    fn started(&self, total: usize) {
        self.total
            .store(total, std::sync::atomic::Ordering::Relaxed);
        if let Some(bar) = &self.bar {
            bar.set_length(total as u64);
        }
    }

    fn finished(&self, r: &CaseResult) {
        let done = self.done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let total = self.total.load(std::sync::atomic::Ordering::Relaxed);
        let mark = match r.failure {
            None => "✓".to_owned(),
            Some(kind) => format!("✗ {kind}"),
        };
        let line = format!(
            "[{done:>3}/{total}] {mark}  {} × {} #{} ({:.1} s)",
            r.case,
            r.model,
            r.repeat,
            r.latency_ms as f64 / 1000.0
        );
        match &self.bar {
            Some(bar) => {
                bar.println(line);
                bar.inc(1);
            }
            None => note!("{line}"),
        }
    }
}

/// An eval's id when none is given: `eval-FSM-YYYYMMDDTHHMMSSZ`.
fn default_id(fsm: &str) -> String {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let stamp: String = now.chars().filter(|c| *c != '-' && *c != ':').collect();
    format!("eval-{fsm}-{stamp}")
}

fn write(path: &Path, what: &str, text: &str) -> Result<()> {
    std::fs::write(path, text)
        .with_context(|| format!("cannot write the {what} report {}", path.display()))?;
    note!("claij: wrote the {what} report {}", path.display());
    Ok(())
}

/// Runs `claij eval`.
pub(super) async fn eval(app: &App, args: EvalArgs) -> u8 {
    match eval_inner(app, args).await {
        Ok(code) => code,
        Err(e) => {
            note!("claij: {e:#}");
            EXIT_USAGE
        }
    }
}

async fn eval_inner(app: &App, args: EvalArgs) -> Result<u8> {
    let store = store::open_runs(&args.store).await?;
    let mut recording = args.exchanges.record.clone().map(|tape| Recording {
        tape,
        parts: Vec::new(),
    });
    // One engine per model, each with its own model layer (and tape), all over the same
    // providers: a model asked two ways (the plain baseline) is loaded once.
    let base = crate::app::models(args.exchanges.config.as_deref(), None)?.layer;
    let names: Vec<Option<&str>> = if args.models.is_empty() {
        vec![None]
    } else {
        let mut seen = Vec::new();
        for m in &args.models {
            if !seen.contains(&Some(m.as_str())) {
                seen.push(Some(m.as_str()));
            }
        }
        seen
    };
    let mut models = Vec::with_capacity(names.len());
    for name in names {
        let (asked, model, provider) = layer(&args, &base, name, recording.as_mut())
            .with_context(|| format!("model `{}`", name.unwrap_or("(the default)")))?;
        models.push(ModelUnderTest {
            name: model.clone(),
            provider: provider.clone(),
            engine: Arc::new(app.engine(store.is_some(), Arc::new(asked))),
        });
        // The baseline: the same model, constraint and decoding, asked plainly.
        if args.baseline == Some(Baseline::Plain) {
            let (mut plain, _, _) = layer(&args, &base, name, recording.as_mut())?;
            plain.set_prompting(Prompting::Plain);
            models.push(ModelUnderTest {
                name: format!("{model} {PLAIN_SUFFIX}"),
                provider,
                engine: Arc::new(app.engine(store.is_some(), Arc::new(plain))),
            });
        }
    }
    let fsm = match load(models[0].engine.registry(), &args.file) {
        Ok(f) => Arc::new(f),
        Err(d) => anyhow::bail!("{d}"),
    };
    let mcp = app.mcp();
    mcp.connect(&fsm).await?;
    let cases = claij_eval::load_cases(&args.cases)?;
    let judges = claij_eval::load_judges(&cases, models[0].engine.registry())?;
    for judge in judges.values() {
        mcp.connect(judge).await?;
    }
    // Judges run on --judge-model, else on the default model: the engine of that model
    // when it is under test, one of its own otherwise.
    let judge_engine: Option<Arc<Engine>> = if judges.is_empty() {
        None
    } else {
        let (layer, name, _) = layer(
            &args,
            &base,
            args.judge_model.as_deref(),
            recording.as_mut(),
        )
        .context("the judge's model")?;
        Some(match models.iter().find(|m| m.name == name) {
            Some(m) => Arc::clone(&m.engine),
            None => Arc::new(app.engine(store.is_some(), Arc::new(layer))),
        })
    };
    let mut provider_limits: HashMap<String, usize> = HashMap::new();
    for m in &models {
        // The embedded model generates one answer at a time anyway.
        let limit = if m.provider == EMBEDDED_PROVIDER {
            1
        } else {
            usize::try_from(args.provider_concurrency).unwrap_or(usize::MAX)
        };
        provider_limits.insert(m.provider.clone(), limit);
    }
    if !args.quiet {
        match &store {
            Some(s) => note!("claij: keeping the eval's runs in {}", s.describe()),
            None => {
                note!("claij: --store memory: the runs are not kept and cannot be opened later")
            }
        }
        let list: Vec<&str> = models.iter().map(|m| m.name.as_str()).collect();
        note!(
            "claij: {} case(s) × {} repeat(s) on {}",
            cases.len(),
            args.repeat,
            list.join(", ")
        );
    }
    let cancel = CancellationToken::new();
    {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                cancel.cancel();
                note!("\nclaij: interrupting the eval (Ctrl-C again to quit at once)");
                if tokio::signal::ctrl_c().await.is_ok() {
                    std::process::exit(130);
                }
            }
        });
    }
    let progress = (!args.quiet).then(|| Arc::new(EvalProgress::new()));
    let report = claij_eval::run(Eval {
        id: args.id.clone().unwrap_or_else(|| default_id(&fsm.id)),
        fsm,
        cases,
        models,
        repeat: args.repeat,
        concurrency: usize::try_from(args.concurrency).unwrap_or(usize::MAX),
        provider_limits,
        store,
        judges,
        judge_engine,
        deadline: args.deadline,
        progress: progress.clone().map(|p| p as Arc<dyn Progress>),
        cancel,
    })
    .await;
    if let Some(p) = &progress {
        p.finish();
    }
    let report = report?;
    if let Some(recording) = &recording {
        let n = recording.merge()?;
        note!(
            "claij: recorded {n} exchange(s) to {} (replay with --replay)",
            recording.tape.display()
        );
    }
    print!("{}", claij_eval::render::text::render(&report));
    write_reports(&args, &report)?;
    Ok(verdict(&args, &report))
}

fn write_reports(args: &EvalArgs, report: &Report) -> Result<()> {
    if let Some(path) = &args.json {
        write(path, "JSON", &(claij_eval::render::json(report) + "\n"))?;
    }
    if let Some(path) = &args.markdown {
        write(
            path,
            "Markdown",
            &claij_eval::render::markdown::render(report),
        )?;
    }
    if let Some(path) = &args.html {
        write(path, "HTML", &claij_eval::render::html::render(report))?;
    }
    Ok(())
}

/// 0, or 1 when a model's pass rate is under `--fail-under`.
fn verdict(args: &EvalArgs, report: &Report) -> u8 {
    let Some(min) = args.fail_under else {
        return EXIT_OK;
    };
    let under: Vec<String> = report
        .models
        .iter()
        .filter(|m| m.pass_rate < min)
        .map(|m| format!("{} ({:.0}%)", m.model, m.pass_rate * 100.0))
        .collect();
    if under.is_empty() {
        EXIT_OK
    } else {
        note!(
            "claij: under the pass rate of {:.0}%: {}",
            min * 100.0,
            under.join(", ")
        );
        EXIT_FAILED
    }
}
