//! `claij runs fork RUN --at SEQ [--input EVENT]`: time travel. A new run whose trail is
//! the run's up to entry SEQ (its event replaced by the input, when given), driven on
//! from there here, or left to `claij worker` processes with `--submit`. The original is
//! not changed (claij_engine's `Engine::fork`).

use std::sync::Arc;

use anyhow::Result;
use claij_core::store::{RunStore, StoreError};
use claij_engine::{ForkAt, RunError, RunOptions};

use super::{input_and_engine, pinned_fsm};
use crate::app::App;
use crate::report::{interrupt_on_ctrl_c, observers, report};
use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE};

/// What `claij runs fork` was asked.
pub(super) struct Fork<'a> {
    /// The run forked.
    pub run: &'a str,
    /// The entry it is forked at.
    pub at: u64,
    /// The event put in that entry's place (JSON text, @FILE or -).
    pub input: Option<&'a str>,
    /// Store the fork for a worker instead of driving it here.
    pub submit: bool,
    /// The models it goes on with.
    pub llm: &'a crate::cli::LlmArgs,
    /// No progress on stderr.
    pub quiet: bool,
}

/// Forks the run as asked; the exit status is the fork's, as `claij run` reports a run.
pub(super) async fn fork(app: &App, store: Arc<dyn RunStore>, how: Fork<'_>) -> Result<u8> {
    let Fork {
        run,
        at,
        input,
        submit,
        llm,
        quiet,
    } = how;
    let (event, engine) = match input_and_engine(app, input, llm) {
        Ok(both) => both,
        Err(code) => return Ok(code),
    };
    let record = match store.run(run).await {
        Ok(r) => r,
        Err(e @ StoreError::NotFound { .. }) => {
            note!("claij: {e}");
            return Ok(EXIT_USAGE);
        }
        Err(e) => return Err(e.into()),
    };
    let fsm = pinned_fsm(store.as_ref(), &engine, &app.mcp(), &record).await?;
    let at = ForkAt { seq: at, event };
    let options = RunOptions {
        store: Some(store.clone()),
        observers: match observers(None, quiet, None) {
            Ok(o) => o,
            Err(code) => return Ok(code),
        },
        ..RunOptions::default()
    };
    let refused = |e: &RunError| {
        note!("claij: {e}; nothing was stored");
        if matches!(e, RunError::Input(_) | RunError::NotForkable { .. }) {
            EXIT_USAGE
        } else {
            EXIT_FAILED
        }
    };
    if submit {
        return Ok(match engine.fork_queued(&fsm, run, at, &options).await {
            Ok(fork) => {
                if !quiet {
                    note!(
                        "claij: run {} forks {run} at entry {} and is queued for a worker (follow it: claij runs wait {})",
                        fork.id,
                        fork.forked_from.as_ref().map_or(0, |f| f.seq),
                        fork.id
                    );
                }
                println!("{}", fork.id);
                EXIT_OK
            }
            Err(e) => refused(&e),
        });
    }
    // The fork's id is chosen here, so that it can be named before the run goes on.
    let id = claij_engine::new_run_id();
    let options = RunOptions {
        run_id: Some(id.clone()),
        ..options
    };
    interrupt_on_ctrl_c(&options);
    if !quiet {
        note!("claij: forking run {run} at entry {} into run {id}", at.seq);
    }
    let result = engine.fork(fsm, run, at, options).await;
    if let Err(e @ (RunError::Input(_) | RunError::NotForkable { .. })) = &result {
        return Ok(refused(e));
    }
    Ok(report(result, quiet, Some(store.as_ref()), "").await)
}
