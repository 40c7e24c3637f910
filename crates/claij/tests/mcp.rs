//! `claij mcp tools` and runs of documents with MCP servers, against the real npm
//! reference servers (installed by scripts/setup/mcp-servers).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

fn server_bin(name: &str) -> String {
    let cache = std::env::var_os("CLAIJ_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/claij")
        });
    let path = cache.join("mcp-servers/node_modules/.bin").join(name);
    assert!(
        path.exists(),
        "{} is missing: run scripts/setup/mcp-servers (it installs the npm reference MCP servers)",
        path.display()
    );
    path.display().to_string()
}

fn claij(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_claij"))
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .stdin(Stdio::null())
        .env("CLAIJ_STORE", "memory")
        .args(args)
        .output()
        .expect("claij starts")
}

#[test]
fn mcp_tools_lists_tools_resources_and_prompts() {
    let everything = server_bin("mcp-server-everything");
    let out = claij(&["mcp", "tools", "--", &everything]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("protocol 2025-11-25"), "{text}");
    assert!(text.contains("get-sum(a*: number, b*: number)"), "{text}");
    assert!(
        text.contains("demo://resource/static/document/architecture.md"),
        "{text}"
    );
    assert!(text.contains("args-prompt(city*, state)"), "{text}");

    let dir = tempfile::tempdir().unwrap();
    let out = claij(&[
        "mcp",
        "tools",
        "--json",
        "--",
        &server_bin("mcp-server-filesystem"),
        &dir.path().display().to_string(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        listed["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "list_directory"),
        "{listed}"
    );

    let out = claij(&["mcp", "tools", "--", "/nonexistent/server"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/server"));
}

#[test]
fn a_run_uses_a_hat_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap().display().to_string();
    std::fs::write(dir.path().join("a.txt"), "alpha").unwrap();
    let template = r#"{% if event.results is defined %}{"id": ["lister", "done"], "listing": {{ event.results[0].result.content[0].text | tojson }}}{% else %}{"id": ["lister", "lister.mcp"], "requests": [{"server": "files", "method": "tools/call", "params": {"name": "list_directory", "arguments": {"path": {{ event.dir | tojson }}}}}]}{% endif %}"#;
    let doc = json!({
        "id": "lister",
        "servers": {"files": {"command": server_bin("mcp-server-filesystem"), "args": [root]}},
        "states": [
            {"id": "lister", "action": "transform", "config": {"template": template}, "servers": ["files"]},
            {"id": "done", "action": "end"}
        ],
        "xitions": [
            {"id": ["start", "lister"], "schema": {"type": "object", "required": ["dir"]}},
            {"id": ["lister", "done"], "schema": {"type": "object", "required": ["listing"]}}
        ]
    });
    let file = dir.path().join("lister.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    let input = json!({"dir": root}).to_string();
    let out = claij(&[
        "run",
        "--quiet",
        &file.display().to_string(),
        "--input",
        &input,
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        result["listing"].as_str().unwrap().contains("a.txt"),
        "{result}"
    );
}
