//! The terminal table: per model, then the matrix of cases × models, then each failed run
//! with the command that opens it.

use std::fmt::Write as _;

use super::{matrix_rows, model_names, summary_headings, summary_row};
use crate::report::Report;

/// Lays out rows under headings, columns padded to their widest cell (by characters).
pub(crate) fn table(headings: &[String], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headings.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, c) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(c.chars().count());
            }
        }
    }
    let line = |cells: &[String]| {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            let pad = widths
                .get(i)
                .copied()
                .unwrap_or(0)
                .saturating_sub(c.chars().count());
            out.push_str(c);
            if i + 1 < cells.len() {
                out.push_str(&" ".repeat(pad + 2));
            }
        }
        out.trim_end().to_owned() + "\n"
    };
    let mut out = line(headings);
    let rule: Vec<String> = widths.iter().map(|w| "─".repeat(*w)).collect();
    out.push_str(&line(&rule));
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

/// The report as text for a terminal.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "eval {} — {} v{}: {} case(s) × {} repeat(s) per model\n",
        report.eval_id,
        report.fsm,
        report.fsm_version,
        report.cases.len(),
        report.repeat
    );
    let rows: Vec<Vec<String>> = report.models.iter().map(summary_row).collect();
    out.push_str(&table(&summary_headings(), &rows));
    let models = model_names(report);
    let mut headings = vec!["case".to_owned()];
    headings.extend(models.iter().map(|m| (*m).to_owned()));
    let rows = matrix_rows(report, &models);
    out.push('\n');
    out.push_str(&table(&headings, &rows));
    let failed: Vec<_> = report.failed().collect();
    if !failed.is_empty() {
        let _ = writeln!(out, "\nfailed runs ({}):", failed.len());
        for r in failed {
            let _ = writeln!(
                out,
                "  {} × {} #{}: {} — {}",
                r.case,
                r.model,
                r.repeat,
                r.failure.map(|k| k.as_str()).unwrap_or("?"),
                r.detail.as_deref().unwrap_or("")
            );
            if let Some(store) = report.store.as_ref().filter(|_| r.status.is_some()) {
                let _ = writeln!(out, "    claij runs trail {} --store {store}", r.run_id);
            }
        }
    }
    out
}
