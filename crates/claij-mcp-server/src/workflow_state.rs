//! A bot's workflow state: which behavior and action are current, and which actions were
//! completed when. Kept in ONE file, `<workspace>/.claij/bots/<bot>/workflow_state.json`,
//! read again on every tool call (never trusted from memory) and written atomically (see
//! `save`).
//!
//! Which action is current (see `resolve`): `current_action` when it names an action of
//! the bot; otherwise the action after the last completed one (of the behavior asked
//! for, or of `current_behavior`); otherwise the first action.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::bot_folder::Bot;

/// The state file's name.
pub(crate) const STATE_FILE: &str = "workflow_state.json";

/// The persisted workflow state of one bot.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct WorkflowState {
    /// `bot.behavior` of the current behavior.
    #[serde(default)]
    pub(crate) current_behavior: Option<String>,
    /// `bot.behavior.action` of the current action.
    #[serde(default)]
    pub(crate) current_action: Option<String>,
    /// When the state last changed (RFC 3339).
    #[serde(default)]
    pub(crate) timestamp: Option<String>,
    /// Every completion, oldest first.
    #[serde(default)]
    pub(crate) completed_actions: Vec<CompletedAction>,
}

/// One completed action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct CompletedAction {
    /// `bot.behavior.action`.
    pub(crate) action_state: String,
    /// When it was completed (RFC 3339).
    pub(crate) timestamp: String,
}

/// The state file cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StateError {
    /// It exists but is not a valid workflow state: never reset silently.
    #[error(
        "the workflow state file {} is corrupt: {message}. Fix or delete it (deleting starts the bot from its first action)",
        file.display()
    )]
    Corrupt {
        /// The file.
        file: PathBuf,
        /// Why it cannot be read.
        message: String,
    },
    /// It could not be read or written.
    #[error("the workflow state file {}: {source}", file.display())]
    Io {
        /// The file.
        file: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Where a bot's state file lives under a workspace.
pub(crate) fn state_file(workspace: &Path, bot: &str) -> PathBuf {
    workspace
        .join(".claij")
        .join("bots")
        .join(bot)
        .join(STATE_FILE)
}

/// The current time in RFC 3339 (microseconds, UTC).
pub(crate) fn now() -> String {
    humantime::format_rfc3339_micros(SystemTime::now()).to_string()
}

/// Reads the state file: the default (empty) state when it does not exist.
pub(crate) fn load(file: &Path) -> Result<WorkflowState, StateError> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(WorkflowState::default()),
        Err(source) => {
            return Err(StateError::Io {
                file: file.to_path_buf(),
                source,
            });
        }
    };
    serde_json::from_str(&text).map_err(|e| StateError::Corrupt {
        file: file.to_path_buf(),
        message: e.to_string(),
    })
}

/// Writes the state file atomically: the state goes to a temporary file of its own in the
/// same folder (a unique name, so that two writers never share one), which is flushed to
/// disk and then renamed over the state file; the folder is flushed after the rename. A
/// reader sees the old state or the new one, never a mix.
///
/// Two writers in one process take turns (`BotHost` holds a lock across its
/// read-modify-write); two processes serving one workspace each write whole states, and
/// the last rename wins.
pub(crate) fn save(file: &Path, state: &WorkflowState) -> Result<(), StateError> {
    let io = |source| StateError::Io {
        file: file.to_path_buf(),
        source,
    };
    let dir = match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let text = serde_json::to_string_pretty(state)
        .map_err(|e| io(std::io::Error::other(e.to_string())))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{STATE_FILE}."))
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(io)?;
    tmp.write_all(text.as_bytes()).map_err(io)?;
    tmp.write_all(b"\n").map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(file).map_err(|e| io(e.error))?;
    // The rename is durable once the folder's entry is on disk.
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io)
}

/// A position in a bot's workflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Position {
    /// Behavior and action indices.
    At(usize, usize),
    /// Every behavior is complete.
    AllComplete,
}

/// `bot.behavior`.
pub(crate) fn behavior_path(bot: &Bot, b: usize) -> String {
    format!("{}.{}", bot.name, bot.behaviors[b].name)
}

/// `bot.behavior.action`.
pub(crate) fn action_path(bot: &Bot, b: usize, a: usize) -> String {
    format!(
        "{}.{}.{}",
        bot.name, bot.behaviors[b].name, bot.behaviors[b].actions[a].name
    )
}

/// The behavior a `bot.behavior` path (or a bare behavior name) names.
fn parse_behavior(bot: &Bot, path: &str) -> Option<usize> {
    let name = match path.split_once('.') {
        Some((b, rest)) if b == bot.name => rest,
        Some(_) => return None,
        None => path,
    };
    bot.behaviors.iter().position(|b| b.name == name)
}

/// The action a `bot.behavior.action` path names.
fn parse_action(bot: &Bot, path: &str) -> Option<(usize, usize)> {
    let mut parts = path.split('.');
    let (Some(b), Some(beh), Some(act), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    if b != bot.name {
        return None;
    }
    let bi = bot.behaviors.iter().position(|x| x.name == beh)?;
    let ai = bot.behaviors[bi]
        .actions
        .iter()
        .position(|x| x.name == act)?;
    Some((bi, ai))
}

/// The position after action `a` of behavior `b`: its `next`, else the next behavior's
/// first action, else all complete.
pub(crate) fn after(bot: &Bot, b: usize, a: usize) -> Position {
    match bot.behaviors[b].actions[a].next {
        Some(n) => Position::At(b, n),
        None if b + 1 < bot.behaviors.len() => Position::At(b + 1, 0),
        None => Position::AllComplete,
    }
}

/// The current action per the precedence rules, within behavior `scope` when given (the
/// behavior tool) or anywhere (the bot tool and the close tool):
///
/// 1. `current_action`, when it names an action of the bot (in `scope`, if given);
/// 2. otherwise the action after the last completed one of the behavior (`scope`, else
///    `current_behavior`, else the behavior of the last completion) — crossing into the
///    next behavior only without a scope;
/// 3. otherwise the first action (of `scope`, else of the bot).
pub(crate) fn resolve(bot: &Bot, state: &WorkflowState, scope: Option<usize>) -> Position {
    if let Some((b, a)) = state
        .current_action
        .as_deref()
        .and_then(|p| parse_action(bot, p))
        && scope.is_none_or(|s| s == b)
    {
        return Position::At(b, a);
    }
    let last_completed_of = |b: usize| {
        state
            .completed_actions
            .iter()
            .rev()
            .filter_map(|c| parse_action(bot, &c.action_state))
            .find(|(cb, _)| *cb == b)
    };
    let behavior = scope
        .or_else(|| {
            state
                .current_behavior
                .as_deref()
                .and_then(|p| parse_behavior(bot, p))
        })
        .or_else(|| {
            state
                .completed_actions
                .iter()
                .rev()
                .find_map(|c| parse_action(bot, &c.action_state))
                .map(|(b, _)| b)
        });
    let Some(b) = behavior else {
        return Position::At(0, 0);
    };
    match last_completed_of(b) {
        Some((b, a)) => match (after(bot, b, a), scope) {
            (Position::At(nb, _), Some(s)) if nb != s => Position::At(s, 0),
            (Position::AllComplete, Some(s)) => Position::At(s, 0),
            (p, _) => p,
        },
        None => Position::At(b, 0),
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use claij_engine::ActionRegistry;

    use super::*;
    use crate::bot_folder::load_bot;

    fn bot() -> Bot {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/bots/story-writer");
        load_bot(&dir, &ActionRegistry::durable()).expect("the example bot loads")
    }

    fn state(current: Option<&str>, completed: &[&str]) -> WorkflowState {
        WorkflowState {
            current_behavior: None,
            current_action: current.map(str::to_owned),
            timestamp: None,
            completed_actions: completed
                .iter()
                .map(|c| CompletedAction {
                    action_state: (*c).to_owned(),
                    timestamp: now(),
                })
                .collect(),
        }
    }

    #[test]
    fn the_example_bot_has_four_behaviors_of_five_actions() {
        let bot = bot();
        assert_eq!(bot.name, "story_writer");
        let names: Vec<_> = bot.behaviors.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["shape", "characters", "draft", "revise"]);
        assert!(bot.behaviors.iter().all(|b| b.actions.len() == 5));
    }

    #[test]
    fn a_missing_state_starts_at_the_first_action() {
        let bot = bot();
        assert_eq!(
            resolve(&bot, &WorkflowState::default(), None),
            Position::At(0, 0)
        );
        assert_eq!(
            resolve(&bot, &WorkflowState::default(), Some(2)),
            Position::At(2, 0)
        );
    }

    #[test]
    fn a_valid_current_action_wins_over_completed_actions() {
        let bot = bot();
        let s = state(
            Some("story_writer.shape.gather_context"),
            &[
                "story_writer.shape.gather_context",
                "story_writer.shape.define_premise",
            ],
        );
        assert_eq!(resolve(&bot, &s, None), Position::At(0, 1));
        // The behavior tool of another behavior does not take it.
        assert_eq!(resolve(&bot, &s, Some(1)), Position::At(1, 0));
    }

    #[test]
    fn an_invalid_current_action_falls_back_to_the_one_after_the_last_completed() {
        let bot = bot();
        for current in [
            None,
            Some("story_writer.shape.no_such_action"),
            Some("other_bot.shape.gather_context"),
        ] {
            let s = state(
                current,
                &[
                    "story_writer.shape.initialize_project",
                    "story_writer.shape.gather_context",
                ],
            );
            assert_eq!(resolve(&bot, &s, None), Position::At(0, 2), "{current:?}");
        }
        // After a behavior's last action: the next behavior's first (not within a scope).
        let s = state(None, &["story_writer.shape.write_logline"]);
        assert_eq!(resolve(&bot, &s, None), Position::At(1, 0));
        assert_eq!(resolve(&bot, &s, Some(0)), Position::At(0, 0));
        // Within a scope, the last completion of that behavior counts.
        let s = state(
            None,
            &[
                "story_writer.draft.outline_plot",
                "story_writer.shape.gather_context",
            ],
        );
        assert_eq!(resolve(&bot, &s, Some(2)), Position::At(2, 1));
        // After the very last action: all complete.
        let s = state(None, &["story_writer.revise.final_approval"]);
        assert_eq!(resolve(&bot, &s, None), Position::AllComplete);
    }

    #[test]
    fn current_behavior_picks_the_behavior_of_the_fallback() {
        let bot = bot();
        let mut s = state(
            None,
            &[
                "story_writer.characters.list_cast",
                "story_writer.shape.gather_context",
            ],
        );
        s.current_behavior = Some("story_writer.characters".into());
        assert_eq!(resolve(&bot, &s, None), Position::At(1, 1));
    }

    /// The bot `bot` in memory: behavior `a` with actions x → z (x's `next` skips y),
    /// y → z; behavior `b` with p → q.
    fn small_bot() -> Bot {
        use crate::bot_folder::{Behavior, BotAction, Completion};
        let action = |name: &str, next: Option<usize>| BotAction {
            name: name.into(),
            order: 0,
            next,
            description: None,
            instructions: None,
            templates: Vec::new(),
            trigger_patterns: Vec::new(),
            completes: Completion::OnClose,
            fsm: None,
        };
        let behavior = |name: &str, actions: Vec<BotAction>| Behavior {
            name: name.into(),
            dir: PathBuf::new(),
            description: None,
            trigger_patterns: Vec::new(),
            key_questions: Vec::new(),
            evidence: Vec::new(),
            rules: Vec::new(),
            actions,
        };
        Bot {
            name: "bot".into(),
            description: None,
            trigger_patterns: Vec::new(),
            dir: PathBuf::new(),
            prompts: Vec::new(),
            behaviors: vec![
                behavior(
                    "a",
                    vec![
                        action("x", Some(2)),
                        action("y", Some(2)),
                        action("z", None),
                    ],
                ),
                behavior("b", vec![action("p", Some(1)), action("q", None)]),
            ],
        }
    }

    fn at(
        current_behavior: Option<&str>,
        current: Option<&str>,
        completed: &[&str],
    ) -> WorkflowState {
        let mut s = state(current, completed);
        s.current_behavior = current_behavior.map(str::to_owned);
        s
    }

    #[test]
    fn rule_1_a_current_action_of_the_bot_is_current() {
        let bot = small_bot();
        let s = at(None, Some("bot.a.y"), &["bot.b.p"]);
        assert_eq!(resolve(&bot, &s, None), Position::At(0, 1));
        assert_eq!(resolve(&bot, &s, Some(0)), Position::At(0, 1));
        // Outside the scope asked for, it is not: the scope's own fallback is.
        assert_eq!(resolve(&bot, &s, Some(1)), Position::At(1, 1));
    }

    #[test]
    fn rule_1_ignores_current_actions_that_name_no_action_of_the_bot() {
        let bot = small_bot();
        for current in [
            "other.a.y",
            "bot.a.nope",
            "bot.nope.y",
            "bot.a",
            "bot.a.y.extra",
            "y",
            "",
        ] {
            let s = at(None, Some(current), &["bot.a.x"]);
            // The fallback: after x comes z (its `next`).
            assert_eq!(resolve(&bot, &s, None), Position::At(0, 2), "{current:?}");
        }
    }

    #[test]
    fn rule_2_the_action_after_the_last_completed_one_of_the_current_behavior() {
        let bot = small_bot();
        // `current_behavior` picks the behavior, as `bot.b` or as a bare name.
        for behavior in ["bot.b", "b"] {
            let s = at(Some(behavior), None, &["bot.b.p", "bot.a.x"]);
            assert_eq!(resolve(&bot, &s, None), Position::At(1, 1), "{behavior}");
        }
        // A current behavior with no completion starts at its first action.
        let s = at(Some("bot.b"), None, &["bot.a.x"]);
        assert_eq!(resolve(&bot, &s, None), Position::At(1, 0));
        // Without (a valid) current behavior: the behavior of the last completion.
        for behavior in [None, Some("other.b"), Some("bot.nope")] {
            let s = at(behavior, None, &["bot.b.p", "bot.a.x"]);
            assert_eq!(resolve(&bot, &s, None), Position::At(0, 2), "{behavior:?}");
            let s = at(behavior, None, &["bot.a.x", "bot.b.p"]);
            assert_eq!(resolve(&bot, &s, None), Position::At(1, 1), "{behavior:?}");
        }
        // Completions that name no action of the bot do not count.
        let s = at(None, None, &["bot.a.x", "other.b.p", "bot.b.nope"]);
        assert_eq!(resolve(&bot, &s, None), Position::At(0, 2));
    }

    #[test]
    fn rule_2_crosses_into_the_next_behavior_only_without_a_scope() {
        let bot = small_bot();
        let s = at(None, None, &["bot.a.z"]);
        assert_eq!(resolve(&bot, &s, None), Position::At(1, 0));
        assert_eq!(resolve(&bot, &s, Some(0)), Position::At(0, 0));
        let s = at(None, None, &["bot.a.z", "bot.b.q"]);
        assert_eq!(resolve(&bot, &s, None), Position::AllComplete);
        assert_eq!(resolve(&bot, &s, Some(1)), Position::At(1, 0));
        // Within a scope, the last completion of that behavior counts, not the latest.
        let s = at(Some("bot.b"), None, &["bot.a.x", "bot.b.p"]);
        assert_eq!(resolve(&bot, &s, Some(0)), Position::At(0, 2));
    }

    #[test]
    fn rule_3_the_first_action() {
        let bot = small_bot();
        let empty = WorkflowState::default();
        assert_eq!(resolve(&bot, &empty, None), Position::At(0, 0));
        assert_eq!(resolve(&bot, &empty, Some(1)), Position::At(1, 0));
        let s = at(None, None, &["other.a.x"]);
        assert_eq!(resolve(&bot, &s, None), Position::At(0, 0));
    }

    #[test]
    fn after_follows_next_then_the_next_behavior() {
        let bot = small_bot();
        assert_eq!(after(&bot, 0, 0), Position::At(0, 2));
        assert_eq!(after(&bot, 0, 1), Position::At(0, 2));
        assert_eq!(after(&bot, 0, 2), Position::At(1, 0));
        assert_eq!(after(&bot, 1, 0), Position::At(1, 1));
        assert_eq!(after(&bot, 1, 1), Position::AllComplete);
        assert_eq!(action_path(&bot, 1, 0), "bot.b.p");
        assert_eq!(behavior_path(&bot, 1), "bot.b");
    }

    #[test]
    fn concurrent_saves_never_fail_on_each_other_and_never_tear_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = state_file(dir.path(), "story_writer");
        // States of different sizes, so that a torn write would not parse or not match.
        let states: Vec<WorkflowState> = (0..4)
            .map(|w| {
                let done: Vec<String> = (0..w * 20)
                    .map(|i| format!("story_writer.shape.step_{w}_{i}"))
                    .collect();
                let done: Vec<&str> = done.iter().map(String::as_str).collect();
                state(
                    Some(format!("story_writer.shape.writer_{w}").as_str()),
                    &done,
                )
            })
            .collect();
        save(&file, &states[0]).expect("first save");
        std::thread::scope(|scope| {
            for s in &states {
                let file = &file;
                scope.spawn(move || {
                    for _ in 0..25 {
                        save(file, s).expect("a save never fails on another's temporary file");
                    }
                });
            }
            scope.spawn(|| {
                for _ in 0..100 {
                    let read = load(&file).expect("the file is whole at every moment");
                    assert!(states.contains(&read), "{read:?}");
                }
            });
        });
        let last = load(&file).expect("load");
        assert!(states.contains(&last));
        // No temporary file is left behind.
        let left: Vec<String> = std::fs::read_dir(dir.path().join(".claij/bots/story_writer"))
            .expect("read the folder")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, [STATE_FILE]);
    }

    #[test]
    fn state_files_round_trip_and_corrupt_ones_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = state_file(dir.path(), "story_writer");
        assert_eq!(
            load(&file).expect("missing is empty"),
            WorkflowState::default()
        );
        let s = state(
            Some("story_writer.shape.gather_context"),
            &["story_writer.shape.initialize_project"],
        );
        save(&file, &s).expect("save");
        assert_eq!(load(&file).expect("load"), s);
        std::fs::write(&file, "{\"completed_actions\": 3}").expect("write");
        let err = load(&file).expect_err("corrupt");
        assert!(matches!(err, StateError::Corrupt { .. }), "{err}");
        assert!(
            err.to_string().contains(&file.display().to_string()),
            "{err}"
        );
    }
}
