//! The checks every request goes through before any route sees it, one middleware around
//! a server's whole router:
//!
//! 1. its `Host` is a name of the server ([`Hosts`]; 403 otherwise: DNS rebinding);
//! 2. its `Origin`, when a browser sends one, is the server's own (403 otherwise);
//! 3. on a server without a token, a `POST` says it sends JSON or YAML (415 otherwise: a
//!    form on another site cannot send that, nor reach the server without asking);
//! 4. its body arrives within [`BODY_TIMEOUT`] and holds at most the body limit (408,
//!    413);
//! 5. a JSON body is held to claij's one rule for JSON from outside (no key twice, at most
//!    [`MAX_NESTING`] levels; 400 naming the place), and handed to the route parsed
//!    ([`ParsedJson`]); a body that is not JSON at all is left to the route to report;
//!
//! and every answer, refusals included, carries `X-Content-Type-Options: nosniff`.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use claij_core::source::{JsonError, JsonErrorKind, MAX_NESTING, parse_json};
use futures_util::StreamExt;
use serde_json::Value;

use crate::hosts::{Hosts, same_origin};
use crate::problem::{Refusal, refusal};

/// How long a request's body may take to arrive, whole.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// The default request body limit: 1 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 1 << 20;

/// A request body's JSON, read by the door with [`parse_json`]: routes take it from the
/// request's extensions instead of parsing the body again.
#[derive(Debug, Clone)]
pub struct ParsedJson(pub Arc<Value>);

/// What the door checks for one server.
#[derive(Debug, Clone)]
pub struct Door {
    hosts: Hosts,
    public_url: Option<String>,
    body_limit: usize,
    forms_refused: bool,
}

impl Door {
    /// A door answering `hosts`, taking bodies of at most `body_limit` bytes.
    pub fn new(hosts: Hosts, body_limit: usize) -> Self {
        Door {
            hosts,
            public_url: None,
            body_limit,
            forms_refused: true,
        }
    }

    /// Whose pages are the server's own besides those of the request's `Host`: the
    /// server's address as others reach it (`https://claij.example.com`, behind a proxy).
    pub fn public_url(mut self, url: Option<String>) -> Self {
        self.public_url = url;
        self
    }

    /// Whether the server has an API token: then the token (a header no form can send)
    /// guards its state-changing routes, and a `POST` need not say it sends JSON.
    pub fn with_token(mut self, has_token: bool) -> Self {
        self.forms_refused = !has_token;
        self
    }

    /// `router`, every request of it (its fallback too) through this door.
    pub fn around(self, router: Router) -> Router {
        router.layer(axum::middleware::from_fn_with_state(self, guard))
    }

    /// The request, checked and its body read; or the refusal.
    async fn admit(&self, request: Request) -> Result<Request, Refusal> {
        let authority = authority(&request).ok_or_else(|| {
            refusal(
                StatusCode::BAD_REQUEST,
                "missing-host",
                "Bad request",
                "the request names no Host",
            )
            .at("header.host", "missing")
        })?;
        if !self.hosts.allows(&authority) {
            return Err(refusal(
                StatusCode::FORBIDDEN,
                "host-not-allowed",
                "Host not allowed",
                format!(
                    "this server does not answer to the Host `{authority}` (a guard against DNS rebinding): it answers to loopback names and the address it is bound to, and to the names given with --allow-host or --public-url"
                ),
            )
            .at("header.host", "not a name of this server"));
        }
        if let Some(origin) = request.headers().get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            if !same_origin(origin, &authority, self.public_url.as_deref()) {
                return Err(refusal(
                    StatusCode::FORBIDDEN,
                    "cross-origin",
                    "Cross-origin request refused",
                    format!(
                        "requests from pages of another origin (`{origin}`) are refused; this server answers its own pages only"
                    ),
                )
                .at("header.origin", "not this server's origin"));
            }
        }
        let content_type = essence(request.headers());
        if self.forms_refused
            && request.method() == Method::POST
            && !(is_json(&content_type) || is_yaml(&content_type))
        {
            return Err(refusal(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported-media-type",
                "Unsupported media type",
                "a POST to a server without an API token must say it sends JSON — `Content-Type: application/json` (a document may be YAML), even with no body — which no form of another site can",
            )
            .at(
                "header.content-type",
                if content_type.is_empty() {
                    "missing; expected application/json".to_owned()
                } else {
                    format!("`{content_type}`; expected application/json")
                },
            ));
        }
        let (parts, body) = request.into_parts();
        let bytes = self.read(&parts.headers, body).await?;
        let parsed = if is_json(&content_type) && !bytes.iter().all(u8::is_ascii_whitespace) {
            match parse_json(&bytes) {
                Ok(value) => Some(ParsedJson(Arc::new(value))),
                // Not JSON at all: the route says so, its own way.
                Err(e) if e.kind == JsonErrorKind::Syntax => None,
                Err(e) => return Err(json_refusal(&e)),
            }
        } else {
            None
        };
        let mut request = Request::from_parts(parts, Body::from(bytes));
        if let Some(parsed) = parsed {
            request.extensions_mut().insert(parsed);
        }
        Ok(request)
    }

    /// The whole body: at most the limit, within [`BODY_TIMEOUT`].
    async fn read(&self, headers: &HeaderMap, body: Body) -> Result<Bytes, Refusal> {
        let limit = self.body_limit;
        let too_large = || {
            refusal(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body-too-large",
                "Request body refused",
                format!("the body is larger than this server takes: {limit} bytes (--body-limit)"),
            )
        };
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        if declared.is_some_and(|n| n > limit as u64) {
            return Err(too_large());
        }
        let read = async {
            let mut data = Vec::new();
            let mut chunks = body.into_data_stream();
            while let Some(chunk) = chunks.next().await {
                let chunk = chunk.map_err(|e| {
                    refusal(
                        StatusCode::BAD_REQUEST,
                        "bad-body",
                        "Request body refused",
                        format!("the body could not be read: {e}"),
                    )
                })?;
                if data.len() + chunk.len() > limit {
                    return Err(too_large());
                }
                data.extend_from_slice(&chunk);
            }
            Ok(Bytes::from(data))
        };
        tokio::time::timeout(BODY_TIMEOUT, read)
            .await
            .unwrap_or_else(|_| {
                Err(refusal(
                    StatusCode::REQUEST_TIMEOUT,
                    "body-too-slow",
                    "Request body too slow",
                    format!(
                        "the body did not arrive within {} s",
                        BODY_TIMEOUT.as_secs()
                    ),
                ))
            })
    }
}

/// The door around every request: refusals answered here, the rest passed on; `nosniff`
/// on every answer.
async fn guard(State(door): State<Door>, request: Request, next: Next) -> Response {
    let mut response = match door.admit(request).await {
        Ok(request) => next.run(request).await,
        Err(refused) => refused.response(),
    };
    response.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// The request's authority: its URI's (absolute form), else its `Host`.
fn authority(request: &Request) -> Option<String> {
    match request.uri().authority() {
        Some(authority) => Some(authority.as_str().to_owned()),
        None => request
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_owned),
    }
}

/// The media type of the body, lower case, without parameters ("" when not given).
fn essence(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

fn is_json(essence: &str) -> bool {
    essence == "application/json" || essence.ends_with("+json")
}

fn is_yaml(essence: &str) -> bool {
    matches!(
        essence,
        "application/yaml" | "application/x-yaml" | "text/yaml"
    )
}

/// The refusal of a body's JSON that breaks the rule.
pub fn json_refusal(error: &JsonError) -> Refusal {
    let detail = match error.kind {
        JsonErrorKind::TooDeep => format!(
            "the body nests arrays and objects deeper than {MAX_NESTING} levels (at {})",
            error.place
        ),
        JsonErrorKind::DuplicateKey => format!(
            "the body gives a key twice (at {}): {}",
            error.place, error.message
        ),
        JsonErrorKind::Syntax => format!("the body is not JSON: {}", error.message),
    };
    refusal(
        StatusCode::BAD_REQUEST,
        "bad-request",
        "Bad request",
        detail,
    )
    .at_line(
        &error.place.to_string(),
        error.message.clone(),
        error.line,
        error.column,
    )
}
