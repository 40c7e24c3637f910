//! The OpenAPI 3.1 description, derived from the handlers and the types they take and
//! give (`GET /openapi.json`).

use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};

use super::{definitions, events, hooks, openai, queue, runs};
use crate::problem::{PlacedError, Problem};
use crate::{links, views};

/// The API's description.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "claij",
        description = "Workflows as a service: FSM definitions, runs, their trails and live events. Errors are `application/problem+json`; with an API token configured, every route but `/health` needs `Authorization: Bearer TOKEN`."
    ),
    paths(
        definitions::list, definitions::show, definitions::register,
        runs::start, runs::list, runs::show, runs::trail, runs::resume, runs::interrupt, runs::fork, runs::deliveries,
        queue::show,
        events::events,
        hooks::show, hooks::answer, hooks::create,
        openai::models, openai::chat_completions,
    ),
    components(schemas(
        Problem, PlacedError, views::RunView, views::WaitView, views::AnswerView, views::RunPage,
        views::RunSummary, views::TrailPage, views::StartRun, views::ResumeRun, views::ForkRun,
        views::DefinitionSummary, views::DefinitionView, views::Registered, views::RefusedMove, views::PlacedReason, views::Accepted, views::DeliveryView,
        links::NewHook, hooks::HookView, hooks::HookAnswered, openai::ChatRequest,
        queue::QueueView, queue::WorkerView,
    )),
    modifiers(&BearerToken),
    security(("bearer" = [])),
    tags(
        (name = "definitions", description = "The FSMs served"),
        (name = "runs", description = "Runs: start, follow, answer, stop"),
        (name = "hooks", description = "Resume links: a waiting run answered with no other credential"),
        (name = "openai", description = "Workflows as OpenAI chat models (`fsm:ID`)"),
    )
)]
pub(crate) struct ApiDoc;

struct BearerToken;

impl utoipa::Modify for BearerToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The description as JSON.
pub fn openapi_json() -> serde_json::Value {
    serde_json::to_value(ApiDoc::openapi()).unwrap_or_default()
}
