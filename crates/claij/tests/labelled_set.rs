//! The project's labelled set (examples/evals/labelled/, docs/EVAL.md "The labelled
//! set"), read from its manifest (examples/evals/labelled/MANIFEST: a development part,
//! tuned on, and a test part, held out): every category's FSM and cases exist, enough
//! cases per category (150 in all, at least half of them held out), balanced between
//! their answers, none copied from the older sets or from another category; every FSM
//! it runs validates through the real binary; every case's input is accepted by its
//! FSM's entry; every expectation names something the FSM can produce (a terminal
//! state, a route into it, a field of the final event whose schema admits the expected
//! value); and every file a tool-use question reads holds the answer the case expects
//! (a held-out token in that one file only). No model runs here: the set's figures are
//! measured with `claij eval`.

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

/// One category of the set, a line of the manifest: its part, its name, the FSM it runs
/// and its cases.
struct Category {
    part: Part,
    name: String,
    fsm: String,
    cases: String,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Part {
    /// The development part: prompts may be tuned on it.
    Dev,
    /// The test part: held out, run once per prompt change and reported, never tuned on.
    Test,
}

const MANIFEST: &str = "examples/evals/labelled/MANIFEST";

/// The least number of cases of a category: 10, and 15 for the two first categories.
fn at_least(category: &Category) -> usize {
    match category.name.as_str() {
        "extraction" | "routing" => 15,
        _ => 10,
    }
}

/// The manifest's categories (`PART CATEGORY FSM CASES` a line, `#` comments).
fn manifest() -> Vec<Category> {
    let text = std::fs::read_to_string(root().join(MANIFEST))
        .unwrap_or_else(|e| panic!("{MANIFEST}: {e}"));
    let mut set: Vec<Category> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let at = format!("{MANIFEST}:{}", n + 1);
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [part, name, fsm, cases] = fields[..] else {
            panic!("{at}: `PART CATEGORY FSM CASES` wanted, got `{line}`");
        };
        let part = match part {
            "dev" => Part::Dev,
            "test" => Part::Test,
            other => panic!("{at}: part `{other}`: `dev` or `test` wanted"),
        };
        assert!(
            !name.is_empty()
                && name.len() <= 20
                && name
                    .split('-')
                    .all(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_lowercase())),
            "{at}: category `{name}`: a short kebab-case name wanted"
        );
        assert!(
            set.iter().all(|c| c.name != name),
            "{at}: category `{name}` listed twice"
        );
        set.push(Category {
            part,
            name: name.to_owned(),
            fsm: fsm.to_owned(),
            cases: cases.to_owned(),
        });
    }
    set
}

fn cases(category: &Category) -> Vec<Case> {
    load_cases(&root().join(&category.cases))
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
fn the_manifest_names_files_that_exist_in_both_parts() {
    let set = manifest();
    for category in &set {
        for file in [&category.fsm, &category.cases] {
            assert!(
                root().join(file).is_file(),
                "{MANIFEST}: category `{}`: {file} does not exist",
                category.name
            );
        }
        // The held-out part keeps to its own folder, so nothing in it is shared with
        // what is tuned on.
        if category.part == Part::Test {
            for file in [&category.fsm, &category.cases] {
                assert!(
                    file.starts_with("examples/evals/labelled/test/"),
                    "{MANIFEST}: test category `{}`: {file} is not under examples/evals/labelled/test/",
                    category.name
                );
            }
        }
    }
    for part in [Part::Dev, Part::Test] {
        assert!(
            set.iter().filter(|c| c.part == part).count() >= 2,
            "{MANIFEST}: too few {part:?} categories"
        );
    }
}

#[test]
fn the_set_has_enough_cases_in_every_category_balanced_between_answers() {
    let (mut total, mut held_out) = (0, 0);
    for category in &manifest() {
        let cases = cases(category);
        assert!(
            cases.len() >= at_least(category),
            "{}: {} cases, at least {} wanted",
            category.cases,
            cases.len(),
            at_least(category)
        );
        total += cases.len();
        if category.part == Part::Test {
            held_out += cases.len();
        }
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for case in &cases {
            *counts.entry(answer(case)).or_default() += 1;
        }
        let fsm = load(&category.fsm);
        let ends = fsm.states.iter().filter(|s| s.is_terminal()).count();
        if counts.len() == 1 && ends == 1 {
            // No route and no label to choose: each answer is its own facts (a file's
            // fact, an order's fields), nothing to balance.
            continue;
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
    assert!(
        total >= 150,
        "{total} cases in the set, at least 150 wanted"
    );
    assert!(
        2 * held_out >= total,
        "{held_out} of {total} cases in the test part, at least half wanted"
    );
}

#[test]
fn no_case_is_copied_from_the_older_sets_or_another_category() {
    let older: Vec<Value> = [
        "examples/evals/triage.jsonl",
        "examples/evals/file-question.jsonl",
    ]
    .iter()
    .flat_map(|f| load_cases(&root().join(f)).unwrap())
    .map(|c| c.input)
    .collect();
    let mut seen: Vec<(Value, String)> = Vec::new();
    for category in &manifest() {
        for case in cases(category) {
            assert!(
                !older.contains(&case.input),
                "{} case `{}`: its input is in an older set",
                category.cases,
                case.name
            );
            if let Some((_, other)) = seen.iter().find(|(input, _)| *input == case.input) {
                panic!(
                    "{} case `{}`: its input is also in {other}",
                    category.cases, case.name
                );
            }
            seen.push((
                case.input,
                format!("{} case `{}`", category.cases, case.name),
            ));
        }
    }
}

#[test]
fn every_fsm_of_the_set_validates() {
    let set = manifest();
    let fsms: Vec<&str> = set.iter().map(|c| c.fsm.as_str()).collect();
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
    for category in &manifest() {
        let fsm = load(&category.fsm);
        let cases = cases(category);
        for case in &cases {
            check_case(&fsm, &category.cases, case);
        }
    }
}

/// Every file a tool-use question may read: the `.txt` files under the set's folder.
fn tool_files() -> Vec<(String, String)> {
    fn walk(dir: &Path, into: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, into);
            } else if path.extension().is_some_and(|e| e == "txt") {
                into.push(path);
            }
        }
    }
    let mut paths = Vec::new();
    walk(&root().join("examples/evals/labelled"), &mut paths);
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let name = p.strip_prefix(root()).unwrap_or(&p).display().to_string();
            (name, text)
        })
        .collect()
}

#[test]
fn every_file_question_is_answered_by_its_file_and_not_by_the_question() {
    let all_files = tool_files();
    let mut questions = 0;
    for category in &manifest() {
        for case in cases(category) {
            let Some(file) = case.input.get("file").and_then(Value::as_str) else {
                continue;
            };
            questions += 1;
            let at = format!("{} case `{}`", category.cases, case.name);
            let question = case.input["question"].as_str().unwrap();
            let text = std::fs::read_to_string(root().join(file))
                .unwrap_or_else(|e| panic!("{at}: {file}: {e}"));
            if category.part == Part::Test {
                assert!(
                    file.starts_with("examples/evals/labelled/test/files/"),
                    "{at}: a held-out question reads {file}, outside examples/evals/labelled/test/files/"
                );
            }
            let mut patterns = 0;
            for check in &case.expect.values {
                if let ValueTest::Pattern(p) = &check.test {
                    patterns += 1;
                    let holding: Vec<&str> = text.lines().filter(|l| p.is_match(l)).collect();
                    assert_eq!(
                        holding.len(),
                        1,
                        "{at}: one line of {file} should hold /{p}/: {holding:?}",
                    );
                    assert!(
                        !p.is_match(question),
                        "{at}: the question gives the answer away"
                    );
                    if category.part == Part::Test {
                        // The held-out token is in its file and in no other: only reading
                        // that file gives it.
                        let holders: Vec<&str> = all_files
                            .iter()
                            .filter(|(_, t)| p.is_match(t))
                            .map(|(n, _)| n.as_str())
                            .collect();
                        assert_eq!(
                            holders,
                            [file],
                            "{at}: /{p}/ should be in {file} and in no other file"
                        );
                    }
                }
            }
            assert!(patterns > 0, "{at}: no answer checked");
            assert!(
                text.lines().count() >= 3,
                "{at}: {file} should hold facts beside the answer"
            );
        }
    }
    assert!(
        questions >= 20,
        "{questions} file questions, at least 20 wanted"
    );
}
