//! The document of the sampling tests (mcp.rs, sampling.rs): one tool call of the
//! everything server that makes it ask the client for a completion.

use std::path::{Path, PathBuf};

use serde_json::json;

/// A document whose one tool call (`trigger-sampling-request` of the everything server)
/// makes the server ask the client for a completion; it ends with the call's results.
pub(crate) fn sampler(dir: &Path) -> PathBuf {
    let template = r#"{% if event.results is defined %}{"id": ["asker", "done"], "results": {{ event.results | tojson }}}{% else %}{"id": ["asker", "call"], "requests": [{"server": "ev", "method": "tools/call", "params": {"name": "trigger-sampling-request", "arguments": {"prompt": "Name a colour.", "maxTokens": 12}}}]}{% endif %}"#;
    let doc = json!({
        "id": "sampler",
        "servers": {"ev": {"command": claij_testkit::cache::mcp_server_bin("mcp-server-everything")}},
        "states": [
            {"id": "asker", "action": "transform", "config": {"template": template}},
            {"id": "call", "action": "mcp"},
            {"id": "done", "action": "end"}
        ],
        "xitions": [
            {"id": ["start", "asker"]},
            {"id": ["asker", "call"], "schema": "mcp:ev:request"},
            {"id": ["call", "asker"], "schema": "mcp:ev:response"},
            {"id": ["asker", "done"]}
        ]
    });
    let file = dir.join("sampler.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    file
}
