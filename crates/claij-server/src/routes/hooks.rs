//! Resume links: `/hooks/{secret}` answers one wait of one run with no other credential,
//! so the link can be mailed to the person who must answer, or given to another system's
//! webhook.
//!
//! A link's secret is 256 bits from the operating system's random source, shown once
//! (when the link is made) and kept only as its SHA-256: the store is searched by that
//! hash, so the secret is never compared byte by byte and a copy of the store gives no
//! link away. (A callback's link is derived from the webhook secret, never stored either:
//! see `callbacks`; how links are kept: `links`.) A link answers the wait it was made for while that wait lasts: once the run
//! moves on (answered here, through the API or the CLI), is interrupted, or its wait
//! expires (even before the run acts on the expiry), the link answers nothing, ever again.
//! Used links are kept (to tell a reused link from a forged one) until a link to a later
//! wait of the run is made, or the run is pruned.

use std::time::SystemTime;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use claij_core::RunStatus;
use claij_core::store::RunRecord;
use claij_store::roles::Hook;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::body::JsonBody;
use crate::links::{NewHook, SECRET_BYTES, hash, mint};
use crate::page;
use crate::problem::{PlacedError, Problem};
use crate::routes::runs::{find_run, fsm_of, resume_with};
use crate::runner::{wait_duration, wait_for};
use crate::state::AppState;
use crate::views::{AnswerView, WaitParam, WaitView};

/// What a resume link asks for.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct HookView {
    /// The state that waits.
    pub state: String,
    /// What the person is asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Each answer the run takes, with its schema.
    pub answers: Vec<AnswerView>,
    /// The question an MCP server asked, when the run stopped for one: `server` and
    /// `message` (the answer is an object satisfying `schema`, `"decline"` or `null`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub question: Option<Value>,
    /// The schema of any answer (for a question, the one it asks for).
    #[schema(value_type = Object)]
    pub schema: Value,
    /// When the wait ends, if it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

/// How an answer through a link went.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct HookAnswered {
    /// The run.
    pub run: String,
    /// Its status now (`running` while it goes on).
    pub status: String,
    /// Its state now.
    pub state: String,
}

/// The link's run, if the link still answers its wait.
async fn live_hook(state: &AppState, secret: &str) -> Result<(Hook, RunRecord), Problem> {
    let unknown = || {
        Problem::not_found("no such resume link (a link is exactly as it was given)")
            .with_errors(vec![PlacedError::at("path.secret", "unknown link")])
    };
    if secret.len() != SECRET_BYTES * 2 || !secret.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(unknown());
    }
    let hook = state
        .webhooks
        .hook(&hash(secret))
        .await
        .map_err(|e| Problem::from_store(&e))?
        .ok_or_else(unknown)?;
    let record = find_run(state, &hook.run_id).await?;
    let gone = |why: String| {
        Problem::new(
            StatusCode::GONE,
            "link-used",
            "This link no longer answers",
            why,
        )
    };
    if record.status != RunStatus::Suspended || record.trail_len != hook.wait_seq {
        return Err(gone(format!(
            "the wait this link was made for is over: the run is {} in `{}` now",
            record.status, record.state
        )));
    }
    if let Some(at) = record.wait.as_ref().and_then(|w| w.expires_at)
        && at <= SystemTime::now()
    {
        return Err(gone("the wait this link was made for expired".into()));
    }
    Ok((hook, record))
}

/// What a resume link asks for: the waiting state, its prompt, each answer's schema. A
/// browser opening the link (its `Accept` prefers HTML to JSON) gets the web page instead,
/// which shows the link's form (and, fetching this as JSON, a link that answers nothing).
#[utoipa::path(
    get, path = "/hooks/{secret}", tag = "hooks",
    params(("secret" = String, Path, description = "The link's secret")),
    security(()),
    responses(
        (status = 200, description = "What the link asks for (JSON); the web page with the link's form when `Accept` prefers `text/html`", body = HookView),
        (status = 404, description = "No such link", body = Problem, content_type = "application/problem+json"),
        (status = 410, description = "The wait is over", body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn show(
    State(state): State<AppState>,
    Path(secret): Path<String>,
    headers: HeaderMap,
) -> Response {
    let mut response = if prefers_html(&headers) {
        page::index_response()
    } else {
        hook_view(&state, &secret).await.into_response()
    };
    // The same URL answers HTML or JSON: caches must tell them apart.
    response
        .headers_mut()
        .insert(header::VARY, HeaderValue::from_static("accept"));
    response
}

/// The JSON of [`show`]: what the link's wait asks for, or why the link answers nothing.
async fn hook_view(state: &AppState, secret: &str) -> Result<Json<HookView>, Problem> {
    let (_, record) = live_hook(state, secret).await?;
    let wait = record
        .wait
        .as_ref()
        .ok_or_else(|| Problem::internal("a waiting run without its wait"))?;
    let fsm = fsm_of(state, &record).await;
    let wait = WaitView::new(wait, fsm.as_deref(), "");
    Ok(Json(HookView {
        state: wait.state,
        prompt: wait.prompt,
        answers: wait.answers,
        question: wait.question,
        schema: wait.schema,
        expires_at: wait.expires_at,
    }))
}

/// Whether a request's `Accept` prefers HTML to JSON, as a browser opening a page does:
/// `text/html` (or XHTML) accepted, and JSON (`application/json`, `application/*+json`)
/// either not named or named with a lower quality, or an equal one but after it. `*/*`
/// counts for neither; no `Accept` at all is a program's call (JSON).
fn prefers_html(headers: &HeaderMap) -> bool {
    // (quality in thousandths, position) of the best range of each kind.
    let mut html: Option<(u16, usize)> = None;
    let mut json: Option<(u16, usize)> = None;
    let ranges = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','));
    for (position, range) in ranges.enumerate() {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
            .map_or(Some(1000), |(_, v)| quality(v.trim()))
            .unwrap_or(1000);
        let slot = if media == "text/html" || media == "application/xhtml+xml" {
            &mut html
        } else if media == "application/json"
            || (media.starts_with("application/") && media.ends_with("+json"))
        {
            &mut json
        } else {
            continue;
        };
        if slot.is_none_or(|(best, _)| q > best) {
            *slot = Some((q, position));
        }
    }
    match (html, json) {
        (Some((h, _)), None) => h > 0,
        (Some((h, hp)), Some((j, jp))) => h > j || (h == j && h > 0 && hp < jp),
        (None, _) => false,
    }
}

/// An `Accept` quality (`0`, `0.8`, `1.000`) in thousandths; `None` if it is not one.
fn quality(q: &str) -> Option<u16> {
    let (whole, fraction) = q.split_once('.').unwrap_or((q, ""));
    if fraction.len() > 3 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole: u16 = match whole {
        "0" => 0,
        "1" => 1000,
        _ => return None,
    };
    let fraction: u16 = if fraction.is_empty() {
        0
    } else {
        format!("{fraction:0<3}").parse().ok()?
    };
    let q = whole + fraction;
    (q <= 1000).then_some(q)
}

/// Answers the wait a link was made for: the body is the answer (its `id` names the
/// transition). Refused answers change nothing and leave the link valid; once an answer
/// is taken the link answers nothing again.
#[utoipa::path(
    post, path = "/hooks/{secret}", tag = "hooks",
    params(("secret" = String, Path, description = "The link's secret"), WaitParam),
    request_body(content = Object, description = "The answer: its `id` names the transition [state, next]"),
    security(()),
    responses(
        (status = 200, description = "Taken; the run ended or waits again", body = HookAnswered),
        (status = 202, description = "Taken; the run goes on", body = HookAnswered),
        (status = 404, description = "No such link", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Another answer was taken first", body = Problem, content_type = "application/problem+json"),
        (status = 410, description = "The wait is over", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The answer was refused; nothing changed", body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn answer(
    State(state): State<AppState>,
    Path(secret): Path<String>,
    Query(wait): Query<WaitParam>,
    JsonBody(input): JsonBody<Value>,
) -> Result<Response, Problem> {
    let (_, record) = live_hook(&state, &secret).await?;
    // Taken, the run moves on, and the link (kept, to say so) answers nothing more.
    let mut launched = resume_with(&state, &record, Some(input), "$").await?;
    let finished = wait_for(&mut launched, wait_duration(wait.wait), &state.shutdown).await;
    let now = find_run(&state, &record.id).await?;
    let body = HookAnswered {
        run: now.id.clone(),
        status: now.status.as_str().to_owned(),
        state: now.state.clone(),
    };
    let status = if finished {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    Ok((status, Json(body)).into_response())
}

/// Makes another resume link for a waiting run's current wait (to mail to a person, say).
#[utoipa::path(
    post, path = "/runs/{id}/hooks", tag = "hooks",
    params(("id" = String, Path, description = "The run's id")),
    responses(
        (status = 201, body = NewHook),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The run waits for no answer", body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn create(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let record = find_run(&state, &id).await?;
    let hook = mint(&state, &record).await?;
    Ok((StatusCode::CREATED, Json(hook)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn browsers_get_the_page_and_programs_the_json() {
        for browser in [
            // Chromium's and Firefox's navigations.
            "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7",
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
            "text/html",
            "text/html, application/json",
            "application/json;q=0.5, text/html",
            "TEXT/HTML;charset=utf-8",
        ] {
            assert!(prefers_html(&accept(browser)), "{browser}");
        }
        assert!(!prefers_html(&HeaderMap::new()), "no Accept");
        for program in [
            "application/json",
            "*/*",
            "application/json, text/html",
            "application/problem+json, text/html",
            "text/html;q=0.5, application/json",
            "text/html;q=0, */*",
            "text/plain",
        ] {
            assert!(!prefers_html(&accept(program)), "{program}");
        }
    }

    #[test]
    fn qualities_are_read_in_thousandths() {
        assert_eq!(quality("1"), Some(1000));
        assert_eq!(quality("0.8"), Some(800));
        assert_eq!(quality("0.125"), Some(125));
        assert_eq!(quality("1.000"), Some(1000));
        assert_eq!(quality("0"), Some(0));
        for bad in ["1.5", "2", "0.1234", "x", "", "-1"] {
            assert_eq!(quality(bad), None, "{bad}");
        }
    }
}
