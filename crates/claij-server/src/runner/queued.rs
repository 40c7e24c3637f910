//! A server that leaves its runs to `claij worker` processes (`ServerConfig::queue`): a
//! start is validated and queued, an answer checked, recorded and queued, and each is then
//! followed in the store until the run ends or suspends — so that `?wait`, the event
//! streams and the completion callbacks work as when the server drives its runs.

use std::sync::Arc;

use claij_core::Fsm;
use claij_core::store::RunStatus;
use claij_engine::{Engine, RunError, RunOptions, RunOutcome, Submission};

use super::{Launched, Work};
use crate::problem::Problem;
use crate::state::AppState;

/// Queues `work` for the workers and follows it (see the module).
pub(crate) async fn launch(
    state: &AppState,
    engine: Arc<Engine>,
    fsm: Arc<Fsm>,
    work: Work,
    options: RunOptions,
    input_place: &str,
) -> Result<Launched, Problem> {
    let options = RunOptions {
        store: Some(state.store.clone()),
        observers: Vec::new(),
        ..options
    };
    let run_id = match work {
        Work::Start { input } => {
            let submitted = engine
                .submit(fsm, input, options, Submission::default())
                .await
                .map_err(|e| Problem::from_run(&e, input_place))?;
            submitted.run_id
        }
        Work::Resume {
            run_id,
            input: Some(input),
        } => {
            engine
                .answer(fsm, &run_id, input, options)
                .await
                .map_err(|e| Problem::from_run(&e, input_place))?;
            run_id
        }
        Work::Fork { from, at } => {
            engine
                .fork_queued(&fsm, &from, at, &options)
                .await
                .map_err(|e| Problem::from_run(&e, input_place))?
                .id
        }
        // A run that can go on without input: the workers take it up themselves.
        Work::Resume {
            run_id,
            input: None,
        } => run_id,
    };
    state.live.observer().run_started(&run_id);
    let task = tokio::spawn(follow(state.clone(), run_id.clone()));
    Ok(Launched {
        run_id,
        task,
        held: Arc::default(),
    })
}

/// Looks at the run until it ends or suspends, then tells the live observers (event
/// streams, callbacks) as a run driven here would, and gives its outcome.
async fn follow(state: AppState, run_id: String) -> Result<RunOutcome, RunError> {
    let outcome = settled(&state, run_id).await?;
    state
        .live
        .observer()
        .run_finished(&outcome.run_id, outcome.status);
    Ok(outcome)
}

/// Looks at a run another process drives (a worker, or the process holding open the
/// request of the question it was answered on) until it ends or suspends.
pub(crate) async fn settled(state: &AppState, run_id: String) -> Result<RunOutcome, RunError> {
    let outcome = RunOutcome::settled(state.store.as_ref(), &run_id, &state.shutdown).await?;
    if outcome.status == RunStatus::Running {
        return Err(RunError::NotResumable {
            run: run_id,
            reason: "is still with the workers (the server stopped following it)".into(),
        });
    }
    Ok(outcome)
}
