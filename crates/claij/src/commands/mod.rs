//! The subcommands, one module each.

mod defs;
mod eval;
mod graph;
mod mcp;
mod mcp_call;
mod mcp_serve;
mod mcp_tools;
mod migrate;
mod model;
mod prompt;
pub(crate) mod run;
mod runs;
mod seed_projection;
mod serve;
mod validate;
mod worker;

use std::path::Path;

use claij_core::{Diagnostics, Fsm};
use claij_engine::Engine;

use crate::cli::{Cli, Command};
use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, store};

/// Runs the chosen subcommand; returns the exit status.
pub(crate) async fn dispatch(cli: Cli) -> u8 {
    // Documents are checked against the durable registry: it knows every action the
    // in-memory one does, with the same configuration.
    let engine = run::engine(true);
    let result = match cli.command {
        Command::Validate { files, json } => Ok(validate::validate(&engine, &files, json)),
        Command::Run(args) => Ok(run::run(args).await),
        Command::Eval(args) => Ok(eval::eval(args).await),
        Command::Graph {
            file,
            format,
            output,
        } => Ok(graph::graph(&engine, &file, format, output.as_deref())),
        Command::Prompt(args) => match run::prompt_layer(&args) {
            Ok(layer) => prompt::prompt(&engine, &layer, &args).await,
            Err(e) => return usage(e),
        },
        Command::Schema => {
            println!("{}", claij_core::META_SCHEMA.trim_end());
            Ok(EXIT_OK)
        }
        // A store that cannot be opened is refused like an unreadable document (exit 2).
        Command::Runs { command, store } => match store::open_required(&store).await {
            Ok(store) => runs::runs(store, command).await,
            Err(e) => return usage(e),
        },
        Command::Defs { command, store } => match store::open_required(&store).await {
            Ok(store) => defs::defs(&engine, store, command).await,
            Err(e) => return usage(e),
        },
        Command::Serve(args) => Ok(serve::serve(args).await),
        Command::Worker(args) => Ok(worker::worker(args).await),
        Command::Workers { command, store } => match store::open_required(&store).await {
            Ok(store) => worker::workers(store, command).await,
            Err(e) => return usage(e),
        },
        Command::Events { command, store } => match store::open_required(&store).await {
            Ok(store) => worker::events(store.as_ref(), command).await,
            Err(e) => return usage(e),
        },
        Command::Mcp { command } => Ok(mcp::mcp(command).await),
        Command::Model { command } => model::model(command),
    };
    crate::mcp::shutdown().await;
    result.unwrap_or_else(|e| {
        // The reader of our output went away (`| head`): stop quietly, like other tools.
        let broken_pipe = e.chain().any(|cause| {
            cause
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
        });
        if broken_pipe {
            return EXIT_OK;
        }
        note!("claij: {e:#}");
        EXIT_FAILED
    })
}

/// Reports a refused invocation; exit 2.
fn usage(e: anyhow::Error) -> u8 {
    note!("claij: {e:#}");
    EXIT_USAGE
}

fn load(engine: &Engine, file: &Path) -> Result<Fsm, Diagnostics> {
    claij_core::load_file(file, engine.registry())
}
