//! `claij`: check, draw and run LLM workflows written as data.

mod cli;
mod commands;
mod input;
mod progress;
mod store;

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
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("claij: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let code = runtime.block_on(commands::dispatch(cli));
    // Do not wait for blocking readers (a person who never answered) to finish.
    runtime.shutdown_background();
    ExitCode::from(code)
}
