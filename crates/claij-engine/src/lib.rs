//! # claij-engine
//!
//! Runs claij FSMs: the [`Action`] trait and its [`ActionRegistry`], the run loop
//! ([`Engine::run`]) with routing, validation, retries, `on_failure` routes, timeouts, a
//! run deadline and interruption, the run's context, and the built-in actions that need
//! no model (`end`, `transform`, `command`, `human`).

pub mod action;
pub mod actions;
mod drive;
pub mod durable;
pub mod observer;
pub mod registry;
pub mod run;

pub use action::{
    Action, ActionError, ActionInput, ActionOutput, BoxFuture, ModelCall, Outcome, Suspension,
};
pub use durable::{is_dead_local_owner, process_owner};
pub use observer::Observer;
pub use registry::ActionRegistry;
pub use run::{
    Engine, InputError, RunError, RunOptions, RunOutcome, RunStatus, interrupt, new_run_id,
};
pub use tokio_util::sync::CancellationToken;
