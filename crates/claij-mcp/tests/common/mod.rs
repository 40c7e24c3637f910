//! What the tests against the real npm reference servers share.
#![allow(dead_code)]

use std::path::PathBuf;

use claij_mcp::ServerSpec;

/// The installed reference servers' `node_modules/.bin`.
pub(crate) fn bin_dir() -> PathBuf {
    let cache = std::env::var_os("CLAIJ_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/claij")
        });
    cache.join("mcp-servers/node_modules/.bin")
}

/// The path of a reference server's binary; panics with the setup script's name when it
/// is not installed.
pub(crate) fn server_bin(name: &str) -> String {
    let path = bin_dir().join(name);
    assert!(
        path.exists(),
        "{} is missing: run scripts/setup/mcp-servers (it installs the npm reference MCP servers)",
        path.display()
    );
    path.display().to_string()
}

/// `mcp-server-everything` over stdio.
pub(crate) fn everything() -> ServerSpec {
    ServerSpec::command(server_bin("mcp-server-everything"), [])
}
