//! What `claij serve` keeps beside the runs: resume links (by the hash of their secret),
//! completion callbacks and their deliveries.

use std::time::SystemTime;

use claij_core::store::StoreFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Resume links, completion callbacks and their deliveries: what the HTTP server keeps
/// beside the runs. Every method is atomic.
pub trait Webhooks: Send + Sync {
    /// Keeps a resume link (its secret's hash and what it answers).
    fn put_hook<'a>(&'a self, token_hash: &'a str, hook: &'a Hook) -> StoreFuture<'a, ()>;

    /// The resume link whose secret hashes to `token_hash`, if there is one.
    fn hook<'a>(&'a self, token_hash: &'a str) -> StoreFuture<'a, Option<Hook>>;

    /// Forgets every resume link of a run made for a wait before `before_seq` (all of them
    /// with `u64::MAX`); returns how many.
    fn delete_hooks<'a>(&'a self, run_id: &'a str, before_seq: u64) -> StoreFuture<'a, u64>;

    /// Keeps the URL a run's events are posted to (before the run exists, so that its
    /// first events find it).
    fn put_callback<'a>(&'a self, run_id: &'a str, url: &'a str) -> StoreFuture<'a, ()>;

    /// The URL a run's events are posted to, if it has one.
    fn callback<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<String>>;

    /// Stores a delivery, or its new state (by id).
    fn put_delivery<'a>(&'a self, delivery: &'a Delivery) -> StoreFuture<'a, ()>;

    /// A run's deliveries, oldest first.
    fn deliveries<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<Delivery>>;

    /// Every pending delivery, by when it is due.
    fn pending_deliveries(&self) -> StoreFuture<'_, Vec<Delivery>>;
}

/// A resume link's record (the link's secret is kept only as a hash, the key of this
/// record): the run it answers and the wait it was made for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// The run.
    pub run_id: String,
    /// The run's trail length when the link was made: the link answers the wait that
    /// began there, and no later one.
    pub wait_seq: u64,
    /// When it was made.
    pub created_at: SystemTime,
}

/// One event of a run posted to its completion callback, and how its attempts went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    /// The event's id (the `webhook-id` header): the same for every attempt.
    pub id: String,
    /// The run.
    pub run_id: String,
    /// Where it is posted.
    pub url: String,
    /// What happened: `run.completed`, `run.failed`, `run.interrupted`, `run.suspended`.
    pub kind: String,
    /// The body posted.
    pub payload: Value,
    /// Attempts made so far.
    pub attempts: u32,
    /// Where it stands.
    pub status: DeliveryStatus,
    /// The HTTP status of the last attempt, when one was answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_status: Option<u16>,
    /// Why the last attempt failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When the next attempt is due (pending deliveries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_at: Option<SystemTime>,
    /// When it was first queued.
    pub created_at: SystemTime,
    /// When it last changed.
    pub updated_at: SystemTime,
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryStatus {
    /// Not delivered yet; another attempt is due at `next_at`.
    Pending,
    /// A receiver answered 2xx.
    Delivered,
    /// Every attempt failed; no more are made.
    Failed,
}

impl DeliveryStatus {
    /// The word stored.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Failed => "failed",
        }
    }

    /// The status a stored word names.
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "pending" => Some(DeliveryStatus::Pending),
            "delivered" => Some(DeliveryStatus::Delivered),
            "failed" => Some(DeliveryStatus::Failed),
            _ => None,
        }
    }
}
