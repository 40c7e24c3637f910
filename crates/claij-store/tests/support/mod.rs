//! Test support: a store per test, on a fresh SQLite file or a fresh database of one
//! PostgreSQL cluster shared by every test process.
//!
//! The cluster (cargo-nextest runs each test in its own process, so it cannot belong to
//! one) lives in `$CLAIJ_PG_TEST_DIR`, else `~/.cache/claij/pg-test/` — or, when the tests
//! run as root, `/var/tmp/claij-pg-test/`: PostgreSQL refuses to run as root, so there
//! the cluster runs as the `postgres` user, which cannot enter root's home. A lock file
//! in that directory makes one process start it (initdb once, then `pg_ctl start` on a
//! free loopback port, written to `port`) while the others wait, and later processes
//! reuse it while `pg_ctl status` says it runs. Each test gets its own database
//! (`test_<time>_<pid>_<n>`), dropped when the test ends (databases that a crashed test
//! left are swept after an hour). Missing PostgreSQL binaries fail the test, saying how
//! to install them.

#![allow(dead_code)]

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use claij_core::store::{Durability, RunStore, StoreError};
use claij_store::{AppliedMigration, CommitStats, PostgresStore, SqliteStore};

/// The superuser the test cluster is created with (trust authentication, loopback only).
const SUPERUSER: &str = "claij";
/// Leftover test databases older than this are dropped.
const SWEEP_AFTER: Duration = Duration::from_secs(3600);

/// Where one test's store lives.
pub struct Harness {
    url: String,
    backend: Backend,
    _dir: Option<tempfile::TempDir>,
    database: Option<PgDatabase>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A store as its concrete type, for what the trait does not show.
pub enum Concrete {
    Sqlite(Arc<SqliteStore>),
    Postgres(Arc<PostgresStore>),
}

impl Concrete {
    pub fn stats(&self) -> CommitStats {
        match self {
            Concrete::Sqlite(s) => s.stats(),
            Concrete::Postgres(s) => s.stats(),
        }
    }

    pub async fn applied_migrations(&self) -> Vec<AppliedMigration> {
        match self {
            Concrete::Sqlite(s) => s.applied_migrations().await,
            Concrete::Postgres(s) => s.applied_migrations().await,
        }
        .expect("applied migrations")
    }

    pub async fn durability_settings(&self) -> String {
        match self {
            Concrete::Sqlite(s) => s.durability_settings().await,
            Concrete::Postgres(s) => s.durability_settings().await,
        }
        .expect("durability settings")
    }

    pub fn store(&self) -> Arc<dyn RunStore> {
        match self {
            Concrete::Sqlite(s) => s.clone(),
            Concrete::Postgres(s) => s.clone(),
        }
    }
}

impl Harness {
    /// A fresh SQLite file in a temporary directory (in a subdirectory that does not exist
    /// yet: opening creates it).
    pub fn sqlite() -> Harness {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("data").join("claij.db");
        Harness {
            url: format!("sqlite:{}", path.display()),
            backend: Backend::Sqlite,
            _dir: Some(dir),
            database: None,
        }
    }

    /// A fresh database on the shared test cluster (started if needed).
    pub fn postgres() -> Harness {
        let database = PgDatabase::create();
        Harness {
            url: database.url(),
            backend: Backend::Postgres,
            _dir: None,
            database: Some(database),
        }
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The store URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Opens the store with the default durability.
    pub async fn open(&self) -> Arc<dyn RunStore> {
        self.try_open(Durability::Normal)
            .await
            .unwrap_or_else(|e| panic!("opening {}: {e}", self.url))
    }

    /// Opens the store through `claij_store::open`.
    pub async fn try_open(&self, durability: Durability) -> Result<Arc<dyn RunStore>, StoreError> {
        claij_store::open(&self.url, durability).await
    }

    /// Opens the store as its concrete type.
    pub async fn open_concrete(&self, durability: Durability) -> Concrete {
        match self.backend {
            Backend::Sqlite => {
                let path = self.url.trim_start_matches("sqlite:");
                Concrete::Sqlite(
                    claij_store::open_sqlite(path, durability)
                        .await
                        .expect("open sqlite"),
                )
            }
            Backend::Postgres => Concrete::Postgres(
                claij_store::open_postgres(&self.url, durability)
                    .await
                    .expect("open postgres"),
            ),
        }
    }

    /// Runs SQL on the database directly (to damage it on purpose).
    pub async fn execute(&self, sql: &str) {
        use sqlx::Connection;
        let sql = sqlx::AssertSqlSafe(sql.to_owned());
        match self.backend {
            Backend::Sqlite => {
                let mut conn = sqlx::SqliteConnection::connect(&self.url)
                    .await
                    .expect("connect to sqlite");
                sqlx::raw_sql(sql)
                    .execute(&mut conn)
                    .await
                    .expect("execute");
            }
            Backend::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&self.url)
                    .await
                    .expect("connect to postgres");
                sqlx::raw_sql(sql)
                    .execute(&mut conn)
                    .await
                    .expect("execute");
            }
        }
    }

    /// A URL of the same database with a password in it (the test cluster trusts every
    /// local connection, so any password works).
    pub fn url_with_password(&self, password: &str) -> Option<String> {
        self.database
            .as_ref()
            .map(|db| db.url_with_password(password))
    }
}

/// One test's database; dropped (with its connections) when the test ends.
pub struct PgDatabase {
    cluster: &'static Cluster,
    name: String,
}

impl PgDatabase {
    fn create() -> PgDatabase {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let cluster = cluster();
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let name = format!(
            "test_{secs}_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        cluster.sql(&format!("CREATE DATABASE {name}"));
        PgDatabase { cluster, name }
    }

    fn url(&self) -> String {
        format!(
            "postgres://{SUPERUSER}@127.0.0.1:{}/{}",
            self.cluster.port, self.name
        )
    }

    fn url_with_password(&self, password: &str) -> String {
        format!(
            "postgres://{SUPERUSER}:{password}@127.0.0.1:{}/{}",
            self.cluster.port, self.name
        )
    }
}

impl Drop for PgDatabase {
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

    /// Runs SQL in the `postgres` database; panics with psql's message on failure.
    fn sql(&self, sql: &str) -> String {
        let output = self
            .client("psql")
            .args(["-d", "postgres", "-v", "ON_ERROR_STOP=1", "-Atc", sql])
            .output()
            .expect("run psql");
        check(&output, &format!("psql -c {sql:?}"));
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}

fn check(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The cluster, found running or started (once per process; the lock makes it once for
/// all processes).
fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();
    match CLUSTER.get_or_init(start_or_reuse) {
        Ok(cluster) => cluster,
        Err(message) => panic!("{message}"),
    }
}

/// The directory of PostgreSQL's server programs: `$CLAIJ_PG_BIN`, the newest
/// `/usr/lib/postgresql/*/bin` (Debian), or wherever `pg_ctl` is on `PATH`.
fn bin_dir() -> Result<PathBuf, String> {
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

fn is_root() -> bool {
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
fn user_ids(name: &str) -> Option<(u32, u32)> {
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

fn base_dir() -> PathBuf {
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
fn server_command(bin: &Path, program: &str) -> Command {
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
fn init(bin: &Path, base: &Path, data: &Path) -> Result<(), String> {
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

fn free_port() -> Result<u16, String> {
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
    let names = cluster.sql("SELECT datname FROM pg_database WHERE datname LIKE 'test\\_%'");
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
