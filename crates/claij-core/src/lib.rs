//! # claij-core
//!
//! The pure heart of claij: the FSM document model and its loading (JSON or YAML), the
//! meta-schema, the structural checks, schema compilation, the trail, the projection of a
//! trail into the prompts a model sees, and graph export. No I/O beyond reading a file
//! on request, no async runtime.
//!
//! ```
//! use claij_core::{BuiltinNames, load_str};
//!
//! let doc = r#"
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
//! "#;
//! let fsm = load_str("greet.yaml", doc, &BuiltinNames).expect("a valid document");
//! assert_eq!(fsm.states.len(), 2);
//!
//! // Every problem is reported at once, each with its place.
//! let broken = doc.replace("[hello, end]", "[hello, nowhere]");
//! let problems = load_str("greet.yaml", &broken, &BuiltinNames).unwrap_err();
//! assert!(problems.to_string().contains("nowhere"));
//! ```
//!
//! # Modules
//!
//! - `source`: text to a JSON value (JSON or YAML, located syntax errors); `parse_json`,
//!   the one rule for JSON from outside (no key twice, bounded nesting).
//! - `metaschema`: the JSON Schema of the format itself (`claij schema`), applied first.
//! - `load`: the loading pipeline (syntax, meta-schema, structure, schemas), every problem
//!   collected; the result is an `Fsm`.
//! - `fsm`: the compiled `Fsm`: states, transitions with compiled schemas, triggers,
//!   settings, the document's `Owner`.
//! - `schema`: effective transition schemas, their compilation and validation, and the
//!   `DynamicSchemas` trait for string-named schemas.
//! - `known_actions`: `KnownActions`, what the loader asks of the registry.
//! - `diagnostic`: `Diagnostic` and `Diagnostics`, each problem with its file, JSON path,
//!   line and column.
//! - `hat`: a state's MCP `servers` expanded on load into a tool-use loop.
//! - `trail`: the trail's entries, failures and usage.
//! - `budget`: what runs spend (`Spend`) and may spend (`Budget`), and budget pauses.
//! - `prompts`: the projection of a trail into a model's messages, shrinkable to a token
//!   budget, and the plain baseline.
//! - `synthesis`: how a sub-FSM's result and a fork's batch read in a parent's prompts.
//! - `question`: an MCP server's question to a person and the person's answer, checked.
//! - `graph`: DOT and Mermaid export.
//! - `diff`: the structural difference of two versions of a document (`claij defs diff`).
//! - `compat`: whether a new version of a JSON Schema accepts what the old one did.
//! - `migration`: a run's move to another version, as its trail records it.
//! - `timeout`: an attempt's timeout as written (a duration or `none`) and the limit it
//!   resolves to, with where it comes from.
//! - `store`: the durable-run contract the engine asks of a store: plain types and boxed
//!   futures, implemented by claij-store.

pub mod budget;
pub mod compat;
pub mod diagnostic;
pub mod diff;
pub mod fsm;
pub mod graph;
pub mod hat;
pub mod known_actions;
pub mod load;
pub mod metaschema;
pub mod migration;
pub mod prompts;
pub mod question;
pub mod schema;
pub mod source;
pub mod store;
pub mod synthesis;
pub mod timeout;
pub mod trace_context;
pub mod trail;

pub use budget::{Budget, BudgetPause, Intent, IntentKind, Limit, PendingCalls, Spend};
pub use diagnostic::{Diagnostic, Diagnostics, JsonPath, Problem};
pub use fsm::{
    DEFAULT_MAX_ATTEMPTS, END_ACTION, Example, Fsm, FsmSettings, Keep, OnNewVersion, Owner, START,
    State, StateIdx, StateSettings, Transition, TransitionIdx, TransitionSchema, Trigger,
};
pub use graph::{to_dot, to_mermaid};
pub use known_actions::{BuiltinNames, ConfigIssue, KnownActions};
pub use load::{load_definition, load_file, load_str, load_value};
pub use metaschema::META_SCHEMA;
pub use prompts::{
    Message, Projection, PromptOptions, Prompting, Role, project, system_message, task_message,
    trail_to_prompts,
};
pub use question::{Answer, Question};
pub use schema::{CompiledSchema, DynamicSchemas, SchemaError, ValidationIssue};
pub use store::{RunStatus, RunStore, StoreError};
pub use timeout::{AttemptLimit, LimitSource, Timeout};
pub use trail::{Failure, FailureKind, TrailEntry, Usage};

/// Where claij keeps its files by default: `$XDG_DATA_HOME/claij`, else
/// `$HOME/.local/share/claij` (relative variables ignored); `None` when neither is set.
pub fn data_home() -> Option<std::path::PathBuf> {
    let env_dir = |name: &str| {
        std::env::var_os(name)
            .map(std::path::PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    env_dir("XDG_DATA_HOME")
        .or_else(|| env_dir("HOME").map(|home| home.join(".local").join("share")))
        .map(|dir| dir.join("claij"))
}
