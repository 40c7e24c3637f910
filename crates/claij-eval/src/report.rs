//! The report: one result per (model, case, repeat), a summary per model, the matrix of
//! cases × models. Plain data (serialised as the `--json` file); the renderers in
//! [`crate::render`] are functions of it.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::stats::{percentile, wilson_95};

/// Why a case failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// Attempts ran out on output that never validated (validation, parse, unknown
    /// transition).
    InvalidOutput,
    /// A tool the case expects was not called.
    RefusedToolUse,
    /// The run ended, but an expectation (or the judge) says the answer is wrong.
    WrongAnswer,
    /// The run (or a state) ran out of time.
    Timeout,
    /// The provider failed (connection refused, HTTP errors, retries exhausted): not the
    /// model's answer.
    ProviderError,
    /// Anything else: the input was refused, the store failed, a program or tool server
    /// failed, the judge could not decide.
    Error,
}

impl FailureKind {
    /// Every kind, in the report's column order.
    pub const ALL: [FailureKind; 6] = [
        FailureKind::InvalidOutput,
        FailureKind::RefusedToolUse,
        FailureKind::WrongAnswer,
        FailureKind::Timeout,
        FailureKind::ProviderError,
        FailureKind::Error,
    ];

    /// The kebab-case word (`wrong-answer`).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::InvalidOutput => "invalid-output",
            FailureKind::RefusedToolUse => "refused-tool-use",
            FailureKind::WrongAnswer => "wrong-answer",
            FailureKind::Timeout => "timeout",
            FailureKind::ProviderError => "provider-error",
            FailureKind::Error => "error",
        }
    }

    /// A short column heading.
    pub fn heading(self) -> &'static str {
        match self {
            FailureKind::InvalidOutput => "invalid",
            FailureKind::RefusedToolUse => "no tool",
            FailureKind::WrongAnswer => "wrong",
            FailureKind::Timeout => "timeout",
            FailureKind::ProviderError => "provider",
            FailureKind::Error => "error",
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The judge's verdict on one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Whether the judge passed it.
    pub pass: bool,
    /// Why.
    pub reason: String,
    /// The judge's own run.
    pub run_id: String,
    /// What the judge's run (and any runs below it) spent; not part of the case's own
    /// tokens and cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spend: Option<claij_core::Spend>,
}

/// One run of one case on one model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseResult {
    /// The model (as named on the command line).
    pub model: String,
    /// The case's name.
    pub case: String,
    /// Which repeat, from 1.
    pub repeat: u32,
    /// The run's id (`claij runs trail RUN`).
    pub run_id: String,
    /// How the run ended (absent when it could not start).
    pub status: Option<String>,
    /// The state it ended in.
    pub state: Option<String>,
    /// Whether every expectation held.
    pub passed: bool,
    /// Why it failed.
    pub failure: Option<FailureKind>,
    /// What did not hold, in words.
    pub detail: Option<String>,
    /// Wall time of the run (and its judge), in milliseconds.
    pub latency_ms: u64,
    /// Model steps (the first attempts of `llm` states).
    pub model_steps: u64,
    /// Model steps whose first attempt validated.
    pub first_try_valid: u64,
    /// Attempts of model steps.
    pub model_attempts: u64,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Cost in US dollars, when prices are known.
    pub cost_usd: Option<f64>,
    /// The judge's verdict, when the case has a judge and it ran.
    pub judge: Option<Verdict>,
}

/// The figures of one model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSummary {
    /// The model.
    pub model: String,
    /// Its provider (the concurrency limit is per provider).
    pub provider: String,
    /// Runs: cases × repeats.
    pub runs: u64,
    /// Runs that passed.
    pub passed: u64,
    /// passed / runs.
    pub pass_rate: f64,
    /// The 95 % Wilson interval of the pass rate: low end.
    pub ci_low: f64,
    /// High end.
    pub ci_high: f64,
    /// Model steps over all runs.
    pub model_steps: u64,
    /// Those whose first attempt validated.
    pub first_try_valid: u64,
    /// first_try_valid / model_steps (absent without model steps).
    pub first_try_validity: Option<f64>,
    /// Attempts of model steps.
    pub model_attempts: u64,
    /// model_attempts / model_steps.
    pub mean_attempts: Option<f64>,
    /// Failed runs by kind (every kind present, zeros included).
    pub failures: BTreeMap<FailureKind, u64>,
    /// Median run latency, ms (nearest rank).
    pub latency_p50_ms: Option<u64>,
    /// 95th percentile run latency, ms (nearest rank).
    pub latency_p95_ms: Option<u64>,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Cost in US dollars (absent when no price is known).
    pub cost_usd: Option<f64>,
}

/// One cell of the matrix: a case on a model, over its repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// Repeats that passed.
    pub passed: u32,
    /// Repeats.
    pub runs: u32,
    /// The failure kinds of the failed repeats, in repeat order.
    pub failures: Vec<FailureKind>,
    /// The run of the first failed repeat (else the first run).
    pub run_id: String,
}

/// The whole eval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The eval's id (the prefix of its runs' ids).
    pub eval_id: String,
    /// The FSM's id.
    pub fsm: String,
    /// The FSM's version.
    pub fsm_version: u32,
    /// Repeats per case.
    pub repeat: u32,
    /// Where the runs are kept (`None`: in memory only).
    pub store: Option<String>,
    /// The cases' names, in file order.
    pub cases: Vec<String>,
    /// One summary per model, in command-line order.
    pub models: Vec<ModelSummary>,
    /// Every run, by model, case and repeat.
    pub results: Vec<CaseResult>,
}

impl Report {
    /// Builds the report from the results (summaries computed here).
    pub fn new(
        eval_id: String,
        fsm: (&str, u32),
        repeat: u32,
        store: Option<String>,
        cases: Vec<String>,
        models: &[(String, String)],
        mut results: Vec<CaseResult>,
    ) -> Self {
        let model_pos = |m: &str| models.iter().position(|(n, _)| n == m);
        let case_pos = |c: &str| cases.iter().position(|n| n == c);
        results.sort_by_key(|r| (model_pos(&r.model), case_pos(&r.case), r.repeat));
        let summaries = models
            .iter()
            .map(|(model, provider)| {
                summarise(
                    model,
                    provider,
                    results.iter().filter(|r| &r.model == model),
                )
            })
            .collect();
        Self {
            eval_id,
            fsm: fsm.0.to_owned(),
            fsm_version: fsm.1,
            repeat,
            store,
            cases,
            models: summaries,
            results,
        }
    }

    /// The matrix cell of `case` on `model` (`None` when it did not run).
    pub fn cell(&self, case: &str, model: &str) -> Option<Cell> {
        let runs: Vec<&CaseResult> = self
            .results
            .iter()
            .filter(|r| r.case == case && r.model == model)
            .collect();
        let first = runs.first()?;
        Some(Cell {
            passed: runs.iter().filter(|r| r.passed).count() as u32,
            runs: runs.len() as u32,
            failures: runs.iter().filter_map(|r| r.failure).collect(),
            run_id: runs
                .iter()
                .find(|r| !r.passed)
                .unwrap_or(first)
                .run_id
                .clone(),
        })
    }

    /// The runs that failed.
    pub fn failed(&self) -> impl Iterator<Item = &CaseResult> {
        self.results.iter().filter(|r| !r.passed)
    }
}

fn summarise<'a>(
    model: &str,
    provider: &str,
    results: impl Iterator<Item = &'a CaseResult>,
) -> ModelSummary {
    let results: Vec<&CaseResult> = results.collect();
    let runs = results.len() as u64;
    let passed = results.iter().filter(|r| r.passed).count() as u64;
    let (ci_low, ci_high) = wilson_95(passed, runs);
    let sum = |f: fn(&CaseResult) -> u64| results.iter().map(|r| f(r)).sum::<u64>();
    let model_steps = sum(|r| r.model_steps);
    let first_try_valid = sum(|r| r.first_try_valid);
    let model_attempts = sum(|r| r.model_attempts);
    let ratio = |a: u64, b: u64| (b > 0).then(|| a as f64 / b as f64);
    let mut failures: BTreeMap<FailureKind, u64> =
        FailureKind::ALL.iter().map(|k| (*k, 0)).collect();
    for kind in results.iter().filter_map(|r| r.failure) {
        *failures.entry(kind).or_default() += 1;
    }
    let latencies: Vec<u64> = results.iter().map(|r| r.latency_ms).collect();
    let costs: Vec<f64> = results.iter().filter_map(|r| r.cost_usd).collect();
    ModelSummary {
        model: model.to_owned(),
        provider: provider.to_owned(),
        runs,
        passed,
        pass_rate: ratio(passed, runs).unwrap_or(0.0),
        ci_low,
        ci_high,
        model_steps,
        first_try_valid,
        first_try_validity: ratio(first_try_valid, model_steps),
        model_attempts,
        mean_attempts: ratio(model_attempts, model_steps),
        failures,
        latency_p50_ms: percentile(&latencies, 50.0),
        latency_p95_ms: percentile(&latencies, 95.0),
        input_tokens: sum(|r| r.input_tokens),
        output_tokens: sum(|r| r.output_tokens),
        cost_usd: (!costs.is_empty()).then(|| costs.iter().sum()),
    }
}
