//! The link between a run and its store: who owns it (the lease), the heartbeat that
//! renews the lease and notices interrupts requested by other processes, and the
//! identity of this process.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use claij_core::store::RunStore;
use tokio_util::sync::CancellationToken;

/// How long a lease lasts unless renewed.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// How often a running run checks its store for interrupts (and renews its lease).
pub(crate) const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(250);

/// This process as a lease owner: `host:pid:started`, where `started` is the process's
/// start time in clock ticks since boot (from `/proc/self/stat`), so a later process that
/// reuses the pid is told apart (where `/proc` cannot be read: `n` and 8 random hex
/// digits, which only tell processes apart).
pub fn process_owner() -> String {
    static OWNER: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    OWNER
        .get_or_init(|| {
            let pid = std::process::id();
            let started = start_ticks(pid as i32).unwrap_or_else(|| {
                use std::hash::{BuildHasher, RandomState};
                format!("n{:08x}", RandomState::new().hash_one(pid) as u32)
            });
            format!("{}:{pid}:{started}", hostname())
        })
        .clone()
}

/// A process's state letter and start time (field 22 of `/proc/PID/stat`).
fn proc_stat(pid: i32) -> Option<(char, String)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let started = fields.nth(18)?.to_owned();
    Some((state, started))
}

fn start_ticks(pid: i32) -> Option<String> {
    proc_stat(pid).map(|(_, started)| started)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// Whether `owner` is a process of this host that no longer exists (gone, a zombie, or
/// its pid now used by a later process): its lease can be taken over at once instead of
/// waiting for it to expire.
pub fn is_dead_local_owner(owner: &str) -> bool {
    let mut parts = owner.splitn(3, ':');
    let (Some(host), Some(pid), started) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let Ok(pid) = pid.parse::<i32>() else {
        return false;
    };
    if host != hostname() || pid == std::process::id() as i32 {
        return false;
    }
    if let Some((state, now_started)) = proc_stat(pid) {
        // A zombie has been killed; only its parent's reaping is left (and where nothing
        // reaps, as in containers without an init, it may stay one for good).
        let reused = started.is_some_and(|s| !s.starts_with('n') && s != now_started);
        return state == 'Z' || reused;
    }
    matches!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
        Err(nix::errno::Errno::ESRCH)
    )
}

/// A run's durable side: its store and lease.
#[derive(Clone)]
pub(crate) struct Durable {
    pub store: Arc<dyn RunStore>,
    pub owner: String,
    pub lease: Duration,
    /// Set when the heartbeat found the lease taken over: the run stops writing.
    pub lost: Arc<AtomicBool>,
}

impl Durable {
    /// When a lease taken now ends.
    pub(crate) fn lease_until(&self) -> SystemTime {
        SystemTime::now() + self.lease
    }

    /// Starts the heartbeat: renews the lease every third of its length and checks for
    /// interrupts every [`HEARTBEAT_INTERVAL`]; cancels `cancel` on an interrupt request
    /// or a lost lease. Stops when the returned guard is dropped.
    pub(crate) fn heartbeat(&self, run_id: &str, cancel: &CancellationToken) -> HeartbeatGuard {
        let link = self.clone();
        let run_id = run_id.to_owned();
        let cancel = cancel.clone();
        let task = tokio::spawn(async move {
            let mut renewed = tokio::time::Instant::now();
            loop {
                tokio::time::sleep(HEARTBEAT_INTERVAL).await;
                let renew = renewed.elapsed() >= link.lease / 3;
                let until = renew.then(|| link.lease_until());
                match link.store.heartbeat(&run_id, &link.owner, until).await {
                    Ok(beat) => {
                        if renew {
                            renewed = tokio::time::Instant::now();
                        }
                        if !beat.held {
                            link.lost.store(true, Ordering::SeqCst);
                            cancel.cancel();
                            return;
                        }
                        if beat.interrupt_requested {
                            cancel.cancel();
                            return;
                        }
                    }
                    // A passing store error: try again next beat; the lease has slack.
                    Err(e) => tracing::warn!(run = %run_id, error = %e, "heartbeat failed"),
                }
            }
        });
        HeartbeatGuard(task)
    }
}

/// Stops the heartbeat when dropped.
pub(crate) struct HeartbeatGuard(tokio::task::JoinHandle<()>);

impl Drop for HeartbeatGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_made_up_or_reused_pids_are_not() {
        let me = process_owner();
        assert!(!is_dead_local_owner(&me));
        let host = hostname();
        // pid 1 is alive but did not start at tick 0 … unless it did: use its real start
        // time to check the comparison both ways.
        if let Some((_, started)) = proc_stat(1) {
            assert!(!is_dead_local_owner(&format!("{host}:1:{started}")));
            assert!(
                is_dead_local_owner(&format!("{host}:1:{started}9")),
                "a reused pid"
            );
        }
        assert!(
            !is_dead_local_owner("another-host:1:5"),
            "other hosts are never judged"
        );
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(
            is_dead_local_owner(&format!("{host}:{pid}:1")),
            "a finished process"
        );
    }
}
