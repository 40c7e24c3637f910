//! Retrying transient provider failures (429, 5xx, connection errors, timeouts) with
//! exponential backoff and jitter, honouring `Retry-After`. Separate from the engine's
//! validation attempts: a retried call is still one attempt, and the number of retries
//! is recorded in the attempt's usage (`http_retries`).

use std::time::Duration;

use claij_engine::TextSink;

use crate::provider::{Provider, ProviderError};
use crate::request::{ModelRequest, ModelResponse};

/// How transient failures are retried.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first call.
    pub max_retries: u32,
    /// The first delay; doubled each time.
    pub base: Duration,
    /// The longest delay (also caps `Retry-After`).
    pub max: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 4,
            base: Duration::from_millis(500),
            max: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The delay before retry `n` (from 0): `base * 2^n` with ±50 % jitter, at least the
    /// server's `Retry-After`, at most `max`.
    pub fn delay(&self, n: u32, retry_after: Option<Duration>) -> Duration {
        let exp = self.base.saturating_mul(1u32 << n.min(16));
        let jittered = exp.mul_f64(0.5 + fastrand::f64());
        jittered.max(retry_after.unwrap_or_default()).min(self.max)
    }
}

/// Calls `provider`, retrying transient failures per `policy`; the answer carries how
/// many retries it took. `on_retry` is told of each one (for logs).
pub async fn complete_with_retries(
    provider: &dyn Provider,
    request: &ModelRequest,
    policy: RetryPolicy,
    on_retry: &(dyn Fn(u32, &ProviderError, Duration) + Send + Sync),
    on_text: Option<&TextSink>,
) -> Result<ModelResponse, ProviderError> {
    let mut n = 0;
    loop {
        let call = match on_text {
            Some(sink) => provider.complete_streaming(request, sink.clone()),
            None => provider.complete(request),
        };
        match call.await {
            Ok(mut r) => {
                r.retries = n;
                return Ok(r);
            }
            Err(e @ ProviderError::Transient { .. }) if n < policy.max_retries => {
                let retry_after = match &e {
                    ProviderError::Transient { retry_after, .. } => *retry_after,
                    _ => None,
                };
                let delay = policy.delay(n, retry_after);
                on_retry(n + 1, &e, delay);
                tokio::time::sleep(delay).await;
                n += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_honour_retry_after_and_are_capped() {
        let p = RetryPolicy {
            max_retries: 5,
            base: Duration::from_millis(100),
            max: Duration::from_secs(2),
        };
        let d0 = p.delay(0, None);
        assert!(d0 >= Duration::from_millis(50) && d0 <= Duration::from_millis(150));
        let d3 = p.delay(3, None);
        assert!(d3 >= Duration::from_millis(400) && d3 <= Duration::from_millis(1200));
        assert_eq!(p.delay(0, Some(Duration::from_secs(1))).as_secs(), 1);
        assert_eq!(p.delay(20, None), Duration::from_secs(2));
    }
}
