//! The link between a run and its store: who owns it (the lease), the heartbeat that
//! renews the lease and notices interrupts requested by other processes, and the
//! identity of this process.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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
    /// Counts the holds begun and ended (odd: the run is suspended on a question whose
    /// request this process holds open, its lease given up): the heartbeat neither renews
    /// nor counts the lease lost meanwhile, nor trusts a beat sent across a hold's edge.
    pub holds: Arc<AtomicU64>,
    /// Who keeps the lease, when not the run's own heartbeat.
    pub keeper: Option<LeaseKeeper>,
}

/// The leases of many runs kept by their owner at once — a worker renews all of them in
/// one statement (the store's `WorkQueue::renew_leases`)
/// instead of each run polling its store. Runs driven with a keeper
/// ([`RunOptions::lease_keeper`](crate::RunOptions::lease_keeper)) are entered here while
/// they are driven; the owner tells the keeper what each renewal found, and the keeper
/// stops the runs that were interrupted or whose lease was taken over.
#[derive(Clone, Default)]
pub struct LeaseKeeper {
    book: Arc<Mutex<Book>>,
}

#[derive(Default)]
struct Book {
    /// Runs being driven: by id, each entry with its key, handles, and the book's
    /// generation when it was entered.
    runs: HashMap<String, Vec<Kept>>,
    /// Counts entries; a renewal remembers it before it is sent.
    generation: u64,
}

struct Kept {
    key: u64,
    cancel: CancellationToken,
    lost: Arc<AtomicBool>,
    holds: Arc<AtomicU64>,
}

impl LeaseKeeper {
    /// An empty keeper.
    pub fn new() -> Self {
        Self::default()
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many runs are driven now.
    pub fn holding(&self) -> usize {
        self.book().runs.len()
    }

    /// The runs driven now.
    pub fn run_ids(&self) -> Vec<String> {
        self.book().runs.keys().cloned().collect()
    }

    /// Taken just before a renewal is sent, and given back to [`renewed`](Self::renewed):
    /// runs entered after it may be missing from the renewal's answer without being lost.
    pub fn mark(&self) -> u64 {
        self.book().generation
    }

    /// What a renewal sent after `mark` found: the runs still held (`held`: run id and
    /// whether an interrupt was requested). Runs entered before the mark and missing from
    /// it lost their lease and are stopped without writing; interrupted ones are stopped.
    pub fn renewed(&self, mark: u64, held: &[claij_core::store::HeldLease]) {
        let held: HashMap<&str, bool> = held
            .iter()
            .map(|h| (h.run_id.as_str(), h.interrupt_requested))
            .collect();
        for (run_id, kept) in &self.book().runs {
            match held.get(run_id.as_str()) {
                Some(true) => kept.iter().for_each(|k| k.cancel.cancel()),
                Some(false) => {}
                None => {
                    // A run holding a question's request gave its lease up on purpose.
                    let lost = kept
                        .iter()
                        .filter(|k| k.key <= mark && k.holds.load(Ordering::SeqCst) % 2 == 0);
                    for k in lost {
                        k.lost.store(true, Ordering::SeqCst);
                        k.cancel.cancel();
                    }
                }
            }
        }
    }

    /// Stops `run_id` if it is driven here (an interrupt was requested); returns whether
    /// it was.
    pub fn interrupt(&self, run_id: &str) -> bool {
        match self.book().runs.get(run_id) {
            Some(kept) => {
                kept.iter().for_each(|k| k.cancel.cancel());
                true
            }
            None => false,
        }
    }

    /// Enters again the runs whose hold just ended (`holds`): a renewal sent before
    /// then, which did not find their lease, does not count it lost.
    fn renew_key(&self, run_id: &str, holds: &Arc<AtomicU64>) {
        let mut book = self.book();
        book.generation += 1;
        let key = book.generation;
        if let Some(kept) = book.runs.get_mut(run_id) {
            for k in kept.iter_mut().filter(|k| Arc::ptr_eq(&k.holds, holds)) {
                k.key = key;
            }
        }
    }

    /// Enters a run while it is driven; it leaves when the guard is dropped.
    fn keep(
        &self,
        run_id: &str,
        cancel: &CancellationToken,
        (lost, holds): (&Arc<AtomicBool>, &Arc<AtomicU64>),
    ) -> KeptRun {
        let mut book = self.book();
        book.generation += 1;
        let key = book.generation;
        book.runs.entry(run_id.to_owned()).or_default().push(Kept {
            key,
            cancel: cancel.clone(),
            lost: lost.clone(),
            holds: holds.clone(),
        });
        KeptRun {
            keeper: self.clone(),
            run_id: run_id.to_owned(),
            key,
        }
    }
}

/// A run's place in a [`LeaseKeeper`], left when dropped.
pub(crate) struct KeptRun {
    keeper: LeaseKeeper,
    run_id: String,
    key: u64,
}

impl Drop for KeptRun {
    fn drop(&mut self) {
        let mut book = self.keeper.book();
        if let Some(kept) = book.runs.get_mut(&self.run_id) {
            kept.retain(|k| k.key != self.key);
            if kept.is_empty() {
                book.runs.remove(&self.run_id);
            }
        }
    }
}

impl Durable {
    /// The run gives its lease up to hold a question's request open: the heartbeat stands
    /// by until [`end_hold`](Self::end_hold).
    pub(crate) fn begin_hold(&self) {
        self.holds.fetch_add(1, Ordering::SeqCst);
    }

    /// The hold is over (the run claimed again, or left suspended): the heartbeat goes on.
    pub(crate) fn end_hold(&self, run_id: &str) {
        self.holds.fetch_add(1, Ordering::SeqCst);
        if let Some(keeper) = &self.keeper {
            keeper.renew_key(run_id, &self.holds);
        }
    }

    /// When a lease taken now ends.
    pub(crate) fn lease_until(&self) -> SystemTime {
        SystemTime::now() + self.lease
    }

    /// Starts the heartbeat: renews the lease every third of its length and checks for
    /// interrupts every [`HEARTBEAT_INTERVAL`]; cancels `cancel` on an interrupt request
    /// or a lost lease. Stops when the returned guard is dropped.
    pub(crate) fn heartbeat(&self, run_id: &str, cancel: &CancellationToken) -> HeartbeatGuard {
        if let Some(keeper) = &self.keeper {
            return HeartbeatGuard::Kept(keeper.keep(run_id, cancel, (&self.lost, &self.holds)));
        }
        let link = self.clone();
        let run_id = run_id.to_owned();
        let cancel = cancel.clone();
        let task = tokio::spawn(async move {
            let mut renewed = tokio::time::Instant::now();
            loop {
                tokio::time::sleep(HEARTBEAT_INTERVAL).await;
                let holds = link.holds.load(Ordering::SeqCst);
                if holds % 2 == 1 {
                    continue;
                }
                let renew = renewed.elapsed() >= link.lease / 3;
                let until = renew.then(|| link.lease_until());
                let beat = link.store.heartbeat(&run_id, &link.owner, until).await;
                if link.holds.load(Ordering::SeqCst) != holds {
                    // A hold began (or came and went) while the beat was out.
                    continue;
                }
                match beat {
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
        HeartbeatGuard::Task(task)
    }
}

/// Stops the heartbeat (or leaves the keeper) when dropped.
pub(crate) enum HeartbeatGuard {
    /// The run's own heartbeat task.
    Task(tokio::task::JoinHandle<()>),
    /// The run's place in its owner's keeper.
    Kept(#[allow(dead_code)] KeptRun),
}

impl Drop for HeartbeatGuard {
    fn drop(&mut self) {
        if let HeartbeatGuard::Task(task) = self {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use claij_core::store::HeldLease;

    fn held(run_id: &str, interrupt_requested: bool) -> HeldLease {
        HeldLease {
            run_id: run_id.into(),
            interrupt_requested,
        }
    }

    #[test]
    fn a_keeper_stops_interrupted_and_lost_runs_and_spares_new_ones() {
        let keeper = LeaseKeeper::new();
        let handles = |_: &str| (CancellationToken::new(), Arc::new(AtomicBool::new(false)));
        let holds = Arc::new(AtomicU64::new(0));
        let (a_cancel, a_lost) = handles("a");
        let (b_cancel, b_lost) = handles("b");
        let (c_cancel, c_lost) = handles("c");
        let a = keeper.keep("a", &a_cancel, (&a_lost, &holds));
        let _b = keeper.keep("b", &b_cancel, (&b_lost, &holds));
        let mark = keeper.mark();
        // Entered after the renewal was sent: its absence from the answer means nothing.
        let _c = keeper.keep("c", &c_cancel, (&c_lost, &holds));
        assert_eq!(keeper.holding(), 3);
        keeper.renewed(mark, &[held("a", true)]);
        assert!(
            a_cancel.is_cancelled() && !a_lost.load(Ordering::SeqCst),
            "interrupted"
        );
        assert!(
            b_cancel.is_cancelled() && b_lost.load(Ordering::SeqCst),
            "lost"
        );
        assert!(
            !c_cancel.is_cancelled() && !c_lost.load(Ordering::SeqCst),
            "new"
        );
        assert!(keeper.interrupt("c") && c_cancel.is_cancelled());
        assert!(!keeper.interrupt("elsewhere"));
        drop(a);
        let mut ids = keeper.run_ids();
        ids.sort();
        assert_eq!(
            ids,
            ["b", "c"],
            "a run leaves the keeper when it is no longer driven"
        );
    }

    #[test]
    fn a_run_holding_a_questions_request_is_not_lost_for_the_lease_it_gave_up() {
        let keeper = LeaseKeeper::new();
        let cancel = CancellationToken::new();
        let lost = Arc::new(AtomicBool::new(false));
        let holds = Arc::new(AtomicU64::new(0));
        let _kept = keeper.keep("q", &cancel, (&lost, &holds));
        // The hold begins: renewals that do not find the lease mean nothing.
        holds.fetch_add(1, Ordering::SeqCst);
        let during = keeper.mark();
        keeper.renewed(during, &[]);
        assert!(!cancel.is_cancelled() && !lost.load(Ordering::SeqCst));
        // It ends (the run claimed again): a renewal sent during it means nothing either.
        holds.fetch_add(1, Ordering::SeqCst);
        keeper.renew_key("q", &holds);
        keeper.renewed(during, &[]);
        assert!(!cancel.is_cancelled() && !lost.load(Ordering::SeqCst));
        // One sent after it, not finding the lease, does.
        let after = keeper.mark();
        keeper.renewed(after, &[]);
        assert!(cancel.is_cancelled() && lost.load(Ordering::SeqCst));
    }

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
