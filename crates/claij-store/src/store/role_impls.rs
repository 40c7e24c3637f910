//! The roles of [`SqlStore`] (the core's and [`crate::roles`]'): each method hands over to
//! the query written once, generic over the database, in the modules beside this one.
//!
//! The impls are generic over the database, made by one macro ([`roles!`]) so that the
//! bounds sqlx's generic queries need are written once for all of them rather than once
//! per role (Rust does not carry a trait's `where` clauses to its users).

use std::time::SystemTime;

use claij_core::budget::{Budget, PendingCalls, Spend};
use claij_core::store::{
    Checkpoint, ClaimFrom, Definition, Definitions, EventRecord, EventStatus, Events, Heartbeat,
    HeldLease, Leases, Migration, Notice, RunFilter, RunRecord, Runs, Spending, StoreFuture,
    Subscription,
};
use claij_core::trail::TrailEntry;

use super::SqlStore;
use crate::dialect::Dialect;
use crate::roles::{Delivery, Doorbell, Due, Hook, QueueStats, Webhooks, WorkQueue, WorkerRecord};

/// Implements each role listed for `SqlStore<DB>`, under the bounds sqlx needs.
macro_rules! roles {
    ($(impl $role:ident { $($body:tt)* })*) => {
        $(
            impl<DB> $role for SqlStore<DB>
            where
                DB: Dialect,
                for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
                DB::Arguments: sqlx::IntoArguments<DB>,
                for<'e> i64: sqlx::Encode<'e, DB> + sqlx::Decode<'e, DB> + sqlx::Type<DB>,
                for<'e> String: sqlx::Encode<'e, DB> + sqlx::Decode<'e, DB> + sqlx::Type<DB>,
                for<'e> bool: sqlx::Encode<'e, DB> + sqlx::Decode<'e, DB> + sqlx::Type<DB>,
                for<'e> Option<i64>: sqlx::Encode<'e, DB> + sqlx::Decode<'e, DB> + sqlx::Type<DB>,
                for<'e> Option<String>: sqlx::Encode<'e, DB> + sqlx::Decode<'e, DB> + sqlx::Type<DB>,
                for<'e> f64: sqlx::Encode<'e, DB> + sqlx::Decode<'e, DB> + sqlx::Type<DB>,
                usize: sqlx::ColumnIndex<DB::Row>,
            {
                $($body)*
            }
        )*
    };
}

roles! {
impl Runs {
    fn describe(&self) -> String {
        self.description.clone()
    }

    fn create_run<'a>(
        &'a self,
        record: &'a RunRecord,
        entries: &'a [TrailEntry],
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.create_run_now(record, entries))
    }

    fn migrate_run<'a>(&'a self, migration: &'a Migration) -> StoreFuture<'a, ()> {
        Box::pin(self.migrate_run_now(migration))
    }

    fn commit(&self, checkpoint: Checkpoint) -> StoreFuture<'_, ()> {
        Box::pin(self.commit_now(checkpoint))
    }

    fn claim<'a>(
        &'a self,
        run_id: &'a str,
        from: ClaimFrom,
        owner: &'a str,
        until: SystemTime,
    ) -> StoreFuture<'a, RunRecord> {
        Box::pin(self.claim_now(run_id, from, owner, until))
    }

    fn run<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, RunRecord> {
        Box::pin(self.run_now(run_id, "reading a run"))
    }

    fn run_by_key<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Option<RunRecord>> {
        Box::pin(self.run_by_key_now(key))
    }

    fn trail<'a>(
        &'a self,
        run_id: &'a str,
        from_seq: u64,
    ) -> StoreFuture<'a, Vec<TrailEntry>> {
        Box::pin(self.trail_now(run_id, from_seq, u64::MAX))
    }

    fn trail_page<'a>(
        &'a self,
        run_id: &'a str,
        from_seq: u64,
        limit: u64,
    ) -> StoreFuture<'a, Vec<TrailEntry>> {
        Box::pin(self.trail_now(run_id, from_seq, limit))
    }

    fn runs<'a>(&'a self, filter: &'a RunFilter) -> StoreFuture<'a, Vec<RunRecord>> {
        Box::pin(self.runs_now(filter))
    }

    fn request_interrupt<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, RunRecord> {
        Box::pin(self.request_interrupt_now(run_id))
    }

    fn prune<'a>(&'a self, filter: &'a RunFilter) -> StoreFuture<'a, u64> {
        Box::pin(self.prune_now(filter))
    }
}

impl Definitions {
    fn put_definition<'a>(&'a self, definition: &'a Definition) -> StoreFuture<'a, ()> {
        Box::pin(self.put_definition_now(definition))
    }

    fn definition<'a>(
        &'a self,
        fsm_id: &'a str,
        version: u32,
        hash: Option<&'a str>,
    ) -> StoreFuture<'a, Definition> {
        Box::pin(self.definition_now(fsm_id, version, hash))
    }

    fn definitions(&self) -> StoreFuture<'_, Vec<Definition>> {
        Box::pin(self.definitions_now())
    }
}

impl Spending {
    fn tree_spend<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Spend> {
        Box::pin(self.tree_spend_now(run_id))
    }

    fn set_budget<'a>(
        &'a self,
        run_id: &'a str,
        budget: Option<&'a Budget>,
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.set_budget_now(run_id, budget))
    }

    fn note_pending<'a>(
        &'a self,
        run_id: &'a str,
        owner: &'a str,
        pending: &'a PendingCalls,
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.note_pending_now(run_id, owner, pending))
    }

    fn run_bytes<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, u64> {
        Box::pin(self.run_bytes_now(run_id))
    }
}

impl Leases {
    fn heartbeat<'a>(
        &'a self,
        run_id: &'a str,
        owner: &'a str,
        renew_until: Option<SystemTime>,
    ) -> StoreFuture<'a, Heartbeat> {
        Box::pin(self.heartbeat_now(run_id, owner, renew_until))
    }

    fn release<'a>(&'a self, run_id: &'a str, owner: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(self.release_now(run_id, owner))
    }

    fn notify<'a>(&'a self, notice: &'a Notice) -> StoreFuture<'a, ()> {
        Box::pin(self.notify_now(notice))
    }
}

impl Events {
    fn put_subscription<'a>(
        &'a self,
        subscription: &'a Subscription,
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.put_subscription_now(subscription))
    }

    fn subscriptions<'a>(&'a self, topic: &'a str) -> StoreFuture<'a, Vec<Subscription>> {
        Box::pin(self.subscriptions_now(topic))
    }

    fn claim_events<'a>(
        &'a self,
        owner: &'a str,
        until: SystemTime,
        limit: u32,
        dead_owners: &'a [String],
    ) -> StoreFuture<'a, Vec<EventRecord>> {
        Box::pin(self.claim_events_now(owner, until, limit, dead_owners))
    }

    fn settle_event<'a>(
        &'a self,
        id: &'a str,
        status: EventStatus,
        runs: &'a [String],
        note: Option<&'a str>,
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.settle_event_now(id, status, runs, note))
    }

    fn events<'a>(
        &'a self,
        status: Option<EventStatus>,
    ) -> StoreFuture<'a, Vec<EventRecord>> {
        Box::pin(self.events_now(status))
    }
}

impl Webhooks {
    fn put_hook<'a>(&'a self, token_hash: &'a str, hook: &'a Hook) -> StoreFuture<'a, ()> {
        Box::pin(self.put_hook_now(token_hash, hook))
    }

    fn hook<'a>(&'a self, token_hash: &'a str) -> StoreFuture<'a, Option<Hook>> {
        Box::pin(self.hook_now(token_hash))
    }

    fn delete_hooks<'a>(
        &'a self,
        run_id: &'a str,
        before_seq: u64,
    ) -> StoreFuture<'a, u64> {
        Box::pin(self.delete_hooks_now(run_id, before_seq))
    }

    fn put_callback<'a>(&'a self, run_id: &'a str, url: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(self.put_callback_now(run_id, url))
    }

    fn callback<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<String>> {
        Box::pin(self.callback_now(run_id))
    }

    fn put_delivery<'a>(&'a self, delivery: &'a Delivery) -> StoreFuture<'a, ()> {
        Box::pin(self.put_delivery_now(delivery))
    }

    fn deliveries<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<Delivery>> {
        Box::pin(self.deliveries_now(run_id))
    }

    fn pending_deliveries(&self) -> StoreFuture<'_, Vec<Delivery>> {
        Box::pin(self.pending_deliveries_now())
    }
}

impl WorkQueue {
    fn claim_due<'a>(
        &'a self,
        owner: &'a str,
        until: SystemTime,
        limit: u32,
        dead_owners: &'a [String],
    ) -> StoreFuture<'a, Vec<RunRecord>> {
        Box::pin(self.claim_due_now(owner, until, limit, dead_owners))
    }

    fn due(&self) -> StoreFuture<'_, Due> {
        Box::pin(self.due_now())
    }

    fn renew_leases<'a>(
        &'a self,
        owner: &'a str,
        until: SystemTime,
        runs: &'a [String],
    ) -> StoreFuture<'a, Vec<HeldLease>> {
        Box::pin(self.renew_leases_now(owner, until, runs))
    }

    fn put_worker<'a>(&'a self, worker: &'a WorkerRecord) -> StoreFuture<'a, ()> {
        Box::pin(self.put_worker_now(worker))
    }

    fn workers(&self) -> StoreFuture<'_, Vec<WorkerRecord>> {
        Box::pin(self.workers_now())
    }

    fn remove_worker<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(self.remove_worker_now(id))
    }

    fn queue(&self) -> StoreFuture<'_, QueueStats> {
        Box::pin(self.queue_now())
    }

    fn listen(&self) -> StoreFuture<'_, Option<Box<dyn Doorbell>>> {
        DB::listen(&self.pool)
    }
}
}
