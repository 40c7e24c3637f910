//! # claij-engine
//!
//! Runs claij FSMs: the [`Action`] trait and its [`ActionRegistry`], the run loop
//! ([`Engine::run`]) with routing, validation, retries, `on_failure` routes, timeouts, a
//! run deadline and interruption, the run's context, the built-in actions that need no
//! model (`end`, `transform`, `command`, `human`), and composition: sub-FSMs (`fsm`),
//! chains ([`Engine::chain`]) and fork/join (`fork`), each child a run of its own in the
//! run tree ([`tree`]).
//!
//! ```
//! use std::sync::Arc;
//! use claij_engine::{ActionRegistry, Engine, RunOptions, RunStatus};
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let registry = ActionRegistry::with_builtins();
//! let fsm = claij_core::load_str("greet.yaml", r#"
//! id: greet
//! states:
//!   - id: hello
//!     action: transform
//!     config: {template: '{"id": ["hello", "end"], "text": "hi {{ event.name }}"}'}
//!   - id: end
//!     action: end
//! xitions:
//!   - id: [start, hello]
//!     schema: {type: object, required: [name], properties: {name: {type: string}}}
//!   - id: [hello, end]
//!     schema: {type: object, required: [text]}
//! "#, &registry).expect("a valid document");
//!
//! let engine = Engine::new(Arc::new(registry));
//! let input = json!({"id": ["start", "hello"], "name": "Ada"});
//! let out = engine.run(Arc::new(fsm), input, RunOptions::default()).await.expect("it runs");
//! assert_eq!(out.status, RunStatus::Completed);
//! assert_eq!(out.result.expect("a result")["text"], "hi Ada");
//! assert_eq!(out.trail.len(), 2); // start → hello, hello → end
//! # }
//! ```
//!
//! # Modules
//!
//! - `run`: the `Engine` and its public API: starting runs, resuming them, the queue's
//!   submissions and answers, interrupts, `RunOptions`, `RunOutcome`, run ids.
//! - `drive`: the loop of one run (attempt, route, validate, append; retries, timeouts,
//!   deadline, steps, budgets, questions held open, checkpoints).
//! - `action`: the `Action` trait, `ActionInput` and what an action returns.
//! - `registry`: `ActionRegistry`, actions and dynamic schema providers by name; it is
//!   the loader's `KnownActions`.
//! - `actions`: the built-in actions (`end`, `transform`, `command`, `human`, `fsm`,
//!   `fork`, `publish`) and the placeholders of those layers provide (`llm`, `mcp`,
//!   `http`).
//! - `tree`: the run tree: child runs started or taken where they stand, parents woken,
//!   chains, definitions loaded back from the store.
//! - `durable`: a run's link to its store: lease owner, heartbeat, `LeaseKeeper`.
//! - `recover`: which stored runs can continue without input.
//! - `questions`: the questions MCP servers put to a person during an attempt.
//! - `spend`: budgets in a process: the `Ledger` of a run tree and each attempt's `Meter`.
//! - `migrate`: parked runs moved to another version of their FSM (plans, then moves).
//! - `events`: triggers stored as subscriptions, published events dispatched.
//! - `observer`: the `Observer` trait, told of runs as they go.
//! - `capability`: what documents touch outside their runs, and the `Policy` of what an
//!   API client's documents may touch.
//! - `egress`: where the process may connect on an API client's behalf.

pub mod action;
pub mod actions;
pub mod capability;
pub mod cassette;
mod drive;
pub mod durable;
pub mod egress;
mod engine;
mod error;
pub mod events;
pub mod migrate;
pub mod observer;
mod outcome;
pub mod questions;
pub mod recover;
pub mod registry;
pub mod run;
pub mod spend;
pub mod tree;

pub use action::{
    Action, ActionError, ActionHost, ActionInput, ActionOutput, BoxFuture, ModelCall, Outcome,
    RunScope, Suspension, TextSink,
};
pub use capability::{Field, Need, NeedsOf, Policy, PolicyError, Refused, Touch};
pub use cassette::Cassette;
pub use durable::{LeaseKeeper, is_dead_local_owner, process_owner};
pub use egress::{EgressRefused, Route};
pub use events::Dispatch;
pub use observer::{Call, CallSite, Commit, ModelExchange, Observer, RunBegan};
pub use questions::Questions;
pub use recover::{continues_without_input, runs_to_continue};
pub use registry::{ActionRegistry, UnknownTimeoutAction, document_needs};
pub use run::{
    Engine, ForkAt, InputError, RunError, RunOptions, RunOutcome, RunStatus, Submission, Submitted,
    interrupt, new_run_id,
};
pub use spend::{Ledger, Meter, Refusal};
pub use tokio_util::sync::CancellationToken;
pub use tree::ChildRun;
