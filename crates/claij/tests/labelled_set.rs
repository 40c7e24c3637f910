//! The project's labelled set (examples/evals/labelled/, docs/EVAL.md "The labelled
//! set"): enough cases per category, balanced between their answers, none copied from
//! the older sets; every FSM it runs validates through the real binary; every case's
//! input is accepted by its FSM's entry; every expectation names something the FSM can
//! produce (a terminal state, a route into it, a field of the final event whose schema
//! admits the expected value); and every file a tool-use question reads holds the
//! answer the case expects. No model runs here: the set's figures are measured with
//! `claij eval`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use claij_core::fsm::{Fsm, START, TransitionSchema};
use claij_core::known_actions::{BuiltinNames, ConfigIssue, KnownActions};
use claij_core::schema::{CompiledSchema, with_defs};
use claij_eval::{Case, ValueTest, load_cases};
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One file of the set: the FSM it runs, its cases, and the least number of cases.
struct Category {
    fsm: &'static str,
    cases: &'static str,
    at_least: usize,
}

const SET: [Category; 5] = [
    Category {
        fsm: "examples/person.yaml",
        cases: "examples/evals/labelled/extraction.jsonl",
        at_least: 15,
    },
    Category {
        fsm: "examples/triage.yaml",
        cases: "examples/evals/labelled/routing.jsonl",
        at_least: 15,
    },
    Category {
        fsm: "examples/sentiment.yaml",
        cases: "examples/evals/labelled/classification.jsonl",
        at_least: 10,
    },
    Category {
        fsm: "examples/file-question.yaml",
        cases: "examples/evals/labelled/file-question.jsonl",
        at_least: 10,
    },
    Category {
        fsm: "examples/expense.yaml",
        cases: "examples/evals/labelled/multi-step.jsonl",
        at_least: 10,
    },
];

fn cases(category: &Category) -> Vec<Case> {
    load_cases(&root().join(category.cases))
        .unwrap_or_else(|e| panic!("{} does not load: {e}", category.cases))
}

/// The built-in actions (any config: `claij validate` checks configs) and every
/// `mcp:` dynamic schema, which the MCP client serves when the binary runs.
struct Names;

impl KnownActions for Names {
    fn has_action(&self, action: &str) -> bool {
        BuiltinNames.has_action(action)
    }
    fn action_names(&self) -> Vec<String> {
        BuiltinNames.action_names()
    }
    fn check_config(&self, action: &str, config: &Value) -> Vec<ConfigIssue> {
        BuiltinNames.check_config(action, config)
    }
    fn has_dynamic_schema(&self, name: &str) -> bool {
        name.starts_with("mcp:")
    }
}

fn load(path: &str) -> Fsm {
    claij_core::load_file(&root().join(path), &Names)
        .unwrap_or_else(|e| panic!("{path} does not load: {e:?}"))
}

/// What a case's answer is, for balance: the route (`$.id[0]` equals), else the label
/// (`$.sentiment` equals), else the final state.
fn answer(case: &Case) -> String {
    for check in &case.expect.values {
        let path = check.path.to_string();
        if let (true, ValueTest::Equals(v)) =
            (path == "$.id[0]" || path == "$.sentiment", &check.test)
        {
            return v.as_str().unwrap_or_default().to_owned();
        }
    }
    case.expect.state.clone().unwrap_or_default()
}

#[test]
fn the_set_has_enough_cases_in_every_category_balanced_between_answers() {
    let mut total = 0;
    for category in &SET {
        let cases = cases(category);
        assert!(
            cases.len() >= category.at_least,
            "{}: {} cases, at least {} wanted",
            category.cases,
            cases.len(),
            category.at_least
        );
        total += cases.len();
        if category.cases.ends_with("file-question.jsonl") {
            continue; // every answer is a different fact
        }
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for case in &cases {
            *counts.entry(answer(case)).or_default() += 1;
        }
        assert!(
            counts.len() >= 2,
            "{}: one answer only: {counts:?}",
            category.cases
        );
        let (least, most) = (
            counts.values().min().copied().unwrap_or(0),
            counts.values().max().copied().unwrap_or(0),
        );
        assert!(
            most - least <= 1,
            "{}: answers not balanced: {counts:?}",
            category.cases
        );
    }
    assert!(total >= 60, "{total} cases in the set, at least 60 wanted");
}

#[test]
fn no_case_is_copied_from_the_older_sets() {
    let older: Vec<Value> = [
        "examples/evals/triage.jsonl",
        "examples/evals/file-question.jsonl",
    ]
    .iter()
    .flat_map(|f| load_cases(&root().join(f)).unwrap())
    .map(|c| c.input)
    .collect();
    for category in &SET {
        for case in cases(category) {
            assert!(
                !older.contains(&case.input),
                "{} case `{}`: its input is in an older set",
                category.cases,
                case.name
            );
        }
    }
}

#[test]
fn every_fsm_of_the_set_validates() {
    let fsms: Vec<&str> = SET.iter().map(|c| c.fsm).collect();
    let out = Command::new(env!("CARGO_BIN_EXE_claij"))
        .current_dir(root())
        .arg("validate")
        .args(&fsms)
        .output()
        .expect("claij starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for fsm in fsms {
        assert!(stdout.contains(&format!("ok  {fsm}")), "{fsm}: {stdout}");
    }
}

/// A transition's schema as written, `$ref`s into the shared schemas followed.
fn written_schema<'f>(fsm: &'f Fsm, schema: &'f TransitionSchema) -> Option<&'f Value> {
    let TransitionSchema::Static(written) = schema else {
        return None;
    };
    let mut here = written;
    while let Some(name) = here
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
    {
        here = fsm.schemas.get(name)?;
    }
    Some(here)
}

/// The schema of `field` in the transition `[from, to]`, compiled with the shared
/// schemas; `None` when the transition does not declare the field.
fn field_schema(fsm: &Fsm, from: &str, to: &str, field: &str) -> Option<CompiledSchema> {
    let t = fsm.transition(from, to)?;
    let field = written_schema(fsm, &t.schema)?
        .get("properties")?
        .get(field)?;
    Some(CompiledSchema::compile(with_defs(field, fsm.defs())).unwrap())
}

/// Checks that the value `test` expects could be the field's value: a string for a
/// pattern, and the expected value(s) admitted by the schema.
fn admits(schema: &CompiledSchema, test: &ValueTest) -> Result<(), String> {
    let wanted: Vec<Value> = match test {
        ValueTest::Equals(v) => vec![v.clone()],
        ValueTest::OneOf(vs) => vs.clone(),
        ValueTest::Number { number, .. } => vec![serde_json::json!(number)],
        ValueTest::Pattern(_) => vec![Value::String("x".into())],
    };
    for value in wanted {
        if let Err(issues) = schema.check(&value) {
            return Err(format!("{value} is refused: {issues:?}"));
        }
    }
    Ok(())
}

fn check_case(fsm: &Fsm, file: &str, case: &Case) {
    let at = format!("{file} case `{}`", case.name);
    // The input: accepted by the entry it names, or by the only entry.
    let mut input = case.input.clone();
    let entry = match input.get("id") {
        Some(id) => fsm
            .outgoing(START)
            .find(|t| &t.id_value == id)
            .unwrap_or_else(|| panic!("{at}: its input names no entry")),
        None => {
            assert_eq!(fsm.entries.len(), 1, "{at}: the input names no entry");
            fsm.outgoing(START).next().unwrap()
        }
    };
    input
        .as_object_mut()
        .unwrap_or_else(|| panic!("{at}: the input is not an object"))
        .insert("id".into(), entry.id_value.clone());
    let compiled = entry
        .compiled
        .as_ref()
        .expect("entries have static schemas");
    if let Err(issues) = compiled.check(&input) {
        panic!("{at}: the entry refuses the input: {issues:?}");
    }

    // The final state: a terminal state of the FSM.
    let state = case
        .expect
        .state
        .as_deref()
        .unwrap_or_else(|| panic!("{at}: no expected state"));
    let terminal = fsm
        .state(state)
        .unwrap_or_else(|| panic!("{at}: no state `{state}`"));
    assert!(terminal.is_terminal(), "{at}: `{state}` is not terminal");

    // The route, if the case names it: a state with a transition into the final state.
    let route: Option<String> =
        case.expect
            .values
            .iter()
            .find_map(|c| match (c.path.to_string().as_str(), &c.test) {
                ("$.id[0]", ValueTest::Equals(v)) => {
                    Some(v.as_str().unwrap_or_default().to_owned())
                }
                _ => None,
            });
    if let Some(route) = &route {
        assert!(
            fsm.transition(route, state).is_some(),
            "{at}: no transition [{route}, {state}]"
        );
    }
    let last_steps: Vec<&str> = match &route {
        Some(r) => vec![r.as_str()],
        None => terminal
            .incoming
            .iter()
            .map(|&i| &*fsm.transitions[i].from)
            .collect(),
    };

    // Each field: declared by the final transition, its expected value admitted there and
    // by every transition into the route's state that declares the field too (a route
    // whose schema bounds the value, as `[route, approve]` bounds the amount).
    for check in &case.expect.values {
        let path = check.path.to_string();
        if path == "$.id[0]" {
            continue;
        }
        let field = path
            .strip_prefix("$.")
            .filter(|f| f.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or_else(|| panic!("{at}: `{path}`: this test reads `$.field` paths only"));
        let mut declared = false;
        for from in &last_steps {
            let Some(schema) = field_schema(fsm, from, state, field) else {
                continue;
            };
            declared = true;
            admits(&schema, &check.test)
                .unwrap_or_else(|e| panic!("{at}: [{from}, {state}] {field}: {e}"));
            let into = fsm.state(from).unwrap();
            for &i in &into.incoming {
                let t = &fsm.transitions[i];
                if let Some(schema) = field_schema(fsm, &t.from, &t.to, field) {
                    admits(&schema, &check.test)
                        .unwrap_or_else(|e| panic!("{at}: [{}, {}] {field}: {e}", t.from, t.to));
                }
            }
        }
        assert!(declared, "{at}: `{path}` is not a field of the final event");
    }

    // The tools: offered by a server of the FSM.
    for tool in &case.expect.tool_called {
        let offered = fsm.servers.values().any(|server| {
            server
                .get("tools")
                .and_then(Value::as_array)
                .is_some_and(|tools| tools.iter().any(|t| t == tool))
        });
        assert!(offered, "{at}: no server of the FSM offers `{tool}`");
    }
}

#[test]
fn every_case_fits_its_fsm() {
    for category in &SET {
        let fsm = load(category.fsm);
        let cases = cases(category);
        for case in &cases {
            check_case(&fsm, category.cases, case);
        }
    }
}

#[test]
fn every_file_question_is_answered_by_its_file_and_not_by_the_question() {
    let category = SET
        .iter()
        .find(|c| c.cases.ends_with("file-question.jsonl"))
        .unwrap();
    for case in cases(category) {
        let file = case.input["file"].as_str().unwrap();
        let question = case.input["question"].as_str().unwrap();
        let text = std::fs::read_to_string(root().join(file))
            .unwrap_or_else(|e| panic!("case `{}`: {file}: {e}", case.name));
        let mut patterns = 0;
        for check in &case.expect.values {
            if let ValueTest::Pattern(p) = &check.test {
                patterns += 1;
                let holding: Vec<&str> = text.lines().filter(|l| p.is_match(l)).collect();
                assert_eq!(
                    holding.len(),
                    1,
                    "case `{}`: one line of {file} should hold /{p}/: {holding:?}",
                    case.name
                );
                assert!(
                    !p.is_match(question),
                    "case `{}`: the question gives the answer away",
                    case.name
                );
            }
        }
        assert!(patterns > 0, "case `{}`: no answer checked", case.name);
        assert!(
            text.lines().count() >= 3,
            "case `{}`: {file} should hold facts beside the answer",
            case.name
        );
    }
}
