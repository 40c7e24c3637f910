//! The roles of a store that the core does not know: the HTTP server's resume links,
//! completion callbacks and their deliveries ([`Webhooks`]), and the queue the workers
//! share ([`WorkQueue`]). They are defined here, beside their implementation, so that
//! `claij-core` knows nothing of webhooks or workers; `claij-server` and `claij-worker`
//! name them, and are handed them by the binary (they never open a store).
//!
//! [`Store`] is every role, the core's ([`RunStore`]) and these: what [`open`](crate::open)
//! returns, for the binary to hand out as `Arc<dyn Role>` (a `dyn Store` upcasts to each).

use claij_core::store::RunStore;

mod webhooks;
mod work_queue;

pub use webhooks::{Delivery, DeliveryStatus, Hook, Webhooks};
pub use work_queue::{Doorbell, Due, QueueStats, WorkQueue, WorkerRecord};

/// A whole store: every role, the core's and the serving and worker roles.
pub trait Store: RunStore + Webhooks + WorkQueue {}

impl<T: RunStore + Webhooks + WorkQueue + ?Sized> Store for T {}
