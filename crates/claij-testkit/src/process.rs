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

/// The absolute path of the program `name` as this process's `PATH` finds it (what a
/// policy allowing programs by path is given); empty when there is none.
pub fn which(name: &str) -> String {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
        .map(|found| found.display().to_string())
        .unwrap_or_default()
}
