//! The report as one self-contained HTML page: inline CSS, inline SVG charts (pass rate
//! with its 95 % interval as whiskers; latency p50 and p95), the tables. No script, no
//! external asset.

use std::fmt::Write as _;

use super::{cell_text, duration, model_names, percent, summary_headings, summary_row};
use crate::report::Report;

/// Escapes text for HTML.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#1d2330;background:#fff}
h1{font-size:1.5em;margin:0 0 .2em}h2{font-size:1.15em;margin:1.6em 0 .5em}
p.meta{color:#5a6372;margin:0 0 1em}
table{border-collapse:collapse;margin:.4em 0;font-size:13px}th,td{border:1px solid #d4d8df;padding:.25em .45em;text-align:left}td{white-space:nowrap}
th{background:#f1f3f6}td.pass{background:#e5f5e9}td.fail{background:#fbe7e7}td.mixed{background:#fdf4dc}
.charts{display:flex;flex-wrap:wrap;gap:2em}svg text{font:12px system-ui,sans-serif;fill:#1d2330}
code{font-size:.92em}li{margin:.2em 0}";

/// Pass rates as horizontal bars with their 95 % interval as whiskers.
fn pass_chart(report: &Report) -> String {
    let (label_w, plot_w, row_h) = (220.0, 360.0, 34.0);
    let height = 40.0 + row_h * report.models.len() as f64;
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{height}" role="img" aria-label="pass rate with 95% confidence interval"><text x="0" y="14" font-weight="bold">Pass rate (bars) with 95% interval (whiskers)</text>"#,
        w = label_w + plot_w + 70.0
    );
    for tick in [0.0, 0.25, 0.5, 0.75, 1.0] {
        let x = label_w + plot_w * tick;
        let _ = write!(
            svg,
            r##"<line x1="{x}" y1="24" x2="{x}" y2="{y2}" stroke="#e1e4e9"/><text x="{x}" y="{ty}" text-anchor="middle" font-size="10">{t}</text>"##,
            y2 = height - 12.0,
            ty = height - 1.0,
            t = percent(tick)
        );
    }
    for (i, m) in report.models.iter().enumerate() {
        let y = 28.0 + row_h * i as f64;
        let bar = plot_w * m.pass_rate;
        let (lo, hi) = (label_w + plot_w * m.ci_low, label_w + plot_w * m.ci_high);
        let mid = y + 10.0;
        let _ = write!(
            svg,
            r##"<text x="{tx}" y="{ty}" text-anchor="end">{name}</text><rect x="{label_w}" y="{y}" width="{bar}" height="20" fill="#4c8bd6"/><line x1="{lo}" y1="{mid}" x2="{hi}" y2="{mid}" stroke="#1d2330" stroke-width="1.5"/><line x1="{lo}" y1="{a}" x2="{lo}" y2="{b}" stroke="#1d2330" stroke-width="1.5"/><line x1="{hi}" y1="{a}" x2="{hi}" y2="{b}" stroke="#1d2330" stroke-width="1.5"/><text x="{vx}" y="{ty}">{v}</text>"##,
            tx = label_w - 8.0,
            ty = y + 14.0,
            name = esc(&m.model),
            a = y + 4.0,
            b = y + 16.0,
            vx = label_w + plot_w + 8.0,
            v = percent(m.pass_rate),
        );
    }
    svg.push_str("</svg>");
    svg
}

/// Latency per model: p50 as a bar, p95 as a marker.
fn latency_chart(report: &Report) -> String {
    let (label_w, plot_w, row_h) = (220.0, 360.0, 34.0);
    let height = 40.0 + row_h * report.models.len() as f64;
    let max = report
        .models
        .iter()
        .filter_map(|m| m.latency_p95_ms)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{height}" role="img" aria-label="latency p50 and p95"><text x="0" y="14" font-weight="bold">Run latency: p50 (bar), p95 (mark); axis up to {m}</text>"#,
        w = label_w + plot_w + 110.0,
        m = esc(&duration(max as u64))
    );
    for (i, m) in report.models.iter().enumerate() {
        let y = 28.0 + row_h * i as f64;
        let p50 = plot_w * m.latency_p50_ms.unwrap_or(0) as f64 / max;
        let p95 = label_w + plot_w * m.latency_p95_ms.unwrap_or(0) as f64 / max;
        let _ = write!(
            svg,
            r##"<text x="{tx}" y="{ty}" text-anchor="end">{name}</text><rect x="{label_w}" y="{y}" width="{p50}" height="20" fill="#8cb369"/><line x1="{p95}" y1="{a}" x2="{p95}" y2="{b}" stroke="#b23a48" stroke-width="3"/><text x="{vx}" y="{ty}">{l50} / {l95}</text>"##,
            tx = label_w - 8.0,
            ty = y + 14.0,
            name = esc(&m.model),
            a = y - 2.0,
            b = y + 22.0,
            vx = label_w + plot_w + 8.0,
            l50 = esc(&m.latency_p50_ms.map(duration).unwrap_or_else(|| "–".into())),
            l95 = esc(&m.latency_p95_ms.map(duration).unwrap_or_else(|| "–".into())),
        );
    }
    svg.push_str("</svg>");
    svg
}

fn table(out: &mut String, headings: &[String], rows: &[Vec<(String, &str)>]) {
    out.push_str("<table><thead><tr>");
    for h in headings {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr></thead><tbody>");
    for row in rows {
        out.push_str("<tr>");
        for (cell, class) in row {
            if class.is_empty() {
                let _ = write!(out, "<td>{}</td>", esc(cell));
            } else {
                let _ = write!(out, "<td class=\"{class}\">{}</td>", esc(cell));
            }
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
}

/// The report as a self-contained HTML page.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let title = format!(
        "claij eval {}: {} v{}",
        report.eval_id, report.fsm, report.fsm_version
    );
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>{STYLE}</style></head><body><h1>{t}</h1><p class=\"meta\">{} case(s) × {} repeat(s) per model{}</p>",
        report.cases.len(),
        report.repeat,
        report
            .store
            .as_ref()
            .map(|s| format!("; runs kept in {}", esc(s)))
            .unwrap_or_default(),
        t = esc(&title),
    );
    let _ = write!(
        out,
        "<div class=\"charts\">{}{}</div><h2>Per model</h2>",
        pass_chart(report),
        latency_chart(report)
    );
    let rows: Vec<Vec<(String, &str)>> = report
        .models
        .iter()
        .map(|m| summary_row(m).into_iter().map(|c| (c, "")).collect())
        .collect();
    table(&mut out, &summary_headings(), &rows);
    out.push_str("<h2>Cases × models</h2>");
    let models = model_names(report);
    let mut headings = vec!["case".to_owned()];
    headings.extend(models.iter().map(|m| (*m).to_owned()));
    let rows: Vec<Vec<(String, &str)>> = report
        .cases
        .iter()
        .map(|case| {
            let mut row = vec![(case.clone(), "")];
            row.extend(models.iter().map(|m| match report.cell(case, m) {
                Some(c) => {
                    let class = if c.passed == c.runs {
                        "pass"
                    } else if c.passed == 0 {
                        "fail"
                    } else {
                        "mixed"
                    };
                    (cell_text(&c), class)
                }
                None => ("–".to_owned(), ""),
            }));
            row
        })
        .collect();
    table(&mut out, &headings, &rows);
    let failed: Vec<_> = report.failed().collect();
    if !failed.is_empty() {
        out.push_str("<h2>Failed runs</h2><ul>");
        for r in failed {
            let _ = write!(
                out,
                "<li><b>{}</b> × {} #{}: {} — {} <code>claij runs trail {}</code></li>",
                esc(&r.case),
                esc(&r.model),
                r.repeat,
                r.failure.map(|k| k.as_str()).unwrap_or("?"),
                esc(r.detail.as_deref().unwrap_or("")),
                esc(&r.run_id)
            );
        }
        out.push_str("</ul>");
    }
    out.push_str("</body></html>\n");
    out
}
