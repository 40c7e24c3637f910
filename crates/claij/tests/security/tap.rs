//! Loopback listeners for the egress tests: each counts the connections it is given and
//! answers each with a canned reply (or closes it), so a test can show that a connection
//! was never made, or that what a target answered never reaches an API client.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// A listener on a loopback address; stopped when dropped.
pub(crate) struct Tap {
    pub(crate) addr: SocketAddr,
    seen: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Tap {
    /// Listens on `ip` (a loopback address), answering every connection with `reply`
    /// (after reading what the client sent), or closing it at once when `reply` is empty.
    pub(crate) fn start(ip: &str, reply: &'static [u8]) -> Self {
        let listener = TcpListener::bind((ip, 0)).unwrap();
        assert!(listener.local_addr().unwrap().ip().is_loopback());
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (counted, stopped) = (seen.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stopped.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((mut stream, _)) => {
                        counted.fetch_add(1, Ordering::SeqCst);
                        if reply.is_empty() {
                            continue;
                        }
                        let _ = stream.set_nonblocking(false);
                        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
                        let mut buffer = [0u8; 8192];
                        let _ = stream.read(&mut buffer);
                        let _ = stream.write_all(reply);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        Tap { addr, seen, stop }
    }

    /// Connections made to it so far.
    pub(crate) fn connections(&self) -> usize {
        self.seen.load(Ordering::SeqCst)
    }

    pub(crate) fn port(&self) -> u16 {
        self.addr.port()
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// A loopback port nothing listens on (bound, then let go).
pub(crate) fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}
