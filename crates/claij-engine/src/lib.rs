//! # claij-engine
//!
//! Runs claij FSMs: the [`Action`] trait and its [`ActionRegistry`], the run loop
//! ([`Engine::run`]) with routing, validation, retries, `on_failure` routes, timeouts, a
//! run deadline and interruption, the run's context, the built-in actions that need no
//! model (`end`, `transform`, `command`, `human`), and composition: sub-FSMs (`fsm`),
//! chains ([`Engine::chain`]) and fork/join (`fork`), each child a run of its own in the
//! run tree ([`tree`]).

pub mod action;
pub mod actions;
mod drive;
pub mod durable;
pub mod observer;
pub mod registry;
pub mod run;
pub mod tree;

pub use action::{
    Action, ActionError, ActionInput, ActionOutput, BoxFuture, ModelCall, Outcome, RunScope,
    Suspension,
};
pub use durable::{is_dead_local_owner, process_owner};
pub use observer::Observer;
pub use registry::ActionRegistry;
pub use run::{
    Engine, InputError, RunError, RunOptions, RunOutcome, RunStatus, interrupt, new_run_id,
};
pub use tokio_util::sync::CancellationToken;
pub use tree::ChildRun;
