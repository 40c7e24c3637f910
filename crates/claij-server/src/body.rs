//! Request bodies: JSON only, size-limited (the door's limit), held to claij's one rule
//! for JSON from outside (`claij_core::source::parse_json`: no key twice, nesting bounded;
//! the door has already checked it and hands the value on), and every refusal a problem
//! that names the place (the line and column of a syntax error, the field of a missing
//! or mistyped member, the key given twice).

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::header;
use claij_core::source::{JsonError, JsonErrorKind, MAX_NESTING, parse_json};
use claij_door::ParsedJson;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::problem::{PlacedError, Problem};

/// A JSON request body, read whole (within the size limit) and parsed by the one rule.
pub(crate) struct JsonBody<T>(pub T);

impl<S, T> FromRequest<S> for JsonBody<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = Problem;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let content_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let essence = content_type.split(';').next().unwrap_or("").trim();
        if !(essence == "application/json" || essence.ends_with("+json")) {
            return Err(Problem::new(
                axum::http::StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported-media-type",
                "Unsupported media type",
                format!(
                    "the body must be JSON (`Content-Type: application/json`), not `{content_type}`"
                ),
            )
            .with_errors(vec![PlacedError::at(
                "header.content-type",
                "expected application/json",
            )]));
        }
        if let Some(parsed) = req.extensions().get::<ParsedJson>() {
            let value = Value::clone(&parsed.0);
            return typed(value).map(JsonBody);
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            let status = e.status();
            Problem::new(
                status,
                if status == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                    "body-too-large"
                } else {
                    "bad-body"
                },
                "Request body refused",
                e.body_text(),
            )
        })?;
        parse(&bytes).map(JsonBody)
    }
}

/// Parses `bytes` as `T`, by the one rule for JSON from outside.
pub(crate) fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Problem> {
    let value = parse_json(bytes).map_err(|e| refused(&e, "the body", "$"))?;
    typed(value)
}

/// The refusal of JSON found in `what` (`the body`, `a message`) at `base` (`$`,
/// `$.messages[0].content`) under the one rule: its place within it, its line and column.
pub(crate) fn refused(error: &JsonError, what: &str, base: &str) -> Problem {
    let detail = match error.kind {
        JsonErrorKind::TooDeep => {
            format!("{what} nests arrays and objects deeper than {MAX_NESTING} levels")
        }
        JsonErrorKind::DuplicateKey => format!("{what} gives a key twice: {error}"),
        JsonErrorKind::Syntax => format!("{what} is not JSON: {error}"),
    };
    let inner = error.place.to_string();
    let place = match inner.strip_prefix('$') {
        Some(rest) if base != "$" => format!("{base}{rest}"),
        _ => inner.clone(),
    };
    let mut placed = PlacedError::at(place, error.message.clone());
    if error.line > 0 {
        placed.line = Some(error.line);
        placed.column = Some(error.column);
    }
    Problem::bad_request(detail).with_errors(vec![placed])
}

/// A JSON value as `T`, a failure placed at the member (`$.input.age`).
fn typed<T: DeserializeOwned>(value: Value) -> Result<T, Problem> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let place = if path == "." {
            "$".to_owned()
        } else {
            format!("$.{path}")
        };
        let e = e.into_inner();
        Problem::bad_request(format!("the body is not what this route takes: {e}"))
            .with_errors(vec![PlacedError::at(place, e.to_string())])
    })
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn syntax_errors_carry_line_and_column() {
        let e = parse::<Value>(b"{\n  \"a\": 1,\n  oops\n}")
            .err()
            .map(|p| p.errors);
        let errors = e.unwrap_or_default();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].line, Some(3));
    }

    #[test]
    fn a_deep_body_is_refused() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let problem = parse::<Value>(deep.as_bytes()).err();
        assert!(problem.is_some_and(|p| p.detail.contains("deeper than 64")));
    }

    #[test]
    fn a_key_given_twice_is_refused_at_its_place() {
        let problem = parse::<Value>(br#"{"input": {"a": 1, "a": 2}}"#).err();
        let place = problem.map(|p| p.errors[0].place.clone());
        assert_eq!(place.as_deref(), Some("$.input.a"));
    }

    #[test]
    fn json_within_a_string_is_placed_below_it() {
        let e = parse_json(br#"{"b": {"b": 1, "b": 2}}"#).err();
        let place = e.map(|e| {
            refused(&e, "a message", "$.messages[2].content").errors[0]
                .place
                .clone()
        });
        assert_eq!(place.as_deref(), Some("$.messages[2].content.b.b"));
    }
}
