//! # claij-door
//!
//! The door every claij HTTP server (`claij serve`, `claij mcp serve --http`) listens
//! through, so that what protects one protects both:
//!
//! - [`listen::serve`]: connections capped ([`Limits`]), each with a header read timeout
//!   that also closes idle ones, stopped gracefully;
//! - [`Door`]: one middleware around the whole router — `Host` and `Origin` checked
//!   ([`Hosts`]), a tokenless server's `POST`s required to say they send JSON (no form of
//!   another site can), bodies bounded in size and time, JSON bodies held to claij's one
//!   rule for JSON from outside (`claij_core::source::parse_json`), `nosniff` on every
//!   answer;
//! - [`ApiToken`]: the token, hashed, compared in constant time, read with the bearer
//!   scheme in any case; [`check_exposure`]: loopback unless there is one;
//! - [`Streams`]: a cap on event streams (and, through it, on anything long-lived).
//!
//! Refusals are `application/problem+json` ([`Refusal`]). See docs/SERVER.md, "Security".
//!
//! # Modules
//!
//! - `listen`: the accept loop, `Limits` and their defaults.
//! - `guard` (private): `Door`, the middleware around a server's whole router.
//! - `hosts` (private): `Hosts`, the `Host` and `Origin` a server answers.
//! - `token` (private): `ApiToken`, the bearer scheme, `check_exposure`.
//! - `streams` (private): `Streams`, the cap on long-lived answers.
//! - `problem` (private): `Refusal`, the door's refusals as problem details.

mod guard;
mod hosts;
pub mod listen;
mod problem;
mod streams;
mod token;

pub use guard::{BODY_TIMEOUT, DEFAULT_BODY_LIMIT, Door, ParsedJson, json_refusal};
pub use hosts::{Hosts, same_origin};
pub use listen::{DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CONNECTIONS, Limits, serve};
pub use problem::{PROBLEM_JSON, Refusal, refusal};
pub use streams::{DEFAULT_MAX_STREAMS, Full, RETRY_AFTER_SECONDS, StreamPermit, Streams, hold};
pub use token::{
    ApiToken, MIN_TOKEN_LEN, OpenWithoutToken, Refused, WeakToken, bearer, check_exposure,
    require_token, unauthorized,
};

#[cfg(test)]
mod tests;
