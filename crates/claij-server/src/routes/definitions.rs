//! `/definitions`: the FSMs served — list, show (document, graph, entries' input
//! schemas), register.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::problem::{PlacedError, Problem};
use crate::state::{AppState, RegisterError};
use crate::views::{DefinitionSummary, DefinitionView, PlacedReason, RefusedMove, Registered};

/// Lists the FSMs served (the newest version of each).
#[utoipa::path(
    get, path = "/definitions", tag = "definitions",
    responses((status = 200, body = Vec<DefinitionSummary>))
)]
pub(crate) async fn list(State(state): State<AppState>) -> Json<Vec<DefinitionSummary>> {
    Json(
        state
            .newest()
            .iter()
            .map(|s| DefinitionView::summary(&s.fsm, s.trusted()))
            .collect(),
    )
}

/// Shows an FSM: its document, its graph (Mermaid and DOT), the input each entry takes.
#[utoipa::path(
    get, path = "/definitions/{id}", tag = "definitions",
    params(("id" = String, Path, description = "The FSM's id")),
    responses(
        (status = 200, body = DefinitionView),
        (status = 404, body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn show(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<DefinitionView>, Problem> {
    let served = state
        .find(&id, None)
        .ok_or_else(|| Problem::not_found(format!("no FSM `{id}` is served")))?;
    Ok(Json(DefinitionView::new(&served.fsm, served.trusted())))
}

/// Registers a document (JSON, or YAML with `Content-Type: application/yaml`): checked as
/// `claij validate` checks it, every problem located; refused if it starts programs or
/// reads the server's files (`command` states, stdio MCP servers, child FSMs by file)
/// unless the server's configuration allows them by name. Then stored and served.
#[utoipa::path(
    post, path = "/definitions", tag = "definitions",
    request_body(content = Object, description = "An FSM document (docs/FORMAT.md)", content_type = "application/json"),
    responses(
        (status = 201, body = Registered),
        (status = 403, description = "The document uses what only the operator may allow", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "That id and version hold another document", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The document does not load", body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn register(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, Problem> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let essence = content_type.split(';').next().unwrap_or("").trim();
    let name = match essence {
        "application/json" => "<request>.json",
        "application/yaml" | "application/x-yaml" | "text/yaml" => "<request>.yaml",
        _ => {
            return Err(Problem::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported-media-type",
                "Unsupported media type",
                format!("a document is JSON (`application/json`) or YAML (`application/yaml`), not `{content_type}`"),
            )
            .with_errors(vec![PlacedError::at("header.content-type", "expected JSON or YAML")]));
        }
    };
    let text = std::str::from_utf8(&body)
        .map_err(|e| Problem::bad_request(format!("the document is not UTF-8: {e}")))?;
    // JSON or YAML, held to the one rule for what comes from outside (no key twice,
    // nesting bounded) by the parser itself.
    let document =
        claij_core::source::parse_text(name, text).map_err(|d| Problem::invalid_document(&d))?;
    match state.register(document).await {
        Ok((served, policy)) => {
            let url = format!("/definitions/{}", served.fsm.id);
            let registered = Registered {
                id: served.fsm.id.to_string(),
                version: served.fsm.version,
                hash: served.fsm.hash.clone(),
                url: url.clone(),
                migrated: policy.moved.iter().map(|p| p.run.clone()).collect(),
                not_migrated: policy
                    .refused
                    .iter()
                    .map(|p| RefusedMove {
                        run: p.run.clone(),
                        version: p.from.version,
                        reasons: p
                            .refusals
                            .iter()
                            .map(|r| PlacedReason {
                                at: r.at.clone(),
                                message: r.message.clone(),
                            })
                            .collect(),
                    })
                    .collect(),
            };
            Ok((
                StatusCode::CREATED,
                [(header::LOCATION, url)],
                Json(registered),
            )
                .into_response())
        }
        Err(RegisterError::Invalid(d)) => Err(Problem::invalid_document(&d)),
        Err(RegisterError::Refused(refusals)) => {
            let errors = refusals
                .iter()
                .map(|(need, refused)| PlacedError::at(need.path.to_string(), refused.to_string()))
                .collect();
            Err(Problem::new(
                StatusCode::FORBIDDEN,
                "privileged-document",
                "Document not allowed",
                format!(
                    "the document would touch what the server's policy does not allow documents registered over the API ({} place(s)); it was not registered",
                    refusals.len()
                ),
            )
            .with_errors(errors))
        }
        Err(RegisterError::Owned { id }) => Err(Problem::new(
            StatusCode::FORBIDDEN,
            "operator-definition",
            "Definition owned by the operator",
            format!(
                "`{id}` is the operator's FSM: a document registered over the API may not replace it (the operator allows it with `claij serve --allow-new-versions {id}`); give the document another id"
            ),
        )
        .with_errors(vec![PlacedError::at("$.id", "the operator's FSM")])),
        Err(RegisterError::Taken { id, version }) => Err(Problem::conflict(format!(
            "FSM `{id}` version {version} is already served with another document: give the new one a higher `version`"
        ))),
        Err(RegisterError::Store(e)) => Err(Problem::from_store(&e)),
    }
}
