//! Accepting connections: at most [`Limits::max_connections`] open at once (one more is
//! answered 503 and closed at once), each served by hyper's HTTP/1 connection with a
//! header read timeout — which also closes a connection idle between requests — and all
//! of them stopped gracefully, within [`GRACE`], when the server stops.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// The default cap on open connections: well under the usual limit of 1,024 open files,
/// leaving room for the store, child processes and outgoing requests.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// The default time a connection may take to send a request's headers, and may stay idle
/// between requests.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long open connections may take to finish once the server stops.
pub const GRACE: Duration = Duration::from_secs(10);

/// At most so many connections refused at once are given time to read their 503.
const LINGERING: usize = 64;

/// How a server treats connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once, at most (`--max-connections`).
    pub max_connections: usize,
    /// How long a request's headers may take to arrive, and a connection may stay idle
    /// between requests (`--header-timeout`).
    pub header_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
        }
    }
}

/// The answer to a connection beyond the cap.
fn over_capacity(max: usize) -> Vec<u8> {
    let body = serde_json::json!({
        "type": "urn:claij:problem:too-many-connections",
        "title": "Too many connections",
        "status": 503,
        "detail": format!("{max} connections are open, as many as this server takes at once (--max-connections); try again later"),
    })
    .to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: {}\r\nretry-after: 1\r\n\
         x-content-type-options: nosniff\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        crate::problem::PROBLEM_JSON,
        body.len()
    )
    .into_bytes()
}

/// Serves `app` on `listener` within `limits` until `shutdown` is cancelled, then lets
/// open connections finish (at most [`GRACE`]).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let open = Arc::new(Semaphore::new(limits.max_connections));
    let lingering = Arc::new(Semaphore::new(LINGERING));
    let refusal: Arc<[u8]> = over_capacity(limits.max_connections).into();
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors, a connection reset before it was taken:
                    // the listener itself is fine; wait a moment for the former.
                    tracing::warn!("accepting a connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        let _ = stream.set_nodelay(true);
        let Ok(permit) = open.clone().try_acquire_owned() else {
            refuse(stream, &lingering, &refusal);
            continue;
        };
        let connection =
            builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("connection ended: {e}");
            }
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            "connections still open {} s after the server stopped were dropped",
            GRACE.as_secs()
        );
    }
    Ok(())
}

/// Answers a connection beyond the cap with 503 and closes it: given a moment to read the
/// answer (so the client sees it rather than a reset) while few are, else at once.
fn refuse(mut stream: TcpStream, lingering: &Arc<Semaphore>, answer: &Arc<[u8]>) {
    let Ok(permit) = lingering.clone().try_acquire_owned() else {
        let _ = stream.try_write(answer);
        return;
    };
    let answer = answer.clone();
    tokio::spawn(async move {
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            stream.write_all(&answer).await?;
            stream.shutdown().await?;
            // Read what the client sent until it closes, so closing sends no reset.
            let mut sink = [0u8; 1024];
            while stream.read(&mut sink).await? > 0 {}
            Ok::<_, std::io::Error>(())
        })
        .await;
        drop(permit);
    });
}
