//! Connections: a cap on how many are open at once, and a time limit on a request's
//! headers (and on staying idle between requests), for `claij serve` and `claij mcp serve
//! --http` alike. Raw TCP sockets, since an HTTP client will not stay silent.

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::door_support::{
    ECHO, Fate, McpServed, exchange, fates, idle, initialize_body, raw_get, write,
};
use crate::served::{Served, approval};

/// Opens `n` idle connections to `addr` and watches them until the server has dealt with
/// each; gives how many it answered 503 and how many it closed without a word.
fn flood(addr: &str, n: usize) -> (usize, usize) {
    let mut streams: Vec<TcpStream> = (0..n).map(|_| idle(addr)).collect();
    // Generous: the idle ones are closed after the header timeout (seconds).
    let fates = fates(&mut streams, 120);
    assert!(
        !fates.contains(&Fate::Open),
        "every idle connection is closed by the server: {fates:?}"
    );
    let refused = fates
        .iter()
        .filter(|f| matches!(f, Fate::Answered(a) if a.starts_with("HTTP/1.1 503")))
        .count();
    let timed_out = fates.iter().filter(|f| **f == Fate::ClosedSilently).count();
    (refused, timed_out)
}

/// Finding 2 (issue 35), "no header-read or idle timeout, no connection cap": 1,100 idle
/// unauthenticated connections denied service to everyone, for as long as they stayed.
/// Now at most `--max-connections` are open at once (those beyond are answered 503 and
/// closed at once) and one that sends nothing is closed after `--header-timeout`; a fresh
/// connection is served again once they are gone.
#[test]
fn idle_connections_beyond_the_cap_are_refused_and_the_rest_time_out() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(
        &dir.path().join("claij.db"),
        &[
            &approval(),
            "--max-connections",
            "8",
            "--header-timeout",
            "3s",
        ],
    );
    let addr = crate::door_support::authority(&server.base);
    let (refused, timed_out) = flood(&addr, 20);
    assert_eq!(refused, 12, "the 12 beyond the cap are answered 503");
    assert_eq!(timed_out, 8, "the 8 within it time out");
    let health = raw_get(&addr, "/health").expect("answered");
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    assert!(health.contains(r#"{"status":"ok"}"#), "{health}");
}

/// Finding 2 (issue 35), slowloris: a connection that sends its headers a line at a time,
/// never finishing, was kept open for ever. Now it is closed once `--header-timeout` has
/// passed since its request began (here 2 s; the test allows a minute).
#[test]
fn a_client_sending_its_headers_too_slowly_is_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(
        &dir.path().join("claij.db"),
        &[&approval(), "--header-timeout", "2s"],
    );
    let addr = crate::door_support::authority(&server.base);
    let mut stream = TcpStream::connect(&addr).expect("connects");
    stream
        .write_all(format!("GET /health HTTP/1.1\r\nHost: {addr}\r\n").as_bytes())
        .expect("the request line is sent");
    stream.set_nonblocking(true).expect("non-blocking");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    let mut line = 0;
    let closed = loop {
        if Instant::now() > deadline {
            break false;
        }
        line += 1;
        if let Err(e) = stream.write_all(format!("X-Slow-{line}: a\r\n").as_bytes())
            && e.kind() != std::io::ErrorKind::WouldBlock
        {
            break true;
        }
        std::thread::sleep(Duration::from_millis(500));
        if crate::door_support::fate(&mut stream, &mut seen) != Fate::Open {
            break true;
        }
    };
    assert!(closed, "the slow connection is still open after a minute");
    let health = raw_get(&addr, "/health").expect("answered");
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
}

/// Finding 2 (issue 35) at `claij mcp serve --http`, which served through `axum::serve`
/// the same way: the same cap and header timeout.
#[test]
fn mcp_serve_http_caps_connections_and_times_idle_ones_out() {
    let dir = tempfile::tempdir().unwrap();
    let echo = write(dir.path(), "echo.yaml", ECHO);
    let server = McpServed::start(
        &dir.path().join("claij.db"),
        &[&echo],
        &["--max-connections", "4", "--header-timeout", "3s"],
        &[],
    );
    let addr = server.authority();
    let (refused, timed_out) = flood(&addr, 10);
    assert_eq!(refused, 6, "the 6 beyond the cap are answered 503");
    assert_eq!(timed_out, 4, "the 4 within it time out");
    let body = initialize_body();
    let answer = exchange(
        &addr,
        &format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        ),
    )
    .expect("answered");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}
