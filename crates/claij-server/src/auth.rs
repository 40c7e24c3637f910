//! The API token: every route but the health check, the resume links and the page's own
//! files needs `Authorization: Bearer TOKEN` when the server has one.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
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
    match check_token(&state, request.headers()) {
        Ok(()) => next.run(request).await,
        Err(problem) => {
            let mut response = problem.into_response();
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            response
        }
    }
}

/// Whether `headers` carry the server's token (always, when it has none), as
/// `Authorization: Bearer TOKEN` with the scheme in any case.
pub(crate) fn check_token(state: &AppState, headers: &HeaderMap) -> Result<(), Problem> {
    let Some(token) = &state.config.token else {
        return Ok(());
    };
    token.check(headers).map_err(|refused| {
        Problem::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "Unauthorized",
            "this server needs its API token: `Authorization: Bearer TOKEN`",
        )
        .with_errors(vec![PlacedError::at(
            "header.authorization",
            refused.reason(),
        )])
    })
}
