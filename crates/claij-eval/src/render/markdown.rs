//! The report as Markdown: the summary table, the matrix, the failed runs.

use std::fmt::Write as _;

use super::{matrix_rows, model_names, summary_headings, summary_row};
use crate::report::Report;

fn escape(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

fn table(out: &mut String, headings: &[String], rows: &[Vec<String>]) {
    let line = |cells: &[String]| {
        format!(
            "| {} |\n",
            cells
                .iter()
                .map(|c| escape(c))
                .collect::<Vec<_>>()
                .join(" | ")
        )
    };
    out.push_str(&line(headings));
    out.push_str(&format!("|{}\n", "---|".repeat(headings.len())));
    for row in rows {
        out.push_str(&line(row));
    }
}

/// The report as Markdown.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## Eval `{}`: {} v{}\n\n{} case(s) × {} repeat(s) per model{}.\n",
        report.eval_id,
        report.fsm,
        report.fsm_version,
        report.cases.len(),
        report.repeat,
        report
            .store
            .as_ref()
            .map(|s| format!("; runs kept in `{s}`"))
            .unwrap_or_default()
    );
    let rows: Vec<Vec<String>> = report.models.iter().map(summary_row).collect();
    table(&mut out, &summary_headings(), &rows);
    let models = model_names(report);
    let mut headings = vec!["case".to_owned()];
    headings.extend(models.iter().map(|m| format!("`{m}`")));
    let rows = matrix_rows(report, &models);
    out.push_str("\n### Cases × models\n\n");
    table(&mut out, &headings, &rows);
    let failed: Vec<_> = report.failed().collect();
    if !failed.is_empty() {
        out.push_str("\n### Failed runs\n\n");
        for r in failed {
            let _ = writeln!(
                out,
                "- **{}** × `{}` #{}: {} — {} (`claij runs trail {}`)",
                escape(&r.case),
                r.model,
                r.repeat,
                r.failure.map(|k| k.as_str()).unwrap_or("?"),
                escape(r.detail.as_deref().unwrap_or("")),
                r.run_id
            );
        }
    }
    out
}
