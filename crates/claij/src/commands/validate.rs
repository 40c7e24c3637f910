//! `claij validate`: check documents, every problem located; warn of attempts no time
//! limit ends (`timeout: none`); with `--explain`, each state's attempt limit and where
//! it comes from.

use claij_core::{AttemptLimit, Fsm, LimitSource, State};
use claij_engine::ActionRegistry;
use serde_json::{Value, json};

use super::load;
use crate::{EXIT_FAILED, EXIT_OK};

/// Loads each file and reports every problem (and warnings, and with `explain` the
/// states' attempt limits); exit 0 when all are valid, 1 otherwise.
pub(super) fn validate(
    registry: &ActionRegistry,
    files: &[std::path::PathBuf],
    as_json: bool,
    explain: bool,
) -> u8 {
    let mut all_valid = true;
    for file in files {
        let result = load(registry, file);
        all_valid &= result.is_ok();
        if as_json {
            let report = match &result {
                Ok(fsm) => {
                    let mut report = json!({"file": file, "valid": true, "id": &*fsm.id, "version": fsm.version, "problems": [], "warnings": warnings(registry, fsm).iter().map(|w| json!({"path": w.path, "state": w.state, "message": w.message})).collect::<Vec<_>>()});
                    if explain {
                        report["limits"] = limits(registry, fsm)
                            .map(|(state, limit)| json!({"state": &*state.id, "action": &*state.action, "timeout": limit.timeout.to_string(), "source": source_word(limit.source)}))
                            .collect();
                    }
                    report
                }
                Err(d) => json!({
                    "file": file,
                    "valid": false,
                    "problems": d.iter().map(|p| json!({
                        "path": p.path.to_string(),
                        "pointer": p.path.pointer(),
                        "line": p.line_col.map(|(l, _)| l),
                        "column": p.line_col.map(|(_, c)| c),
                        "problem": format!("{:?}", p.problem),
                        "message": p.message,
                    })).collect::<Vec<_>>(),
                }),
            };
            println!("{report}");
        } else {
            match &result {
                Ok(fsm) => {
                    println!(
                        "ok  {}  ({} v{}: {} states, {} transitions)",
                        file.display(),
                        fsm.id,
                        fsm.version,
                        fsm.states.len(),
                        fsm.transitions.len()
                    );
                    for w in warnings(registry, fsm) {
                        note!("warn {}: {}: {}", file.display(), w.path, w.message);
                    }
                    if explain {
                        for (state, limit) in limits(registry, fsm) {
                            println!(
                                "  {} ({}): {}  from {}",
                                state.id, state.action, limit.timeout, limit.source
                            );
                        }
                    }
                }
                Err(d) => {
                    note!("bad {}  ({} problem(s))", file.display(), d.0.len());
                    for problem in d.iter() {
                        note!("  {problem}");
                    }
                }
            }
        }
    }
    if all_valid { EXIT_OK } else { EXIT_FAILED }
}

/// Something valid that deserves a look.
struct Warning {
    /// Where in the document.
    path: String,
    /// The state concerned.
    state: String,
    /// What, in words.
    message: String,
}

/// The attempt limit of each state that runs (terminal states never do), in order.
fn limits<'f>(
    registry: &'f ActionRegistry,
    fsm: &'f Fsm,
) -> impl Iterator<Item = (&'f State, AttemptLimit)> + 'f {
    fsm.states
        .iter()
        .filter(|s| !s.is_terminal())
        .map(|s| (s, registry.attempt_limit(fsm, s)))
}

/// The states whose attempts no time limit ends because the document says `timeout:
/// none`, each at the place it says so.
fn warnings(registry: &ActionRegistry, fsm: &Fsm) -> Vec<Warning> {
    fsm.states
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.is_terminal())
        .filter_map(|(i, s)| {
            let limit = registry.attempt_limit(fsm, s);
            if !limit.written_none() {
                return None;
            }
            let path = match limit.source {
                LimitSource::State => format!("$.states[{i}].config.timeout"),
                _ => "$.config.timeout".to_owned(),
            };
            Some(Warning {
                path,
                state: s.id.to_string(),
                message: format!(
                    "state `{}` has `timeout: none`: its attempts are never ended by time \
                     (a `{}` that blocks holds its run until interrupted)",
                    s.id, s.action
                ),
            })
        })
        .collect()
}

/// The word for `source` in JSON reports.
fn source_word(source: LimitSource) -> Value {
    Value::from(match source {
        LimitSource::State => "state",
        LimitSource::Document => "document",
        LimitSource::Operator => "operator",
        LimitSource::BuiltIn => "built-in",
    })
}
