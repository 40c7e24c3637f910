//! What the setup scripts install under claij's cache (`$CLAIJ_CACHE_DIR`, else
//! `~/.cache/claij`), found by the tests that use it; each lookup panics naming the script
//! to run when its file is missing, so a test never passes without the real thing.

use std::path::PathBuf;

/// The cache directory the setup scripts install into.
pub fn dir() -> PathBuf {
    std::env::var_os("CLAIJ_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/claij")
        })
}

/// The npm reference MCP servers' `node_modules/.bin` (`scripts/setup/mcp-servers`).
pub fn mcp_server_bin_dir() -> PathBuf {
    dir().join("mcp-servers/node_modules/.bin")
}

/// The path of a reference MCP server's binary (`mcp-server-everything`, …).
pub fn mcp_server_bin(name: &str) -> String {
    let path = mcp_server_bin_dir().join(name);
    assert!(
        path.exists(),
        "{} is missing: run scripts/setup/mcp-servers (it installs the npm reference MCP servers)",
        path.display()
    );
    path.display().to_string()
}

/// The Python of the HTTP clients' venv (`scripts/setup/http-clients`: standardwebhooks,
/// openai, httpx-sse, Selenium).
pub fn http_clients_python() -> PathBuf {
    let python = dir().join("http-clients/venv/bin/python");
    assert!(
        python.exists(),
        "the Python HTTP clients are missing ({}): run scripts/setup/http-clients",
        python.display()
    );
    python
}

/// The Python of the MCP clients' venv (`scripts/setup/mcp-clients`: the official MCP
/// Python SDK, as client and as server).
pub fn mcp_sdk_python() -> PathBuf {
    let python = dir().join("mcp-clients/venv/bin/python");
    assert!(
        python.exists(),
        "the Python MCP SDK is missing ({}): run scripts/setup/mcp-clients",
        python.display()
    );
    python
}

/// The smallest embedded model's file as claij runs it (`scripts/setup/model`): SmolLM2's
/// Q4_1 GGUF, as its wheel holds it. For tests where the answer does not matter.
pub fn embedded_model() -> PathBuf {
    model_file("SmolLM2-135M-Instruct.Q4_1.gguf")
}

/// The default embedded model's file (`scripts/setup/model`): Qwen2.5-Coder-1.5B. For
/// tests where the answer matters.
pub fn default_model() -> PathBuf {
    model_file("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
}

/// A fetched model file in the cache.
fn model_file(name: &str) -> PathBuf {
    let model = dir().join("models").join(name);
    assert!(
        model.exists(),
        "{} is missing: run scripts/setup/model",
        model.display()
    );
    model
}
