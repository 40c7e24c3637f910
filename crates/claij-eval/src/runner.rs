//! Running an eval: every case, on every model, as many times as asked, within the
//! concurrency limits (overall and per provider); each run checked, judged when the case
//! has a judge, and measured from its trail.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use claij_core::{Diagnostics, Fsm, KnownActions, RunStatus, RunStore};
use claij_engine::{CancellationToken, Engine, RunOptions, RunOutcome};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::cases::Case;
use crate::expect::{self, Observed};
use crate::report::{CaseResult, FailureKind, Report, Verdict};

/// A model under test: its name, its provider, and an engine whose `llm` states use it.
#[derive(Clone)]
pub struct ModelUnderTest {
    /// The model's name (as on the command line; part of the runs' ids).
    pub name: String,
    /// Its provider (the per-provider limit applies to it).
    pub provider: String,
    /// An engine assembled for it (its model layer's run model is this model).
    pub engine: Arc<Engine>,
}

/// Told as the eval goes (a progress bar, lines in a log).
pub trait Progress: Send + Sync {
    /// The eval is starting `total` runs.
    fn started(&self, _total: usize) {}
    /// A run finished.
    fn finished(&self, _result: &CaseResult) {}
}

/// What to run.
pub struct Eval {
    /// The eval's id: the prefix of its runs' ids (`RUN = ID.MODEL.CASE.REPEAT`).
    pub id: String,
    /// The FSM under test.
    pub fsm: Arc<Fsm>,
    /// The cases.
    pub cases: Vec<Case>,
    /// The models.
    pub models: Vec<ModelUnderTest>,
    /// Runs per case and model (≥ 1).
    pub repeat: u32,
    /// Runs at a time, overall (≥ 1).
    pub concurrency: usize,
    /// Runs at a time per provider (providers not listed: `concurrency`).
    pub provider_limits: HashMap<String, usize>,
    /// Where runs are kept (`None`: in memory only, and they cannot be opened later).
    pub store: Option<Arc<dyn RunStore>>,
    /// The judges the cases name, loaded (see [`load_judges`]).
    pub judges: HashMap<PathBuf, Arc<Fsm>>,
    /// The engine judges run on (`None`: the engine of the model under test).
    pub judge_engine: Option<Arc<Engine>>,
    /// A deadline per run (overrides the FSM's).
    pub deadline: Option<Duration>,
    /// Told of progress.
    pub progress: Option<Arc<dyn Progress>>,
    /// Cancelled: running runs are interrupted, the others not started.
    pub cancel: CancellationToken,
}

/// An eval that cannot run.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// Nothing to run, or limits of zero.
    #[error("{0}")]
    Setup(String),
    /// A judge's document is invalid.
    #[error("the judge of case `{case}` ({}): {diagnostics}", path.display())]
    Judge {
        /// The case.
        case: String,
        /// The judge's file.
        path: PathBuf,
        /// What is wrong with it.
        diagnostics: Diagnostics,
    },
}

/// Loads every judge the cases name (each once), checked against `actions`.
pub fn load_judges(
    cases: &[Case],
    actions: &dyn KnownActions,
) -> Result<HashMap<PathBuf, Arc<Fsm>>, EvalError> {
    let mut judges = HashMap::new();
    for case in cases {
        let Some(path) = &case.expect.judge else {
            continue;
        };
        if judges.contains_key(path) {
            continue;
        }
        let fsm = claij_core::load_file(path, actions).map_err(|diagnostics| EvalError::Judge {
            case: case.name.clone(),
            path: path.clone(),
            diagnostics,
        })?;
        judges.insert(path.clone(), Arc::new(fsm));
    }
    Ok(judges)
}

/// A run's id: `EVAL.MODEL.CASE.REPEAT`, each part reduced to letters, digits, `_` and
/// `-` (other characters become `-`).
pub fn run_id(eval: &str, model: &str, case: &str, repeat: u32) -> String {
    format!("{eval}.{}.{}.{repeat}", slug(model), slug(case))
}

fn slug(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// One run to make.
struct Job {
    model: usize,
    case: usize,
    repeat: u32,
}

/// The order the runs start in: model by model (each model's cases one after another
/// before the next model's), the model that goes first turning with each repeat. Models
/// sharing a process or a server share its prompt cache, and a run finds computed the
/// prefix it has in common with the run before it. Run by run, each model finds its own
/// previous case's prefix, as a user running many cases of one workflow would; two models
/// asking a question the same way (claij and the plain baseline on a one-step question)
/// then get it computed alike, so they answer alike. Taking the cases in turns instead
/// would give the second of each pair the whole prompt cached — another kernel path, so
/// sometimes another answer to the same text, and a speed no user sees.
fn job_order(repeats: u32, cases: usize, models: usize) -> Vec<Job> {
    let mut jobs = Vec::with_capacity(cases * models * repeats as usize);
    for repeat in 1..=repeats {
        let first = (repeat as usize - 1) % models.max(1);
        for k in 0..models {
            for case in 0..cases {
                jobs.push(Job {
                    model: (first + k) % models,
                    case,
                    repeat,
                });
            }
        }
    }
    jobs
}

/// Runs the eval and reports.
pub async fn run(eval: Eval) -> Result<Report, EvalError> {
    if eval.models.is_empty() || eval.cases.is_empty() {
        return Err(EvalError::Setup(
            "an eval needs at least one model and one case".into(),
        ));
    }
    if eval.repeat == 0 || eval.concurrency == 0 || eval.provider_limits.values().any(|l| *l == 0) {
        return Err(EvalError::Setup(
            "repeats and concurrency limits must be at least 1".into(),
        ));
    }
    for case in &eval.cases {
        if let Some(path) = &case.expect.judge
            && !eval.judges.contains_key(path)
        {
            return Err(EvalError::Setup(format!(
                "the judge of case `{}` ({}) is not loaded",
                case.name,
                path.display()
            )));
        }
    }
    let eval = Arc::new(eval);
    let overall = Arc::new(Semaphore::new(eval.concurrency));
    let mut per_provider: HashMap<String, Arc<Semaphore>> = HashMap::new();
    for m in &eval.models {
        let limit = eval
            .provider_limits
            .get(&m.provider)
            .copied()
            .unwrap_or(eval.concurrency)
            .min(eval.concurrency);
        per_provider
            .entry(m.provider.clone())
            .or_insert_with(|| Arc::new(Semaphore::new(limit)));
    }
    let jobs = job_order(eval.repeat, eval.cases.len(), eval.models.len());
    if let Some(p) = &eval.progress {
        p.started(jobs.len());
    }
    let mut handles = Vec::with_capacity(jobs.len());
    for job in jobs {
        let eval = Arc::clone(&eval);
        let overall = Arc::clone(&overall);
        let provider = per_provider
            .get(&eval.models[job.model].provider)
            .cloned()
            .unwrap_or_else(|| Arc::clone(&overall));
        let who = (job.model, job.case, job.repeat);
        // Runs start in `job_order`: each waits here for its turn before the next is
        // looked at (spawned first, they would take their turns in whatever order the
        // scheduler polled them). The provider's turn first, then the overall one: a run
        // never holds an overall slot while it waits for its provider.
        let provider_turn = provider.acquire_owned().await;
        let overall_turn = overall.acquire_owned().await;
        let handle = tokio::spawn(async move {
            let _turns = (provider_turn, overall_turn);
            let result = one(&eval, &job).await;
            if let Some(p) = &eval.progress {
                p.finished(&result);
            }
            result
        });
        handles.push((who, handle));
    }
    let mut results = Vec::with_capacity(handles.len());
    for ((model, case, repeat), handle) in handles {
        let result = match handle.await {
            Ok(r) => r,
            Err(e) => {
                let model = &eval.models[model].name;
                let case = &eval.cases[case].name;
                let mut r = blank(model, case, repeat, run_id(&eval.id, model, case, repeat));
                r.failure = Some(FailureKind::Error);
                r.detail = Some(format!("the run's task failed: {e}"));
                r
            }
        };
        results.push(result);
    }
    let models: Vec<(String, String)> = eval
        .models
        .iter()
        .map(|m| (m.name.clone(), m.provider.clone()))
        .collect();
    Ok(Report::new(
        eval.id.clone(),
        (&eval.fsm.id, eval.fsm.version),
        eval.repeat,
        eval.store.as_ref().map(|s| s.describe()),
        eval.cases.iter().map(|c| c.name.clone()).collect(),
        &models,
        results,
    ))
}

fn blank(model: &str, case: &str, repeat: u32, run_id: String) -> CaseResult {
    CaseResult {
        model: model.to_owned(),
        case: case.to_owned(),
        repeat,
        run_id,
        status: None,
        state: None,
        passed: false,
        failure: None,
        detail: None,
        latency_ms: 0,
        model_steps: 0,
        first_try_valid: 0,
        model_attempts: 0,
        input_tokens: 0,
        output_tokens: 0,
        cost_usd: None,
        judge: None,
    }
}

/// Runs one case on one model, checks it, and measures it.
async fn one(eval: &Eval, job: &Job) -> CaseResult {
    let model = &eval.models[job.model];
    let case = &eval.cases[job.case];
    let id = run_id(&eval.id, &model.name, &case.name, job.repeat);
    let mut result = blank(&model.name, &case.name, job.repeat, id.clone());
    if eval.cancel.is_cancelled() {
        result.failure = Some(FailureKind::Error);
        result.detail = Some("interrupted before it started".into());
        return result;
    }
    let started = Instant::now();
    let options = RunOptions {
        run_id: Some(id.clone()),
        deadline: eval.deadline,
        store: eval.store.clone(),
        cancel: eval.cancel.child_token(),
        ..RunOptions::default()
    };
    let outcome = match model
        .engine
        .run(Arc::clone(&eval.fsm), case.input.clone(), options)
        .await
    {
        Ok(o) => o,
        Err(e) => {
            result.latency_ms = elapsed_ms(started);
            result.failure = Some(FailureKind::Error);
            result.detail = Some(format!("the run could not start: {e}"));
            return result;
        }
    };
    let observed = Observed {
        fsm: &eval.fsm,
        status: outcome.status,
        state: &outcome.state,
        trail: &outcome.trail,
    };
    let misses = expect::check(&case.expect, &observed);
    let mut judge_error = None;
    if misses.is_empty()
        && let Some(path) = &case.expect.judge
        && let Some(judge) = eval.judges.get(path)
    {
        let engine = eval.judge_engine.as_ref().unwrap_or(&model.engine);
        match run_judge(eval, engine, judge, case, &outcome).await {
            Ok(v) => result.judge = Some(v),
            Err(e) => judge_error = Some(e),
        }
    }
    result.latency_ms = elapsed_ms(started);
    result.status = Some(outcome.status.to_string());
    result.state = Some(outcome.state.clone());
    let (steps, first_try, attempts) = expect::model_steps(&eval.fsm, &outcome.trail);
    result.model_steps = steps;
    result.first_try_valid = first_try;
    result.model_attempts = attempts;
    // The whole run tree's (sub-FSMs and branches too), when the runs are stored.
    let usage = claij_core::trail::total_usage(&outcome.trail);
    let tree = tree_spend(eval, &outcome).await;
    result.input_tokens = tree.input_tokens;
    result.output_tokens = tree.output_tokens;
    result.cost_usd = (usage.cost_usd.is_some() || tree.cost_usd > 0.0).then_some(tree.cost_usd);
    let judged_wrong = result.judge.as_ref().is_some_and(|v| !v.pass);
    result.passed = misses.is_empty() && judge_error.is_none() && !judged_wrong;
    if result.passed {
        return result;
    }
    let kind = match &judge_error {
        Some(_) => FailureKind::Error,
        None => expect::classify(&observed, &misses),
    };
    let mut detail: Vec<String> = misses.into_iter().map(|m| m.message).collect();
    if let Some(e) = judge_error {
        detail.push(format!("the judge could not decide: {e}"));
    }
    if let Some(v) = result.judge.as_ref().filter(|v| !v.pass) {
        detail.push(format!("the judge says: {}", v.reason));
    }
    if outcome.status == RunStatus::Suspended {
        detail.push("the run suspended, waiting for input".into());
    }
    if matches!(
        kind,
        FailureKind::InvalidOutput
            | FailureKind::ProviderError
            | FailureKind::Timeout
            | FailureKind::Error
    ) && let Some(m) = expect::last_failure_message(&outcome.trail)
    {
        detail.push(format!("last failure: {m}"));
    }
    result.failure = Some(kind);
    result.detail = Some(detail.join("; "));
    result
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Runs the judge on a case's run: its input is `{case: {name, input}, result: {run_id,
/// status, state, event}}`; it must complete with a final event holding `pass` (a
/// boolean) and `reason` (a string).
/// What a run and the runs below it spent: from the store when the runs are kept, else
/// the run's own trail.
async fn tree_spend(eval: &Eval, outcome: &RunOutcome) -> claij_core::Spend {
    if let Some(store) = &eval.store
        && let Ok(spent) = store.tree_spend(&outcome.run_id).await
    {
        return spent;
    }
    outcome.spend
}

async fn run_judge(
    eval: &Eval,
    engine: &Engine,
    judge: &Arc<Fsm>,
    case: &Case,
    outcome: &RunOutcome,
) -> Result<Verdict, String> {
    let event = claij_core::trail::last_event(&outcome.trail)
        .cloned()
        .unwrap_or(Value::Null);
    let input = json!({
        "case": {"name": case.name, "input": case.input},
        "result": {
            "run_id": outcome.run_id,
            "status": outcome.status.as_str(),
            "state": outcome.state,
            "event": event,
        },
    });
    let id = format!("{}.judge", outcome.run_id);
    let options = RunOptions {
        run_id: Some(id.clone()),
        deadline: eval.deadline,
        store: eval.store.clone(),
        cancel: eval.cancel.child_token(),
        ..RunOptions::default()
    };
    let judged = engine
        .run(Arc::clone(judge), input, options)
        .await
        .map_err(|e| format!("run `{id}` could not start: {e}"))?;
    if judged.status != RunStatus::Completed {
        return Err(format!(
            "run `{id}` {} in `{}`{}",
            judged.status,
            judged.state,
            expect::last_failure_message(&judged.trail)
                .map(|m| format!(" ({m})"))
                .unwrap_or_default()
        ));
    }
    let spend = tree_spend(eval, &judged).await;
    let verdict = judged.result.unwrap_or(Value::Null);
    match (
        verdict.get("pass").and_then(Value::as_bool),
        verdict.get("reason").and_then(Value::as_str),
    ) {
        (Some(pass), Some(reason)) => Ok(Verdict {
            pass,
            reason: reason.to_owned(),
            spend: Some(spend),
            run_id: id,
        }),
        _ => Err(format!(
            "run `{id}` ended with {verdict}, not {{\"pass\": boolean, \"reason\": string}}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::job_order;

    /// Every run once; each model's cases together, in order; the model that goes first
    /// turns with each repeat.
    #[test]
    fn each_model_runs_its_cases_together_and_the_first_turns_by_repeat() {
        let jobs = job_order(2, 5, 2);
        let mut seen: Vec<(usize, usize, u32)> =
            jobs.iter().map(|j| (j.model, j.case, j.repeat)).collect();
        assert_eq!(seen.len(), 20);
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 20, "no run twice");
        for pass in jobs.chunks(5) {
            assert!(
                pass.iter()
                    .all(|j| j.model == pass[0].model && j.repeat == pass[0].repeat)
            );
            assert_eq!(
                pass.iter().map(|j| j.case).collect::<Vec<_>>(),
                [0, 1, 2, 3, 4]
            );
        }
        let firsts: Vec<(u32, usize)> = jobs.chunks(5).map(|p| (p[0].repeat, p[0].model)).collect();
        assert_eq!(firsts, [(1, 0), (1, 1), (2, 1), (2, 0)]);
        let one_model = job_order(1, 3, 1);
        assert!(one_model.iter().all(|j| j.model == 0));
        assert_eq!(
            job_order(3, 1, 3)
                .chunks(3)
                .map(|c| c[0].model)
                .collect::<Vec<_>>(),
            [0, 1, 2]
        );
    }
}
