//! Request bodies: JSON only, size-limited (the router's limit), nesting bounded, and
//! every refusal a problem that names the place (the line and column of a syntax error,
//! the field of a missing or mistyped member).

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::header;
use serde::de::DeserializeOwned;

use crate::problem::{PlacedError, Problem};

/// How deep a request body's arrays and objects may nest.
pub(crate) const MAX_DEPTH: usize = 64;

/// A JSON request body, read whole (within the size limit) and checked for depth before it
/// is parsed.
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

/// Parses `bytes` as `T`, checking the nesting first.
pub(crate) fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Problem> {
    if let Some(at) = too_deep(bytes, MAX_DEPTH) {
        return Err(Problem::bad_request(format!(
            "the body nests arrays and objects deeper than {MAX_DEPTH} levels (at byte {at})"
        ))
        .with_errors(vec![PlacedError::at("$", "nested too deep")]));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_value(&mut de).map_err(|(path, e)| {
        let mut error = PlacedError::at(path, e.to_string());
        if e.line() > 0 {
            error.line = Some(e.line());
            error.column = Some(e.column());
        }
        Problem::bad_request(format!("the body is not what this route takes: {e}"))
            .with_errors(vec![error])
    })?;
    de.end().map_err(|e| {
        Problem::bad_request(format!("the body has more after its JSON value: {e}"))
    })?;
    Ok(value)
}

/// Deserializes, telling the path of a failure within the document.
fn serde_path_value<'de, T: DeserializeOwned>(
    de: &mut serde_json::Deserializer<serde_json::de::SliceRead<'de>>,
) -> Result<T, (String, serde_json::Error)> {
    // Parse to a value first (syntax errors carry line and column), then map it to `T`
    // (type errors name the member).
    let value: serde_json::Value =
        serde::Deserialize::deserialize(&mut *de).map_err(|e| ("$".to_owned(), e))?;
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let place = if path == "." {
            "$".to_owned()
        } else {
            format!("$.{path}")
        };
        (place, e.into_inner())
    })
}

/// The offset where `bytes` first nests deeper than `limit`, if it does (strings are
/// skipped, so brackets inside them do not count).
pub(crate) fn too_deep(bytes: &[u8], limit: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return Some(i);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn nesting_is_counted_outside_strings() {
        assert_eq!(too_deep(br#"{"a": [[1]]}"#, 3), None);
        assert_eq!(too_deep(br#"{"a": [[[1]]]}"#, 3), Some(8));
        assert_eq!(too_deep(br#"{"a": "[[[[[[\"[[["}"#, 1), None);
    }

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
    fn a_deep_body_is_refused_before_parsing() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let problem = parse::<Value>(deep.as_bytes()).err();
        assert!(problem.is_some_and(|p| p.detail.contains("deeper than 64")));
    }
}
