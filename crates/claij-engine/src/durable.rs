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
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(250);

/// This process as a lease owner: `host:pid:nonce` (the nonce tells two processes apart
/// that reuse a pid).
pub fn process_owner() -> String {
    use std::hash::{BuildHasher, RandomState};
    static OWNER: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    OWNER
        .get_or_init(|| {
            let nonce = RandomState::new().hash_one(std::process::id()) as u32;
            format!("{}:{}:{nonce:08x}", hostname(), std::process::id())
        })
        .clone()
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// Whether `owner` is a process of this host that no longer exists: its lease can be
/// taken over at once instead of waiting for it to expire.
pub fn is_dead_local_owner(owner: &str) -> bool {
    let mut parts = owner.split(':');
    let (Some(host), Some(pid)) = (parts.next(), parts.next()) else {
        return false;
    };
    let Ok(pid) = pid.parse::<i32>() else {
        return false;
    };
    if host != hostname() || pid == std::process::id() as i32 {
        return false;
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
    pub fn lease_until(&self) -> SystemTime {
        SystemTime::now() + self.lease
    }

    /// Starts the heartbeat: renews the lease every third of its length and checks for
    /// interrupts every [`HEARTBEAT_INTERVAL`]; cancels `cancel` on an interrupt request
    /// or a lost lease. Stops when the returned guard is dropped.
    pub fn heartbeat(&self, run_id: &str, cancel: &CancellationToken) -> HeartbeatGuard {
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
