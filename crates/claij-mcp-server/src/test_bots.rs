//! Bot folders and runtimes for the unit tests, written into temporary folders.

use std::path::Path;
use std::sync::Arc;

use claij_core::Fsm;
use claij_core::store::Durability;
use claij_engine::{ActionRegistry, Engine};

use crate::fsm_tools::Runtime;

/// The FSM `text`, written to `dir/file` and loaded from there.
pub(crate) fn fsm(dir: &Path, file: &str, text: &str) -> Arc<Fsm> {
    write(dir, file, text);
    Arc::new(claij_core::load_file(&dir.join(file), &registry()).unwrap_or_else(|d| panic!("{d}")))
}

/// Writes `text` to `root/rel`, creating the folders on the way.
pub(crate) fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).expect("create the folder");
    }
    std::fs::write(&path, text).expect("write the file");
}

/// An FSM with one entry that ends at once: its result is its input, which needs a
/// `title`.
pub(crate) const TITLE_FSM: &str = "\
id: title
description: Ends at once with its input.
states:
  - id: done
    action: end
xitions:
  - id: [start, done]
    schema:
      type: object
      required: [title]
      properties:
        title: {type: string, minLength: 1}
";

/// The `plan` behavior of [`helper_bot`]: actions listed out of order, one `next` that
/// skips an action, instructions from the default file and from a named one, a template,
/// guardrails, rules, and an action that runs [`TITLE_FSM`] and completes on its own.
pub(crate) const PLAN_BEHAVIOR: &str = "\
description: Make a plan.
trigger_patterns: [plan]
actions:
  - name: write
    order: 2
    instructions: notes/write.md
    templates: [templates/plan.md]
  - name: gather
    order: 1
    next: publish
    trigger_patterns: ['facts?']
  - name: publish
    order: 3
    completes: on_run
    fsm: ../../fsms/title.yaml
    fsm_input: {title: Plan}
";

/// Writes the bot `helper` into `root`: behaviors `plan` (folder `1_plan`; actions
/// gather → publish, write → publish) and `review` (folder `review`, no number; one
/// action, `check`).
pub(crate) fn helper_bot(root: &Path) {
    write(
        root,
        "bot.yaml",
        "name: helper\ndescription: Helps with plans.\ntrigger_patterns: ['help( me)?']\nbehaviors: [plan, review]\n",
    );
    write(root, "fsms/title.yaml", TITLE_FSM);
    write(root, "behaviors/1_plan/behavior.yaml", PLAN_BEHAVIOR);
    write(
        root,
        "behaviors/1_plan/instructions/gather.md",
        "Gather the facts.\n",
    );
    write(
        root,
        "behaviors/1_plan/notes/write.md",
        "Write the plan down.\n",
    );
    write(root, "behaviors/1_plan/templates/plan.md", "# Plan\n");
    write(
        root,
        "behaviors/1_plan/guardrails.yaml",
        "key_questions: [Who is it for?]\nevidence: [The sources]\n",
    );
    write(root, "behaviors/1_plan/rules.yaml", "- Keep it short.\n");
    write(
        root,
        "behaviors/review/behavior.yaml",
        "actions:\n  - name: check\n",
    );
}

/// The durable registry (what the server runs with).
pub(crate) fn registry() -> ActionRegistry {
    ActionRegistry::durable()
}

/// A runtime on a real SQLite store in `dir`.
pub(crate) async fn runtime(dir: &Path) -> Runtime {
    let store = claij_store::open_sqlite(dir.join("runs.db"), Durability::Normal)
        .await
        .expect("open the SQLite store");
    Runtime {
        engine: Arc::new(Engine::new(Arc::new(registry()))),
        store,
    }
}
