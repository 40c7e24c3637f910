//! What the settings and the shared state hold for completion callbacks: the secret they
//! are signed with ([`WebhookSecret`], the Standard Webhooks way), the waits between
//! attempts, and the URLs of runs being started ([`Callbacks`]). `callbacks` delivers them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

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

    pub(crate) fn url_of_starting(&self, run_id: &str) -> Option<String> {
        self.lock().get(run_id).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.starting.lock().unwrap_or_else(|p| p.into_inner())
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
