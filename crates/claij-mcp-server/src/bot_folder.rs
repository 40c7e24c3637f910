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
//! ```

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use claij_core::{Fsm, KnownActions};
use regex::Regex;
use serde::Deserialize;
use serde_json::Value;

/// The bot file's name inside a bot folder.
pub const BOT_FILE: &str = "bot.yaml";
/// A behavior's config file inside its folder.
pub const BEHAVIOR_FILE: &str = "behavior.yaml";
/// A behavior's optional guardrails file.
pub const GUARDRAILS_FILE: &str = "guardrails.yaml";
/// A behavior's optional rules file.
pub const RULES_FILE: &str = "rules.yaml";

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

/// Whether `name` may appear in a tool name: 1–64 of `A-Z a-z 0-9 _ -`.
pub fn is_tool_word(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// A folder's name without its number prefix: `1_shape` → `shape`, `shape` → `shape`.
pub fn strip_number_prefix(name: &str) -> &str {
    match name.split_once('_') {
        Some((n, rest)) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => rest,
        _ => name,
    }
}

/// Collects problems while loading.
struct Loader<'a> {
    problems: Vec<BotProblem>,
    actions: &'a dyn KnownActions,
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
pub fn load_bot(dir: &Path, actions: &dyn KnownActions) -> Result<Bot, BotErrors> {
    let mut l = Loader {
        problems: Vec::new(),
        actions,
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
    Some(Bot {
        name: file.name,
        description: file.description,
        trigger_patterns: file.trigger_patterns,
        dir: dir.to_path_buf(),
        behaviors,
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
            Some(rel) => l.read(&dir.join(rel)),
            None => {
                let default = dir.join("instructions").join(format!("{}.md", a.name));
                default.exists().then(|| l.read(&default)).flatten()
            }
        };
        let templates = a
            .templates
            .iter()
            .filter_map(|rel| l.read(&dir.join(rel)).map(|text| (rel.clone(), text)))
            .collect();
        let fsm = a.fsm.as_ref().and_then(|rel| {
            let path = dir.join(rel);
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
