//! Processes, as tests that kill them see them.

/// Whether process `pid` is still running: it exists and is not a zombie (a zombie has
/// been killed; only its parent's reaping is left).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}
