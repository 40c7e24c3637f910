//! The bot → behavior → action tools of one bot: generation from its folder, and the
//! calls (continue, jump to a behavior, run an action, close the current action,
//! restart). For B behaviors of A actions each: 3 + B + B×A tools.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::bot_folder::{Bot, BotErrors, Completion, load_bot};
use crate::fsm_tools::{self, RunWatch, Runtime};
use crate::tool::{ToolOutput, ToolSpec};
use crate::workflow_state::{
    self, CompletedAction, Position, StateError, WorkflowState, action_path, after, behavior_path,
    resolve,
};

/// Which bot tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BotVerb {
    /// `{bot}`: the current action of the current behavior.
    Continue,
    /// `{bot}_{behavior}`: that behavior's current action.
    Behavior(usize),
    /// `{bot}_{behavior}_{action}`: that action, directly.
    Action(usize, usize),
    /// `{bot}_close_current_action`.
    Close,
    /// `{bot}_restart`.
    Restart,
}

/// One served bot: its folder (reloadable) and its workflow state file.
pub struct BotHost {
    dir: PathBuf,
    state_file: PathBuf,
    workspace: PathBuf,
    bot: RwLock<Arc<Bot>>,
    /// Serialises the read-modify-write of the state file within this process.
    lock: tokio::sync::Mutex<()>,
}

fn patterns_line(patterns: &[String]) -> String {
    if patterns.is_empty() {
        String::new()
    } else {
        format!("\nTrigger patterns: {}", patterns.join(", "))
    }
}

fn input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "input": {
                "type": "object",
                "description": "Only for actions that run a workflow (FSM): the workflow's input event (default: the action's configured input)."
            }
        }
    })
}

impl BotHost {
    /// Loads the bot in `dir`; its state lives under `workspace`.
    pub fn load(dir: &Path, workspace: &Path, runtime: &Runtime) -> Result<Self, BotErrors> {
        let bot = load_bot(dir, runtime.engine.registry())?;
        Ok(Self {
            dir: dir.to_path_buf(),
            state_file: workflow_state::state_file(workspace, &bot.name),
            workspace: workspace.to_path_buf(),
            bot: RwLock::new(Arc::new(bot)),
            lock: tokio::sync::Mutex::new(()),
        })
    }

    /// The bot as last loaded.
    pub(crate) fn bot(&self) -> Arc<Bot> {
        match self.bot.read() {
            Ok(b) => b.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Its workflow state file (for the tests: the tools name it in their answers).
    #[cfg(test)]
    pub(crate) fn state_file(&self) -> &Path {
        &self.state_file
    }

    /// Its tools, in order: `{bot}`, `{bot}_close_current_action`, `{bot}_restart`, then
    /// per behavior `{bot}_{behavior}` followed by its `{bot}_{behavior}_{action}` tools.
    pub(crate) fn specs(&self) -> Vec<ToolSpec> {
        let bot = self.bot();
        let mut out = Vec::new();
        let order = bot
            .behaviors
            .iter()
            .map(|b| b.name.as_str())
            .collect::<Vec<_>>()
            .join(" → ");
        let about = bot
            .description
            .as_deref()
            .map(|d| format!("{d}\n"))
            .unwrap_or_default();
        out.push(ToolSpec {
            name: bot.name.clone(),
            description: format!(
                "{about}Continue with {}: runs the current action of the current behavior (from the persisted workflow state) and returns its instructions. Behaviors in order: {order}.{}",
                bot.name,
                patterns_line(&bot.trigger_patterns)
            ),
            input_schema: input_schema(),
        });
        out.push(ToolSpec {
            name: format!("{}_close_current_action", bot.name),
            description: format!(
                "Mark the current action of {} complete (call it when the person agrees the action is done) and move to the next action; after a behavior's last action, to the next behavior's first.\nTrigger patterns: done, finished, close (the )?(current )?action, next step",
                bot.name
            ),
            input_schema: json!({"type": "object", "properties": {}}),
        });
        out.push(ToolSpec {
            name: format!("{}_restart", bot.name),
            description: format!(
                "Reload {}'s folder and its workflow state, and say where the workflow stands.\nTrigger patterns: restart, reload",
                bot.name
            ),
            input_schema: json!({"type": "object", "properties": {}}),
        });
        for behavior in &bot.behaviors {
            let actions = behavior
                .actions
                .iter()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>()
                .join(" → ");
            out.push(ToolSpec {
                name: format!("{}_{}", bot.name, behavior.name),
                description: format!(
                    "{}Work on the behavior `{}` of {}: runs its current action and makes it the current behavior. Actions in order: {actions}.{}",
                    behavior
                        .description
                        .as_deref()
                        .map(|d| format!("{d}\n"))
                        .unwrap_or_default(),
                    behavior.name,
                    bot.name,
                    patterns_line(&behavior.trigger_patterns)
                ),
                input_schema: input_schema(),
            });
            for action in &behavior.actions {
                out.push(ToolSpec {
                    name: format!("{}_{}_{}", bot.name, behavior.name, action.name),
                    description: format!(
                        "{}Run the action `{}` of the behavior `{}` of {} directly: it becomes the current action ({}).{}",
                        action
                            .description
                            .as_deref()
                            .map(|d| format!("{d}\n"))
                            .unwrap_or_default(),
                        action.name,
                        behavior.name,
                        bot.name,
                        match action.completes {
                            Completion::OnClose => format!(
                                "it does not complete; `{}_close_current_action` does",
                                bot.name
                            ),
                            Completion::OnRun => "it completes itself once it has run".to_owned(),
                        },
                        patterns_line(&action.trigger_patterns)
                    ),
                    input_schema: input_schema(),
                });
            }
        }
        out
    }

    /// Which of this bot's tools `name` is.
    pub(crate) fn route(&self, name: &str) -> Option<BotVerb> {
        let bot = self.bot();
        if name == bot.name {
            return Some(BotVerb::Continue);
        }
        let rest = name.strip_prefix(&bot.name)?.strip_prefix('_')?;
        match rest {
            "close_current_action" => return Some(BotVerb::Close),
            "restart" => return Some(BotVerb::Restart),
            _ => {}
        }
        for (b, behavior) in bot.behaviors.iter().enumerate() {
            if rest == behavior.name {
                return Some(BotVerb::Behavior(b));
            }
            if let Some(action) = rest
                .strip_prefix(&behavior.name)
                .and_then(|r| r.strip_prefix('_'))
                && let Some(a) = behavior.actions.iter().position(|x| x.name == action)
            {
                return Some(BotVerb::Action(b, a));
            }
        }
        None
    }

    fn load_state(&self) -> Result<WorkflowState, ToolOutput> {
        workflow_state::load(&self.state_file).map_err(|e| self.state_error(e))
    }

    fn save_state(&self, state: &WorkflowState) -> Result<(), ToolOutput> {
        workflow_state::save(&self.state_file, state).map_err(|e| self.state_error(e))
    }

    fn state_error(&self, e: StateError) -> ToolOutput {
        tracing::error!(bot = %self.bot().name, "{e}");
        ToolOutput::error(e.to_string())
    }

    /// Calls one of this bot's tools.
    pub(crate) async fn call(
        &self,
        verb: BotVerb,
        args: &Map<String, Value>,
        runtime: &Runtime,
        cancel: CancellationToken,
    ) -> ToolOutput {
        let _guard = self.lock.lock().await;
        let result = match verb {
            BotVerb::Restart => return self.restart(runtime),
            BotVerb::Close => self.close(),
            BotVerb::Continue | BotVerb::Behavior(_) | BotVerb::Action(..) => {
                self.run(verb, args, runtime, cancel).await
            }
        };
        result.unwrap_or_else(|e| e)
    }

    async fn run(
        &self,
        verb: BotVerb,
        args: &Map<String, Value>,
        runtime: &Runtime,
        cancel: CancellationToken,
    ) -> Result<ToolOutput, ToolOutput> {
        let bot = self.bot();
        let mut state = self.load_state()?;
        let position = match verb {
            BotVerb::Action(b, a) => Position::At(b, a),
            BotVerb::Behavior(b) => resolve(&bot, &state, Some(b)),
            _ => resolve(&bot, &state, None),
        };
        let Position::At(b, a) = position else {
            return Ok(ToolOutput::json(json!({
                "status": "all_complete",
                "bot": bot.name,
                "message": format!(
                    "Every behavior of {} is complete. Jump to a behavior (`{}_<behavior>`) or an action to revisit it.",
                    bot.name, bot.name
                ),
                "workflow_state": self.state_file.display().to_string(),
            })));
        };
        let stamp = workflow_state::now();
        state.current_behavior = Some(behavior_path(&bot, b));
        state.current_action = Some(action_path(&bot, b, a));
        state.timestamp = Some(stamp.clone());
        self.save_state(&state)?;

        let behavior = &bot.behaviors[b];
        let action = &behavior.actions[a];
        let mut out = json!({
            "status": "in_progress",
            "bot": bot.name,
            "behavior": behavior.name,
            "action": action.name,
            "instructions": instructions(&bot, b, a, &self.workspace),
            "workspace": self.workspace.display().to_string(),
            "workflow_state": self.state_file.display().to_string(),
        });
        if let Some(fsm) = &action.fsm {
            let input = args
                .get("input")
                .cloned()
                .unwrap_or_else(|| fsm.input.clone());
            match fsm_tools::start(runtime, &fsm.fsm, input, RunWatch::cancelled_by(cancel)).await {
                ToolOutput::Json(run) => out["fsm_run"] = run,
                // `ID_start` answers JSON; content is a plain tool's answer.
                ToolOutput::Content(blocks) => out["fsm_run"] = Value::Array(blocks),
                ToolOutput::Error(message) => {
                    return Err(ToolOutput::error(format!(
                        "the action `{}` runs the workflow `{}` ({}), which refused: {message}",
                        action.name,
                        fsm.fsm.id,
                        fsm.file.display()
                    )));
                }
            }
        }
        if action.completes == Completion::OnRun {
            let next = complete(&bot, &mut state, b, a);
            self.save_state(&state)?;
            out["status"] = json!("completed");
            out["next"] = position_json(&bot, next);
        } else {
            let next = after(&bot, b, a);
            out["next"] = position_json(&bot, next);
        }
        Ok(ToolOutput::json(out))
    }

    fn close(&self) -> Result<ToolOutput, ToolOutput> {
        let bot = self.bot();
        let mut state = self.load_state()?;
        let Position::At(b, a) = resolve(&bot, &state, None) else {
            return Ok(ToolOutput::json(json!({
                "status": "all_complete",
                "bot": bot.name,
                "message": format!("Every behavior of {} is already complete; nothing to close.", bot.name),
            })));
        };
        let next = complete(&bot, &mut state, b, a);
        self.save_state(&state)?;
        let crossed = match next {
            Position::At(nb, _) => nb != b,
            Position::AllComplete => true,
        };
        let message = match next {
            Position::At(nb, na) if nb != b => format!(
                "Closed {}.{}: the behavior `{}` is complete. Next: the behavior `{}`, action `{}`.",
                bot.behaviors[b].name,
                bot.behaviors[b].actions[a].name,
                bot.behaviors[b].name,
                bot.behaviors[nb].name,
                bot.behaviors[nb].actions[na].name
            ),
            Position::At(nb, na) => format!(
                "Closed {}.{}. Next: {}.{}.",
                bot.behaviors[b].name,
                bot.behaviors[b].actions[a].name,
                bot.behaviors[nb].name,
                bot.behaviors[nb].actions[na].name
            ),
            Position::AllComplete => format!(
                "Closed {}.{}: all behaviors of {} are complete.",
                bot.behaviors[b].name, bot.behaviors[b].actions[a].name, bot.name
            ),
        };
        Ok(ToolOutput::json(json!({
            "status": "completed",
            "bot": bot.name,
            "completed": {"behavior": bot.behaviors[b].name, "action": bot.behaviors[b].actions[a].name},
            "next": position_json(&bot, next),
            "behavior_complete": crossed,
            "all_behaviors_complete": next == Position::AllComplete,
            "message": message,
        })))
    }

    fn restart(&self, runtime: &Runtime) -> ToolOutput {
        let before: Vec<String> = self.specs().into_iter().map(|s| s.name).collect();
        match load_bot(&self.dir, runtime.engine.registry()) {
            Ok(bot) => {
                let bot = Arc::new(bot);
                if bot.name != self.bot().name {
                    return ToolOutput::error(format!(
                        "{} now names the bot {:?}, not {:?}: renaming a bot needs a restart of the server",
                        self.dir.join(crate::bot_folder::BOT_FILE).display(),
                        bot.name,
                        self.bot().name
                    ));
                }
                match self.bot.write() {
                    Ok(mut slot) => *slot = bot,
                    Err(poisoned) => *poisoned.into_inner() = bot,
                }
            }
            Err(e) => {
                tracing::error!("{e}");
                return ToolOutput::error(format!("{e}\nThe bot as loaded before is kept."));
            }
        }
        let bot = self.bot();
        let state = match self.load_state() {
            Ok(s) => s,
            Err(e) => return e,
        };
        let after: Vec<String> = self.specs().into_iter().map(|s| s.name).collect();
        ToolOutput::json(json!({
            "status": "restarted",
            "bot": bot.name,
            "behaviors": bot.behaviors.iter().map(|b| &b.name).collect::<Vec<_>>(),
            "tools": after.len(),
            "tools_changed": before != after,
            "current": position_json(&bot, resolve(&bot, &state, None)),
            "completed_actions": state.completed_actions.len(),
            "workflow_state": self.state_file.display().to_string(),
        }))
    }
}

/// Marks action `(b, a)` complete and makes the one after it current; returns it.
fn complete(bot: &Bot, state: &mut WorkflowState, b: usize, a: usize) -> Position {
    let stamp = workflow_state::now();
    state.completed_actions.push(CompletedAction {
        action_state: action_path(bot, b, a),
        timestamp: stamp.clone(),
    });
    let next = after(bot, b, a);
    match next {
        Position::At(nb, na) => {
            state.current_behavior = Some(behavior_path(bot, nb));
            state.current_action = Some(action_path(bot, nb, na));
        }
        Position::AllComplete => {
            state.current_behavior = None;
            state.current_action = None;
        }
    }
    state.timestamp = Some(stamp);
    next
}

fn position_json(bot: &Bot, p: Position) -> Value {
    match p {
        Position::At(b, a) => json!({
            "behavior": bot.behaviors[b].name,
            "action": bot.behaviors[b].actions[a].name,
        }),
        Position::AllComplete => Value::Null,
    }
}

/// The instructions of action `(b, a)`, assembled from the behavior folder's files:
/// descriptions, the instructions file, templates, guardrails, rules, and how to finish.
fn instructions(bot: &Bot, b: usize, a: usize, workspace: &Path) -> String {
    let behavior = &bot.behaviors[b];
    let action = &behavior.actions[a];
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# {} — behavior `{}` ({} of {}), action `{}` ({} of {})",
        bot.name,
        behavior.name,
        b + 1,
        bot.behaviors.len(),
        action.name,
        a + 1,
        behavior.actions.len()
    );
    if let Some(d) = &behavior.description {
        let _ = writeln!(s, "\n{}", d.trim_end());
    }
    if let Some(d) = &action.description {
        let _ = writeln!(s, "\n## Action\n\n{}", d.trim_end());
    }
    if let Some(text) = &action.instructions {
        let _ = writeln!(s, "\n## Instructions\n\n{}", text.trim_end());
    }
    for (path, text) in &action.templates {
        let _ = writeln!(
            s,
            "\n## Template `{path}`\n\nFill in this template:\n\n```\n{}\n```",
            text.trim_end()
        );
    }
    if !behavior.key_questions.is_empty() || !behavior.evidence.is_empty() {
        let _ = writeln!(s, "\n## Guardrails");
        if !behavior.key_questions.is_empty() {
            let _ = writeln!(
                s,
                "\nKey questions — settle these with the person before going on:"
            );
            for q in &behavior.key_questions {
                let _ = writeln!(s, "- {q}");
            }
        }
        if !behavior.evidence.is_empty() {
            let _ = writeln!(s, "\nEvidence — gather it and show it:");
            for e in &behavior.evidence {
                let _ = writeln!(s, "- {e}");
            }
        }
    }
    if !behavior.rules.is_empty() {
        let _ = writeln!(s, "\n## Rules\n");
        for r in &behavior.rules {
            let _ = writeln!(s, "- {r}");
        }
    }
    let _ = writeln!(
        s,
        "\n## When done\n\nWork in {}. When the person agrees this action is done, call `{}_close_current_action`.",
        workspace.display(),
        bot.name
    );
    if action.completes == Completion::OnRun {
        let _ = writeln!(s, "This action completes itself once it has run.");
    }
    s
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::{Map, Value, json};
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::test_bots::{helper_bot, runtime, write};

    /// The tools of `helper` ([`helper_bot`]), in order, with the verb each routes to.
    fn expected() -> Vec<(&'static str, BotVerb)> {
        vec![
            ("helper", BotVerb::Continue),
            ("helper_close_current_action", BotVerb::Close),
            ("helper_restart", BotVerb::Restart),
            ("helper_plan", BotVerb::Behavior(0)),
            ("helper_plan_gather", BotVerb::Action(0, 0)),
            ("helper_plan_write", BotVerb::Action(0, 1)),
            ("helper_plan_publish", BotVerb::Action(0, 2)),
            ("helper_review", BotVerb::Behavior(1)),
            ("helper_review_check", BotVerb::Action(1, 0)),
        ]
    }

    async fn host(root: &Path) -> (BotHost, Runtime) {
        let runtime = runtime(root).await;
        helper_bot(&root.join("bot"));
        let host = BotHost::load(&root.join("bot"), &root.join("work"), &runtime)
            .unwrap_or_else(|e| panic!("{e}"));
        (host, runtime)
    }

    async fn call(host: &BotHost, runtime: &Runtime, verb: BotVerb) -> Value {
        call_with(host, runtime, verb, Map::new()).await
    }

    async fn call_with(
        host: &BotHost,
        runtime: &Runtime,
        verb: BotVerb,
        args: Map<String, Value>,
    ) -> Value {
        match host
            .call(verb, &args, runtime, CancellationToken::new())
            .await
        {
            ToolOutput::Json(v) => v,
            other => panic!("{verb:?} failed: {other:?}"),
        }
    }

    fn saved(host: &BotHost) -> WorkflowState {
        workflow_state::load(host.state_file()).expect("the state file reads")
    }

    #[tokio::test]
    async fn three_plus_b_plus_b_times_a_tools_each_routed_to_its_verb() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (host, _runtime) = host(dir.path()).await;
        let specs = host.specs();
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        let expected = expected();
        // 3 + B + the actions: 3 + 2 + (3 + 1).
        assert_eq!(names, expected.iter().map(|(n, _)| *n).collect::<Vec<_>>());
        for (name, verb) in &expected {
            assert_eq!(host.route(name), Some(*verb), "{name}");
        }
        for name in [
            "",
            "helpe",
            "helperx",
            "helper_",
            "helper_plan_",
            "helper_plan_nope",
            "helper_nope",
            "other_plan",
            "helper_review_gather",
        ] {
            assert_eq!(host.route(name), None, "{name:?}");
        }
        // Descriptions carry the trigger patterns and the order.
        assert!(
            specs[0]
                .description
                .contains("Trigger patterns: help( me)?")
        );
        assert!(specs[0].description.contains("plan → review"));
        assert!(specs[3].description.contains("gather → write → publish"));
        assert!(specs[4].description.contains("Trigger patterns: facts?"));
        assert!(specs[6].description.contains("completes itself"));
    }

    #[tokio::test]
    async fn continue_close_and_completion_walk_the_workflow() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (host, runtime) = host(dir.path()).await;

        let out = call(&host, &runtime, BotVerb::Continue).await;
        assert_eq!(out["status"], "in_progress");
        assert_eq!(
            (out["behavior"].clone(), out["action"].clone()),
            (json!("plan"), json!("gather"))
        );
        assert_eq!(
            out["next"],
            json!({"behavior": "plan", "action": "publish"})
        );
        let instructions = out["instructions"].as_str().expect("instructions");
        for part in [
            "Gather the facts.",
            "Who is it for?",
            "The sources",
            "Keep it short.",
            "helper_close_current_action",
        ] {
            assert!(instructions.contains(part), "{part}: {instructions}");
        }
        assert_eq!(
            saved(&host).current_action.as_deref(),
            Some("helper.plan.gather")
        );
        // Running an action does not complete it.
        assert!(saved(&host).completed_actions.is_empty());

        let out = call(&host, &runtime, BotVerb::Close).await;
        assert_eq!(out["status"], "completed");
        assert_eq!(
            out["completed"],
            json!({"behavior": "plan", "action": "gather"})
        );
        assert_eq!(
            out["next"],
            json!({"behavior": "plan", "action": "publish"})
        );
        assert_eq!(out["behavior_complete"], false);
        let state = saved(&host);
        assert_eq!(
            state
                .completed_actions
                .iter()
                .map(|c| c.action_state.as_str())
                .collect::<Vec<_>>(),
            ["helper.plan.gather"]
        );
        assert_eq!(state.current_action.as_deref(), Some("helper.plan.publish"));

        // publish runs its FSM and completes itself.
        let out = call(&host, &runtime, BotVerb::Continue).await;
        assert_eq!(out["action"], "publish");
        assert_eq!(out["status"], "completed");
        assert_eq!(out["fsm_run"]["status"], "completed");
        assert_eq!(out["fsm_run"]["result"]["title"], "Plan");
        assert_eq!(
            out["next"],
            json!({"behavior": "review", "action": "check"})
        );
        assert_eq!(
            saved(&host).current_action.as_deref(),
            Some("helper.review.check")
        );

        let out = call(&host, &runtime, BotVerb::Continue).await;
        assert_eq!(out["action"], "check");
        let out = call(&host, &runtime, BotVerb::Close).await;
        assert_eq!(out["behavior_complete"], true);
        assert_eq!(out["all_behaviors_complete"], true);
        assert_eq!(out["next"], Value::Null);
        let state = saved(&host);
        assert_eq!(state.current_action, None);
        assert_eq!(state.completed_actions.len(), 3);

        // All complete: continuing and closing say so and change nothing.
        assert_eq!(
            call(&host, &runtime, BotVerb::Continue).await["status"],
            "all_complete"
        );
        assert_eq!(
            call(&host, &runtime, BotVerb::Close).await["status"],
            "all_complete"
        );
        assert_eq!(saved(&host).completed_actions.len(), 3);
    }

    #[tokio::test]
    async fn behavior_and_action_tools_jump_and_the_input_overrides_the_fsm_input() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (host, runtime) = host(dir.path()).await;
        let out = call(&host, &runtime, BotVerb::Action(0, 1)).await;
        assert_eq!(out["action"], "write");
        assert!(
            out["instructions"]
                .as_str()
                .expect("text")
                .contains("Fill in this template")
        );
        assert_eq!(
            saved(&host).current_action.as_deref(),
            Some("helper.plan.write")
        );
        // The behavior tool of another behavior: that behavior's current action.
        let out = call(&host, &runtime, BotVerb::Behavior(1)).await;
        assert_eq!(out["action"], "check");
        assert_eq!(
            saved(&host).current_behavior.as_deref(),
            Some("helper.review")
        );
        // Back to plan: its current action is the first (nothing of it completed).
        let out = call(&host, &runtime, BotVerb::Behavior(0)).await;
        assert_eq!(out["action"], "gather");

        let mut args = Map::new();
        args.insert("input".into(), json!({"title": "Other"}));
        let out = call_with(&host, &runtime, BotVerb::Action(0, 2), args).await;
        assert_eq!(out["fsm_run"]["result"]["title"], "Other");
        // An input the FSM refuses is an error naming the action and its FSM file.
        let mut args = Map::new();
        args.insert("input".into(), json!({"title": ""}));
        let args_ = args.clone();
        match host
            .call(
                BotVerb::Action(0, 2),
                &args_,
                &runtime,
                CancellationToken::new(),
            )
            .await
        {
            ToolOutput::Error(e) => {
                assert!(
                    e.contains("the action `publish` runs the workflow `title`"),
                    "{e}"
                );
                assert!(e.contains("title.yaml"), "{e}");
            }
            v => panic!("an empty title was taken: {v:?}"),
        }
    }

    #[tokio::test]
    async fn a_corrupt_state_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (host, runtime) = host(dir.path()).await;
        write(
            host.state_file().parent().expect("a folder"),
            workflow_state::STATE_FILE,
            "{\"completed_actions\": 3}",
        );
        for verb in [BotVerb::Continue, BotVerb::Close, BotVerb::Restart] {
            match host
                .call(verb, &Map::new(), &runtime, CancellationToken::new())
                .await
            {
                ToolOutput::Error(e) => {
                    assert!(e.contains(&host.state_file().display().to_string()), "{e}");
                    assert!(e.contains("corrupt"), "{e}");
                }
                v => panic!("{verb:?} answered {v:?}"),
            }
        }
    }

    #[tokio::test]
    async fn restart_reloads_the_folder_and_keeps_the_old_bot_when_the_new_one_is_broken() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (host, runtime) = host(dir.path()).await;
        let folder = dir.path().join("bot");
        call(&host, &runtime, BotVerb::Close).await;

        // Unchanged: the same tools.
        let out = call(&host, &runtime, BotVerb::Restart).await;
        assert_eq!(out["status"], "restarted");
        assert_eq!(out["tools_changed"], false);
        assert_eq!(out["tools"], 9);
        assert_eq!(out["completed_actions"], 1);
        assert_eq!(
            out["current"],
            json!({"behavior": "plan", "action": "publish"})
        );

        // A new action: a new tool, routed.
        write(
            &folder,
            "behaviors/review/behavior.yaml",
            "actions: [{name: check}, {name: sign}]\n",
        );
        let out = call(&host, &runtime, BotVerb::Restart).await;
        assert_eq!(out["tools_changed"], true);
        assert_eq!(out["tools"], 10);
        assert_eq!(
            host.route("helper_review_sign"),
            Some(BotVerb::Action(1, 1))
        );

        // A broken folder: an error, and the bot as loaded before is kept.
        write(&folder, "behaviors/review/behavior.yaml", "actions: []\n");
        let before: Vec<String> = host.specs().into_iter().map(|s| s.name).collect();
        match host
            .call(
                BotVerb::Restart,
                &Map::new(),
                &runtime,
                CancellationToken::new(),
            )
            .await
        {
            ToolOutput::Error(e) => {
                assert!(e.contains("`actions` lists no action"), "{e}");
                assert!(e.contains("kept"), "{e}");
            }
            v => panic!("a broken bot was loaded: {v:?}"),
        }
        let after: Vec<String> = host.specs().into_iter().map(|s| s.name).collect();
        assert_eq!(before, after);

        // A renamed bot needs a restart of the server.
        write(
            &folder,
            "behaviors/review/behavior.yaml",
            "actions: [{name: check}]\n",
        );
        write(
            &folder,
            "bot.yaml",
            "name: other\nbehaviors: [plan, review]\n",
        );
        match host
            .call(
                BotVerb::Restart,
                &Map::new(),
                &runtime,
                CancellationToken::new(),
            )
            .await
        {
            ToolOutput::Error(e) => assert!(e.contains("renaming a bot needs a restart"), "{e}"),
            v => panic!("the bot was renamed: {v:?}"),
        }
        assert_eq!(host.bot().name, "helper");
    }
}
