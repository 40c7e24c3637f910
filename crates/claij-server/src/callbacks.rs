//! Completion callbacks: a run started with a `webhook` URL has each of its ends posted
//! there — completed, failed, interrupted, or suspended (with a resume link) — signed the
//! Standard Webhooks way (`webhook-id`, `webhook-timestamp`, `webhook-signature`: HMAC-SHA256
//! of `id.timestamp.body` with the server's secret), retried with backoff, each attempt's
//! outcome kept in the store and shown at `GET /runs/{id}/deliveries`. Deliveries run on
//! tasks of their own: a slow or dead receiver never slows a run, and a delivery still
//! pending when the server stops is taken up again by the next one.
//!
//! A callback is an API client's: each attempt goes where the engine's egress policy
//! allows ([`claij_engine::Policy::egress`]: no internal address unless `--allow-connect`
//! names the host), to the addresses checked and nowhere else (resolved once, pinned, no
//! redirect, no proxy). What a receiver answered stays in the server's log: a delivery's
//! record says only `delivered`, `refused`, or not taken — never the target's status or
//! error, which would make callbacks a port scanner.
//!
//! A `run.suspended` body's resume link is never stored: its secret is derived from the
//! webhook secret (which the store never holds) and the delivery's id, the store keeps
//! only its hash (as for every link), and the link is put into the body at each attempt.
//!
//! Each attempt is a `tracing` span, for the operator's telemetry (claij-telemetry's layer
//! makes it an OpenTelemetry span and counts it): name and target `claij.delivery`, level
//! `INFO`, no parent, made as the attempt begins and closed once its outcome is known;
//! its fields:
//!
//! - `run_id`: the run whose end is delivered;
//! - `webhook_id`: the delivery (its `webhook-id`);
//! - `webhook_type`: what it tells (`run.completed`, `run.suspended`, …);
//! - `attempt`: which attempt this is, from 1;
//! - `host`: the receiver's host (and port), never the rest of its URL (whose query may
//!   hold the receiver's secret);
//! - `status`: the receiver's HTTP status, recorded when it answered;
//! - `outcome`: recorded as the attempt ends — `delivered` (a 2xx answer), `failed` (no
//!   answer, or another), or `refused` (the egress policy does not allow the URL).
//!
//! When a layer gives the span a W3C trace context ([`Traceparent`] in its extensions),
//! the attempt sends it as its `traceparent` header: the receiver's spans join the run's
//! trace, under the attempt's.

use std::time::{Duration, SystemTime};

use claij_core::store::RunRecord;
use claij_core::trace_context::Traceparent;
use claij_core::{Owner, RunStatus};
use claij_engine::Route;
use claij_store::roles::{Delivery, DeliveryStatus};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tracing::field::Empty;
use tracing_subscriber::registry::{LookupSpan as _, SpanData as _};

use crate::links::{keep, stored};
use crate::state::AppState;
use crate::views::rfc3339;
use crate::webhook::WebhookSecret;

/// How long a receiver has to answer one attempt.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// Posts the ends of the runs this server drives to their callbacks, as `finished` tells
/// of them.
pub(crate) async fn dispatch(
    state: AppState,
    mut finished: mpsc::UnboundedReceiver<(String, RunStatus)>,
) {
    while let Some((run_id, status)) = finished.recv().await {
        let starting = state.callbacks.url_of_starting(&run_id);
        let url = match starting {
            Some(url) => Some(url),
            None => match state.webhooks.callback(&run_id).await {
                Ok(url) => url,
                Err(e) => {
                    tracing::warn!("run {run_id}: its callback could not be read: {e}");
                    None
                }
            },
        };
        let Some(url) = url else { continue };
        let state = state.clone();
        tokio::spawn(async move {
            match queue(&state, &run_id, status, url).await {
                Ok(delivery) => deliver(state, delivery).await,
                Err(e) => tracing::warn!("run {run_id}: its callback could not be queued: {e}"),
            }
        });
    }
}

/// The delivery of a run's end: its payload built and kept as pending.
async fn queue(
    state: &AppState,
    run_id: &str,
    status: RunStatus,
    url: String,
) -> Result<Delivery, claij_core::StoreError> {
    let record = state.store.run(run_id).await?;
    let kind = format!("run.{}", status.as_str());
    let mut data = json!({
        "run": record.id,
        "fsm": record.fsm_id,
        "version": record.version,
        "status": record.status.as_str(),
        "state": record.state,
        "url": format!("{}/runs/{}", state.public_url(), record.id),
    });
    if record.status == RunStatus::Completed
        && let Ok(trail) = state
            .store
            .trail(run_id, record.trail_len.saturating_sub(1))
            .await
        && let Some(last) = trail.last()
    {
        data["result"] = last.event.clone();
    }
    let id = format!("msg_{}_{}", record.id, record.trail_len);
    if let Some(wait) = &record.wait {
        data["wait"] = wait_data(state, &record, wait, &id).await;
    }
    let now = SystemTime::now();
    let delivery = Delivery {
        id,
        run_id: record.id.clone(),
        url,
        kind: kind.clone(),
        payload: json!({"type": kind, "timestamp": rfc3339(now), "data": data}),
        attempts: 0,
        status: DeliveryStatus::Pending,
        last_status: None,
        last_error: None,
        next_at: Some(now),
        created_at: now,
        updated_at: now,
    };
    state.webhooks.put_delivery(&delivery).await?;
    Ok(delivery)
}

/// What a suspended run waits for. Its resume link is made for the delivery `id` (its
/// hash stored) and put into the body only as it is sent ([`with_link`]).
async fn wait_data(
    state: &AppState,
    record: &RunRecord,
    wait: &claij_core::store::Wait,
    id: &str,
) -> Value {
    let mut data = json!({
        "state": wait.state,
        "prompt": wait.prompt,
        "transitions": wait.transitions,
        "expires_at": wait.expires_at.map(rfc3339),
    });
    if let Some(pause) = &wait.budget {
        data["budget"] = json!(pause);
    }
    if wait.takes_input()
        && let Some(secret) = &state.config.webhook_secret
        && let Err(p) = keep(state, record, &secret.link_secret(id)).await
    {
        tracing::warn!(
            "run {}: no resume link for its callback: {}",
            record.id,
            p.detail
        );
    }
    data
}

/// The body of `delivery` as it is sent: a `run.suspended` one with its resume link,
/// made again from the webhook secret, when the store holds that link's hash for the run.
async fn with_link(state: &AppState, secret: &WebhookSecret, delivery: &Delivery) -> Value {
    let mut payload = delivery.payload.clone();
    if delivery.kind != "run.suspended" || !payload["data"]["wait"].is_object() {
        return payload;
    }
    let link = secret.link_secret(&delivery.id);
    match stored(state, &link).await {
        Some(hook) if hook.run_id == delivery.run_id => {
            payload["data"]["wait"]["hook_url"] =
                json!(format!("{}/hooks/{link}", state.public_url()));
        }
        _ => {}
    }
    payload
}

/// An HTTP client for one attempt along `route`: to its addresses only (a name pinned to
/// those checked), no redirect followed, no proxy.
fn client_for(route: &Route) -> Result<reqwest::Client, reqwest::Error> {
    let mut builder = reqwest::Client::builder()
        .timeout(ATTEMPT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy();
    if route.pinned() && route.host_is_name() {
        builder = builder.resolve_to_addrs(&route.host, &route.addrs);
    }
    builder.build()
}

/// What a delivery's record says of an attempt that was not taken: nothing of what the
/// receiver answered, or whether it answered at all.
const NOT_TAKEN: &str = "not taken: no 2xx answer within 10 s";

/// The span of an attempt of `delivery` (see the module's documentation), to `host`.
fn attempt_span(delivery: &Delivery, host: &str) -> tracing::Span {
    tracing::info_span!(
        target: "claij.delivery",
        parent: None,
        "claij.delivery",
        run_id = %delivery.run_id,
        webhook_id = %delivery.id,
        webhook_type = %delivery.kind,
        attempt = delivery.attempts,
        host = %host,
        status = Empty,
        outcome = Empty,
    )
}

/// The W3C trace context a layer gave `span` ([`Traceparent`]), when one did.
fn traceparent_of(span: &tracing::Span) -> Option<String> {
    span.with_subscriber(|(id, dispatch)| {
        let registry = dispatch.downcast_ref::<tracing_subscriber::Registry>()?;
        let data = registry.span_data(id)?;
        data.extensions().get::<Traceparent>().map(|t| t.0.clone())
    })
    .flatten()
}

/// Attempts `delivery` until a receiver takes it or the attempts run out, each outcome
/// kept; refused at once (and not tried again) where the egress policy does not allow
/// its URL.
pub(crate) async fn deliver(state: AppState, mut delivery: Delivery) {
    let Some(secret) = state.config.webhook_secret.clone() else {
        return;
    };
    let engine = state.engine();
    let policy = engine.policy();
    let host = reqwest::Url::parse(&delivery.url)
        .ok()
        .and_then(|u| {
            let host = u.host_str()?.to_owned();
            Some(u.port().map_or(host.clone(), |p| format!("{host}:{p}")))
        })
        .unwrap_or_default();
    loop {
        if let Some(at) = delivery.next_at
            && let Ok(wait) = at.duration_since(SystemTime::now())
        {
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = state.shutdown.cancelled() => return,
            }
        }
        delivery.attempts += 1;
        let span = attempt_span(&delivery, &host);
        // Checked again at each attempt: the policy may have changed since the run
        // started, and a name may resolve elsewhere now.
        let route = match policy.egress(Owner::Client, &delivery.url).await {
            Ok(route) => route,
            Err(refused) => {
                tracing::warn!("delivery {}: refused: {refused}", delivery.id);
                delivery.updated_at = SystemTime::now();
                delivery.status = DeliveryStatus::Failed;
                delivery.last_status = None;
                delivery.last_error = Some(format!("refused: {}", refused.why));
                delivery.next_at = None;
                span.record("outcome", "refused");
                drop(span);
                if let Err(e) = state.webhooks.put_delivery(&delivery).await {
                    tracing::warn!("delivery {}: its outcome was not kept: {e}", delivery.id);
                }
                return;
            }
        };
        let body =
            serde_json::to_vec(&with_link(&state, &secret, &delivery).await).unwrap_or_default();
        let timestamp = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let signature = secret.sign(&delivery.id, timestamp, &body);
        // What the receiver answered: its status, or why there was none (for the log and
        // the operator's telemetry, never for the record).
        let (status, error) = match client_for(&route) {
            Ok(client) => {
                let mut request = client
                    .post(&route.url)
                    .header("content-type", "application/json")
                    .header("webhook-id", &delivery.id)
                    .header("webhook-timestamp", timestamp.to_string())
                    .header("webhook-signature", signature);
                if let Some(traceparent) = traceparent_of(&span) {
                    request = request.header("traceparent", traceparent);
                }
                match request.body(body).send().await {
                    Ok(response) if response.status().is_success() => {
                        (Some(response.status().as_u16()), None)
                    }
                    Ok(response) => (
                        Some(response.status().as_u16()),
                        Some(format!("the receiver answered {}", response.status())),
                    ),
                    Err(e) => (None, Some(format!("no answer: {e}"))),
                }
            }
            Err(e) => (None, Some(format!("no HTTP client: {e}"))),
        };
        if let Some(status) = status {
            span.record("status", status);
        }
        span.record(
            "outcome",
            if error.is_none() {
                "delivered"
            } else {
                "failed"
            },
        );
        drop(span);
        delivery.updated_at = SystemTime::now();
        match &error {
            None => {
                delivery.status = DeliveryStatus::Delivered;
                delivery.last_status = status;
                delivery.last_error = None;
                delivery.next_at = None;
            }
            Some(why) => {
                tracing::warn!(
                    "delivery {} to {host}: attempt {} not taken: {why}",
                    delivery.id,
                    delivery.attempts
                );
                delivery.last_status = None;
                delivery.last_error = Some(NOT_TAKEN.to_owned());
            }
        }
        if delivery.status == DeliveryStatus::Pending {
            match state
                .config
                .retry_delays
                .get(delivery.attempts as usize - 1)
            {
                Some(delay) => delivery.next_at = Some(SystemTime::now() + *delay),
                None => {
                    delivery.status = DeliveryStatus::Failed;
                    delivery.next_at = None;
                }
            }
        }
        if let Err(e) = state.webhooks.put_delivery(&delivery).await {
            tracing::warn!("delivery {}: its outcome was not kept: {e}", delivery.id);
        }
        if delivery.status != DeliveryStatus::Pending {
            return;
        }
    }
}
