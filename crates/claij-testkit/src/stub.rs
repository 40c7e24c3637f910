//! A scripted HTTP/1.1 server on a free loopback port: it answers each request with the
//! next of its replies (the last one again once they run out) and records every request
//! it was sent, for tests of clients (the `http` action).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// One scripted reply.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Its status.
    pub status: u16,
    /// Its headers (`Content-Length` and `Connection: close` are added).
    pub headers: Vec<(String, String)>,
    /// Its body.
    pub body: String,
    /// How long the server waits before answering.
    pub delay: Duration,
}

impl Reply {
    /// A reply with `status` and a JSON `body`.
    pub fn json(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: body.into(),
            delay: Duration::ZERO,
        }
    }

    /// A reply with `status` and a plain-text `body`.
    pub fn text(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: vec![("Content-Type".into(), "text/plain".into())],
            body: body.into(),
            delay: Duration::ZERO,
        }
    }

    /// The same reply with the header `name: value`.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The same reply, sent after `delay`.
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// A request the server was sent.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    /// Its method.
    pub method: String,
    /// Its target (path and query).
    pub target: String,
    /// Its headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// Its body.
    pub body: String,
}

impl Seen {
    /// The value of header `name` (any case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The server; it stops when dropped.
pub struct Stub {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
}

impl Stub {
    /// Starts a server on 127.0.0.1 answering with `replies` in turn.
    pub fn start(replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|e| panic!("no loopback port for the stub server: {e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("the stub server's address: {e}"))
            .port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen_, stop_) = (seen.clone(), stop.clone());
        let replies = Arc::new(Mutex::new((replies, 0usize)));
        thread::spawn(move || {
            for stream in listener.incoming() {
                if stop_.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let (seen, replies) = (seen_.clone(), replies.clone());
                thread::spawn(move || serve(stream, &seen, &replies));
            }
        });
        Self { port, seen, stop }
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The requests it was sent so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Drop for Stub {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

type Replies = Mutex<(Vec<Reply>, usize)>;

fn serve(stream: TcpStream, seen: &Mutex<Vec<Seen>>, replies: &Replies) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let mut request = Seen {
        method: parts.next().unwrap_or_default().to_owned(),
        target: parts.next().unwrap_or_default().to_owned(),
        ..Seen::default()
    };
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 {
            return;
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            request
                .headers
                .push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let length: usize = request
        .header("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    request.body = String::from_utf8_lossy(&body).into_owned();
    if let Ok(mut seen) = seen.lock() {
        seen.push(request);
    }
    let reply = {
        let Ok(mut guard) = replies.lock() else {
            return;
        };
        let (list, next) = &mut *guard;
        let reply = list
            .get(*next)
            .or_else(|| list.last())
            .cloned()
            .unwrap_or_else(|| Reply::text(404, "no reply scripted"));
        *next += 1;
        reply
    };
    thread::sleep(reply.delay);
    let mut head = format!("HTTP/1.1 {} Scripted\r\n", reply.status);
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        reply.body.len()
    ));
    let _ = writer.write_all(head.as_bytes());
    let _ = writer.write_all(reply.body.as_bytes());
    let _ = writer.flush();
}
