//! Test support shared by claij's crates (a dev-dependency of the crates that use it, a
//! normal dependency only of the `claij-bench` binary; never published).
//!
//! - [`postgres`]: a real PostgreSQL server, started once and shared by every test
//!   process, with a fresh database per test ([`postgres::database`]), dropped when the
//!   test ends.
//! - [`TestStore`]: a throwaway store location on either backend — a SQLite file in a
//!   temporary directory or a PostgreSQL test database — as the URL that
//!   `claij_store::open` and `claij --store` take, so one test body can run on both.
//! - [`llama_server::LlamaServer`]: llama-cpp-python's OpenAI-compatible server on a
//!   GGUF file from the cache, on a free loopback port.
//! - [`Rng`]: a small seeded random source, for tests that pick random points (kill
//!   times, say) and must be reproducible from the seed they print.
//!
//! This crate depends on no claij crate, so every claij crate (claij-store included) can
//! use it in its tests without a dependency cycle.
//!
//! Its own test `tests/tidy` checks the workspace's layout: no import circle between a
//! crate's top-level modules, docs/ARCHITECTURE.md true to the repository and to
//! `cargo metadata`, no dependency needing a newer Rust than the workspace's.
//!
//! # Modules
//!
//! - `postgres`: the shared PostgreSQL cluster, a fresh database per test.
//! - `postgres_tls`: a cluster of its own taking TLS connections only, its certificate
//!   signed by a CA made for it.
//! - `store` (private): `TestStore`, a throwaway store on either backend.
//! - `cache`: what the setup scripts installed (MCP servers, models, Python clients),
//!   each lookup panicking with the script to run when missing.
//! - `llama_server`: llama-cpp-python's server on a GGUF from the cache.
//! - `process`: whether a process is alive, as tests that kill processes see it.
//! - `rng` (private): `Rng`, a seeded SplitMix64.
//! - `stub`: a scripted HTTP/1.1 server on a loopback port that records what it is sent.

pub mod cache;
pub mod llama_server;
pub mod postgres;
pub mod postgres_tls;
pub mod process;
mod rng;
mod store;
pub mod stub;

pub use rng::Rng;
pub use store::{Backend, TestStore};
