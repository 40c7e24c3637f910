//! The store suite on SQLite files, and what is particular to SQLite.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

mod support;
#[macro_use]
mod suite;

use claij_core::store::Durability;
use support::Harness;

store_suite!(Harness::sqlite());

#[test]
fn a_store_dropped_outside_its_runtime_lets_go_quietly() {
    suite::a_store_dropped_outside_its_runtime_lets_go_quietly(Harness::sqlite());
}

#[tokio::test]
async fn a_file_of_schema_1_is_upgraded_and_its_runs_go_on() {
    suite::a_sqlite_file_of_schema_1_is_upgraded(Harness::sqlite()).await;
}

#[tokio::test]
async fn plain_paths_and_sqlite_urls_open_the_same_file() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("nested").join("dirs").join("runs.db");
    let by_path = claij_store::open(&path.display().to_string(), Durability::Normal)
        .await
        .expect("open by path");
    assert!(path.is_file(), "the file and its directories are created");
    let by_url = claij_store::open(&format!("sqlite://{}", path.display()), Durability::Normal)
        .await
        .expect("open by URL");
    assert_eq!(by_path.describe(), by_url.describe());
    assert_eq!(by_path.describe(), format!("sqlite:{}", path.display()));
}

#[tokio::test]
async fn an_unwritable_location_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "not a directory").expect("write");
    let err = claij_store::open(
        &blocker.join("claij.db").display().to_string(),
        Durability::Normal,
    )
    .await
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(err.contains("cannot create"), "{err}");
}

#[test]
fn the_default_path_follows_xdg() {
    let path = claij_store::default_sqlite_path();
    assert!(path.ends_with("claij/claij.db"), "{}", path.display());
}

#[tokio::test]
async fn what_is_not_a_database_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let garbage = dir.path().join("garbage.db");
    std::fs::write(&garbage, "x".repeat(5000)).expect("write");
    for (path, why) in [
        (dir.path().to_path_buf(), "unable to open database file"),
        (garbage, "file is not a database"),
    ] {
        let err = claij_store::open(&path.display().to_string(), Durability::Normal)
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains(&format!("sqlite:{}", path.display())), "{err}");
        assert!(err.contains(why), "{err}");
    }
}
