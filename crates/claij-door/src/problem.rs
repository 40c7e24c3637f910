//! The door's refusals as `application/problem+json` (RFC 9457), the shape of every claij
//! server's errors: `type` (`urn:claij:problem:KIND`), `title`, `status`, `detail`, and
//! `errors` placing each problem (`header.host`, `$.input.a`).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

/// The media type of problem answers.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// A refusal being built.
#[derive(Debug, Clone)]
pub struct Refusal {
    status: StatusCode,
    body: Map<String, Value>,
    errors: Vec<Value>,
    retry_after: Option<u64>,
}

/// A refusal with `status`, of `kind`, titled `title`, saying `detail`.
pub fn refusal(status: StatusCode, kind: &str, title: &str, detail: impl Into<String>) -> Refusal {
    let mut body = Map::new();
    body.insert("type".into(), json!(format!("urn:claij:problem:{kind}")));
    body.insert("title".into(), json!(title));
    body.insert("status".into(), json!(status.as_u16()));
    body.insert("detail".into(), json!(detail.into()));
    Refusal {
        status,
        body,
        errors: Vec::new(),
        retry_after: None,
    }
}

impl Refusal {
    /// With a problem at `place`.
    pub fn at(mut self, place: &str, message: impl Into<String>) -> Self {
        self.errors
            .push(json!({"place": place, "message": message.into()}));
        self
    }

    /// With a problem at `place`, `line` and `column` of the body.
    pub fn at_line(
        mut self,
        place: &str,
        message: impl Into<String>,
        line: usize,
        column: usize,
    ) -> Self {
        let mut error = json!({"place": place, "message": message.into()});
        if line > 0 {
            error["line"] = json!(line);
            error["column"] = json!(column);
        }
        self.errors.push(error);
        self
    }

    /// Telling the client to try again after `seconds` (`Retry-After`).
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    /// The status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The body's JSON.
    pub fn body(&self) -> Value {
        let mut body = self.body.clone();
        if !self.errors.is_empty() {
            body.insert("errors".into(), Value::Array(self.errors.clone()));
        }
        Value::Object(body)
    }

    /// As an HTTP answer.
    pub fn response(self) -> Response {
        let mut response = (self.status, self.body().to_string()).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        self.response()
    }
}
