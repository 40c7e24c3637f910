//! `claij validate`: check documents, every problem located.

use claij_engine::ActionRegistry;
use serde_json::json;

use super::load;
use crate::{EXIT_FAILED, EXIT_OK};

/// Loads each file and reports every problem; exit 0 when all are valid, 1 otherwise.
pub(super) fn validate(
    registry: &ActionRegistry,
    files: &[std::path::PathBuf],
    as_json: bool,
) -> u8 {
    let mut all_valid = true;
    for file in files {
        let result = load(registry, file);
        all_valid &= result.is_ok();
        if as_json {
            let report = match &result {
                Ok(fsm) => {
                    json!({"file": file, "valid": true, "id": &*fsm.id, "version": fsm.version, "problems": []})
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
                Ok(fsm) => println!(
                    "ok  {}  ({} v{}: {} states, {} transitions)",
                    file.display(),
                    fsm.id,
                    fsm.version,
                    fsm.states.len(),
                    fsm.transitions.len()
                ),
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
