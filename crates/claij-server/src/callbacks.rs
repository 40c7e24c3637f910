//! Completion callbacks: a run started with a `webhook` URL has each of its ends posted
//! there — completed, failed, interrupted, or suspended (with a resume link) — signed the
//! Standard Webhooks way (`webhook-id`, `webhook-timestamp`, `webhook-signature`: HMAC-SHA256
//! of `id.timestamp.body` with the server's secret), retried with backoff, each attempt's
//! outcome kept in the store and shown at `GET /runs/{id}/deliveries`. Deliveries run on
//! tasks of their own: a slow or dead receiver never slows a run, and a delivery still
//! pending when the server stops is taken up again by the next one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine as _;
use claij_core::RunStatus;
use claij_core::store::{Delivery, DeliveryStatus, RunRecord};
use claij_engine::{DeliveryOutcome, DeliverySite};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::sync::mpsc;

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
}

/// The callbacks of this server: the URLs of runs being started (known before the run
/// is in the store) and the HTTP client that posts.
#[derive(Clone)]
pub(crate) struct Callbacks {
    starting: Arc<Mutex<HashMap<String, String>>>,
    client: reqwest::Client,
}

impl Callbacks {
    pub(crate) fn new() -> Self {
        // Callbacks may go to https URLs; reqwest's rustls takes the process's provider.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(ATTEMPT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Callbacks {
            starting: Arc::default(),
            client,
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
            None => match state.store.callback(&run_id).await {
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
    if let Some(wait) = &record.wait {
        data["wait"] = wait_data(state, &record, wait).await;
    }
    let now = SystemTime::now();
    let delivery = Delivery {
        id: format!("msg_{}_{}", record.id, record.trail_len),
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
    state.store.put_delivery(&delivery).await?;
    Ok(delivery)
}

/// What a suspended run waits for, with a resume link to answer it.
async fn wait_data(state: &AppState, record: &RunRecord, wait: &claij_core::store::Wait) -> Value {
    let mut data = json!({
        "state": wait.state,
        "prompt": wait.prompt,
        "transitions": wait.transitions,
        "expires_at": wait.expires_at.map(rfc3339),
    });
    if let Some(pause) = &wait.budget {
        data["budget"] = json!(pause);
    }
    if wait.takes_input() {
        match crate::routes::hooks::mint(state, record).await {
            Ok(hook) => data["hook_url"] = json!(format!("{}{}", state.public_url(), hook.url)),
            Err(p) => tracing::warn!(
                "run {}: no resume link for its callback: {}",
                record.id,
                p.detail
            ),
        }
    }
    data
}

/// Attempts `delivery` until a receiver takes it or the attempts run out, each outcome
/// kept.
pub(crate) async fn deliver(state: AppState, mut delivery: Delivery) {
    let Some(secret) = state.config.webhook_secret.clone() else {
        return;
    };
    let body = serde_json::to_vec(&delivery.payload).unwrap_or_default();
    // The engine's observers (telemetry) are told of each attempt; none when no engine is.
    let observers = state
        .engines
        .engine(None)
        .map(|e| e.observers().to_vec())
        .unwrap_or_default();
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
        let timestamp = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let signature = secret.sign(&delivery.id, timestamp, &body);
        let site = DeliverySite {
            run_id: &delivery.run_id,
            id: &delivery.id,
            kind: &delivery.kind,
            attempt: delivery.attempts + 1,
        };
        let mut request = state
            .callbacks
            .client
            .post(&delivery.url)
            .header("content-type", "application/json")
            .header("webhook-id", &delivery.id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature);
        if let Some(traceparent) = observers.iter().find_map(|o| o.delivery_context(&site)) {
            request = request.header("traceparent", traceparent);
        }
        let (began, clock) = (SystemTime::now(), Instant::now());
        let outcome = request.body(body.clone()).send().await;
        let took = clock.elapsed();
        delivery.attempts += 1;
        delivery.updated_at = SystemTime::now();
        match outcome {
            Ok(response) if response.status().is_success() => {
                delivery.status = DeliveryStatus::Delivered;
                delivery.last_status = Some(response.status().as_u16());
                delivery.last_error = None;
                delivery.next_at = None;
            }
            Ok(response) => {
                delivery.last_status = Some(response.status().as_u16());
                delivery.last_error = Some(format!("the receiver answered {}", response.status()));
            }
            Err(e) => {
                delivery.last_status = None;
                delivery.last_error = Some(format!("no answer: {e}"));
            }
        }
        let told = DeliveryOutcome {
            host: &host,
            began,
            took,
            status: delivery.last_status,
            error: delivery.last_error.as_deref(),
        };
        let site = DeliverySite {
            run_id: &delivery.run_id,
            id: &delivery.id,
            kind: &delivery.kind,
            attempt: delivery.attempts,
        };
        for o in &observers {
            o.delivery_made(&site, &told);
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
        if let Err(e) = state.store.put_delivery(&delivery).await {
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
    fn short_or_garbled_secrets_are_refused_and_none_prints() {
        assert!(WebhookSecret::new("whsec_c2hvcnQ=").is_err());
        assert!(WebhookSecret::new("whsec_!!!").is_err());
        let ok = WebhookSecret::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").ok();
        assert!(!format!("{ok:?}").contains("MfKQ"));
    }
}
