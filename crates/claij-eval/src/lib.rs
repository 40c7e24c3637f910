//! # claij-eval
//!
//! One workflow, many models, one table: `claij eval`'s library. Cases (an input event
//! and expectations: final state and status, values at JSON paths of the final event,
//! tools called, attempts, a judge FSM) are run on every model under test, each through
//! an engine assembled for it by the caller, the runs kept in a store; the [`Report`]
//! holds every result, a summary per model (pass rate with a 95 % Wilson interval,
//! first-try validity, attempts per model step, failures by kind, latency, tokens,
//! cost) and the matrix of cases × models. The [`render`] functions turn it into a
//! terminal table, Markdown, JSON and a self-contained HTML page. See docs/EVAL.md.
//!
//! # Modules
//!
//! - `cases`: the cases file (JSON lines or YAML), each problem at its place.
//! - `path`: places in a JSON value (`$.a.b[0]`, or a JSON Pointer).
//! - `runner`: running an eval: models × cases × repeats within concurrency limits,
//!   judged, measured.
//! - `expect`: a run checked against its case: misses, model steps, attempts, tools
//!   called, the kind of a failure.
//! - `report`: the `Report`, plain data (the `--json` file).
//! - `stats`: Wilson intervals and percentiles.
//! - `render`: the report as a terminal table, Markdown and an HTML page.

pub mod cases;
pub mod expect;
pub mod path;
pub mod render;
pub mod report;
pub mod runner;
pub mod stats;

pub use cases::{Case, CasesError, Expect, ValueCheck, ValueTest, load_cases, parse_cases};
pub use report::{CaseResult, Cell, FailureKind, ModelSummary, Report, Verdict};
pub use runner::{Eval, EvalError, ModelUnderTest, Progress, load_judges, run, run_id};
