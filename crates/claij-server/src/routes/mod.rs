//! The routes, and the router that puts them together with the token check, the body
//! limit and the MCP endpoint.

use axum::Json;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde_json::json;

use crate::auth::require_token;
use crate::problem::Problem;
use crate::state::AppState;

pub(crate) mod definitions;
pub(crate) mod events;
pub(crate) mod hooks;
pub(crate) mod openai;
pub(crate) mod openapi;
pub(crate) mod queue;
pub(crate) mod runs;

/// The API's routes, the token check in front of all but `/health`.
pub(crate) fn router(state: AppState) -> Router {
    let api = Router::new()
        .route("/openapi.json", get(openapi))
        .route(
            "/definitions",
            get(definitions::list).post(definitions::register),
        )
        .route("/definitions/{id}", get(definitions::show))
        .route("/runs", get(runs::list).post(runs::start))
        .route("/runs/{id}", get(runs::show))
        .route("/runs/{id}/trail", get(runs::trail))
        .route("/runs/{id}/resume", post(runs::resume))
        .route("/runs/{id}/interrupt", post(runs::interrupt))
        .route("/runs/{id}/fork", post(runs::fork))
        .route("/runs/{id}/events", get(events::events))
        .route("/runs/{id}/hooks", post(hooks::create))
        .route("/runs/{id}/deliveries", get(runs::deliveries))
        .route("/queue", get(queue::show))
        .route("/v1/models", get(openai::models))
        .route("/v1/chat/completions", post(openai::chat_completions))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            require_token,
        ));
    Router::new()
        .merge(crate::page::router())
        .route("/health", get(health))
        // A resume link is its own credential.
        .route("/hooks/{secret}", get(hooks::show).post(hooks::answer))
        .merge(api)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(state.config.body_limit))
        .with_state(state)
}

async fn health() -> impl IntoResponse {
    Json(json!({"status": "ok"}))
}

async fn openapi() -> impl IntoResponse {
    Json(openapi::openapi_json())
}

async fn not_found(uri: axum::http::Uri) -> Problem {
    Problem::new(
        StatusCode::NOT_FOUND,
        "not-found",
        "Not found",
        format!("no route `{}` (GET /openapi.json lists them)", uri.path()),
    )
}
