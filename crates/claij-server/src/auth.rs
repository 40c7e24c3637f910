//! The API token: every route but the health check needs `Authorization: Bearer TOKEN`
//! when the server has one.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::problem::{PlacedError, Problem};
use crate::state::AppState;

/// Refuses requests without the server's token (when it has one).
pub(crate) async fn require_token(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = &state.config.token else {
        return next.run(request).await;
    };
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        });
    match presented {
        Some(p) if token.matches(p.trim()) => next.run(request).await,
        _ => {
            let mut response = Problem::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "Unauthorized",
                "this server needs its API token: `Authorization: Bearer TOKEN`",
            )
            .with_errors(vec![PlacedError::at(
                "header.authorization",
                if presented.is_some() {
                    "wrong token"
                } else {
                    "missing"
                },
            )])
            .into_response();
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            response
        }
    }
}
