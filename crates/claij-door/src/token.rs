//! The API token: kept only as its SHA-256, a presented one hashed and compared in constant
//! time; `Authorization: Bearer TOKEN` read with the scheme in any case (RFC 9110 §11.1);
//! and the rule that a server listens beyond loopback only with a token.

use std::net::SocketAddr;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::problem::refusal;

/// The shortest API token accepted.
pub const MIN_TOKEN_LEN: usize = 32;

/// A token too short to resist guessing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the API token is {0} characters long; use at least 32 (e.g. `openssl rand -hex 32`)")]
pub struct WeakToken(pub usize);

/// A server asked to listen beyond loopback without a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "refusing to listen on {0} without an API token: anyone who can reach it could run workflows. Give --token-file FILE or CLAIJ_API_TOKEN, or bind 127.0.0.1"
)]
pub struct OpenWithoutToken(pub SocketAddr);

/// Loopback by default: any other address needs a token.
pub fn check_exposure(bind: SocketAddr, token: Option<&ApiToken>) -> Result<(), OpenWithoutToken> {
    if bind.ip().is_loopback() || token.is_some() {
        Ok(())
    } else {
        Err(OpenWithoutToken(bind))
    }
}

/// The API token, kept only as its SHA-256; a presented token is hashed and compared in
/// constant time. It never prints.
#[derive(Clone)]
pub struct ApiToken {
    hash: [u8; 32],
}

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiToken(<redacted>)")
    }
}

/// Why a request's credentials were refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// No `Authorization: Bearer …`.
    Missing,
    /// A bearer token, not this one.
    Wrong,
}

impl Refused {
    /// In words, for the `header.authorization` place of a refusal.
    pub fn reason(self) -> &'static str {
        match self {
            Refused::Missing => "missing",
            Refused::Wrong => "wrong token",
        }
    }
}

impl ApiToken {
    /// The token `secret` (surrounding whitespace ignored: a token file's newline).
    pub fn new(secret: &str) -> Result<Self, WeakToken> {
        let secret = secret.trim();
        if secret.len() < MIN_TOKEN_LEN {
            return Err(WeakToken(secret.len()));
        }
        Ok(ApiToken {
            hash: Sha256::digest(secret.as_bytes()).into(),
        })
    }

    /// Whether `presented` is the token.
    pub fn matches(&self, presented: &str) -> bool {
        let hash: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        hash.ct_eq(&self.hash).into()
    }

    /// Whether `headers` carry the token as `Authorization: Bearer TOKEN`.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), Refused> {
        match bearer(headers) {
            Some(presented) if self.matches(presented) => Ok(()),
            Some(_) => Err(Refused::Wrong),
            None => Err(Refused::Missing),
        }
    }
}

/// The credentials of an `Authorization: Bearer CREDENTIALS` header, the scheme's name
/// in any case, if there is one.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, credentials) = value.trim().split_once([' ', '\t'])?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| credentials.trim())
        .filter(|c| !c.is_empty())
}

/// Middleware for a server whose every route needs the token (`claij mcp serve --http`):
/// a request without it is refused 401 (`WWW-Authenticate: Bearer`), unseen by the route.
pub async fn require_token(
    State(token): State<Option<ApiToken>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = token else {
        return next.run(request).await;
    };
    match token.check(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refused) => unauthorized(refused),
    }
}

/// The 401 answer to `refused`.
pub fn unauthorized(refused: Refused) -> Response {
    let mut response = refusal(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "Unauthorized",
        "this server needs its API token: `Authorization: Bearer TOKEN`",
    )
    .at("header.authorization", refused.reason())
    .response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "0123456789abcdef0123456789abcdef";

    fn authorization(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(header::AUTHORIZATION, value);
        }
        headers
    }

    #[test]
    fn tokens_match_only_themselves_and_never_print() {
        let token = ApiToken::new(&format!("{SECRET}\n")).ok();
        assert!(token.as_ref().is_some_and(|t| t.matches(SECRET)));
        assert!(
            token
                .as_ref()
                .is_some_and(|t| !t.matches("0123456789abcdef0123456789abcdeF"))
        );
        assert!(!format!("{token:?}").contains("0123"));
        assert_eq!(ApiToken::new("short").err(), Some(WeakToken(5)));
    }

    #[test]
    fn the_scheme_is_read_in_any_case() {
        for value in [
            format!("Bearer {SECRET}"),
            format!("bearer {SECRET}"),
            format!("BEARER {SECRET}"),
            format!("  BeArEr   {SECRET} "),
        ] {
            assert_eq!(bearer(&authorization(&value)), Some(SECRET), "{value}");
        }
        for value in [
            format!("Basic {SECRET}"),
            format!("Bearer{SECRET}"),
            "Bearer ".to_owned(),
            String::new(),
        ] {
            assert_eq!(bearer(&authorization(&value)), None, "{value}");
        }
        let token = ApiToken::new(SECRET).ok();
        let check = |v: &str| token.as_ref().map(|t| t.check(&authorization(v)));
        assert_eq!(check(&format!("BEARER {SECRET}")), Some(Ok(())));
        assert_eq!(check("Bearer nope"), Some(Err(Refused::Wrong)));
        assert_eq!(check(""), Some(Err(Refused::Missing)));
    }

    #[test]
    fn an_open_address_needs_a_token() {
        let open = SocketAddr::from(([0, 0, 0, 0], 0));
        assert_eq!(check_exposure(open, None), Err(OpenWithoutToken(open)));
        let token = ApiToken::new(SECRET).ok();
        assert_eq!(check_exposure(open, token.as_ref()), Ok(()));
        assert_eq!(
            check_exposure(SocketAddr::from(([127, 0, 0, 1], 8080)), None),
            Ok(())
        );
        assert_eq!(
            check_exposure("[::1]:0".parse().unwrap_or(open), None),
            Ok(())
        );
    }
}
