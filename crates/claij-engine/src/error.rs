//! Why a run could not be started or continued: [`InputError`] (the input was refused,
//! nothing changed) and [`RunError`] (that, the store, or a run that cannot be resumed).

use claij_core::ValidationIssue;
use claij_core::store::StoreError;

/// The input event cannot start a run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InputError {
    /// The input's `id` names no entry transition, or is missing with several entries.
    #[error("the input {problem}; entries are: {entries}")]
    UnknownEntry {
        /// What is wrong with it.
        problem: String,
        /// The valid entry ids.
        entries: String,
    },
    /// The input does not satisfy its transition's schema.
    #[error("the input does not satisfy the schema of [{from}, {to}]:\n{}", render_issues(.issues))]
    Invalid {
        /// The transition's source (`start` for entries).
        from: String,
        /// The transition's target.
        to: String,
        /// Every validation error.
        issues: Vec<ValidationIssue>,
    },
    /// The transition's dynamic schema could not be resolved.
    #[error("the schema of [{from}, {to}] could not be resolved: {message}")]
    Schema {
        /// The transition's source.
        from: String,
        /// The transition's target.
        to: String,
        /// Why.
        message: String,
    },
    /// A resumed run's input is no answer to the question it stopped for.
    #[error("the answer to the MCP server `{server}`'s question does not fit: {message}")]
    Answer {
        /// The server that asked.
        server: String,
        /// Why (the field and the rule, from the requested schema).
        message: String,
    },
    /// A fork's event names no transition out of the state whose entry it replaces.
    #[error(
        "the event's `id` {id} does not leave `{state}`, the state that made entry {seq}; it may take one of: {routes}"
    )]
    NotFromState {
        /// The state that made the entry.
        state: String,
        /// The entry's sequence number.
        seq: u64,
        /// The event's id.
        id: String,
        /// The transitions out of the state.
        routes: String,
    },
    /// A resumed run's input names a transition the run does not wait on.
    #[error(
        "the input's `id` {id} is not what run `{run}` waits for; it waits for one of: {waiting}"
    )]
    NotWaitedFor {
        /// The run.
        run: String,
        /// The input's id.
        id: String,
        /// The transitions it waits on.
        waiting: String,
    },
}

/// A run could not be started or continued.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RunError {
    /// The input was refused; nothing changed.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The store failed or refused (another process won a race, say).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run cannot be continued this way.
    #[error("run `{run}` {reason}")]
    NotResumable {
        /// The run.
        run: String,
        /// Why, in words.
        reason: String,
    },
    /// The run cannot be forked at that entry; nothing was stored.
    #[error("run `{run}` cannot be forked at entry {seq}: {reason}")]
    NotForkable {
        /// The run.
        run: String,
        /// The entry asked for.
        seq: u64,
        /// Why, in words.
        reason: String,
    },
}

fn render_issues(issues: &[ValidationIssue]) -> String {
    issues
        .iter()
        .map(|i| format!("  {i}"))
        .collect::<Vec<_>>()
        .join("\n")
}
