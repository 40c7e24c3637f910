//! A real PostgreSQL server for tests: one cluster shared by every test process, a fresh
//! database per test.
//!
//! The cluster (cargo-nextest runs each test in its own process, so it cannot belong to
//! one) lives in `$CLAIJ_PG_TEST_DIR`, else `~/.cache/claij/pg-test/` — or, when the tests
//! run as root, `/var/tmp/claij-pg-test/`: PostgreSQL refuses to run as root, so there
//! the cluster runs as the `postgres` user, which cannot enter root's home. A lock file
//! in that directory makes one process start it (initdb once, then `pg_ctl start` on a
//! free loopback port, written to `port`) while the others wait, and later processes
//! reuse it while `pg_ctl status` says it runs. Each test gets its own database
//! (`test_<time>_<pid>_<n>`), dropped when the [`TestDatabase`] is dropped (databases
//! that a crashed test left are swept after an hour). The server programs are
//! `$CLAIJ_PG_BIN`, else the newest `/usr/lib/postgresql/*/bin` (Debian's
//! `apt-get install -y postgresql`), else `pg_ctl` on `PATH`.
//!
//! `scripts/postgres-test-cluster status|stop|url|psql` looks at the same cluster.
//!
//! ```no_run
//! let db = claij_testkit::postgres::database();
//! println!("a fresh, empty database: {}", db.url());
//! // … dropped (with its connections) when `db` goes out of scope.
//! ```

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The superuser the test cluster is created with (trust authentication, loopback only).
pub const SUPERUSER: &str = "claij";

/// Leftover test databases older than this are dropped.
const SWEEP_AFTER: Duration = Duration::from_secs(3600);

/// A fresh database on the shared test cluster (starting the cluster if needed).
///
/// # Panics
/// When PostgreSQL is not installed (the message says how to install it) or the cluster
/// cannot be started: a test that asks for a database must not pass without one. Use
/// [`try_database`] where its absence is fine (benchmarks).
pub fn database() -> TestDatabase {
    try_database().unwrap_or_else(|message| panic!("{message}"))
}

/// A fresh database on the shared test cluster, or why there is none (PostgreSQL is not
/// installed, the cluster does not start, the database cannot be created).
pub fn try_database() -> Result<TestDatabase, String> {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let cluster = cluster()?;
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let name = format!(
        "test_{secs}_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    cluster.sql(&format!("CREATE DATABASE {name}"))?;
    Ok(TestDatabase { cluster, name })
}

/// Whether PostgreSQL's server programs are installed (the cluster may still have to be
/// started).
pub fn server_installed() -> bool {
    bin_dir().is_ok()
}

/// One test's database; dropped (with its connections) when this is dropped.
pub struct TestDatabase {
    cluster: &'static Cluster,
    name: String,
}

impl TestDatabase {
    /// The database's name (`test_<time>_<pid>_<n>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `postgres://claij@127.0.0.1:PORT/NAME` (no password: the cluster trusts loopback).
    pub fn url(&self) -> String {
        format!(
            "postgres://{SUPERUSER}@127.0.0.1:{}/{}",
            self.cluster.port, self.name
        )
    }

    /// The URL with a password in it (the test cluster trusts every local connection, so
    /// any password works): for tests that check passwords never show.
    pub fn url_with_password(&self, password: &str) -> String {
        format!(
            "postgres://{SUPERUSER}:{password}@127.0.0.1:{}/{}",
            self.cluster.port, self.name
        )
    }

    /// The cluster's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.cluster.port
    }

    /// Runs SQL in this database with `psql` (`ON_ERROR_STOP`), returning its unaligned,
    /// tuples-only output, or psql's message.
    pub fn psql(&self, sql: &str) -> Result<String, String> {
        self.cluster.sql_in(&self.name, sql)
    }
}

impl std::fmt::Debug for TestDatabase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestDatabase")
            .field("url", &self.url())
            .finish()
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        // Best effort: a leftover is swept later.
        let _ = self
            .cluster
            .client("dropdb")
            .args(["--force", "--if-exists", &self.name])
            .output();
    }
}

/// The shared test cluster.
struct Cluster {
    bin: PathBuf,
    port: u16,
}

impl Cluster {
    /// A client program (`psql`, `dropdb`) aimed at the cluster as the superuser.
    fn client(&self, program: &str) -> Command {
        let mut command = Command::new(self.bin.join(program));
        command
            .env("PGCONNECT_TIMEOUT", "10")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", SUPERUSER]);
        command
    }

    /// Runs SQL in the `postgres` database.
    fn sql(&self, sql: &str) -> Result<String, String> {
        self.sql_in("postgres", sql)
    }

    /// Runs SQL in `database`; psql's message on failure.
    fn sql_in(&self, database: &str, sql: &str) -> Result<String, String> {
        let output = self
            .client("psql")
            .args(["-d", database, "-v", "ON_ERROR_STOP=1", "-Atc", sql])
            .output()
            .map_err(|e| format!("cannot run psql: {e}"))?;
        check(&output, &format!("psql -c {sql:?}"))?;
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}

pub(crate) fn check(output: &Output, what: &str) -> Result<(), String> {
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "{what} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ))
}

/// The cluster, found running or started (once per process; the lock makes it once for
/// all processes).
fn cluster() -> Result<&'static Cluster, String> {
    static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();
    CLUSTER
        .get_or_init(start_or_reuse)
        .as_ref()
        .map_err(Clone::clone)
}

/// The directory of PostgreSQL's server programs: `$CLAIJ_PG_BIN`, the newest
/// `/usr/lib/postgresql/*/bin` (Debian), or wherever `pg_ctl` is on `PATH`.
pub(crate) fn bin_dir() -> Result<PathBuf, String> {
    let has_server = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    if let Some(dir) = std::env::var_os("CLAIJ_PG_BIN").map(PathBuf::from) {
        return if has_server(&dir) {
            Ok(dir)
        } else {
            Err(format!(
                "$CLAIJ_PG_BIN ({}) has no initdb and pg_ctl: unset it to use the PostgreSQL \
                 of `apt-get install -y postgresql`",
                dir.display()
            ))
        };
    }
    let mut debian: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            Some((version, e.path().join("bin")))
        })
        .filter(|(_, dir)| has_server(dir))
        .collect();
    debian.sort();
    if let Some((_, dir)) = debian.pop() {
        return Ok(dir);
    }
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path
        .into_iter()
        .find(|dir| has_server(dir))
        .ok_or_else(|| {
            "the PostgreSQL tests need a PostgreSQL server (initdb, pg_ctl), found neither in \
             /usr/lib/postgresql/*/bin nor on PATH: install it with `apt-get install -y \
             postgresql` (scripts/test does), or point $CLAIJ_PG_BIN at its bin directory"
                .to_owned()
        })
}

pub(crate) fn is_root() -> bool {
    effective_uid() == 0
}

/// The effective user id, read from `/proc` (no libc binding needed).
fn effective_uid() -> u32 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(u32::MAX)
}

/// `(uid, gid)` of a user, from `/etc/passwd`.
pub(crate) fn user_ids(name: &str) -> Option<(u32, u32)> {
    let passwd = fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        if fields.next()? != name {
            return None;
        }
        let _password = fields.next()?;
        Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
    })
}

/// Where the cluster lives (see the module documentation).
pub fn base_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CLAIJ_PG_TEST_DIR") {
        return PathBuf::from(dir);
    }
    if is_root() {
        return PathBuf::from("/var/tmp/claij-pg-test");
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    cache.join("claij").join("pg-test")
}

/// Runs a server program as the cluster's owner (`postgres` when we are root).
pub(crate) fn server_command(bin: &Path, program: &str) -> Command {
    if is_root() {
        let mut command = Command::new("runuser");
        command
            .args(["-u", "postgres", "--"])
            .arg(bin.join(program));
        command
    } else {
        Command::new(bin.join(program))
    }
}

fn start_or_reuse() -> Result<Cluster, String> {
    let bin = bin_dir()?;
    let base = base_dir();
    fs::create_dir_all(&base).map_err(|e| format!("cannot create {}: {e}", base.display()))?;
    if is_root() {
        let (uid, gid) = user_ids("postgres").ok_or(
            "running as root, the PostgreSQL tests need the `postgres` user to run the server \
             (`apt-get install -y postgresql` creates it)",
        )?;
        std::os::unix::fs::chown(&base, Some(uid), Some(gid))
            .map_err(|e| format!("cannot give {} to postgres: {e}", base.display()))?;
    }
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(base.join("lock"))
        .map_err(|e| format!("cannot open the lock file: {e}"))?;
    lock.lock()
        .map_err(|e| format!("cannot lock {}: {e}", base.display()))?;
    let cluster = locked_start_or_reuse(&bin, &base);
    if let Ok(cluster) = &cluster {
        sweep(cluster, &base);
    }
    drop(lock);
    cluster
}

fn locked_start_or_reuse(bin: &Path, base: &Path) -> Result<Cluster, String> {
    let data = base.join("data");
    let port_file = base.join("port");
    let running = server_command(bin, "pg_ctl")
        .arg("status")
        .arg("-D")
        .arg(&data)
        .output()
        .is_ok_and(|o| o.status.success());
    let known_port = fs::read_to_string(&port_file)
        .ok()
        .and_then(|p| p.trim().parse::<u16>().ok());
    if let (true, Some(port)) = (running, known_port)
        && TcpStream::connect(("127.0.0.1", port)).is_ok()
    {
        return Ok(Cluster {
            bin: bin.to_path_buf(),
            port,
        });
    }
    if running {
        // Running, but not where we expect it: restart it on a port we know.
        let _ = server_command(bin, "pg_ctl")
            .args(["stop", "-m", "fast", "-D"])
            .arg(&data)
            .output();
    }
    if !data.join("PG_VERSION").is_file() {
        init(bin, base, &data)?;
    }
    let mut last_error = String::new();
    for _ in 0..3 {
        let port = free_port()?;
        let output = server_command(bin, "pg_ctl")
            .args(["start", "-w", "-t", "60", "-D"])
            .arg(&data)
            .arg("-l")
            .arg(base.join("postgres.log"))
            .arg("-o")
            .arg(format!("-p {port}"))
            .output()
            .map_err(|e| format!("cannot run pg_ctl: {e}"))?;
        if output.status.success() {
            let mut file = File::create(&port_file)
                .map_err(|e| format!("cannot write {}: {e}", port_file.display()))?;
            writeln!(file, "{port}").map_err(|e| format!("cannot write the port: {e}"))?;
            return Ok(Cluster {
                bin: bin.to_path_buf(),
                port,
            });
        }
        let log = fs::read_to_string(base.join("postgres.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(15).collect();
        last_error = format!(
            "pg_ctl start failed: {}{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    Err(last_error)
}

/// Creates the cluster: superuser `claij`, trust authentication, loopback only, sockets
/// in the base directory.
pub(crate) fn init(bin: &Path, base: &Path, data: &Path) -> Result<(), String> {
    if data.exists() {
        let _ = fs::remove_dir_all(data);
    }
    let output = server_command(bin, "initdb")
        .arg("-D")
        .arg(data)
        .args(["-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--locale=C"])
        .args(["--no-sync", "--no-instructions"])
        .output()
        .map_err(|e| format!("cannot run initdb: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "initdb failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let settings = format!(
        "\n# claij test cluster\nlisten_addresses = '127.0.0.1'\n\
         unix_socket_directories = '{}'\nmax_connections = 300\n",
        base.display()
    );
    OpenOptions::new()
        .append(true)
        .open(data.join("postgresql.conf"))
        .and_then(|mut f| f.write_all(settings.as_bytes()))
        .map_err(|e| format!("cannot configure the test cluster: {e}"))
}

pub(crate) fn free_port() -> Result<u16, String> {
    TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

/// Drops test databases left by crashed tests (at most every ten minutes).
fn sweep(cluster: &Cluster, base: &Path) {
    let stamp = base.join("last-sweep");
    let recent = fs::metadata(&stamp)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age < Duration::from_secs(600));
    if recent {
        return;
    }
    let _ = File::create(&stamp);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let Ok(names) = cluster.sql("SELECT datname FROM pg_database WHERE datname LIKE 'test\\_%'")
    else {
        return;
    };
    for name in names.lines() {
        let created = name
            .split('_')
            .nth(1)
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(now);
        if now.saturating_sub(created) > SWEEP_AFTER.as_secs() {
            let _ = cluster
                .client("dropdb")
                .args(["--force", "--if-exists", name])
                .output();
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn two_databases_are_distinct_and_dropped() {
        let a = super::database();
        let b = super::database();
        assert_ne!(a.name(), b.name());
        assert_eq!(a.psql("SELECT 1 + 1").as_deref(), Ok("2\n"));
        let name = a.name().to_owned();
        drop(a);
        let left = b
            .psql(&format!(
                "SELECT count(*) FROM pg_database WHERE datname = '{name}'"
            ))
            .unwrap_or_default();
        assert_eq!(left.trim(), "0", "the database is dropped with its handle");
    }
}
