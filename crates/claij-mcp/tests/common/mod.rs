//! What the tests against the real npm reference servers share.
#![allow(dead_code)]

use std::path::PathBuf;

use claij_mcp::ServerSpec;

/// The installed reference servers' `node_modules/.bin`.
pub(crate) fn bin_dir() -> PathBuf {
    claij_testkit::cache::mcp_server_bin_dir()
}

/// The path of a reference server's binary; panics with the setup script's name when it
/// is not installed.
pub(crate) fn server_bin(name: &str) -> String {
    claij_testkit::cache::mcp_server_bin(name)
}

/// `mcp-server-everything` over stdio.
pub(crate) fn everything() -> ServerSpec {
    ServerSpec::command(server_bin("mcp-server-everything"), [])
}
