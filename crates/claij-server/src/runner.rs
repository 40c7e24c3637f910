//! Runs on their own tasks: a start or a resume answers as soon as the run is under way
//! (or refused, with nothing changed), and may then wait a while for it to end or suspend.
//! A run outlives the request that started it, and the server: a run in flight when the
//! process dies is continued by the next server on the same store. A server whose runs
//! `claij worker` processes drive follows them in the store instead ([`queued`]).

mod queued;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use claij_core::{Fsm, Question, RunStatus};
use claij_engine::{Engine, ForkAt, Observer, RunError, RunOptions, RunOutcome};
use serde_json::Value;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::problem::Problem;
use crate::state::AppState;

/// The longest `?wait` honoured.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(300);

/// A run under way on its own task.
pub(crate) struct Launched {
    /// The run's id.
    pub run_id: String,
    /// Ends when the run ends or suspends.
    pub task: JoinHandle<Result<RunOutcome, RunError>>,
    /// Told when the run is suspended on an MCP server's question while the task holds
    /// the server's request open (the task goes on until it is answered or the hold ends).
    pub held: Arc<Notify>,
}

/// Tells a waiter that the run waits on a question whose request is held open.
struct HoldSignal(Arc<Notify>);

impl Observer for HoldSignal {
    fn question_held(&self, _run_id: &str, _question: &Question, _until: SystemTime) {
        self.0.notify_one();
    }
}

/// Tells, once, that a run is under way.
struct StartSignal(Mutex<Option<oneshot::Sender<()>>>);

impl Observer for StartSignal {
    fn run_started(&self, _run_id: &str) {
        if let Some(tx) = self.0.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = tx.send(());
        }
    }
}

/// What to run.
pub(crate) enum Work {
    /// A new run of the FSM from this input.
    Start {
        /// The input event.
        input: Value,
    },
    /// A suspended run given its answer, or a stale one continued (`None`).
    Resume {
        /// The run.
        run_id: String,
        /// The answer.
        input: Option<Value>,
    },
    /// A new run forked from a stored one at one of its trail entries (time travel).
    Fork {
        /// The run forked.
        from: String,
        /// Where, and with what event.
        at: ForkAt,
    },
}

/// Starts `work` on a task of its own and answers once the run is under way, or with the
/// problem that refused it (nothing changed then). `input_place` is where the input is in
/// the request (for the problem's errors).
pub(crate) async fn launch(
    state: &AppState,
    engine: Arc<Engine>,
    fsm: Arc<Fsm>,
    work: Work,
    mut options: RunOptions,
    input_place: &str,
) -> Result<Launched, Problem> {
    if state.config.queue {
        return queued::launch(state, engine, fsm, work, options, input_place).await;
    }
    state
        .assembly
        .prepare(&fsm)
        .await
        .map_err(|e| Problem::internal(format!("the FSM `{}` cannot start: {e}", fsm.id)))?;
    let (tx, rx) = oneshot::channel();
    options
        .observers
        .push(Arc::new(StartSignal(Mutex::new(Some(tx)))));
    options.observers.push(state.live.observer());
    let held = Arc::new(Notify::new());
    options.observers.push(Arc::new(HoldSignal(held.clone())));
    options.store = Some(state.store.clone());
    let (run_id, mut task) = match work {
        Work::Start { input } => {
            let run_id = options
                .run_id
                .get_or_insert_with(claij_engine::new_run_id)
                .clone();
            let id = run_id.clone();
            let task =
                tokio::spawn(async move { logged(&id, engine.run(fsm, input, options).await) });
            (run_id, task)
        }
        Work::Fork { from, at } => {
            let run_id = options
                .run_id
                .get_or_insert_with(claij_engine::new_run_id)
                .clone();
            let id = run_id.clone();
            let task =
                tokio::spawn(
                    async move { logged(&id, engine.fork(fsm, &from, at, options).await) },
                );
            (run_id, task)
        }
        Work::Resume { run_id, input } => {
            let id = run_id.clone();
            let following = state.clone();
            let task = tokio::spawn(async move {
                match engine.resume(fsm, &id, input, options).await {
                    // An answer handed to the process holding the question's request open:
                    // the run goes on there; it is followed until it ends or suspends.
                    Ok(outcome) if outcome.status == RunStatus::Running => {
                        logged(&id, queued::settled(&following, id.clone()).await)
                    }
                    result => logged(&id, result),
                }
            });
            (run_id, task)
        }
    };
    let ended = tokio::select! {
        // A run that started and then ended at once counts as started.
        biased;
        started = rx => match started {
            Ok(()) => return Ok(Launched { run_id, task, held }),
            // The signal was dropped unsent: the run's task ended before the run was
            // under way.
            Err(_) => task.await,
        },
        ended = &mut task => ended,
    };
    // Ended before it was under way: refused (or, for a run ending at once, done).
    match ended {
        Ok(Err(e)) => Err(Problem::from_run(&e, input_place)),
        Ok(Ok(outcome)) => Ok(Launched {
            run_id,
            task: tokio::spawn(async move { Ok(outcome) }),
            held,
        }),
        Err(e) => Err(Problem::internal(format!("the run's task failed: {e}"))),
    }
}

/// A run's end, with a failure to go on logged (the request that started it may be gone).
fn logged(run_id: &str, result: Result<RunOutcome, RunError>) -> Result<RunOutcome, RunError> {
    if let Err(e) = &result {
        tracing::warn!("run {run_id}: {e}");
    }
    result
}

/// Waits up to `wait` for a launched run to end or suspend (on a question whose request
/// it holds open, too): `true` when it did. A server stopping stops the wait (the run goes
/// on, and is continued by the next server).
pub(crate) async fn wait_for(
    launched: &mut Launched,
    wait: Duration,
    shutdown: &CancellationToken,
) -> bool {
    if wait.is_zero() {
        return launched.task.is_finished();
    }
    let ended = async {
        tokio::select! {
            _ = &mut launched.task => true,
            () = launched.held.notified() => true,
        }
    };
    tokio::select! {
        ended = tokio::time::timeout(wait.min(MAX_WAIT), ended) => ended.unwrap_or(false),
        () = shutdown.cancelled() => false,
    }
}

/// The `?wait` seconds as a duration (negative, NaN or absent: zero).
pub(crate) fn wait_duration(seconds: Option<f64>) -> Duration {
    match seconds {
        Some(s) if s.is_finite() && s > 0.0 => Duration::from_secs_f64(s).min(MAX_WAIT),
        _ => Duration::ZERO,
    }
}
