//! A PostgreSQL server that takes TLS connections only, for the tests of `sslmode`: a
//! cluster of its own (the shared one stays plain), its certificate signed by a CA made
//! for it with the `openssl` program, `hostssl` connections trusted and every other one
//! refused. Stopped and removed when dropped.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::postgres::{
    base_dir, bin_dir, check, free_port, init, is_root, server_command, user_ids,
};

/// A TLS-only PostgreSQL server (superuser `claij`, database `postgres`).
#[derive(Debug)]
pub struct TlsServer {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
}

impl TlsServer {
    /// `postgres://claij@localhost:PORT/postgres?PARAMS` (the certificate names
    /// `localhost` and 127.0.0.1).
    pub fn url(&self, params: &str) -> String {
        format!("postgres://claij@localhost:{}/postgres?{params}", self.port)
    }

    /// The CA certificate that signed the server's (PEM), for `sslrootcert`.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = server_command(&self.bin, "pg_ctl")
            .args(["stop", "-m", "immediate", "-D"])
            .arg(self.dir.join("data"))
            .output();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Starts a TLS-only server; panics, saying why, when it cannot (PostgreSQL or `openssl`
/// missing).
pub fn tls_server() -> TlsServer {
    start().unwrap_or_else(|e| panic!("cannot start a TLS PostgreSQL server: {e}"))
}

fn openssl(dir: &Path, args: &[&str]) -> Result<(), String> {
    let output = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("cannot run openssl (apt-get install -y openssl): {e}"))?;
    check(&output, &format!("openssl {}", args.join(" ")))
}

fn start() -> Result<TlsServer, String> {
    let bin = bin_dir()?;
    let dir = base_dir().join(format!("tls-{}-{}", std::process::id(), free_port()?));
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    // A CA, and the server's certificate for localhost and 127.0.0.1 signed by it.
    openssl(
        &dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=claij test CA",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
        ],
    )?;
    fs::write(
        dir.join("san.ext"),
        "subjectAltName = DNS:localhost, IP:127.0.0.1\n",
    )
    .map_err(|e| e.to_string())?;
    openssl(
        &dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
    )?;
    openssl(
        &dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.ext",
            "-out",
            "server.crt",
        ],
    )?;
    let data = dir.join("data");
    if is_root() {
        let (uid, gid) = user_ids("postgres").ok_or("no `postgres` user to run the server")?;
        for entry in [dir.clone(), dir.join("server.key"), dir.join("server.crt")] {
            std::os::unix::fs::chown(&entry, Some(uid), Some(gid)).map_err(|e| e.to_string())?;
        }
    }
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(dir.join("server.key"), fs::Permissions::from_mode(0o600))
            .map_err(|e| e.to_string())?;
    }
    init(&bin, &dir, &data)?;
    let settings = format!(
        "ssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'\n",
        dir.join("server.crt").display(),
        dir.join("server.key").display()
    );
    OpenOptions::new()
        .append(true)
        .open(data.join("postgresql.conf"))
        .and_then(|mut f| f.write_all(settings.as_bytes()))
        .map_err(|e| format!("cannot configure TLS: {e}"))?;
    fs::write(
        data.join("pg_hba.conf"),
        "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostnossl all all 127.0.0.1/32 reject\n",
    )
    .map_err(|e| format!("cannot write pg_hba.conf: {e}"))?;
    if is_root()
        && let Some((uid, gid)) = user_ids("postgres")
    {
        std::os::unix::fs::chown(data.join("pg_hba.conf"), Some(uid), Some(gid))
            .map_err(|e| e.to_string())?;
    }
    let port = free_port()?;
    let output = server_command(&bin, "pg_ctl")
        .args(["start", "-w", "-t", "60", "-D"])
        .arg(&data)
        .arg("-l")
        .arg(dir.join("postgres.log"))
        .arg("-o")
        .arg(format!("-p {port}"))
        .output()
        .map_err(|e| format!("cannot run pg_ctl: {e}"))?;
    let server = TlsServer { bin, dir, port };
    check(&output, "pg_ctl start").map_err(|e| {
        let log = fs::read_to_string(server.dir.join("postgres.log")).unwrap_or_default();
        format!("{e}\n{log}")
    })?;
    Ok(server)
}
