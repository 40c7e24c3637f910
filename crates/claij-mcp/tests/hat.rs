//! The MCP hat: a state with `servers` gets the `mcp` state and the two transitions on
//! load; a run calls the real filesystem server (`@modelcontextprotocol/server-filesystem`)
//! through them. The loop is driven by a `transform` state standing in for the model, so the
//! test is about the hat; `claij/tests/mcp.rs` runs the same loop on the embedded model.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

mod common;

use std::sync::Arc;

use claij_core::{TransitionSchema, load_value};
use claij_engine::{ActionRegistry, Engine, RunOptions, RunStatus};
use claij_mcp::{ClientHooks, McpClient};
use serde_json::{Value, json};

/// Asks for `event.path` through the hat, then answers with what came back.
const ASKER: &str = r#"{% if event.results is defined %}{"id": ["asker", "done"], "answer": {{ (event.results[0].error.message if event.results[0].error is defined else event.results[0].result.content[0].text) | tojson }}}{% else %}{"id": ["asker", "asker.mcp"], "requests": [{"server": "files", "method": "tools/call", "params": {"name": {{ event.tool | tojson }}, "arguments": {"path": {{ event.path | tojson }}}}}]}{% endif %}"#;

fn document(dir: &str, inline: bool) -> Value {
    let server = json!({"command": common::server_bin("mcp-server-filesystem"), "args": [dir]});
    let mut doc = json!({
        "id": "folder-qa",
        "states": [
            {"id": "asker", "action": "transform", "config": {"template": ASKER}, "servers": ["files"]},
            {"id": "done", "action": "end"}
        ],
        "xitions": [
            {"id": ["start", "asker"], "schema": {"type": "object", "required": ["path", "tool"]}},
            {"id": ["asker", "done"], "schema": {"type": "object", "required": ["answer"]}}
        ],
        "servers": {"files": server.clone()}
    });
    if inline {
        doc["states"][0]["servers"] = json!({"files": server});
        doc.as_object_mut().unwrap().remove("servers");
    }
    doc
}

fn registry(client: &Arc<McpClient>) -> ActionRegistry {
    let mut registry = ActionRegistry::with_builtins();
    claij_mcp::register(&mut registry, client).unwrap();
    registry
}

#[tokio::test]
async fn a_hat_loop_reads_a_file_through_the_filesystem_server() {
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().canonicalize().unwrap().display().to_string();
    std::fs::write(
        dir.path().join("notes.txt"),
        "The meeting is on Tuesday at 10.",
    )
    .unwrap();
    for inline in [false, true] {
        let client = McpClient::new(ClientHooks::default());
        let registry = registry(&client);
        let fsm = load_value("folder-qa.json", document(&dir_path, inline), &registry)
            .unwrap_or_else(|d| panic!("{d}"));
        // The hat added the state and both transitions.
        let hat = fsm.state("asker.mcp").expect("the hat's state");
        assert_eq!(&*hat.action, "mcp");
        assert_eq!(hat.config["servers"], json!(["files"]));
        let to_hat = fsm
            .transitions
            .iter()
            .find(|t| &*t.from == "asker" && &*t.to == "asker.mcp")
            .unwrap();
        assert!(matches!(&to_hat.schema, TransitionSchema::Dynamic(n) if n == "mcp:files:request"));
        assert!(
            fsm.transitions
                .iter()
                .any(|t| &*t.from == "asker.mcp" && &*t.to == "asker")
        );
        assert!(fsm.servers.contains_key("files"));

        client.connect_fsm(&fsm).await.unwrap();
        let engine = Engine::new(Arc::new(registry));
        let fsm = Arc::new(fsm);
        let path = format!("{dir_path}/notes.txt");
        let outcome = engine
            .run(
                fsm.clone(),
                json!({"path": path, "tool": "read_text_file"}),
                RunOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(outcome.status, RunStatus::Completed, "{:#?}", outcome.trail);
        let result = outcome.result.unwrap();
        assert_eq!(result["answer"], "The meeting is on Tuesday at 10.");
        // start→asker, asker→asker.mcp, asker.mcp→asker, asker→done.
        let hops: Vec<(String, String)> = outcome
            .trail
            .iter()
            .map(|e| {
                (
                    e.from.to_string(),
                    e.to.clone().map(|t| t.to_string()).unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(hops.len(), 4, "{hops:?}");
        assert_eq!(hops[2], ("asker.mcp".into(), "asker".into()));

        // A call the server's tools do not allow is refused by the dynamic schema.
        let outcome = engine
            .run(
                fsm.clone(),
                json!({"path": path, "tool": "format_disk"}),
                RunOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(outcome.status, RunStatus::Failed);
        let failure = outcome
            .trail
            .iter()
            .find_map(|e| e.failure.as_ref())
            .unwrap();
        assert_eq!(
            failure.kind,
            claij_core::FailureKind::Validation,
            "{failure:?}"
        );

        // A tool error comes back as a result the state can read (here: a path outside
        // the allowed folder).
        let outcome = engine
            .run(
                fsm.clone(),
                json!({"path": "/etc/passwd", "tool": "read_text_file"}),
                RunOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(outcome.status, RunStatus::Completed, "{:#?}", outcome.trail);
        let answer = outcome.result.unwrap()["answer"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            answer.to_lowercase().contains("denied") || answer.contains("outside"),
            "{answer}"
        );

        let pids: Vec<u32> = client
            .connected_names()
            .iter()
            .filter_map(|n| client.connection(n)?.pid())
            .collect();
        client.shutdown().await;
        for pid in pids {
            assert!(
                !std::path::Path::new(&format!("/proc/{pid}")).exists(),
                "server {pid} left behind"
            );
        }
    }
}

#[test]
fn hat_mistakes_are_reported_on_load() {
    let client = McpClient::new(ClientHooks::default());
    let registry = registry(&client);
    let mut doc = document("/tmp", false);
    doc["states"][0]["servers"] = json!(["fils"]);
    let e = load_value("bad.json", doc, &registry)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no server `fils`") && e.contains("`files`"),
        "{e}"
    );

    let mut doc = document("/tmp", false);
    doc["states"][0]["servers"] = json!({"files": {"command": "other"}});
    let e = load_value("bad.json", doc, &registry)
        .unwrap_err()
        .to_string();
    assert!(e.contains("already declared differently"), "{e}");

    let mut doc = document("/tmp", false);
    doc["servers"]["files"] = json!({"command": "x", "url": "http://a"});
    let e = load_value("bad.json", doc, &registry)
        .unwrap_err()
        .to_string();
    assert!(e.contains("servers"), "{e}");
}

#[test]
fn the_shipped_example_loads() {
    let client = McpClient::new(ClientHooks::default());
    let registry = registry(&client);
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/mcp-folder-qa.yaml");
    let fsm = claij_core::load_file(&path, &registry).unwrap_or_else(|d| panic!("{d}"));
    assert!(fsm.state("answer.mcp").is_some());
    assert!(fsm.servers.contains_key("files"));
}
