//! `claij`: check, draw and run LLM workflows written as data.
//!
//! The binary is where claij is assembled: it opens the store, builds the model layer and
//! the MCP client, registers their actions in an engine and hands engine and store to
//! the surface a command runs. Process-wide setup (the TLS provider, the logs, the
//! runtime) is done here and nowhere else.
//!
//! # Modules
//!
//! - `app`: the composition root: the `App` a command asks for what it needs (a registry
//!   to read documents with, engines over model layers, the MCP client, telemetry).
//! - `mcp`: the command's MCP client, registered in each engine; servers' sampling
//!   answered by the model layer of the engine whose call asked.
//! - `telemetry`: OpenTelemetry as the environment asks (feature `otel`).
//! - `logs`: log lines on stderr, text or JSON.
//! - `cli`: the clap definitions and help texts.
//! - `commands`: one module per subcommand; none uses another's.
//! - `report`, `serving`: what several commands share (the outcome report, observers,
//!   Ctrl-C; the documents served, secrets, signals).
//! - `store`: the store named by `--store` or `CLAIJ_STORE`, opened.
//! - `input`: JSON arguments: inline, `@FILE`, `-`.
//! - `progress`: the progress observer and the trail file writer.
//! - `classified` (tests): every field of every registered action says what it touches.

/// `eprintln!` that never panics: when stderr is gone (`claij run … 2>&1 | head -1`) the
/// message is dropped, never the run.
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `println!` that returns the error instead of panicking, for commands whose output may
/// be cut short (`claij runs list | head`): see `commands::dispatch`.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}

mod app;
#[cfg(test)]
mod classified;
mod cli;
mod commands;
mod input;
mod logs;
mod mcp;
mod progress;
mod report;
mod serving;
mod store;
mod telemetry;

use std::process::ExitCode;

use clap::Parser;

/// Exit status: the run completed / the documents are valid.
const EXIT_OK: u8 = 0;
/// Exit status: the run failed or was interrupted / a document is invalid.
const EXIT_FAILED: u8 = 1;
/// Exit status: bad invocation, unreadable or invalid document, input refused.
const EXIT_USAGE: u8 = 2;
/// Exit status: the run is suspended, waiting for input.
const EXIT_SUSPENDED: u8 = 3;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    // Process-wide TLS, set here and nowhere else: ring as rustls's provider, for every
    // HTTPS client of the process (MCP servers over HTTP and their authorization,
    // callbacks, trace export; reqwest is built with `rustls-no-provider`). Err: one is
    // installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let app = match app::App::start() {
        Ok(app) => app,
        Err(e) => {
            note!("claij: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    // Logging, with telemetry's layer (the application has it set up now).
    logs::start(cli.log_format, app.tracing_layer());
    // One worker thread per core (tokio's default; `TOKIO_WORKER_THREADS` overrides it).
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            note!("claij: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let code = runtime.block_on(async {
        let code = commands::dispatch(&app, cli).await;
        app.shutdown().await;
        code
    });
    // Do not wait for blocking readers (a person who never answered) to finish.
    runtime.shutdown_background();
    app.finish();
    ExitCode::from(code)
}
