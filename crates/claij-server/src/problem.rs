//! Errors as `application/problem+json` (RFC 9457): a status, a title, what went wrong
//! in words, and each problem with its place (a JSON path in the request, or in the
//! document registered).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use claij_core::store::StoreError;
use claij_core::{Diagnostics, ValidationIssue};
use claij_engine::{InputError, RunError};
use serde::Serialize;
use utoipa::ToSchema;

/// The media type of problem responses.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// An error response: RFC 9457 problem details with claij's `errors` member.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Problem {
    /// A URI naming the kind of problem (`urn:claij:problem:KIND`).
    #[serde(rename = "type")]
    pub kind: String,
    /// The kind in words.
    pub title: String,
    /// The HTTP status.
    pub status: u16,
    /// What went wrong, in words.
    pub detail: String,
    /// Each problem and its place.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<PlacedError>,
}

/// One problem and where it is.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PlacedError {
    /// Where: a JSON path (`$.input.age`, `$.states[1].id`), or a request part
    /// (`query.limit`, `header.authorization`).
    pub place: String,
    /// What is wrong there.
    pub message: String,
    /// Where in the document, for problems in a registered document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// The column on that line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
}

impl PlacedError {
    /// A problem at `place`.
    pub fn at(place: impl Into<String>, message: impl Into<String>) -> Self {
        PlacedError {
            place: place.into(),
            message: message.into(),
            line: None,
            column: None,
        }
    }
}

impl Problem {
    /// A problem of `kind` with `status`.
    pub fn new(status: StatusCode, kind: &str, title: &str, detail: impl Into<String>) -> Self {
        Problem {
            kind: format!("urn:claij:problem:{kind}"),
            title: title.to_owned(),
            status: status.as_u16(),
            detail: detail.into(),
            errors: Vec::new(),
        }
    }

    /// With these placed errors.
    pub fn with_errors(mut self, errors: Vec<PlacedError>) -> Self {
        self.errors = errors;
        self
    }

    /// 400: the request is malformed.
    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "bad-request",
            "Bad request",
            detail,
        )
    }

    /// 404: no such thing.
    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not-found", "Not found", detail)
    }

    /// 409: the thing is not in a state that allows this.
    pub fn conflict(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", "Conflict", detail)
    }

    /// 422: the input was understood and refused; nothing changed.
    pub fn refused(kind: &str, title: &str, detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, kind, title, detail)
    }

    /// 500: the server failed (the store, say).
    pub fn internal(detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "Server error",
            detail,
        )
    }

    /// A document that does not load: every located problem.
    pub fn invalid_document(diagnostics: &Diagnostics) -> Self {
        let errors = diagnostics
            .0
            .iter()
            .map(|d| PlacedError {
                place: d.path.to_string(),
                message: d.message.clone(),
                line: d.line_col.map(|(l, _)| l),
                column: d.line_col.map(|(_, c)| c),
            })
            .collect::<Vec<_>>();
        Self::refused(
            "invalid-document",
            "Invalid document",
            format!("the document has {} problem(s)", errors.len()),
        )
        .with_errors(errors)
    }

    /// A store error: missing runs are 404s, lost races 409s, the rest 500s.
    pub fn from_store(e: &StoreError) -> Self {
        match e {
            StoreError::NotFound { .. } => Self::not_found(e.to_string()),
            StoreError::Conflict { .. } | StoreError::LostLease { .. } => {
                Self::conflict(e.to_string())
            }
            _ => Self::internal(e.to_string()),
        }
    }

    /// A run that could not start or continue. `input_place` is where the input sits in
    /// the request body (`$.input`).
    pub fn from_run(e: &RunError, input_place: &str) -> Self {
        match e {
            RunError::Input(InputError::Invalid { issues, .. }) => Self::refused(
                "invalid-input",
                "Input refused",
                format!("{e}; nothing changed"),
            )
            .with_errors(issue_errors(input_place, issues)),
            RunError::Input(InputError::Schema { .. }) => Self::internal(e.to_string()),
            RunError::Input(_) => Self::refused(
                "invalid-input",
                "Input refused",
                format!("{e}; nothing changed"),
            )
            .with_errors(vec![PlacedError::at(
                format!("{input_place}.id"),
                e.to_string(),
            )]),
            RunError::Store(s) => Self::from_store(s),
            RunError::NotResumable { .. } => Self::conflict(e.to_string()),
            // A fork point the run does not have: the request's `at` is wrong.
            RunError::NotForkable { .. } => Self::refused(
                "not-forkable",
                "Fork refused",
                format!("{e}; nothing changed"),
            )
            .with_errors(vec![PlacedError::at("$.at", e.to_string())]),
        }
    }
}

/// Validation issues placed under `base` (`$.input` + the instance path).
pub(crate) fn issue_errors(base: &str, issues: &[ValidationIssue]) -> Vec<PlacedError> {
    issues
        .iter()
        .map(|i| {
            let place = match i.instance_path.as_str() {
                "" => base.to_owned(),
                pointer => format!("{base}{}", pointer_to_path(pointer)),
            };
            PlacedError::at(place, i.message.clone())
        })
        .collect()
}

/// `/a/0/b c` → `.a[0]['b c']`.
fn pointer_to_path(pointer: &str) -> String {
    let mut out = String::new();
    for raw in pointer.split('/').skip(1) {
        let segment = raw.replace("~1", "/").replace("~0", "~");
        if segment.chars().all(|c| c.is_ascii_digit()) && !segment.is_empty() {
            out.push_str(&format!("[{segment}]"));
        } else if segment
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            && !segment.is_empty()
        {
            out.push('.');
            out.push_str(&segment);
        } else {
            out.push_str(&format!("['{}']", segment.replace('\'', "\\'")));
        }
    }
    out
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self).unwrap_or_default();
        let mut response = (status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        // The server is full (of streams, say): room is made as others finish.
        if status == StatusCode::SERVICE_UNAVAILABLE {
            headers.insert(
                header::RETRY_AFTER,
                HeaderValue::from(claij_door::RETRY_AFTER_SECONDS),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_read_as_paths() {
        assert_eq!(pointer_to_path("/age"), ".age");
        assert_eq!(pointer_to_path("/items/3/name"), ".items[3].name");
        assert_eq!(pointer_to_path("/a b/x~1y"), "['a b']['x/y']");
    }
}
