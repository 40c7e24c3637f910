//! # claij-core
//!
//! The pure heart of claij: the FSM document model and its loading (JSON or YAML), the
//! meta-schema, the structural checks, schema compilation, the trail, the projection of a
//! trail into the prompts a model sees, and graph export. No I/O beyond reading a file
//! on request, no async runtime.

pub mod diagnostic;
pub mod fsm;
pub mod graph;
pub mod hat;
pub mod known_actions;
pub mod load;
pub mod metaschema;
pub mod prompts;
pub mod schema;
pub mod source;
pub mod store;
pub mod synthesis;
pub mod trail;

pub use diagnostic::{Diagnostic, Diagnostics, JsonPath, Problem};
pub use fsm::{
    DEFAULT_MAX_ATTEMPTS, END_ACTION, Fsm, FsmSettings, START, State, StateIdx, StateSettings,
    Transition, TransitionIdx, TransitionSchema,
};
pub use graph::{to_dot, to_mermaid};
pub use known_actions::{BuiltinNames, ConfigIssue, KnownActions};
pub use load::{load_file, load_str, load_value};
pub use metaschema::META_SCHEMA;
pub use prompts::{Message, PromptOptions, Role, system_message, trail_to_prompts};
pub use schema::{CompiledSchema, DynamicSchemas, SchemaError, ValidationIssue};
pub use store::{RunStatus, RunStore, StoreError};
pub use trail::{Failure, FailureKind, TrailEntry, Usage};
