//! The subcommands.

use std::path::Path;
use std::sync::Arc;

use claij_core::{Diagnostics, Fsm};
use claij_engine::{Engine, Observer, RunOptions, RunStatus};
use serde_json::{Value, json};

use crate::cli::{Cli, Command, GraphFormat, RunArgs};
use crate::progress::{Progress, TrailFile, status_word};
use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, input};

/// Runs the chosen subcommand; returns the exit status.
pub async fn dispatch(cli: Cli) -> u8 {
    let engine = Engine::default();
    match cli.command {
        Command::Validate { files, json } => validate(&engine, &files, json),
        Command::Run(args) => run(&engine, args).await,
        Command::Graph {
            file,
            format,
            output,
        } => graph(&engine, &file, format, output.as_deref()),
        Command::Schema => {
            println!("{}", claij_core::META_SCHEMA.trim_end());
            EXIT_OK
        }
    }
}

fn load(engine: &Engine, file: &Path) -> Result<Fsm, Diagnostics> {
    claij_core::load_file(file, engine.registry())
}

fn validate(engine: &Engine, files: &[std::path::PathBuf], as_json: bool) -> u8 {
    let mut all_valid = true;
    for file in files {
        let result = load(engine, file);
        all_valid &= result.is_ok();
        if as_json {
            let report = match &result {
                Ok(fsm) => {
                    json!({"file": file, "valid": true, "id": &*fsm.id, "version": fsm.version, "problems": []})
                }
                Err(d) => json!({
                    "file": file,
                    "valid": false,
                    "problems": d.iter().map(|p| json!({
                        "path": p.path.to_string(),
                        "pointer": p.path.pointer(),
                        "line": p.line_col.map(|(l, _)| l),
                        "column": p.line_col.map(|(_, c)| c),
                        "problem": format!("{:?}", p.problem),
                        "message": p.message,
                    })).collect::<Vec<_>>(),
                }),
            };
            println!("{report}");
        } else {
            match &result {
                Ok(fsm) => println!(
                    "ok  {}  ({} v{}: {} states, {} transitions)",
                    file.display(),
                    fsm.id,
                    fsm.version,
                    fsm.states.len(),
                    fsm.transitions.len()
                ),
                Err(d) => {
                    eprintln!("bad {}  ({} problem(s))", file.display(), d.0.len());
                    for problem in d.iter() {
                        eprintln!("  {problem}");
                    }
                }
            }
        }
    }
    if all_valid { EXIT_OK } else { EXIT_FAILED }
}

async fn run(engine: &Engine, args: RunArgs) -> u8 {
    let fsm = match load(engine, &args.file) {
        Ok(fsm) => Arc::new(fsm),
        Err(d) => {
            eprintln!("claij: {d}");
            return EXIT_USAGE;
        }
    };
    let input = match input::json_argument("input", &args.input) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("claij: {e:#}");
            return EXIT_USAGE;
        }
    };
    let context = match args
        .context
        .as_deref()
        .map(|c| input::json_argument("context", c))
    {
        None => Value::Null,
        Some(Ok(v @ Value::Object(_))) => v,
        Some(Ok(_)) => {
            eprintln!("claij: the context must be a JSON object");
            return EXIT_USAGE;
        }
        Some(Err(e)) => {
            eprintln!("claij: {e:#}");
            return EXIT_USAGE;
        }
    };
    let mut observers: Vec<Arc<dyn Observer>> = Vec::new();
    if let Some(path) = &args.trail {
        match TrailFile::create(path) {
            Ok(t) => observers.push(Arc::new(t)),
            Err(e) => {
                eprintln!(
                    "claij: cannot create the trail file {}: {e}",
                    path.display()
                );
                return EXIT_USAGE;
            }
        }
    }
    if !args.quiet {
        observers.push(Arc::new(Progress::new()));
    }
    let options = RunOptions {
        run_id: args.run_id,
        context,
        deadline: args.deadline,
        observers,
        ..RunOptions::default()
    };
    let cancel = options.cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\nclaij: interrupting the run (Ctrl-C again to quit at once)");
            cancel.cancel();
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        }
    });
    let outcome = match engine.run(fsm, input, options).await {
        Ok(o) => o,
        Err(e) => {
            eprintln!("claij: {e}");
            return EXIT_USAGE;
        }
    };
    let failures = outcome.trail.iter().filter(|e| e.failure.is_some()).count();
    let steps = outcome.trail.len() - failures;
    if !args.quiet {
        eprintln!(
            "claij: run {} {} in state `{}` after {steps} transition(s) and {failures} failed attempt(s)",
            outcome.run_id,
            status_word(outcome.status),
            outcome.state,
        );
    }
    match outcome.status {
        RunStatus::Completed => {
            let result = outcome.result.unwrap_or(Value::Null);
            println!(
                "{}",
                serde_json::to_string_pretty(&result).unwrap_or_else(|_| result.to_string())
            );
            EXIT_OK
        }
        _ => {
            if let Some(f) = outcome.trail.iter().rev().find_map(|e| e.failure.as_ref()) {
                eprintln!("claij: last failure ({}): {}", f.kind, f.message);
                for e in &f.errors {
                    eprintln!("  {e}");
                }
            }
            EXIT_FAILED
        }
    }
}

fn graph(engine: &Engine, file: &Path, format: GraphFormat, output: Option<&Path>) -> u8 {
    let fsm = match load(engine, file) {
        Ok(fsm) => fsm,
        Err(d) => {
            eprintln!("claij: {d}");
            return EXIT_USAGE;
        }
    };
    let bytes = match format {
        GraphFormat::Dot => claij_core::graph::to_dot(&fsm).into_bytes(),
        GraphFormat::Mermaid => claij_core::graph::to_mermaid(&fsm).into_bytes(),
        GraphFormat::Svg => match render_svg(&claij_core::graph::to_dot(&fsm)) {
            Ok(svg) => svg,
            Err(message) => {
                eprintln!("claij: {message}");
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
            eprintln!("claij: cannot write the graph: {e}");
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
