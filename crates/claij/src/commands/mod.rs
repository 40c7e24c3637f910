//! The subcommands, one module each (a command's own subcommands below it, e.g.
//! `mcp/serve.rs`, `runs/migrate.rs`). No command's module uses another's: what several
//! share lives beside them (`crate::app`, `crate::report`, `crate::serving`).

mod defs;
mod eval;
mod graph;
mod mcp;
mod model;
mod prompt;
mod run;
mod runs;
mod serve;
mod validate;
mod worker;

use std::path::Path;

use std::sync::Arc;

use claij_core::{Diagnostics, Fsm, KnownActions};

use crate::app::App;
use crate::cli::{Cli, Command};
use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, store};

/// Runs the chosen subcommand on `app`; returns the exit status.
pub(crate) async fn dispatch(app: &App, cli: Cli) -> u8 {
    let result = match cli.command {
        // Documents are checked against the durable registry: it knows every action the
        // in-memory one does, with the same configuration.
        // Model names are checked against the layer a run would have (no `--model`: a
        // state's own name resolves without it), limits with the operator's `[timeouts]`.
        Command::Validate {
            files,
            json,
            explain,
            config,
        } => {
            let checked = crate::app::models(config.as_deref(), None).and_then(|models| {
                let mut registry = app.reader();
                let found = crate::app::configuration(config.as_deref())?;
                crate::app::timed(&mut registry, &found.timeouts)?;
                Ok((models, registry))
            });
            match checked {
                Ok((models, registry)) => Ok(validate::validate(
                    &registry,
                    &models.layer,
                    &files,
                    json,
                    explain,
                )),
                Err(e) => return usage(e),
            }
        }
        Command::Run(args) => Ok(run::run(app, args).await),
        Command::Eval(args) => Ok(eval::eval(app, args).await),
        Command::Graph {
            file,
            format,
            output,
        } => Ok(graph::graph(
            &app.reader(),
            &file,
            format,
            output.as_deref(),
        )),
        Command::Prompt(args) => {
            match crate::app::models(args.config.as_deref(), args.model.clone()) {
                Ok(models) => {
                    let layer = Arc::new(models.layer);
                    let engine = app.engine(true, layer.clone());
                    prompt::prompt(app, &engine, &layer, &args).await
                }
                Err(e) => return usage(e),
            }
        }
        Command::Schema => {
            println!("{}", claij_core::META_SCHEMA.trim_end());
            Ok(EXIT_OK)
        }
        // A store that cannot be opened is refused like an unreadable document (exit 2).
        Command::Runs { command, store } => match store::open_required(&store).await {
            Ok(store) => runs::runs(app, store, command).await,
            Err(e) => return usage(e),
        },
        Command::Defs { command, store } => match store::open_required(&store).await {
            Ok(store) => defs::defs(app, store, command).await,
            Err(e) => return usage(e),
        },
        Command::Serve(args) => Ok(serve::serve(app, args).await),
        Command::Worker(args) => Ok(worker::worker(app, args).await),
        Command::Workers { command, store } => match store::open_required(&store).await {
            Ok(store) => worker::workers(store, command).await,
            Err(e) => return usage(e),
        },
        Command::Events { command, store } => match store::open_required(&store).await {
            Ok(store) => worker::events(store.as_ref(), command).await,
            Err(e) => return usage(e),
        },
        Command::Mcp { command } => Ok(mcp::mcp(app, command).await),
        Command::Model { command } => model::model(command),
    };
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

/// The document in `file`, read and checked with `registry` (an engine's, or
/// [`App::reader`]).
fn load(registry: &dyn KnownActions, file: &Path) -> Result<Fsm, Diagnostics> {
    claij_core::load_file(file, registry)
}
