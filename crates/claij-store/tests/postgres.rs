//! The store suite on a real PostgreSQL server (one cluster shared by all test processes,
//! a fresh database per test; see `support`), and what is particular to PostgreSQL.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

mod support;
#[macro_use]
mod suite;

use claij_core::store::Durability;
use support::Harness;

store_suite!(Harness::postgres());

#[test]
fn a_store_dropped_outside_its_runtime_lets_go_quietly() {
    suite::a_store_dropped_outside_its_runtime_lets_go_quietly(Harness::postgres());
}

#[tokio::test]
async fn connection_errors_never_show_the_password() {
    // Port 1 on loopback: nothing listens there.
    let err = claij_store::open(
        "postgres://alice:hunter2@127.0.0.1:1/claij",
        Durability::Normal,
    )
    .await
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(
        err.contains("cannot connect to postgres://alice@127.0.0.1:1/claij"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
}
