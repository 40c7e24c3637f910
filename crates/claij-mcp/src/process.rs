//! A server's child process: its own process group, stderr kept (the tail), and a shutdown
//! that always ends with the process reaped: end of input, then `SIGTERM`, then `SIGKILL`.

use std::collections::VecDeque;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::process::{Child, ChildStdin, Command};
use tokio::task::JoinHandle;

use crate::access::Access;
use crate::spec::Transport;

/// How much of a server's stderr is kept (the end of it).
const STDERR_TAIL_BYTES: usize = 4096;

/// How long a server gets to exit after its input closes, and again after `SIGTERM`.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(2);

/// The tail of a process's stderr, shared with the task that reads it.
#[derive(Debug, Clone, Default)]
pub struct StderrTail(Arc<Mutex<VecDeque<u8>>>);

impl StderrTail {
    fn push(&self, bytes: &[u8]) {
        let mut tail = self.0.lock().unwrap_or_else(|p| p.into_inner());
        tail.extend(bytes);
        let excess = tail.len().saturating_sub(STDERR_TAIL_BYTES);
        tail.drain(..excess);
    }

    /// The last bytes written to stderr, as text.
    pub fn text(&self) -> String {
        let tail = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let (a, b) = tail.as_slices();
        String::from_utf8_lossy(&[a, b].concat()).into_owned()
    }
}

/// How a shutdown ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The process exited by itself once its input closed.
    Exited,
    /// It ignored the end of its input and exited on `SIGTERM`.
    Terminated,
    /// It ignored `SIGTERM` too and was killed.
    Killed,
}

/// A running server process (the leader of its own process group).
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    pid: u32,
    stderr: StderrTail,
    stderr_reader: Option<JoinHandle<()>>,
    reaped: Option<ExitStatus>,
}

impl ServerProcess {
    /// Starts `transport` (which must be `Stdio`), returning the process and the pipes the
    /// MCP transport uses: its stdin, and its stdout through a relay that keeps reading
    /// (and discarding) after the transport lets go, so a server writing its last words
    /// during shutdown is not killed by a broken pipe.
    pub fn spawn(transport: &Transport) -> std::io::Result<(Self, DuplexStream, ChildStdin)> {
        Self::spawn_with(transport, &Access::operator())
    }

    /// [`spawn`](Self::spawn) as `access` allows: the program the policy found (its name
    /// as written kept as `argv[0]`), and, for an API client's document, none of this
    /// process's variables but those a program needs to run.
    pub fn spawn_with(
        transport: &Transport,
        access: &Access,
    ) -> std::io::Result<(Self, DuplexStream, ChildStdin)> {
        let Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } = transport
        else {
            return Err(std::io::Error::other("not a child-process server"));
        };
        let mut cmd = match &access.program {
            Some(program) => {
                let mut cmd = Command::new(program);
                cmd.arg0(command);
                cmd
            }
            None => Command::new(command),
        };
        if let Some(passed) = access.passed_environment() {
            cmd.env_clear().envs(passed);
        }
        cmd.args(args)
            .envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(cwd) = cwd {
            cmd.current_dir(cwd);
        }
        let mut child = cmd.spawn()?;
        let pid = child.id().unwrap_or_default();
        let (Some(mut stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(std::io::Error::other("the child's pipes are missing"));
        };
        let (theirs, mut ours) = tokio::io::duplex(64 * 1024);
        tokio::spawn(async move {
            let mut buf = vec![0u8; 16 * 1024];
            let mut relaying = true;
            while let Ok(n) = stdout.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                if relaying && ours.write_all(&buf[..n]).await.is_err() {
                    relaying = false;
                }
            }
            // Dropping `ours` tells the transport the server's output ended.
        });
        let stderr = StderrTail::default();
        let stderr_reader = child.stderr.take().map(|mut pipe| {
            let tail = stderr.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                while let Ok(n) = pipe.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    tail.push(&buf[..n]);
                }
            })
        });
        Ok((
            Self {
                child,
                pid,
                stderr,
                stderr_reader,
                reaped: None,
            },
            theirs,
            stdin,
        ))
    }

    /// The process id (also its process group id).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The tail of its stderr so far.
    pub fn stderr(&self) -> StderrTail {
        self.stderr.clone()
    }

    /// Waits (at most `wait`) until everything the process wrote to stderr has been read.
    pub async fn drain_stderr(&mut self, wait: Duration) {
        if let Some(reader) = self.stderr_reader.take() {
            let _ = tokio::time::timeout(wait, reader).await;
        }
    }

    /// Its exit status, if it has exited (reaping it).
    pub fn try_exited(&mut self) -> Option<ExitStatus> {
        if self.reaped.is_none() {
            self.reaped = self.child.try_wait().ok().flatten();
        }
        self.reaped
    }

    fn signal(&self, signal: Signal) {
        if let Ok(pid) = i32::try_from(self.pid) {
            // The group may already be gone; nothing to do then.
            let _ = killpg(Pid::from_raw(pid), signal);
        }
    }

    async fn wait_for(&mut self, grace: Duration) -> bool {
        if self.reaped.is_some() {
            return true;
        }
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(status) => {
                self.reaped = Some(status.unwrap_or_default());
                true
            }
            Err(_) => false,
        }
    }

    /// Ends the process, its input being closed already: waits `grace` for it to exit,
    /// then sends `SIGTERM` to its group and waits `grace` again, then `SIGKILL`. The
    /// process is always reaped when this returns.
    pub async fn shutdown(&mut self, grace: Duration) -> Ending {
        let ending = if self.wait_for(grace).await {
            Ending::Exited
        } else {
            tracing::debug!(pid = self.pid, "MCP server ignored end of input; SIGTERM");
            self.signal(Signal::SIGTERM);
            if self.wait_for(grace).await {
                Ending::Terminated
            } else {
                tracing::warn!(pid = self.pid, "MCP server ignored SIGTERM; SIGKILL");
                self.signal(Signal::SIGKILL);
                // SIGKILL cannot be ignored: the wait ends.
                let status = self.child.wait().await.unwrap_or_default();
                self.reaped = Some(status);
                Ending::Killed
            }
        };
        // Whatever the leader did, leave nothing of its group behind.
        self.signal(Signal::SIGKILL);
        self.drain_stderr(Duration::from_millis(500)).await;
        ending
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if self.reaped.is_none() {
            // Not shut down (a panic, a dropped connection): kill the group; tokio reaps
            // the leader in the background (`kill_on_drop`).
            self.signal(Signal::SIGKILL);
        }
    }
}
