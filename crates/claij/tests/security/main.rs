//! The threat model of docs/SECURITY.md, tested: each attack on `claij serve`, `claij mcp
//! serve --http`, workers and the engine that an audit found (issue 35), reproduced
//! against the real server process (or the real engine and store), and refused.
//!
//! One module per kind of attack; each test names the finding it covers.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

#[path = "../served/mod.rs"]
mod served;

mod answers;
mod capability;
mod connections;
mod deputy;
mod door_support;
mod doors;
mod egress;
mod json;
mod mcp_http;
mod origins;
mod orphans;
mod secrets;
mod steps;
mod tap;
mod templates;
