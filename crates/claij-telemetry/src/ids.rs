//! The ids of a run tree's trace: derived from run ids, so that every process that takes
//! a run of the tree up adds to the same trace, under the span of the run it continues.
//!
//! The SDK draws a new span's ids from its [`IdGenerator`] as the span is started, on the
//! starting thread: [`with_ids`] makes the generator hand out the ids given for the one
//! span started inside it (a run's first span), and random ones otherwise.

use std::cell::Cell;

use claij_engine::Call;
use opentelemetry::trace::{SpanId, TraceFlags, TraceId};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};
use sha2::{Digest, Sha256};

thread_local! {
    static NEXT: Cell<Option<(TraceId, SpanId)>> = const { Cell::new(None) };
}

/// Random ids, except for a span started inside [`with_ids`].
#[derive(Debug, Default)]
pub(crate) struct RunIds {
    random: RandomIdGenerator,
}

impl IdGenerator for RunIds {
    fn new_trace_id(&self) -> TraceId {
        match NEXT.with(Cell::get) {
            Some((trace, _)) => trace,
            None => self.random.new_trace_id(),
        }
    }

    fn new_span_id(&self) -> SpanId {
        match NEXT.with(Cell::get) {
            Some((_, span)) => span,
            None => self.random.new_span_id(),
        }
    }
}

/// Runs `start` (which starts one span) with the ids that span is to have.
pub(crate) fn with_ids<T>(trace: TraceId, span: SpanId, start: impl FnOnce() -> T) -> T {
    NEXT.with(|next| next.set(Some((trace, span))));
    let out = start();
    NEXT.with(|next| next.set(None));
    out
}

/// The root of a run's tree: its id up to the first `.` (children are `PARENT.SEQ[.K]`).
pub(crate) fn root(run_id: &str) -> &str {
    run_id.split('.').next().unwrap_or(run_id)
}

/// The trace of the tree `run_id` belongs to.
pub(crate) fn trace_of(run_id: &str) -> TraceId {
    let digest = Sha256::digest(format!("claij trace {}", root(run_id)).as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    TraceId::from_bytes(bytes)
}

/// The span of a run's first stretch (its start), which later stretches continue.
pub(crate) fn run_span(run_id: &str) -> SpanId {
    let digest = Sha256::digest(format!("claij run {run_id}").as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    SpanId::from_bytes(bytes)
}

/// The span of a call an attempt makes ([`Call`]): known before the call is made, so that
/// the called service's spans (given it as their parent in `traceparent`) and the span made
/// of the call once its trail entry is written are one.
pub(crate) fn call_span(run_id: &str, state: &str, attempt: u32, call: Call) -> SpanId {
    let what = match call {
        Call::Model => "model".to_owned(),
        Call::Request(n) => format!("request {n}"),
        Call::Attempt => "attempt".to_owned(),
    };
    let digest = Sha256::digest(format!("claij call {run_id} {state} {attempt} {what}").as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    SpanId::from_bytes(bytes)
}

/// The span of an attempt to deliver a run's end to its callback (`claij serve`'s
/// webhooks): the receiver is given it in `traceparent` as the attempt is made.
pub(crate) fn delivery_span(delivery_id: &str, attempt: u32) -> SpanId {
    let digest = Sha256::digest(format!("claij delivery {delivery_id} {attempt}").as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    SpanId::from_bytes(bytes)
}

/// The W3C `traceparent` value for a span.
pub(crate) fn traceparent(trace: TraceId, span: SpanId, flags: TraceFlags) -> String {
    format!("00-{trace}-{span}-{:02x}", flags.to_u8())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_shares_its_roots_trace_and_each_run_has_its_span() {
        assert_eq!(root("r1.3.0"), "r1");
        assert_eq!(trace_of("r1.3.0"), trace_of("r1"));
        assert_ne!(trace_of("r1"), trace_of("r2"));
        assert_ne!(run_span("r1"), run_span("r1.3.0"));
        let ids = RunIds::default();
        let (t, s) = with_ids(trace_of("r1"), run_span("r1"), || {
            (ids.new_trace_id(), ids.new_span_id())
        });
        assert_eq!((t, s), (trace_of("r1"), run_span("r1")));
        assert_ne!(ids.new_span_id(), run_span("r1"), "random again outside");
        let model = call_span("r1", "triage", 1, Call::Model);
        assert_eq!(model, call_span("r1", "triage", 1, Call::Model));
        assert_ne!(model, call_span("r1", "triage", 2, Call::Model));
        assert_ne!(model, call_span("r1", "triage", 1, Call::Request(0)));
        assert_eq!(
            traceparent(trace_of("r1"), model, TraceFlags::SAMPLED),
            format!("00-{}-{model}-01", trace_of("r1"))
        );
    }
}
