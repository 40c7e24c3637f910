//! Long-lived answers (server-sent event streams) and MCP sessions, each bounded: a
//! stream holds a permit for as long as its body lives; one asked for beyond the cap is
//! refused with a 503 problem saying so.

use std::sync::Arc;

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;
use futures_util::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::problem::{Refusal, refusal};

/// The default cap on event streams open at once.
pub const DEFAULT_MAX_STREAMS: usize = 128;

/// How long a client refused for want of room is asked to wait before trying again.
pub const RETRY_AFTER_SECONDS: u64 = 5;

/// At most so many event streams open at once.
#[derive(Debug, Clone)]
pub struct Streams {
    open: Arc<Semaphore>,
    max: usize,
}

/// A stream's place among the [`Streams`], given back when dropped.
#[derive(Debug)]
pub struct StreamPermit {
    _held: OwnedSemaphorePermit,
}

/// Every place is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{max} event streams are open, as many as this server keeps at once (--max-streams)")]
pub struct Full {
    /// The cap.
    pub max: usize,
}

impl Full {
    /// The 503 answer: `too-many-streams`, with `Retry-After`.
    pub fn refusal(self) -> Refusal {
        refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "too-many-streams",
            "Too many event streams",
            format!("{self}; close one, or try again later"),
        )
        .retry_after(RETRY_AFTER_SECONDS)
    }
}

impl Streams {
    /// At most `max` streams at once.
    pub fn new(max: usize) -> Self {
        Streams {
            open: Arc::new(Semaphore::new(max)),
            max,
        }
    }

    /// A place for one more stream, or [`Full`].
    pub fn open(&self) -> Result<StreamPermit, Full> {
        self.open
            .clone()
            .try_acquire_owned()
            .map(|held| StreamPermit { _held: held })
            .map_err(|_| Full { max: self.max })
    }
}

/// `response` with `permit` held until its body is dropped (sent to its end, or its
/// client gone).
pub fn hold(response: Response, permit: StreamPermit) -> Response {
    let (parts, body) = response.into_parts();
    let body = body.into_data_stream().map(move |chunk| {
        let _held = &permit;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_taken_and_given_back() {
        let streams = Streams::new(2);
        let a = streams.open();
        let b = streams.open();
        assert!(a.is_ok() && b.is_ok());
        assert_eq!(streams.open().err(), Some(Full { max: 2 }));
        drop(a);
        assert!(streams.open().is_ok());
        let refused = Full { max: 2 }.refusal();
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            refused.body()["detail"]
                .as_str()
                .is_some_and(|d| d.contains("--max-streams"))
        );
    }

    #[tokio::test]
    async fn a_held_body_keeps_its_place_until_dropped() {
        let streams = Streams::new(1);
        let permit = streams.open().ok();
        let response = permit.map(|p| hold(Response::new(Body::from("data")), p));
        assert!(streams.open().is_err(), "held");
        drop(response);
        assert!(streams.open().is_ok(), "given back");
    }
}
