//! The HTTP side shared by the remote providers: one client (rustls with ring, the
//! webpki roots), JSON POSTs, and the classification of failures into transient and
//! permanent. Keys go into headers only and are scrubbed from every message.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::provider::ProviderError;
use crate::secret::Secret;

/// One HTTP call a provider wants made.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpCall {
    /// The full URL (never holding a key: keys go in headers).
    pub url: String,
    /// Headers besides `content-type`; secret values are redacted when printed.
    pub headers: Vec<(String, HeaderValue)>,
    /// The JSON body.
    pub body: Value,
}

/// A header value: plain, or a key.
#[derive(Debug, Clone, PartialEq)]
pub enum HeaderValue {
    /// Printable.
    Plain(String),
    /// A key, with a prefix such as `Bearer `.
    Secret(&'static str, Secret),
}

/// A JSON-over-HTTPS client.
#[derive(Clone)]
pub struct Http {
    client: reqwest::Client,
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Http")
    }
}

impl Http {
    /// A client whose requests give up after `timeout`.
    pub fn new(timeout: Duration) -> Result<Self, ProviderError> {
        let fail = |message: String| ProviderError::Permanent {
            provider: "http".into(),
            message,
        };
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| fail(format!("TLS setup failed: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .timeout(timeout)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| fail(format!("HTTP client setup failed: {e}")))?;
        Ok(Self { client })
    }

    /// POSTs `call.body`; the parsed JSON answer of a 2xx, else a classified error.
    pub async fn post(&self, provider: &str, call: &HttpCall) -> Result<Value, ProviderError> {
        let scrub = |text: String| scrub_secrets(call, text);
        let response = self.send(provider, call).await?;
        let status = response.status();
        let retry_after = retry_after_of(&response);
        let text = match response.text().await {
            Ok(t) => t,
            Err(e) => {
                return Err(ProviderError::Transient {
                    provider: provider.to_owned(),
                    message: scrub(format!("reading the answer failed: {e}")),
                    retry_after: None,
                });
            }
        };
        if status.is_success() {
            return serde_json::from_str(&text).map_err(|e| ProviderError::Permanent {
                provider: provider.to_owned(),
                message: scrub(format!("the answer is not JSON ({e}): {}", snippet(&text))),
            });
        }
        failure(provider, status, retry_after, &text, call)
    }

    /// POSTs `call.body` and reads the answer as server-sent events: each `data:` line's
    /// JSON goes to `on_event` as it arrives (`[DONE]` ends the stream). A non-2xx answer
    /// is a classified error, as with [`post`](Self::post).
    pub async fn post_stream(
        &self,
        provider: &str,
        call: &HttpCall,
        on_event: &mut (dyn FnMut(Value) + Send),
    ) -> Result<(), ProviderError> {
        let scrub = |text: String| scrub_secrets(call, text);
        let mut response = self.send(provider, call).await?;
        let status = response.status();
        if !status.is_success() {
            let retry_after = retry_after_of(&response);
            let text = response.text().await.unwrap_or_default();
            return failure(provider, status, retry_after, &text, call);
        }
        let broken = |e: reqwest::Error| ProviderError::Transient {
            provider: provider.to_owned(),
            message: scrub(format!("reading the streamed answer failed: {e}")),
            retry_after: None,
        };
        let mut pending: Vec<u8> = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(broken)? {
            pending.extend_from_slice(&chunk);
            while let Some(end) = pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line);
                let Some(data) = line.trim_end().strip_prefix("data:") else {
                    continue;
                };
                let data = data.trim();
                if data == "[DONE]" {
                    return Ok(());
                }
                let event = serde_json::from_str(data).map_err(|e| ProviderError::Permanent {
                    provider: provider.to_owned(),
                    message: scrub(format!(
                        "a streamed event is not JSON ({e}): {}",
                        snippet(data)
                    )),
                })?;
                on_event(event);
            }
        }
        Ok(())
    }

    /// Sends `call`: the response of any status, or a transient error when none came.
    async fn send(
        &self,
        provider: &str,
        call: &HttpCall,
    ) -> Result<reqwest::Response, ProviderError> {
        let mut request = self
            .client
            .post(&call.url)
            .header("content-type", "application/json")
            .body(call.body.to_string());
        for (name, value) in &call.headers {
            request = match value {
                HeaderValue::Plain(v) => request.header(name.as_str(), v.as_str()),
                HeaderValue::Secret(prefix, s) => {
                    request.header(name.as_str(), format!("{prefix}{}", s.expose()))
                }
            };
        }
        request.send().await.map_err(|e| ProviderError::Transient {
            provider: provider.to_owned(),
            // reqwest's message holds the URL (never a key) and the cause.
            message: scrub_secrets(call, describe_send_error(&e)),
            retry_after: None,
        })
    }
}

/// `text` with the call's secrets taken out.
fn scrub_secrets(call: &HttpCall, text: String) -> String {
    call.headers
        .iter()
        .filter_map(|(_, v)| match v {
            HeaderValue::Secret(_, s) => Some(s),
            HeaderValue::Plain(_) => None,
        })
        .fold(text, |t, s| s.scrub(&t))
}

/// The `Retry-After` of an answer, when it has one.
fn retry_after_of(response: &reqwest::Response) -> Option<Duration> {
    response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(parse_retry_after)
}

/// The error of a non-2xx answer: transient for 408, 429 and 5xx (with its
/// `Retry-After`), permanent otherwise.
fn failure<T>(
    provider: &str,
    status: reqwest::StatusCode,
    retry_after: Option<Duration>,
    text: &str,
    call: &HttpCall,
) -> Result<T, ProviderError> {
    let message = scrub_secrets(call, format!("HTTP {status}: {}", snippet(text)));
    if status.as_u16() == 429 || status.as_u16() == 408 || status.is_server_error() {
        Err(ProviderError::Transient {
            provider: provider.to_owned(),
            message,
            retry_after,
        })
    } else {
        Err(ProviderError::Permanent {
            provider: provider.to_owned(),
            message,
        })
    }
}

fn describe_send_error(e: &reqwest::Error) -> String {
    let what = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    let mut message = format!("{what}: {e}");
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    message
}

/// `Retry-After` in seconds (the HTTP-date form is not honoured: backoff applies).
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let secs: f64 = value.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(3600.0)))
}

/// At most 500 characters of a server's answer, for error messages.
fn snippet(text: &str) -> String {
    let t = text.trim();
    match t.char_indices().nth(500) {
        Some((i, _)) => format!("{}…", &t[..i]),
        None => t.to_owned(),
    }
}
