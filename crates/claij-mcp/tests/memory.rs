//! `@modelcontextprotocol/server-memory` (npm, installed by scripts/setup/mcp-servers):
//! a server configured through `env` and `cwd` as a document would, its tools and its
//! knowledge-graph resource read back.

mod common;

use claij_mcp::{ClientHooks, Connection, Reply, ServerSpec};
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn env_and_cwd_reach_the_server_and_its_graph_is_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let spec = ServerSpec::from_value(
        "memory",
        &json!({
            "command": common::server_bin("mcp-server-memory"),
            "env": {"MEMORY_FILE_PATH": "graph.jsonl"},
            "cwd": dir.path(),
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
    // MEMORY_FILE_PATH is relative: it lands in the server's cwd.
    let saved = std::fs::read_to_string(dir.path().join("graph.jsonl")).unwrap();
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
