//! A bot's folder of config, loaded and checked: the bot file, its ordered behaviors,
//! each behavior's ordered actions, instruction and template files, guardrails, rules
//! and trigger patterns. The format is documented in docs/MCP-SERVER.md.
//!
//! ```text
//! story-writer/
//!   bot.yaml                      name, description, trigger_patterns, behaviors (ordered)
//!   behaviors/
//!     1_shape/                    number prefix orders folders; optional when naming them
//!       behavior.yaml             description, trigger_patterns, actions (name, order, next, …)
//!       guardrails.yaml           optional: key_questions, evidence
//!       rules.yaml                optional: a list of rules
//!       instructions/NAME.md      an action's instructions (default file name)
//!       templates/…               files actions name as templates
//!   prompts/NAME.md               optional: prompts (see [`crate::bot_prompts`])
//! ```

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use claij_core::{Fsm, KnownActions};

use crate::bot_prompts::BotPrompt;
use crate::tool::is_tool_word;
use regex::Regex;
use serde::Deserialize;
use serde_json::Value;

/// The bot file's name inside a bot folder.
pub(crate) const BOT_FILE: &str = "bot.yaml";
/// A behavior's config file inside its folder.
const BEHAVIOR_FILE: &str = "behavior.yaml";
/// A behavior's optional guardrails file.
const GUARDRAILS_FILE: &str = "guardrails.yaml";
/// A behavior's optional rules file.
const RULES_FILE: &str = "rules.yaml";

/// One problem in a bot folder, naming the file it is in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", file.display())]
pub struct BotProblem {
    /// The file (or folder) at fault.
    pub file: PathBuf,
    /// What is wrong.
    pub message: String,
}

/// Every problem found in a bot folder (never empty).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct BotErrors {
    /// The bot folder.
    pub dir: PathBuf,
    /// The problems, in the order found.
    pub problems: Vec<BotProblem>,
}

impl fmt::Display for BotErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the bot folder {} is invalid ({} problem(s)):",
            self.dir.display(),
            self.problems.len()
        )?;
        for p in &self.problems {
            write!(f, "\n  {p}")?;
        }
        Ok(())
    }
}

/// When an action counts as complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Completion {
    /// Only through the close tool (the default).
    #[default]
    OnClose,
    /// As soon as it has run: the action completes itself.
    OnRun,
}

/// A loaded, checked bot.
#[derive(Debug)]
pub struct Bot {
    /// The bot's name: the prefix of its tools.
    pub name: String,
    /// What it does.
    pub description: Option<String>,
    /// Trigger patterns (regular expressions) of the bot as a whole.
    pub trigger_patterns: Vec<String>,
    /// The bot folder.
    pub dir: PathBuf,
    /// The behaviors, in order.
    pub behaviors: Vec<Behavior>,
    /// Its prompts (`prompts/NAME.md`), served as `BOT_NAME`.
    pub prompts: Vec<BotPrompt>,
}

/// One behavior of a bot.
#[derive(Debug)]
pub struct Behavior {
    /// Its name (the folder name without its number prefix).
    pub name: String,
    /// Its folder.
    pub dir: PathBuf,
    /// What it does.
    pub description: Option<String>,
    /// Trigger patterns (regular expressions).
    pub trigger_patterns: Vec<String>,
    /// Guardrails: questions to settle before acting.
    pub key_questions: Vec<String>,
    /// Guardrails: evidence to gather or show.
    pub evidence: Vec<String>,
    /// Rules that hold for every action of the behavior.
    pub rules: Vec<String>,
    /// The actions, in order.
    pub actions: Vec<BotAction>,
}

/// One action of a behavior.
#[derive(Debug)]
pub struct BotAction {
    /// Its name.
    pub name: String,
    /// Its position (`order`).
    pub order: u32,
    /// The index (in [`Behavior::actions`]) of the action that follows it; `None` for the
    /// behavior's last action.
    pub next: Option<usize>,
    /// What it does.
    pub description: Option<String>,
    /// The instructions text (from its instructions file), if any.
    pub instructions: Option<String>,
    /// Template files: (path relative to the behavior folder, contents).
    pub templates: Vec<(String, String)>,
    /// Trigger patterns (regular expressions).
    pub trigger_patterns: Vec<String>,
    /// When it counts as complete.
    pub completes: Completion,
    /// An FSM the action runs, with the input it starts from (the tool's `input`
    /// argument overrides it).
    pub fsm: Option<FsmAction>,
}

/// An FSM an action runs.
#[derive(Debug)]
pub struct FsmAction {
    /// The loaded FSM.
    pub fsm: Arc<Fsm>,
    /// Its file.
    pub file: PathBuf,
    /// The input event it starts from when the call gives none.
    pub input: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BotFile {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    trigger_patterns: Vec<String>,
    behaviors: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BehaviorFile {
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    trigger_patterns: Vec<String>,
    actions: Vec<ActionEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ActionEntry {
    name: String,
    #[serde(default)]
    order: Option<u32>,
    #[serde(default)]
    next: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    instructions: Option<String>,
    #[serde(default)]
    templates: Vec<String>,
    #[serde(default)]
    trigger_patterns: Vec<String>,
    #[serde(default)]
    completes: Completion,
    #[serde(default)]
    fsm: Option<String>,
    #[serde(default)]
    fsm_input: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct GuardrailsFile {
    #[serde(default)]
    key_questions: Vec<String>,
    #[serde(default)]
    evidence: Vec<String>,
}

/// A folder's name without its number prefix: `1_shape` → `shape`, `shape` → `shape`.
fn strip_number_prefix(name: &str) -> &str {
    match name.split_once('_') {
        Some((n, rest)) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => rest,
        _ => name,
    }
}

/// `path` with its `.` and `..` resolved without reading the file system (a `..` above
/// the start is kept).
fn lexical(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// Collects problems while loading.
struct Loader<'a> {
    problems: Vec<BotProblem>,
    actions: &'a dyn KnownActions,
    /// The bot's folder: every file a behavior names lies inside it.
    root: PathBuf,
}

impl Loader<'_> {
    fn problem(&mut self, file: &Path, message: impl Into<String>) {
        self.problems.push(BotProblem {
            file: file.to_path_buf(),
            message: message.into(),
        });
    }

    fn read(&mut self, file: &Path) -> Option<String> {
        match std::fs::read_to_string(file) {
            Ok(text) => Some(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.problem(file, "missing file");
                None
            }
            Err(e) => {
                self.problem(file, format!("cannot be read: {e}"));
                None
            }
        }
    }

    fn yaml<T: serde::de::DeserializeOwned>(&mut self, file: &Path) -> Option<T> {
        let text = self.read(file)?;
        match serde_yaml_ng::from_str(&text) {
            Ok(v) => Some(v),
            Err(e) => {
                self.problem(file, format!("invalid: {e}"));
                None
            }
        }
    }

    fn patterns(&mut self, file: &Path, what: &str, patterns: &[String]) {
        for p in patterns {
            if let Err(e) = Regex::new(p) {
                // The regex crate's message spans lines (pattern, caret, reason): keep the reason.
                let text = e.to_string();
                let reason = text
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or_default()
                    .trim_start_matches("error: ");
                self.problem(
                    file,
                    format!("{what}: the trigger pattern {p:?} is not a valid regular expression: {reason}"),
                );
            }
        }
    }

    /// The file `rel` names (relative to the behavior folder `dir`), when it lies inside
    /// the bot's folder: not an absolute path, not leading out with `..`, and — when it
    /// exists — its real path (links followed) under the folder's. Otherwise a problem of
    /// `file` (the behavior file) naming `what` (`the action "x": its template`).
    fn inside(&mut self, file: &Path, what: &str, dir: &Path, rel: &str) -> Option<PathBuf> {
        let path = dir.join(rel);
        let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        let root = lexical(&absolute(&self.root));
        let real_root = std::fs::canonicalize(&self.root).unwrap_or_else(|_| root.clone());
        let stays = !Path::new(rel).is_absolute()
            && lexical(&absolute(&path)).starts_with(&root)
            && std::fs::canonicalize(&path).map_or(true, |real| real.starts_with(&real_root));
        if stays {
            Some(path)
        } else {
            self.problem(
                file,
                format!(
                    "{what} {rel:?} is outside the bot's folder (files a bot uses lie inside it)"
                ),
            );
            None
        }
    }

    fn name(&mut self, file: &Path, what: &str, name: &str) {
        if !is_tool_word(name) {
            self.problem(
                file,
                format!("{what} name {name:?} must be 1-64 letters, digits, `_` or `-` (it becomes part of tool names)"),
            );
        }
    }
}

/// Loads and checks the bot folder `dir`. FSMs named by actions are loaded against
/// `actions`. Every problem is reported, each naming its file.
///
/// Serving goes through [`crate::BotHost::load`]; this is public so that a bot folder can
/// be checked (or inspected as a [`Bot`]) without serving it.
pub fn load_bot(dir: &Path, actions: &dyn KnownActions) -> Result<Bot, BotErrors> {
    let mut l = Loader {
        problems: Vec::new(),
        actions,
        root: dir.to_path_buf(),
    };
    let bot = load_into(&mut l, dir);
    match bot {
        Some(bot) if l.problems.is_empty() => Ok(bot),
        _ => Err(BotErrors {
            dir: dir.to_path_buf(),
            problems: l.problems,
        }),
    }
}

fn load_into(l: &mut Loader<'_>, dir: &Path) -> Option<Bot> {
    if !dir.is_dir() {
        l.problem(dir, "not a folder");
        return None;
    }
    let bot_file = dir.join(BOT_FILE);
    let file: BotFile = l.yaml(&bot_file)?;
    l.name(&bot_file, "the bot", &file.name);
    l.patterns(&bot_file, "the bot", &file.trigger_patterns);
    if file.behaviors.is_empty() {
        l.problem(&bot_file, "`behaviors` lists no behavior");
    }
    let folders = behavior_folders(l, &dir.join("behaviors"));
    let mut seen = HashSet::new();
    let mut behaviors = Vec::new();
    for name in &file.behaviors {
        l.name(&bot_file, "a behavior", name);
        if !seen.insert(name.clone()) {
            l.problem(&bot_file, format!("the behavior {name:?} is listed twice"));
            continue;
        }
        match folders.get(name.as_str()) {
            None => l.problem(
                &bot_file,
                format!(
                    "the behavior {name:?} has no folder behaviors/{name}/ or behaviors/N_{name}/"
                ),
            ),
            Some(found) if found.len() > 1 => l.problem(
                &dir.join("behaviors"),
                format!(
                    "duplicate folders for the behavior {name:?}: {}",
                    found
                        .iter()
                        .map(|p| p.file_name().unwrap_or_default().to_string_lossy())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
            Some(found) => {
                if let Some(b) = load_behavior(l, name, &found[0]) {
                    behaviors.push(b);
                }
            }
        }
    }
    for (name, found) in &folders {
        if !seen.contains(name) {
            l.problem(
                &found[0],
                format!("the behavior folder is not listed in {BOT_FILE}'s `behaviors`"),
            );
        }
    }
    let prompts = match crate::bot_prompts::load(dir) {
        Ok(prompts) => prompts,
        Err(problems) => {
            for (file, message) in problems {
                l.problem(&file, message);
            }
            Vec::new()
        }
    };
    Some(Bot {
        name: file.name,
        description: file.description,
        trigger_patterns: file.trigger_patterns,
        dir: dir.to_path_buf(),
        behaviors,
        prompts,
    })
}

/// The behavior folders by name (number prefix stripped), sorted by folder name.
fn behavior_folders(l: &mut Loader<'_>, dir: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let mut out: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            let mut paths: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect();
            paths.sort();
            for p in paths {
                let folder = p
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned();
                out.entry(strip_number_prefix(&folder).to_owned())
                    .or_default()
                    .push(p);
            }
        }
        Err(e) => l.problem(dir, format!("cannot be read: {e}")),
    }
    out
}

fn load_behavior(l: &mut Loader<'_>, name: &str, dir: &Path) -> Option<Behavior> {
    let file = dir.join(BEHAVIOR_FILE);
    let config: BehaviorFile = l.yaml(&file)?;
    l.patterns(
        &file,
        &format!("the behavior {name:?}"),
        &config.trigger_patterns,
    );
    let guardrails_file = dir.join(GUARDRAILS_FILE);
    let guardrails: GuardrailsFile = if guardrails_file.exists() {
        l.yaml(&guardrails_file).unwrap_or_default()
    } else {
        GuardrailsFile::default()
    };
    let rules_file = dir.join(RULES_FILE);
    let rules: Vec<String> = if rules_file.exists() {
        l.yaml(&rules_file).unwrap_or_default()
    } else {
        Vec::new()
    };
    if config.actions.is_empty() {
        l.problem(&file, "`actions` lists no action");
    }
    // Order: by `order` (default: the position in the list, from 1).
    let mut entries: Vec<(u32, ActionEntry)> = config
        .actions
        .into_iter()
        .enumerate()
        .map(|(i, a)| (a.order.unwrap_or(i as u32 + 1), a))
        .collect();
    entries.sort_by_key(|(order, _)| *order);
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut orders = HashSet::new();
    for (i, (order, a)) in entries.iter().enumerate() {
        l.name(&file, "an action", &a.name);
        if index.insert(a.name.clone(), i).is_some() {
            l.problem(&file, format!("duplicate action name {:?}", a.name));
        }
        if !orders.insert(*order) {
            l.problem(
                &file,
                format!("duplicate order {order} (action {:?})", a.name),
            );
        }
    }
    let count = entries.len();
    let mut actions = Vec::with_capacity(count);
    for (i, (order, a)) in entries.into_iter().enumerate() {
        let what = format!("the action {:?}", a.name);
        l.patterns(&file, &what, &a.trigger_patterns);
        let next = match &a.next {
            Some(next) => match index.get(next) {
                Some(&n) => Some(n),
                None => {
                    l.problem(
                        &file,
                        format!("{what}: its next action {next:?} is not an action of the behavior {name:?}"),
                    );
                    None
                }
            },
            None => (i + 1 < count).then_some(i + 1),
        };
        let instructions = match &a.instructions {
            Some(rel) => l
                .inside(&file, &format!("{what}: its instructions file"), dir, rel)
                .and_then(|path| l.read(&path)),
            None => {
                let default = format!("instructions/{}.md", a.name);
                let path = dir.join(&default);
                path.exists()
                    .then(|| {
                        l.inside(
                            &file,
                            &format!("{what}: its instructions file"),
                            dir,
                            &default,
                        )
                    })
                    .flatten()
                    .and_then(|path| l.read(&path))
            }
        };
        let templates = a
            .templates
            .iter()
            .filter_map(|rel| {
                let path = l.inside(&file, &format!("{what}: its template"), dir, rel)?;
                l.read(&path).map(|text| (rel.clone(), text))
            })
            .collect();
        let fsm = a.fsm.as_ref().and_then(|rel| {
            let path = l.inside(&file, &format!("{what}: its FSM file"), dir, rel)?;
            if !path.exists() {
                l.problem(
                    &file,
                    format!("{what}: its FSM file {} is missing", path.display()),
                );
                return None;
            }
            match claij_core::load_file(&path, l.actions) {
                Ok(fsm) => Some(FsmAction {
                    fsm: Arc::new(fsm),
                    file: path,
                    input: a
                        .fsm_input
                        .clone()
                        .unwrap_or_else(|| Value::Object(Default::default())),
                }),
                Err(d) => {
                    l.problem(&path, format!("the FSM of {what} is invalid: {d}"));
                    None
                }
            }
        });
        actions.push(BotAction {
            name: a.name,
            order,
            next,
            description: a.description,
            instructions,
            templates,
            trigger_patterns: a.trigger_patterns,
            completes: a.completes,
            fsm,
        });
    }
    Some(Behavior {
        name: name.to_owned(),
        dir: dir.to_path_buf(),
        description: config.description,
        trigger_patterns: config.trigger_patterns,
        key_questions: guardrails.key_questions,
        evidence: guardrails.evidence,
        rules,
        actions,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::*;
    use crate::test_bots::{PLAN_BEHAVIOR, TITLE_FSM, helper_bot, registry, write};

    fn load(root: &Path) -> Result<Bot, BotErrors> {
        load_bot(root, &registry())
    }

    fn names<T>(items: &[T], name: impl Fn(&T) -> &str) -> Vec<&str> {
        items.iter().map(name).collect()
    }

    #[test]
    fn a_folder_loads_with_its_order_its_files_and_its_fsms() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        helper_bot(root);
        let bot = load(root).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(bot.name, "helper");
        assert_eq!(bot.description.as_deref(), Some("Helps with plans."));
        assert_eq!(bot.trigger_patterns, ["help( me)?"]);
        // Behaviors in the order of bot.yaml; the number prefix is optional.
        assert_eq!(names(&bot.behaviors, |b| &b.name), ["plan", "review"]);
        assert_eq!(bot.behaviors[0].dir, root.join("behaviors/1_plan"));
        assert_eq!(bot.behaviors[1].dir, root.join("behaviors/review"));

        let plan = &bot.behaviors[0];
        assert_eq!(plan.trigger_patterns, ["plan"]);
        assert_eq!(plan.key_questions, ["Who is it for?"]);
        assert_eq!(plan.evidence, ["The sources"]);
        assert_eq!(plan.rules, ["Keep it short."]);
        // Actions by `order`, not by their place in the list.
        assert_eq!(
            names(&plan.actions, |a| &a.name),
            ["gather", "write", "publish"]
        );
        let orders: Vec<u32> = plan.actions.iter().map(|a| a.order).collect();
        assert_eq!(orders, [1, 2, 3]);
        // `next` names an action; without it, the next in order; the last has none.
        let nexts: Vec<Option<usize>> = plan.actions.iter().map(|a| a.next).collect();
        assert_eq!(nexts, [Some(2), Some(2), None]);
        let [gather, write_, publish] = &plan.actions[..] else {
            panic!("three actions");
        };
        // Instructions: the default file instructions/NAME.md, or the file named.
        assert_eq!(gather.instructions.as_deref(), Some("Gather the facts.\n"));
        assert_eq!(
            write_.instructions.as_deref(),
            Some("Write the plan down.\n")
        );
        assert_eq!(publish.instructions, None);
        assert_eq!(
            write_.templates,
            [("templates/plan.md".to_owned(), "# Plan\n".to_owned())]
        );
        assert_eq!(gather.trigger_patterns, ["facts?"]);
        assert_eq!(gather.completes, Completion::OnClose);
        assert_eq!(publish.completes, Completion::OnRun);
        let fsm = publish.fsm.as_ref().expect("publish runs an FSM");
        assert_eq!(&*fsm.fsm.id, "title");
        assert_eq!(
            fsm.file,
            root.join("behaviors/1_plan/../../fsms/title.yaml")
        );
        assert_eq!(fsm.input, json!({"title": "Plan"}));
        assert!(gather.fsm.is_none());

        let review = &bot.behaviors[1];
        assert_eq!(names(&review.actions, |a| &a.name), ["check"]);
        assert_eq!(review.actions[0].order, 1);
        assert_eq!(review.actions[0].next, None);
        assert!(review.key_questions.is_empty() && review.evidence.is_empty());
        assert!(review.rules.is_empty());
        assert_eq!(review.actions[0].instructions, None);
    }

    #[test]
    fn orders_default_to_the_place_in_the_list_and_fsm_input_to_an_empty_object() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        helper_bot(root);
        write(
            root,
            "behaviors/review/behavior.yaml",
            "actions:\n  - name: read\n  - name: check\n    fsm: ../../fsms/title.yaml\n  - name: sign\n",
        );
        let bot = load(root).unwrap_or_else(|e| panic!("{e}"));
        let review = &bot.behaviors[1];
        assert_eq!(
            names(&review.actions, |a| &a.name),
            ["read", "check", "sign"]
        );
        let orders: Vec<u32> = review.actions.iter().map(|a| a.order).collect();
        assert_eq!(orders, [1, 2, 3]);
        let nexts: Vec<Option<usize>> = review.actions.iter().map(|a| a.next).collect();
        assert_eq!(nexts, [Some(1), Some(2), None]);
        let fsm = review.actions[1].fsm.as_ref().expect("check runs an FSM");
        assert_eq!(fsm.input, json!({}));
    }

    /// A fault to make in a valid bot folder, the file the problem must name (relative
    /// to the bot folder), and words its message must hold.
    struct Case {
        fault: &'static str,
        make: fn(&Path),
        file: &'static str,
        says: &'static str,
    }

    fn set_bot(root: &Path, text: &str) {
        write(root, "bot.yaml", text);
    }

    fn set_review(root: &Path, text: &str) {
        write(root, "behaviors/review/behavior.yaml", text);
    }

    const CASES: &[Case] = &[
        Case {
            fault: "no bot file",
            make: |r| std::fs::remove_file(r.join("bot.yaml")).expect("remove"),
            file: "bot.yaml",
            says: "missing file",
        },
        Case {
            fault: "the bot file is not YAML",
            make: |r| set_bot(r, "name: [helper\n"),
            file: "bot.yaml",
            says: "invalid",
        },
        Case {
            fault: "an unknown field in the bot file",
            make: |r| set_bot(r, "name: helper\ncolour: red\nbehaviors: [plan, review]\n"),
            file: "bot.yaml",
            says: "colour",
        },
        Case {
            fault: "no name in the bot file",
            make: |r| set_bot(r, "behaviors: [plan, review]\n"),
            file: "bot.yaml",
            says: "name",
        },
        Case {
            fault: "a bot name that cannot be part of a tool name",
            make: |r| set_bot(r, "name: my helper\nbehaviors: [plan, review]\n"),
            file: "bot.yaml",
            says: "the bot name \"my helper\" must be 1-64 letters",
        },
        Case {
            fault: "a bot trigger pattern that is not a regular expression",
            make: |r| {
                set_bot(
                    r,
                    "name: helper\ntrigger_patterns: ['(open']\nbehaviors: [plan, review]\n",
                )
            },
            file: "bot.yaml",
            says: "the bot: the trigger pattern \"(open\" is not a valid regular expression: unclosed group",
        },
        Case {
            fault: "a behavior listed twice",
            make: |r| set_bot(r, "name: helper\nbehaviors: [plan, review, plan]\n"),
            file: "bot.yaml",
            says: "the behavior \"plan\" is listed twice",
        },
        Case {
            fault: "a listed behavior without a folder",
            make: |r| set_bot(r, "name: helper\nbehaviors: [plan, review, ship]\n"),
            file: "bot.yaml",
            says: "the behavior \"ship\" has no folder behaviors/ship/ or behaviors/N_ship/",
        },
        Case {
            fault: "two folders for one behavior",
            make: |r| write(r, "behaviors/2_plan/behavior.yaml", PLAN_BEHAVIOR),
            file: "behaviors",
            says: "duplicate folders for the behavior \"plan\": 1_plan, 2_plan",
        },
        Case {
            fault: "a behavior folder the bot file does not list",
            make: |r| {
                write(
                    r,
                    "behaviors/3_ship/behavior.yaml",
                    "actions: [{name: go}]\n",
                )
            },
            file: "behaviors/3_ship",
            says: "not listed in bot.yaml's `behaviors`",
        },
        Case {
            fault: "no behavior file",
            make: |r| {
                std::fs::remove_file(r.join("behaviors/review/behavior.yaml")).expect("remove")
            },
            file: "behaviors/review/behavior.yaml",
            says: "missing file",
        },
        Case {
            fault: "an unknown field in a behavior file",
            make: |r| set_review(r, "actions: [{name: check, colour: red}]\n"),
            file: "behaviors/review/behavior.yaml",
            says: "colour",
        },
        Case {
            fault: "a behavior without actions",
            make: |r| set_review(r, "actions: []\n"),
            file: "behaviors/review/behavior.yaml",
            says: "`actions` lists no action",
        },
        Case {
            fault: "a behavior trigger pattern that is not a regular expression",
            make: |r| {
                set_review(
                    r,
                    "trigger_patterns: ['a{2,1}']\nactions: [{name: check}]\n",
                )
            },
            file: "behaviors/review/behavior.yaml",
            says: "the behavior \"review\": the trigger pattern \"a{2,1}\"",
        },
        Case {
            fault: "two actions of one name",
            make: |r| set_review(r, "actions: [{name: check}, {name: check}]\n"),
            file: "behaviors/review/behavior.yaml",
            says: "duplicate action name \"check\"",
        },
        Case {
            fault: "two actions of one order",
            make: |r| set_review(r, "actions: [{name: read}, {name: check, order: 1}]\n"),
            file: "behaviors/review/behavior.yaml",
            says: "duplicate order 1",
        },
        Case {
            fault: "an action name that cannot be part of a tool name",
            make: |r| set_review(r, "actions: [{name: check.all}]\n"),
            file: "behaviors/review/behavior.yaml",
            says: "an action name \"check.all\" must be 1-64 letters",
        },
        Case {
            fault: "a `next` that names no action of the behavior",
            make: |r| set_review(r, "actions: [{name: check, next: gather}]\n"),
            file: "behaviors/review/behavior.yaml",
            says: "the action \"check\": its next action \"gather\" is not an action of the behavior \"review\"",
        },
        Case {
            fault: "an action trigger pattern that is not a regular expression",
            make: |r| set_review(r, "actions: [{name: check, trigger_patterns: ['[z-a]']}]\n"),
            file: "behaviors/review/behavior.yaml",
            says: "the action \"check\": the trigger pattern \"[z-a]\"",
        },
        Case {
            fault: "a missing instructions file",
            make: |r| set_review(r, "actions: [{name: check, instructions: how.md}]\n"),
            file: "behaviors/review/how.md",
            says: "missing file",
        },
        Case {
            fault: "a missing template",
            make: |r| set_review(r, "actions: [{name: check, templates: [form.md]}]\n"),
            file: "behaviors/review/form.md",
            says: "missing file",
        },
        Case {
            fault: "instructions outside the folder",
            make: |r| {
                set_review(
                    r,
                    "actions: [{name: check, instructions: ../../../outside.md}]\n",
                )
            },
            file: "behaviors/review/behavior.yaml",
            says: "the action \"check\": its instructions file \"../../../outside.md\" is outside the bot's folder",
        },
        Case {
            fault: "instructions at an absolute path",
            make: |r| set_review(r, "actions: [{name: check, instructions: /etc/passwd}]\n"),
            file: "behaviors/review/behavior.yaml",
            says: "its instructions file \"/etc/passwd\" is outside the bot's folder",
        },
        Case {
            fault: "a template outside the folder",
            make: |r| {
                set_review(
                    r,
                    "actions: [{name: check, templates: [../../../../etc/hostname]}]\n",
                )
            },
            file: "behaviors/review/behavior.yaml",
            says: "its template \"../../../../etc/hostname\" is outside the bot's folder",
        },
        Case {
            fault: "an FSM file outside the folder",
            make: |r| set_review(r, "actions: [{name: check, fsm: /etc/passwd}]\n"),
            file: "behaviors/review/behavior.yaml",
            says: "its FSM file \"/etc/passwd\" is outside the bot's folder",
        },
        Case {
            fault: "a missing FSM file",
            make: |r| set_review(r, "actions: [{name: check, fsm: check.yaml}]\n"),
            file: "behaviors/review/behavior.yaml",
            says: "the action \"check\": its FSM file",
        },
        Case {
            fault: "an FSM that does not load",
            make: |r| {
                write(
                    r,
                    "behaviors/review/check.yaml",
                    &TITLE_FSM.replace("action: end", "action: nowhere"),
                );
                set_review(r, "actions: [{name: check, fsm: check.yaml}]\n");
            },
            file: "behaviors/review/check.yaml",
            says: "the FSM of the action \"check\" is invalid",
        },
        Case {
            fault: "guardrails that are not guardrails",
            make: |r| write(r, "behaviors/1_plan/guardrails.yaml", "questions: [Why?]\n"),
            file: "behaviors/1_plan/guardrails.yaml",
            says: "invalid",
        },
        Case {
            fault: "rules that are not a list",
            make: |r| write(r, "behaviors/1_plan/rules.yaml", "rule: Keep it short.\n"),
            file: "behaviors/1_plan/rules.yaml",
            says: "invalid",
        },
    ];

    #[test]
    fn each_malformed_folder_reports_one_problem_naming_its_file() {
        for case in CASES {
            let dir = tempfile::tempdir().expect("tempdir");
            let root = dir.path();
            helper_bot(root);
            (case.make)(root);
            let err = match load(root) {
                Ok(_) => panic!("{}: the bot loaded", case.fault),
                Err(e) => e,
            };
            assert_eq!(err.dir, root, "{}", case.fault);
            let [problem] = &err.problems[..] else {
                panic!("{}: one problem expected, got {err}", case.fault);
            };
            assert_eq!(problem.file, root.join(case.file), "{}: {err}", case.fault);
            assert!(
                problem.message.contains(case.says),
                "{}: {:?} does not say {:?}",
                case.fault,
                problem.message,
                case.says
            );
            // The message names the file, so the person knows where to look.
            assert!(
                err.to_string()
                    .contains(&root.join(case.file).display().to_string()),
                "{}: {err}",
                case.fault
            );
        }
    }

    #[test]
    fn files_may_be_shared_inside_the_folder_but_no_link_leads_out_of_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("bot");
        helper_bot(&root);
        write(dir.path(), "secret.md", "the host's secret\n");
        write(&root, "shared/how.md", "Check it twice.\n");
        // Up and back into the bot's folder: a file it shares.
        set_review(
            &root,
            "actions: [{name: check, instructions: ../../shared/how.md}]\n",
        );
        let bot = load(&root).unwrap_or_else(|e| panic!("{e}"));
        let review = &bot.behaviors[1];
        assert_eq!(
            review.actions[0].instructions.as_deref(),
            Some("Check it twice.\n")
        );
        // A link inside the folder to a file outside it, as instructions or a template.
        let link = root.join("behaviors/review/how.md");
        std::os::unix::fs::symlink(dir.path().join("secret.md"), &link).expect("a link");
        for (entry, field) in [
            ("instructions: how.md", "instructions file"),
            ("templates: [how.md]", "template"),
        ] {
            set_review(&root, &format!("actions: [{{name: check, {entry}}}]\n"));
            let err = load(&root).expect_err("a link out of the folder");
            let [problem] = &err.problems[..] else {
                panic!("one problem expected, got {err}");
            };
            assert_eq!(problem.file, root.join("behaviors/review/behavior.yaml"));
            assert!(
                problem.message.contains(&format!(
                    "its {field} \"how.md\" is outside the bot's folder"
                )),
                "{}",
                problem.message
            );
            assert!(!err.to_string().contains("secret\n"), "{err}");
        }
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        helper_bot(root);
        set_bot(
            root,
            "name: helper\ntrigger_patterns: ['(']\nbehaviors: [plan, review]\n",
        );
        set_review(root, "actions: [{name: check, next: nowhere}]\n");
        write(root, "behaviors/1_plan/rules.yaml", "{}\n");
        let err = load(root).expect_err("three faults");
        let files: Vec<PathBuf> = err.problems.iter().map(|p| p.file.clone()).collect();
        assert_eq!(
            files,
            [
                root.join("bot.yaml"),
                root.join("behaviors/1_plan/rules.yaml"),
                root.join("behaviors/review/behavior.yaml"),
            ]
        );
        let text = err.to_string();
        assert!(text.contains("(3 problem(s))"), "{text}");
    }

    #[test]
    fn an_empty_behavior_list_and_a_missing_folder_are_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        helper_bot(root);
        set_bot(root, "name: helper\nbehaviors: []\n");
        let err = load(root).expect_err("no behaviors");
        assert_eq!(err.problems[0].file, root.join("bot.yaml"));
        assert!(
            err.problems[0]
                .message
                .contains("`behaviors` lists no behavior")
        );
        // Both folders are then unlisted.
        assert_eq!(err.problems.len(), 3, "{err}");

        let missing = root.join("nowhere");
        let err = load(&missing).expect_err("no folder");
        assert_eq!(
            err.problems,
            [BotProblem {
                file: missing,
                message: "not a folder".into()
            }]
        );
    }

    #[test]
    fn tool_words_and_number_prefixes() {
        assert!(is_tool_word("a-b_C9"));
        assert!(is_tool_word(&"x".repeat(64)));
        assert!(!is_tool_word(&"x".repeat(65)));
        for bad in ["", "a.b", "a b", "é", "a/b"] {
            assert!(!is_tool_word(bad), "{bad:?}");
        }
        assert_eq!(strip_number_prefix("1_shape"), "shape");
        assert_eq!(strip_number_prefix("12_a_b"), "a_b");
        assert_eq!(strip_number_prefix("shape"), "shape");
        assert_eq!(strip_number_prefix("v1_shape"), "v1_shape");
        assert_eq!(strip_number_prefix("_shape"), "_shape");
    }
}
