//! The report rendered: a terminal table ([`text`]), Markdown ([`markdown`]), a
//! self-contained HTML page with SVG charts ([`html`]); JSON is the report serialised.

pub mod html;
pub mod markdown;
pub mod text;

use crate::report::{Cell, FailureKind, ModelSummary, Report};

/// The report as pretty JSON.
pub fn json(report: &Report) -> String {
    serde_json::to_string_pretty(report).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// The summary table's headings.
fn summary_headings() -> Vec<String> {
    let mut h: Vec<String> = ["model", "pass", "95% CI", "1st try", "att/step"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    h.extend(FailureKind::ALL.iter().map(|k| k.heading().to_owned()));
    h.extend(
        ["p50", "p95", "tokens in", "tokens out", "cost"]
            .iter()
            .map(|s| (*s).to_owned()),
    );
    h
}

/// One model's row of the summary table.
fn summary_row(m: &ModelSummary) -> Vec<String> {
    let mut row = vec![
        m.model.clone(),
        format!("{}/{} {}", m.passed, m.runs, percent(m.pass_rate)),
        format!("{}–{}", percent(m.ci_low), percent(m.ci_high)),
        m.first_try_validity
            .map(percent)
            .unwrap_or_else(|| "–".into()),
        m.mean_attempts
            .map(|a| format!("{a:.2}"))
            .unwrap_or_else(|| "–".into()),
    ];
    row.extend(
        FailureKind::ALL
            .iter()
            .map(|k| m.failures.get(k).copied().unwrap_or(0).to_string()),
    );
    row.extend([
        m.latency_p50_ms.map(duration).unwrap_or_else(|| "–".into()),
        m.latency_p95_ms.map(duration).unwrap_or_else(|| "–".into()),
        m.input_tokens.to_string(),
        m.output_tokens.to_string(),
        m.cost_usd.map(cost).unwrap_or_else(|| "unknown".into()),
    ]);
    row
}

/// The rows of the cases × models matrix: a case's name, then its cell text per model
/// (`–` where a model has no run of it).
fn matrix_rows(report: &Report, models: &[&str]) -> Vec<Vec<String>> {
    report
        .cases
        .iter()
        .map(|case| {
            let mut row = vec![case.clone()];
            row.extend(models.iter().map(|m| {
                report
                    .cell(case, m)
                    .map(|c| cell_text(&c))
                    .unwrap_or_else(|| "–".into())
            }));
            row
        })
        .collect()
}

/// A matrix cell in words: `✓`, `✓ 3/3`, `✗ wrong-answer`, `1/3 ✗ timeout, wrong-answer`.
fn cell_text(cell: &Cell) -> String {
    let mut kinds: Vec<&str> = Vec::new();
    for k in &cell.failures {
        if !kinds.contains(&k.as_str()) {
            kinds.push(k.as_str());
        }
    }
    match (cell.passed == cell.runs, cell.runs) {
        (true, 1) => "✓".into(),
        (true, n) => format!("✓ {n}/{n}"),
        (false, 1) => format!("✗ {}", kinds.join(", ")),
        (false, n) => format!("{}/{n} ✗ {}", cell.passed, kinds.join(", ")),
    }
}

/// A fraction as a whole percentage.
fn percent(f: f64) -> String {
    format!("{:.0}%", f * 100.0)
}

/// Milliseconds, readably.
fn duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

/// Dollars.
fn cost(usd: f64) -> String {
    format!("${usd:.4}")
}

/// The models' names, in report order.
fn model_names(report: &Report) -> Vec<&str> {
    report.models.iter().map(|m| m.model.as_str()).collect()
}
