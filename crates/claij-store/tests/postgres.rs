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

/// A server that takes TLS connections only (the test kit's, with a CA of its own): a
/// URL asking for TLS gets it, one refusing it is refused by the server, and
/// `verify-full` checks the certificate against the CA given (and refuses it without).
#[tokio::test]
async fn tls_is_used_and_verified_as_the_url_asks() {
    let server = claij_testkit::postgres_tls::tls_server();
    let open = |params: String| {
        let url = server.url(&params);
        async move { claij_store::open(&url, Durability::Normal).await }
    };
    // Required (encrypted, not verified): the store opens, migrates and keeps a run.
    let store = claij_store::open(&server.url("sslmode=require"), Durability::Normal)
        .await
        .unwrap_or_else(|e| panic!("sslmode=require: {e}"));
    assert!(store.describe().starts_with("postgres://claij@localhost:"));
    assert!(store.workers().await.unwrap().is_empty());
    drop(store);
    // Verified against the CA that signed the server's certificate.
    let ca = server.ca_file();
    let verified = format!("sslmode=verify-full&sslrootcert={}", ca.display());
    let store = open(verified)
        .await
        .unwrap_or_else(|e| panic!("verify-full: {e}"));
    assert!(store.queue().await.is_ok());
    drop(store);
    // Without the CA, the certificate is not trusted: refused, and saying so.
    let unverified = open("sslmode=verify-full".into())
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        !unverified.is_empty(),
        "an untrusted certificate must be refused"
    );
    // Without TLS, this server refuses the connection.
    let plain = open("sslmode=disable".into())
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        plain.contains("no encryption") || plain.contains("pg_hba") || plain.contains("rejects"),
        "{plain}"
    );
}
