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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use claij_core::store::RunRecord;
use claij_core::trace_context::Traceparent;
use claij_core::{Owner, RunStatus};
use claij_engine::Route;
use claij_store::roles::{Delivery, DeliveryStatus};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::sync::mpsc;
use tracing::field::Empty;
use tracing_subscriber::registry::{LookupSpan as _, SpanData as _};

use crate::state::AppState;
use crate::views::rfc3339;

/// How long a receiver has to answer one attempt.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// The waits between attempts: after the last, a delivery is `failed`.
pub const DEFAULT_RETRY_DELAYS: [Duration; 6] = [
    Duration::from_secs(1),
    Duration::from_secs(5),
    Duration::from_secs(30),
    Duration::from_secs(120),
    Duration::from_secs(600),
    Duration::from_secs(3600),
];

/// The secret callbacks are signed with (`whsec_` and base64, as Standard Webhooks
/// libraries take it). It never prints.
#[derive(Clone)]
pub struct WebhookSecret {
    key: Vec<u8>,
}

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret(<redacted>)")
    }
}

/// A webhook secret that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error(
    "the webhook secret must be `whsec_` followed by base64 of 24 to 64 random bytes (e.g. `whsec_$(openssl rand -base64 32)`): {0}"
)]
pub struct BadSecret(String);

impl WebhookSecret {
    /// Reads `whsec_BASE64` (the prefix may be left out; whitespace around is ignored).
    pub fn new(text: &str) -> Result<Self, BadSecret> {
        let text = text.trim();
        let encoded = text.strip_prefix("whsec_").unwrap_or(text);
        let key = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|e| BadSecret(format!("not base64: {e}")))?;
        if !(24..=64).contains(&key.len()) {
            return Err(BadSecret(format!("{} bytes", key.len())));
        }
        Ok(WebhookSecret { key })
    }

    /// `v1,BASE64(HMAC-SHA256(key, "{id}.{timestamp}.{body}"))`.
    pub(crate) fn sign(&self, id: &str, timestamp: u64, body: &[u8]) -> String {
        // An HMAC takes a key of any length.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.key) else {
            return String::new();
        };
        mac.update(format!("{id}.{timestamp}.").as_bytes());
        mac.update(body);
        let signature = mac.finalize().into_bytes();
        format!(
            "v1,{}",
            base64::engine::general_purpose::STANDARD.encode(signature)
        )
    }

    /// The secret of the resume link the callback `delivery_id` carries (64 hex digits,
    /// as every link's): HMAC-SHA256, under a key derived from this secret for links
    /// alone, of the delivery's id. Made again at each attempt, so only its hash is
    /// stored; without the webhook secret, nothing in the store makes it.
    pub(crate) fn link_secret(&self, delivery_id: &str) -> String {
        let mac = |key: &[u8], message: &[u8]| {
            Hmac::<Sha256>::new_from_slice(key).map(|mut mac| {
                mac.update(message);
                mac.finalize().into_bytes().to_vec()
            })
        };
        let secret = mac(&self.key, b"claij resume links")
            .and_then(|links_key| mac(&links_key, delivery_id.as_bytes()))
            .unwrap_or_default();
        secret.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The callbacks of this server: the URLs of runs being started (known before the run
/// is in the store).
#[derive(Clone)]
pub(crate) struct Callbacks {
    starting: Arc<Mutex<HashMap<String, String>>>,
}

impl Callbacks {
    pub(crate) fn new() -> Self {
        Callbacks {
            starting: Arc::default(),
        }
    }

    /// Notes the URL of a run about to start (its first events may come before the
    /// URL is in the store).
    pub(crate) fn starting(&self, run_id: &str, url: &str) {
        self.lock().insert(run_id.to_owned(), url.to_owned());
    }

    /// Forgets a run that started (its URL is in the store now) or was refused.
    pub(crate) fn started(&self, run_id: &str) {
        self.lock().remove(run_id);
    }

    fn url_of_starting(&self, run_id: &str) -> Option<String> {
        self.lock().get(run_id).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.starting.lock().unwrap_or_else(|p| p.into_inner())
    }
}

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
        && let Err(p) = crate::routes::hooks::keep(state, record, &secret.link_secret(id)).await
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
    match crate::routes::hooks::stored(state, &link).await {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_follow_the_standard_webhooks_example() {
        // The example of the Standard Webhooks specification.
        let secret = WebhookSecret::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").ok();
        let body = br#"{"test": 2432232314}"#;
        let signature = secret.map(|s| s.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body));
        assert_eq!(
            signature.as_deref(),
            Some("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        );
    }

    #[test]
    fn a_links_secret_is_the_keys_and_the_deliverys_alone() {
        let key = |text: &str| WebhookSecret::new(text).ok();
        let (a, b) = (
            key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
            key("whsec_c2Vjb25kIHNlY3JldCBmb3IgdGhlIHRlc3Q="),
        );
        let link = |k: &Option<WebhookSecret>, id: &str| k.as_ref().map(|k| k.link_secret(id));
        let first = link(&a, "msg_r_2");
        assert_eq!(first, link(&a, "msg_r_2"), "made again the same");
        assert!(
            first
                .as_ref()
                .is_some_and(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()))
        );
        assert_ne!(first, link(&a, "msg_r_3"));
        assert_ne!(first, link(&b, "msg_r_2"));
    }

    #[test]
    fn short_or_garbled_secrets_are_refused_and_none_prints() {
        assert!(WebhookSecret::new("whsec_c2hvcnQ=").is_err());
        assert!(WebhookSecret::new("whsec_!!!").is_err());
        let ok = WebhookSecret::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").ok();
        assert!(!format!("{ok:?}").contains("MfKQ"));
    }
}
