//! The door around a small router, driven request by request (the servers' own tests
//! drive the real processes: crates/claij/tests/security/).

use std::net::SocketAddr;

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::Extension;
use axum::http::{Request, StatusCode};
use axum::routing::post;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::{Door, Hosts, ParsedJson};

/// A router whose one route answers the JSON the door parsed, behind a door of a
/// loopback server without a token, taking bodies of at most 64 bytes.
fn app() -> Router {
    let route = Router::new().route(
        "/echo",
        post(|parsed: Option<Extension<ParsedJson>>| async move {
            parsed.map_or_else(|| "none".to_owned(), |Extension(p)| p.0.to_string())
        }),
    );
    let hosts = Hosts::new(SocketAddr::from(([127, 0, 0, 1], 8080)), &[]);
    Door::new(hosts, 64).around(route)
}

async fn call(request: Request<Body>) -> (StatusCode, String, Value) {
    let response = app().oneshot(request).await.expect("infallible");
    let status = response.status();
    let nosniff = response
        .headers()
        .get("x-content-type-options")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let body = to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&body).into_owned();
    let json = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, nosniff, json)
}

fn request(host: &str, content_type: Option<&str>) -> axum::http::request::Builder {
    let mut builder = Request::post("/echo").header("host", host);
    if let Some(content_type) = content_type {
        builder = builder.header("content-type", content_type);
    }
    builder
}

#[tokio::test]
async fn a_json_body_is_checked_once_and_handed_on_parsed() {
    let ok = request("127.0.0.1:8080", Some("application/json"))
        .body(Body::from(r#"{"a": [1]}"#))
        .expect("a request");
    let (status, nosniff, body) = call(ok).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(nosniff, "nosniff");
    assert_eq!(body, json!({"a": [1]}));

    let twice = request("127.0.0.1:8080", Some("application/json"))
        .body(Body::from(r#"{"a": 1, "a": 2}"#))
        .expect("a request");
    let (status, nosniff, body) = call(twice).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(nosniff, "nosniff");
    assert_eq!(body["errors"][0]["place"], "$.a", "{body}");

    let broken = request("127.0.0.1:8080", Some("application/json"))
        .body(Body::from("{oops"))
        .expect("a request");
    assert_eq!(call(broken).await.2, json!("none"), "left to the route");
}

#[tokio::test]
async fn a_large_body_is_refused() {
    let big = request("127.0.0.1:8080", Some("application/json"))
        .body(Body::from(format!(r#"{{"a": "{}"}}"#, "x".repeat(100))))
        .expect("a request");
    let (status, _, body) = call(big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("64 bytes")),
        "{body}"
    );
}

#[tokio::test]
async fn strangers_and_forms_are_refused() {
    let rebound = request("attacker.example:8080", Some("application/json"))
        .body(Body::from("{}"))
        .expect("a request");
    let (status, nosniff, body) = call(rebound).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(nosniff, "nosniff");
    assert_eq!(body["errors"][0]["place"], "header.host");

    let cross = request("127.0.0.1:8080", Some("application/json"))
        .header("origin", "http://attacker.example")
        .body(Body::from("{}"))
        .expect("a request");
    assert_eq!(call(cross).await.0, StatusCode::FORBIDDEN);

    let own = request("127.0.0.1:8080", Some("application/json"))
        .header("origin", "http://127.0.0.1:8080")
        .body(Body::from("{}"))
        .expect("a request");
    assert_eq!(call(own).await.0, StatusCode::OK);

    for form in [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
    ] {
        let sent = request("127.0.0.1:8080", form)
            .body(Body::from("a=b"))
            .expect("a request");
        let (status, _, body) = call(sent).await;
        assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{form:?}");
        assert_eq!(body["errors"][0]["place"], "header.content-type");
    }
}
