//! `claij validate`: check documents and what a run of them would meet, every problem
//! located.
//!
//! Each document is loaded and checked; then the models its `llm` states name (against
//! the model layer a run would have), then the child documents its `fsm` and `fork`
//! states name, found where a run finds them ([`child_path`]) and checked the same way,
//! recursively. A problem is reported in the file where it is: an unknown model or a
//! child file that cannot be read in the document naming it, a child's own problems in
//! the child (with the parent's state that names it). A child named by a stored
//! definition (`{id}`) is not checked (validate opens no store): a note says so.
//!
//! A cycle (a document that names itself, through its children or directly) is an error
//! when no document on it can end without starting the next (every path from `start` to
//! an `end` state passes a state that starts one): a run would recurse without end. Else
//! it is a warning: a recursive composition ends when some run takes a path that starts
//! no child, which validate cannot decide, and claij sets no depth limit.
//!
//! Attempts no time limit ends (`timeout: none`) are warned of; with `--explain`, each
//! state's attempt limit is shown with where it comes from.

use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};

use claij_core::{AttemptLimit, Diagnostic, Fsm, JsonPath, LimitSource, Problem, State};
use claij_engine::actions::child_path;
use claij_engine::capability::config_path;
use claij_engine::{ActionRegistry, NeedsOf, Touch, document_needs};
use claij_llm::LlmLayer;
use serde_json::{Value, json};

use super::load;
use crate::{EXIT_FAILED, EXIT_OK};

/// Loads each file and reports every problem, its children's and their children's (and
/// warnings, and with `explain` the states' attempt limits); exit 0 when all are valid, 1
/// otherwise. `layer` is the model layer the states' model names must resolve in.
pub(super) fn validate(
    registry: &ActionRegistry,
    layer: &LlmLayer,
    files: &[PathBuf],
    as_json: bool,
    explain: bool,
) -> u8 {
    let mut walk = Walk {
        registry,
        layer,
        seen: HashSet::new(),
        as_json,
        explain,
        all_valid: true,
    };
    for file in files {
        walk.check(file, None, &mut Vec::new());
    }
    if walk.all_valid { EXIT_OK } else { EXIT_FAILED }
}

/// Where a child document is named: the parent's file, the state, the JSON path.
struct Origin {
    file: String,
    state: String,
    path: JsonPath,
}

/// A child reference of a loaded document.
struct ChildRef {
    /// The state naming it.
    state: String,
    /// Where in the document.
    path: JsonPath,
    /// The file a run would read.
    file: PathBuf,
    /// Whether every visit of the state starts it (not so for a `fork` over a list, which
    /// may be empty).
    forced: bool,
}

/// A document on the way from a top-level file to the one being checked.
struct Frame {
    canonical: PathBuf,
    fsm: Fsm,
    /// Its children, resolved to canonical paths (`None`: cannot be read).
    children: Vec<(String, Option<PathBuf>, bool)>,
}

struct Walk<'a> {
    registry: &'a ActionRegistry,
    layer: &'a LlmLayer,
    /// The child documents checked already (canonical paths): each is checked once.
    seen: HashSet<PathBuf>,
    as_json: bool,
    explain: bool,
    all_valid: bool,
}

impl Walk<'_> {
    /// Checks `file` (named by `origin`, below the documents of `stack`), reports it, then
    /// its children.
    fn check(&mut self, file: &Path, origin: Option<Origin>, stack: &mut Vec<Frame>) {
        let depth = stack.len();
        if let Ok(canonical) = std::fs::canonicalize(file) {
            self.seen.insert(canonical);
        }
        let fsm = match load(self.registry, file) {
            Ok(fsm) => fsm,
            Err(d) => {
                self.all_valid = false;
                self.report(file, depth, origin.as_ref(), None, &d.0, &[], &[]);
                return;
            }
        };
        let mut problems = self.model_problems(&fsm);
        let mut warnings = timeout_warnings(self.registry, &fsm);
        let notes = stored_refs(&fsm);
        let refs = self.child_refs(&fsm);
        let canonical = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_owned());
        let frame = Frame {
            canonical,
            children: refs
                .iter()
                .map(|r| {
                    (
                        r.state.clone(),
                        std::fs::canonicalize(&r.file).ok(),
                        r.forced,
                    )
                })
                .collect(),
            fsm,
        };
        stack.push(frame);
        let mut to_visit = Vec::new();
        for (r, (_, canonical, _)) in refs.iter().zip(&stack[depth].children) {
            let at = |message: String| Diagnostic {
                file: stack[depth].fsm.source.clone(),
                path: r.path.clone(),
                line_col: None,
                problem: Problem::BadConfig,
                message,
            };
            let Some(canonical) = canonical else {
                let why = std::fs::metadata(&r.file)
                    .err()
                    .map_or_else(|| "it cannot be resolved".to_owned(), |e| e.to_string());
                let mut d = at(format!(
                    "state `{}` names the child FSM `{}`, which cannot be read: {why}",
                    r.state,
                    r.file.display()
                ));
                d.problem = Problem::Io;
                problems.push(d);
                continue;
            };
            if let Some(k) = stack.iter().position(|f| &f.canonical == canonical) {
                let (endless, chain) = cycle(&stack[k..]);
                if endless {
                    problems.push(at(format!(
                        "state `{}` names `{}` again ({chain}): no document on this cycle can end without starting the next, so a run would recurse without end",
                        r.state,
                        r.file.display()
                    )));
                } else {
                    warnings.push(at(format!(
                        "state `{}` names `{}` again ({chain}): a recursive composition, which ends only when some run takes a path that starts no child (claij sets no depth limit)",
                        r.state,
                        r.file.display()
                    )));
                }
                continue;
            }
            to_visit.push((r, canonical.clone()));
        }
        self.all_valid &= problems.is_empty();
        let loaded = &stack[depth].fsm;
        self.report(
            file,
            depth,
            origin.as_ref(),
            Some(loaded),
            &problems,
            &warnings,
            &notes,
        );
        for (r, canonical) in to_visit {
            if self.seen.contains(&canonical) {
                continue;
            }
            let origin = Origin {
                file: stack[depth].fsm.source.clone(),
                state: r.state.clone(),
                path: r.path.clone(),
            };
            self.check(&r.file, Some(origin), stack);
        }
        stack.pop();
    }

    /// The model names of `fsm`'s states that do not resolve in the layer, each located.
    fn model_problems(&self, fsm: &Fsm) -> Vec<Diagnostic> {
        document_needs(fsm, self.registry)
            .into_iter()
            .filter(|need| need.touch == Touch::Model)
            .filter_map(|need| {
                self.layer.resolve(&need.value).err().map(|why| Diagnostic {
                    file: fsm.source.clone(),
                    path: need.path,
                    line_col: None,
                    problem: Problem::BadConfig,
                    message: why,
                })
            })
            .collect()
    }

    /// The child files `fsm`'s `fsm` and `fork` states name, as their actions declare them.
    fn child_refs(&self, fsm: &Fsm) -> Vec<ChildRef> {
        let mut refs = Vec::new();
        for state in composing(fsm) {
            let Some(action) = self.registry.action(&state.action) else {
                continue;
            };
            let at = config_path(fsm, &state.id);
            let forced = !(&*state.action == "fork" && state.config.get("over").is_some());
            let needs = action.needs(NeedsOf {
                config: &state.config,
                at: &at,
                fsm,
            });
            refs.extend(
                needs
                    .into_iter()
                    .filter(|n| n.touch == Touch::File)
                    .map(|n| ChildRef {
                        state: state.id.to_string(),
                        path: n.path,
                        file: child_path(&fsm.source, &n.value),
                        forced,
                    }),
            );
        }
        refs
    }

    /// Prints one file's report (indented by its depth below the top-level file).
    #[allow(clippy::too_many_arguments)]
    fn report(
        &self,
        file: &Path,
        depth: usize,
        origin: Option<&Origin>,
        fsm: Option<&Fsm>,
        problems: &[Diagnostic],
        warnings: &[Diagnostic],
        notes: &[String],
    ) {
        if self.as_json {
            let located = |all: &[Diagnostic]| {
                all.iter()
                    .map(|p| {
                        json!({
                            "file": p.file,
                            "path": p.path.to_string(),
                            "pointer": p.path.pointer(),
                            "line": p.line_col.map(|(l, _)| l),
                            "column": p.line_col.map(|(_, c)| c),
                            "problem": format!("{:?}", p.problem),
                            "message": p.message,
                        })
                    })
                    .collect::<Vec<_>>()
            };
            let mut report = json!({
                "file": file,
                "valid": problems.is_empty(),
                "problems": located(problems),
                "warnings": located(warnings),
                "notes": notes,
            });
            if let Some(fsm) = fsm.filter(|_| problems.is_empty()) {
                report["id"] = json!(&*fsm.id);
                report["version"] = json!(fsm.version);
                if self.explain {
                    report["limits"] = limits(self.registry, fsm)
                        .map(|(state, limit)| json!({"state": &*state.id, "action": &*state.action, "timeout": limit.timeout.to_string(), "source": source_word(limit.source)}))
                        .collect();
                }
            }
            if let Some(o) = origin {
                report["parent"] =
                    json!({"file": o.file, "state": o.state, "path": o.path.to_string()});
            }
            println!("{report}");
            return;
        }
        let indent = "  ".repeat(depth);
        let named_by = origin.map_or_else(String::new, |o| {
            format!("; the child of state `{}`, {}: {}", o.state, o.file, o.path)
        });
        match fsm.filter(|_| problems.is_empty()) {
            Some(fsm) => {
                println!(
                    "{indent}ok  {}  ({} v{}: {} states, {} transitions{named_by})",
                    file.display(),
                    fsm.id,
                    fsm.version,
                    fsm.states.len(),
                    fsm.transitions.len()
                );
                if self.explain {
                    for (state, limit) in limits(self.registry, fsm) {
                        println!(
                            "{indent}  {} ({}): {}  from {}",
                            state.id, state.action, limit.timeout, limit.source
                        );
                    }
                }
            }
            None => {
                note!(
                    "{indent}bad {}  ({} problem(s){named_by})",
                    file.display(),
                    problems.len()
                );
                for problem in problems {
                    note!("{indent}  {problem}");
                }
            }
        }
        for warning in warnings {
            note!("{indent}  warning: {warning}");
        }
        for n in notes {
            note!("{indent}  note: {n}");
        }
    }
}

/// The states of `fsm` that start child FSMs.
fn composing(fsm: &Fsm) -> impl Iterator<Item = &claij_core::State> {
    fsm.states
        .iter()
        .filter(|s| matches!(&*s.action, "fsm" | "fork"))
}

/// The children of `fsm` named by a stored definition (`{id}`), which validate does not
/// check: one note each.
fn stored_refs(fsm: &Fsm) -> Vec<String> {
    let mut notes = Vec::new();
    for state in composing(fsm) {
        let at = config_path(fsm, &state.id);
        for key in ["fsm", "fsms"] {
            let items: Vec<(JsonPath, &Value)> = match state.config.get(key) {
                Some(Value::Array(items)) => items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (at.join(key).join(i), v))
                    .collect(),
                Some(one) => vec![(at.join(key), one)],
                None => Vec::new(),
            };
            for (path, item) in items {
                if let Some(id) = item.get("id").and_then(Value::as_str) {
                    notes.push(format!(
                        "{}: {path}: state `{}` names the stored FSM `{id}`, not checked (validate opens no store)",
                        fsm.source, state.id
                    ));
                }
            }
        }
    }
    notes
}

/// Whether a run of the cycle `frames` (each document naming the next, the last naming
/// the first) would recurse without end — no document on it reaches an `end` state from
/// `start` without passing a state that always starts a document of the cycle — and the
/// cycle in words (`a.yaml → b.yaml → a.yaml`).
fn cycle(frames: &[Frame]) -> (bool, String) {
    let on_cycle: HashSet<&PathBuf> = frames.iter().map(|f| &f.canonical).collect();
    let endless = frames.iter().all(|frame| {
        let blocked: HashSet<&str> = frame
            .children
            .iter()
            .filter(|(_, c, forced)| *forced && c.as_ref().is_some_and(|c| on_cycle.contains(c)))
            .map(|(state, _, _)| state.as_str())
            .collect();
        !ends_avoiding(&frame.fsm, &blocked)
    });
    let mut names: Vec<String> = frames.iter().map(|f| f.fsm.source.clone()).collect();
    names.push(frames[0].fsm.source.clone());
    (endless, names.join(" → "))
}

/// Whether a run of `fsm` can reach an `end` state from `start` without entering a state
/// of `blocked`.
fn ends_avoiding(fsm: &Fsm, blocked: &HashSet<&str>) -> bool {
    let mut seen: HashSet<&str> = HashSet::new();
    let mut queue: VecDeque<&str> = VecDeque::from([claij_core::START]);
    while let Some(at) = queue.pop_front() {
        for t in fsm.transitions.iter().filter(|t| &*t.from == at) {
            let to = &*t.to;
            if blocked.contains(to) || !seen.insert(to) {
                continue;
            }
            let terminal = fsm
                .states
                .iter()
                .any(|s| &*s.id == to && &*s.action == claij_core::END_ACTION);
            if terminal {
                return true;
            }
            queue.push_back(to);
        }
    }
    false
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
/// none`, each warned of at the place it says so.
fn timeout_warnings(registry: &ActionRegistry, fsm: &Fsm) -> Vec<Diagnostic> {
    fsm.states
        .iter()
        .filter(|s| !s.is_terminal())
        .filter_map(|s| {
            let limit = registry.attempt_limit(fsm, s);
            if !limit.written_none() {
                return None;
            }
            let path = match limit.source {
                LimitSource::State => config_path(fsm, &s.id).join("timeout"),
                _ => JsonPath::root().join("config").join("timeout"),
            };
            Some(Diagnostic {
                file: fsm.source.clone(),
                path,
                line_col: None,
                problem: Problem::BadConfig,
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
