//! The web page: a single-page app served by the binary from embedded assets (no build
//! step): the runs, live; one run with its FSM drawn and its current state lit, its trail
//! growing as it goes (server-sent events), the form that answers a waiting run, and a
//! button that interrupts it; and, at a resume link (`/hooks/{secret}`) opened in a
//! browser, the form that answers that link's wait. See docs/SERVER.md, "The web page".
//!
//! The page and its assets need no token (the page asks the user for it when the API
//! answers 401, and sends it with every call). The graph of an FSM, drawn by Graphviz,
//! needs it like the API does; at most two `dot` run at once, each drawing kept by the
//! definition's hash.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use tokio::io::AsyncWriteExt;
use tokio::sync::{OnceCell, Semaphore};

use crate::problem::Problem;
use crate::state::AppState;

/// The page's HTML.
const INDEX_HTML: &str = include_str!("../assets/index.html");
/// The page's script.
const APP_JS: &str = include_str!("../assets/app.js");
/// The page's style sheet.
const APP_CSS: &str = include_str!("../assets/app.css");

/// What the page may load: only itself (no inline scripts or styles, no other origin).
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'";

/// How long Graphviz may take to draw a graph (and a request may wait for its turn).
const DOT_TIMEOUT: Duration = Duration::from_secs(10);

/// Graphviz runs at once, at most, in the whole process.
static DOT_RUNS: Semaphore = Semaphore::const_new(2);

/// Drawings kept, at most (one per definition: its hash).
const KEPT_GRAPHS: usize = 256;

/// A definition's drawing: made once, by whichever request gets there first.
type Drawing = Arc<OnceCell<Arc<str>>>;

/// The drawings made (or being made), by the hash of the definition drawn.
static KEPT: LazyLock<Mutex<HashMap<String, Drawing>>> = LazyLock::new(Mutex::default);

/// The page's routes: `/`, `/ui/app.js`, `/ui/app.css`, `/ui/graph/{fsm}.svg`.
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/ui/app.js", get(app_js))
        .route("/ui/app.css", get(app_css))
        .route("/ui/graph/{file}", get(graph))
}

/// The headers every page response carries, with its content type.
fn page_headers(content_type: &'static str) -> [(HeaderName, HeaderValue); 5] {
    [
        (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
    ]
}

/// `GET /`: the page.
async fn index() -> Response {
    index_response()
}

/// The page's HTML with the page's headers: what `/` answers, and what a resume link
/// answers a browser (the page then shows the link's form).
pub(crate) fn index_response() -> Response {
    (page_headers("text/html; charset=utf-8"), INDEX_HTML).into_response()
}

/// `GET /ui/app.js`: the page's script.
async fn app_js() -> Response {
    (page_headers("text/javascript; charset=utf-8"), APP_JS).into_response()
}

/// `GET /ui/app.css`: the page's style sheet.
async fn app_css() -> Response {
    (page_headers("text/css; charset=utf-8"), APP_CSS).into_response()
}

/// `?version=N` of the graph route.
#[derive(Debug, Deserialize)]
struct GraphParams {
    /// The FSM's version (default: the newest served).
    version: Option<u32>,
}

/// `GET /ui/graph/{fsm}.svg[?version=N]`: the FSM served under that id drawn by Graphviz
/// (`dot -Tsvg` on its DOT). 501 when Graphviz is not installed (the page then shows the
/// Mermaid text of `/definitions/{id}`).
async fn graph(
    State(state): State<AppState>,
    Path(file): Path<String>,
    Query(params): Query<GraphParams>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    crate::auth::check_token(&state, &headers)?;
    let id = file.strip_suffix(".svg").ok_or_else(|| {
        Problem::not_found(format!(
            "no route `/ui/graph/{file}`: graphs are `/ui/graph/FSM.svg`"
        ))
    })?;
    let served = state.find(id, params.version).ok_or_else(|| {
        Problem::not_found(match params.version {
            Some(v) => format!("no FSM `{id}` version {v} is served"),
            None => format!("no FSM `{id}` is served"),
        })
    })?;
    let svg = drawing(&served.fsm).await?;
    Ok((
        page_headers("image/svg+xml; charset=utf-8"),
        svg.to_string(),
    )
        .into_response())
}

/// The drawing of `fsm`: kept from before (by its hash), or drawn by Graphviz — once
/// per definition however many ask at once, at most [`DOT_RUNS`] at once in all, a draw
/// waiting its turn at most [`DOT_TIMEOUT`] (then 503).
async fn drawing(fsm: &claij_core::Fsm) -> Result<Arc<str>, Problem> {
    let cell = {
        let mut all = KEPT.lock().unwrap_or_else(|p| p.into_inner());
        if !all.contains_key(&fsm.hash)
            && all.len() >= KEPT_GRAPHS
            && let Some(old) = all.keys().next().cloned()
        {
            all.remove(&old);
        }
        all.entry(fsm.hash.clone()).or_default().clone()
    };
    let svg = cell
        .get_or_try_init(|| async {
            let _turn = tokio::time::timeout(DOT_TIMEOUT, DOT_RUNS.acquire())
                .await
                .ok()
                .and_then(Result::ok)
                .ok_or_else(|| {
                    Problem::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "graphviz-busy",
                        "Graphviz is busy",
                        "every Graphviz run this server allows is drawing another graph; try again later",
                    )
                })?;
            render_svg(&claij_core::to_dot(fsm))
                .await
                .map(Arc::<str>::from)
        })
        .await?;
    Ok(svg.clone())
}

/// `dot -Tsvg` on `dot`: killed after [`DOT_TIMEOUT`], or when the request goes away.
async fn render_svg(dot: &str) -> Result<String, Problem> {
    let mut child = tokio::process::Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Problem::new(
                    StatusCode::NOT_IMPLEMENTED,
                    "graphviz-missing",
                    "Graphviz is needed",
                    "drawing a graph needs Graphviz's `dot` on the server's PATH (Debian: apt-get install graphviz); GET /definitions/{id} gives the graph as Mermaid and DOT",
                )
            } else {
                Problem::internal(format!("`dot` could not start: {e}"))
            }
        })?;
    let stdin = child.stdin.take();
    let input = dot.as_bytes().to_vec();
    let write = async move {
        if let Some(mut stdin) = stdin {
            // A `dot` that exits early closes its input: its status tells why.
            let _ = stdin.write_all(&input).await;
            let _ = stdin.shutdown().await;
        }
    };
    // On timeout the child is dropped, and so killed (`kill_on_drop`).
    let output = tokio::time::timeout(DOT_TIMEOUT, async {
        let ((), output) = tokio::join!(write, child.wait_with_output());
        output
    })
    .await
    .map_err(|_| {
        Problem::internal(format!(
            "`dot` took longer than {} s and was stopped",
            DOT_TIMEOUT.as_secs()
        ))
    })?
    .map_err(|e| Problem::internal(format!("`dot` failed: {e}")))?;
    if !output.status.success() {
        return Err(Problem::internal(format!(
            "`dot` failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    String::from_utf8(output.stdout)
        .map_err(|e| Problem::internal(format!("`dot` wrote something that is not UTF-8: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_from_itself() {
        // No inline script or style: the policy would refuse them.
        assert!(!INDEX_HTML.contains("<script>"));
        assert!(!INDEX_HTML.contains("<style"));
        assert!(!INDEX_HTML.contains(" style="));
        assert!(INDEX_HTML.contains("/ui/app.js"));
        assert!(INDEX_HTML.contains("/ui/app.css"));
        for asset in [INDEX_HTML, APP_JS, APP_CSS] {
            for other_origin in [
                "src=\"http",
                "href=\"http",
                "url(http",
                "fetch(\"http",
                "//cdn",
            ] {
                assert!(
                    !asset.contains(other_origin),
                    "no other origin: {other_origin}"
                );
            }
        }
    }
}
