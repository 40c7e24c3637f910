//! claij's `http` action: a state calls a service over HTTP and the answer is the next
//! event (docs/FORMAT.md, "http").
//!
//! The engine makes no network call of its own; this crate provides the action, and the
//! binary registers it with [`register`], replacing the placeholder
//! [`ActionRegistry::with_builtins`](claij_engine::ActionRegistry::with_builtins) reserves
//! under the name `http` (a document using it loads without this crate, but running it
//! fails saying so).
//!
//! ```
//! let mut registry = claij_engine::ActionRegistry::with_builtins();
//! claij_http::register(&mut registry);
//! ```
//!
//! Modules:
//!
//! - `action`: the [`Http`] action: rendering the request, secrets, the call and its
//!   retries, routing the answer.

mod action;

use std::sync::Arc;

pub use action::Http;

/// Registers the `http` action in `registry`, replacing the placeholder.
pub fn register(registry: &mut claij_engine::ActionRegistry) {
    // The config schema is a constant, checked by this crate's tests.
    if let Err(e) = registry.register("http", Arc::new(Http::default())) {
        tracing::error!("the `http` config schema does not compile: {e}");
    }
}
