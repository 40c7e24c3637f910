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
