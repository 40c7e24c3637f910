//! Events that start workflows (seed 003's event-driven composition): FSMs subscribe to
//! topics with their documents' `triggers` ([`Engine::subscribe`]); `publish` states
//! publish events, written with their run's checkpoint; workers claim them and
//! [`Engine::dispatch`] each: one run of every subscribed FSM whose trigger the event
//! satisfies, queued under the idempotency key `event:ID:FSM` — so an event dispatched
//! again after a crash starts nothing twice. An event no trigger takes is kept as
//! `unmatched`, with the reasons.

use std::sync::Arc;

use claij_core::Fsm;
use claij_core::store::{EventRecord, EventStatus, RunStore, StoreError, Subscription};

use crate::run::{Engine, RunError, RunOptions, Submission};

/// What a dispatch did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dispatch {
    /// `dispatched` (it started at least one run) or `unmatched`.
    pub status: EventStatus,
    /// The runs it started (or found started by an earlier dispatch of the same event).
    pub runs: Vec<String>,
    /// The subscribers that did not take it, and why.
    pub note: Option<String>,
}

impl Engine {
    /// Stores `fsm`'s definition and subscribes it to the topics its `triggers` name (the
    /// newest definition registered of an FSM is the one subscribed); returns how many
    /// topics.
    pub async fn subscribe(&self, store: &dyn RunStore, fsm: &Fsm) -> Result<usize, StoreError> {
        if fsm.triggers.is_empty() {
            return Ok(0);
        }
        self.store_definition(store, fsm).await?;
        let mut topics: Vec<&str> = fsm.triggers.iter().map(|t| t.topic.as_str()).collect();
        topics.sort_unstable();
        topics.dedup();
        for topic in &topics {
            store
                .put_subscription(&Subscription {
                    topic: (*topic).to_owned(),
                    fsm_id: fsm.id.to_string(),
                    version: fsm.version,
                    hash: fsm.hash.clone(),
                })
                .await?;
        }
        Ok(topics.len())
    }

    /// Dispatches a published event (claimed with
    /// [`Events::claim_events`](claij_core::store::Events::claim_events)) and settles it
    /// in the store. A store failure leaves it pending, for this or another worker to
    /// dispatch again.
    pub async fn dispatch(
        &self,
        store: &Arc<dyn RunStore>,
        event: &EventRecord,
    ) -> Result<Dispatch, StoreError> {
        let mut runs = Vec::new();
        let mut refusals = Vec::new();
        let subscriptions = store.subscriptions(&event.topic).await?;
        if subscriptions.is_empty() {
            refusals.push(format!("no FSM subscribes to `{}`", event.topic));
        }
        for sub in &subscriptions {
            let fsm = match self
                .stored_definition(store.as_ref(), &sub.fsm_id, sub.version, &sub.hash)
                .await
            {
                Ok(fsm) => fsm,
                Err(RunError::Store(e)) => return Err(e),
                Err(e) => {
                    refusals.push(format!("{}: {e}", sub.fsm_id));
                    continue;
                }
            };
            let mut taken = false;
            let mut why = Vec::new();
            for trigger in fsm.triggers.iter().filter(|t| t.topic == event.topic) {
                let input = match trigger.input_for(&fsm, &event.event) {
                    Ok(input) => input,
                    Err(problems) => {
                        why.push(problems);
                        continue;
                    }
                };
                let options = RunOptions {
                    store: Some(store.clone()),
                    ..RunOptions::default()
                };
                let submission = Submission {
                    not_before: None,
                    idempotency_key: Some(format!("event:{}:{}", event.id, fsm.id)),
                };
                match self.submit(fsm.clone(), input, options, submission).await {
                    Ok(submitted) => {
                        runs.push(submitted.run_id);
                        taken = true;
                        break;
                    }
                    Err(RunError::Store(e)) => return Err(e),
                    Err(e) => why.push(e.to_string()),
                }
            }
            if !taken {
                refusals.push(format!("{}: {}", fsm.id, why.join("; ")));
            }
        }
        let status = if runs.is_empty() {
            EventStatus::Unmatched
        } else {
            EventStatus::Dispatched
        };
        let note = (!refusals.is_empty()).then(|| refusals.join(" | "));
        store
            .settle_event(&event.id, status, &runs, note.as_deref())
            .await?;
        Ok(Dispatch { status, runs, note })
    }
}
