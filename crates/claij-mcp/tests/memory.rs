//! `@modelcontextprotocol/server-memory` (npm, installed by scripts/setup/mcp-servers):
//! a server configured through `env` as a document would, its graph written and read
//! back; and `cwd` reaching `@modelcontextprotocol/server-filesystem`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

mod common;

use claij_mcp::{ClientHooks, Connection, Reply, ServerSpec};
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn env_reaches_the_server_and_its_graph_is_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("graph.jsonl");
    let spec = ServerSpec::from_value(
        "memory",
        &json!({
            "command": common::server_bin("mcp-server-memory"),
            "env": {"MEMORY_FILE_PATH": file},
            "timeout": "20s"
        }),
    )
    .unwrap();
    let c = Connection::connect("memory", &spec, ClientHooks::default())
        .await
        .unwrap();
    assert!(
        c.catalog().tool("create_entities").is_some(),
        "{:?}",
        c.catalog().tools
    );
    let created = c
        .request(
            "tools/call",
            json!({"name": "create_entities", "arguments": {"entities": [
                {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}
            ]}}),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(
        matches!(&created.reply, Reply::Result(r) if r["isError"] != true),
        "{created:?}"
    );
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(saved.contains("Ada"), "{saved}");

    let graph = c
        .request(
            "tools/call",
            json!({"name": "read_graph", "arguments": {}}),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    let Reply::Result(graph) = graph.reply else {
        panic!("{:?}", graph.reply)
    };
    assert!(
        graph.to_string().contains("wrote the first program"),
        "{graph}"
    );
    let pid = c.pid().unwrap();
    c.shutdown().await;
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
}

#[tokio::test]
async fn cwd_is_the_servers_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("marker.txt"), "x").unwrap();
    let spec = ServerSpec::from_value(
        "files",
        &json!({"command": common::server_bin("mcp-server-filesystem"), "args": ["."], "cwd": dir.path()}),
    )
    .unwrap();
    let c = Connection::connect("files", &spec, ClientHooks::default())
        .await
        .unwrap();
    let listing = c
        .request(
            "tools/call",
            json!({"name": "list_directory", "arguments": {"path": dir.path().canonicalize().unwrap()}}),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    let Reply::Result(listing) = listing.reply else {
        panic!("{:?}", listing.reply)
    };
    assert!(listing.to_string().contains("marker.txt"), "{listing}");
    c.shutdown().await;
}
