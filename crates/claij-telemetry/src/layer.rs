//! [`TelemetryLayer`]: what happens around runs, as the surfaces report it through
//! `tracing` — `claij serve`'s callback deliveries and `claij worker`'s queue — turned into
//! spans and metrics. Runs themselves reach telemetry through the engine's observers
//! ([`crate::trace`], [`crate::metrics`]).
//!
//! What it sees (the emitting modules document the names and fields):
//!
//! - a `claij.delivery` span (claij-server's `callbacks`): an attempt to deliver a run's
//!   end, made a `deliver {type}` span of the run's trace, under the run's first stretch,
//!   with the span id derived from the delivery and the attempt. As the `tracing` span is
//!   made, the layer puts that span's W3C context in its extensions
//!   ([`Traceparent`]), which the server sends to the receiver: the receiver's spans join
//!   the run's trace under the attempt's. Counted in `claij.webhook.deliveries` (by type
//!   and outcome, `delivered` or `failed`);
//! - a `claij.queue` event (claij-worker): how the queue stands, recorded in the
//!   `claij.queue.runs` gauge by state (`queued`, `scheduled`, `timers_due`,
//!   `timers_pending`, `held`).
//!
//! Its filter ([`Surroundings`]) lets nothing else through: logging's spans and events
//! cost it nothing.

use std::time::SystemTime;

use claij_core::trace_context::Traceparent;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Gauge, Meter};
use opentelemetry::trace::{SpanBuilder, SpanKind, Status, TraceContextExt as _, TraceFlags};
use opentelemetry_sdk::trace::SdkTracer;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Filter, Layer};
use tracing_subscriber::registry::LookupSpan;

use crate::ids::{self, trace_of, with_ids};
use crate::trace::remote;

/// The name (and target) of a delivery attempt's span.
const DELIVERY: &str = "claij.delivery";

/// The name (and target) of a queue sample's event.
const QUEUE: &str = "claij.queue";

/// The states of the `claij.queue.runs` gauge: the `claij.queue` event's fields.
const QUEUE_STATES: [&str; 5] = [
    "queued",
    "scheduled",
    "timers_due",
    "timers_pending",
    "held",
];

/// Turns the surfaces' `claij.delivery` spans and `claij.queue` events into spans and
/// metrics (see the module's documentation). Install it with its filter
/// ([`crate::Telemetry::layer`]).
#[derive(Clone)]
pub struct TelemetryLayer {
    /// The spans' tracer, when traces are exported.
    tracer: Option<SdkTracer>,
    /// The instruments, when metrics are exported.
    instruments: Option<Instruments>,
}

impl std::fmt::Debug for TelemetryLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelemetryLayer")
            .field("traces", &self.tracer.is_some())
            .field("metrics", &self.instruments.is_some())
            .finish()
    }
}

/// The metrics the layer records.
#[derive(Clone)]
struct Instruments {
    deliveries: Counter<u64>,
    queue: Gauge<u64>,
}

impl Instruments {
    fn new(meter: &Meter) -> Self {
        Instruments {
            deliveries: meter
                .u64_counter("claij.webhook.deliveries")
                .with_unit("{delivery}")
                .with_description("Attempts to deliver runs' ends to their callbacks, by type and outcome")
                .build(),
            queue: meter
                .u64_gauge("claij.queue.runs")
                .with_unit("{run}")
                .with_description("Runs in the workers' queue, by state (queued, scheduled, timers_due, timers_pending, held)")
                .build(),
        }
    }
}

impl TelemetryLayer {
    /// A layer making spans with `tracer` (none without) and recording metrics with
    /// `meter` (none without).
    pub fn new(tracer: Option<SdkTracer>, meter: Option<&Meter>) -> Self {
        TelemetryLayer {
            tracer,
            instruments: meter.map(Instruments::new),
        }
    }

    /// The attempt's span, ended now: under the run's first stretch (the run has ended or
    /// stopped by now), with the id its `traceparent` gave the receiver.
    fn trace(&self, tracer: &SdkTracer, attempt: &Attempt, outcome: &str) {
        let mut attributes = vec![
            KeyValue::new("http.request.method", "POST"),
            KeyValue::new("server.address", attempt.host.clone()),
            KeyValue::new("claij.run.id", attempt.run_id.clone()),
            KeyValue::new("claij.webhook.id", attempt.webhook_id.clone()),
            KeyValue::new("claij.webhook.type", attempt.webhook_type.clone()),
            KeyValue::new("claij.webhook.attempt", i64::from(attempt.attempt)),
        ];
        if let Some(status) = attempt.status {
            attributes.push(KeyValue::new(
                "http.response.status_code",
                i64::from(status),
            ));
        }
        let builder = SpanBuilder::from_name(format!("deliver {}", attempt.webhook_type))
            .with_kind(SpanKind::Client)
            .with_start_time(attempt.began)
            .with_attributes(attributes);
        let parent = remote(&attempt.run_id);
        let span = with_ids(
            trace_of(&attempt.run_id),
            ids::delivery_span(&attempt.webhook_id, attempt.attempt),
            || builder.start_with_context(tracer, &parent),
        );
        let cx = parent.with_span(span);
        // Not the client's words: they name the URL, whose query may hold the receiver's
        // secret.
        if outcome != "delivered" {
            let why = match attempt.status {
                Some(status) => format!("the receiver answered {status}"),
                None => "no answer from the receiver".to_owned(),
            };
            cx.span().set_status(Status::error(why));
        }
        cx.span().end_with_timestamp(SystemTime::now());
    }
}

/// A delivery attempt, from its span's fields, kept in the span's extensions until it
/// closes.
#[derive(Debug)]
struct Attempt {
    run_id: String,
    webhook_id: String,
    webhook_type: String,
    attempt: u32,
    host: String,
    status: Option<u16>,
    outcome: Option<String>,
    /// When the span was made (the attempt began).
    began: SystemTime,
}

impl Visit for Attempt {
    fn record_str(&mut self, field: &Field, value: &str) {
        let slot = match field.name() {
            "run_id" => &mut self.run_id,
            "webhook_id" => &mut self.webhook_id,
            "webhook_type" => &mut self.webhook_type,
            "host" => &mut self.host,
            "outcome" => {
                self.outcome = Some(value.to_owned());
                return;
            }
            _ => return,
        };
        value.clone_into(slot);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "attempt" => self.attempt = u32::try_from(value).unwrap_or(u32::MAX),
            "status" => self.status = u16::try_from(value).ok(),
            _ => {}
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if let Ok(value) = u64::try_from(value) {
            self.record_u64(field, value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        // `%value` fields come as their `Display`.
        self.record_str(field, &format!("{value:?}"));
    }
}

/// A queue sample's counts, from its event's fields.
#[derive(Debug, Default)]
struct QueueSample(Vec<(&'static str, u64)>);

impl Visit for QueueSample {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if let Some(state) = QUEUE_STATES.iter().find(|s| **s == field.name()) {
            self.0.push((state, value));
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if let Ok(value) = u64::try_from(value) {
            self.record_u64(field, value);
        }
    }

    fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
}

impl<S> Layer<S> for TelemetryLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().name() != DELIVERY {
            return;
        }
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut attempt = Attempt {
            run_id: String::new(),
            webhook_id: String::new(),
            webhook_type: String::new(),
            attempt: 0,
            host: String::new(),
            status: None,
            outcome: None,
            began: SystemTime::now(),
        };
        attrs.record(&mut attempt);
        let mut extensions = span.extensions_mut();
        if self.tracer.is_some() {
            extensions.insert(Traceparent(ids::traceparent(
                trace_of(&attempt.run_id),
                ids::delivery_span(&attempt.webhook_id, attempt.attempt),
                TraceFlags::SAMPLED,
            )));
        }
        extensions.insert(attempt);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(attempt) = span.extensions_mut().get_mut::<Attempt>()
        {
            values.record(attempt);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(attempt) = ctx
            .span(&id)
            .and_then(|span| span.extensions_mut().remove::<Attempt>())
        else {
            return;
        };
        // An attempt cut short (the server stopping) has no outcome: not reported.
        let Some(outcome) = attempt.outcome.as_deref() else {
            return;
        };
        if let Some(tracer) = &self.tracer {
            self.trace(tracer, &attempt, outcome);
        }
        if let Some(instruments) = &self.instruments {
            let counted = if outcome == "delivered" {
                "delivered"
            } else {
                "failed"
            };
            instruments.deliveries.add(
                1,
                &[
                    KeyValue::new("claij.webhook.type", attempt.webhook_type.clone()),
                    KeyValue::new("claij.outcome", counted),
                ],
            );
        }
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let Some(instruments) = &self.instruments else {
            return;
        };
        if event.metadata().name() != QUEUE {
            return;
        }
        let mut sample = QueueSample::default();
        event.record(&mut sample);
        for (state, count) in sample.0 {
            instruments
                .queue
                .record(count, &[KeyValue::new("claij.queue.state", state)]);
        }
    }
}

/// The filter of [`TelemetryLayer`]: the `claij.delivery` and `claij.queue` targets only,
/// decided once per callsite.
#[derive(Debug, Clone, Copy, Default)]
pub struct Surroundings;

impl Surroundings {
    fn wants(meta: &Metadata<'_>) -> bool {
        matches!(meta.target(), DELIVERY | QUEUE)
    }
}

impl<S> Filter<S> for Surroundings {
    fn enabled(&self, meta: &Metadata<'_>, _cx: &Context<'_, S>) -> bool {
        Self::wants(meta)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if Self::wants(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::DEBUG)
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::registry::{LookupSpan as _, SpanData as _};

    use super::*;

    /// The context the layer gave `span`, read as the server reads it.
    fn traceparent_of(span: &tracing::Span) -> Option<String> {
        span.with_subscriber(|(id, dispatch)| {
            let registry = dispatch.downcast_ref::<tracing_subscriber::Registry>()?;
            let data = registry.span_data(id)?;
            data.extensions().get::<Traceparent>().map(|t| t.0.clone())
        })
        .flatten()
    }

    #[test]
    fn a_delivery_span_is_given_the_context_of_its_attempt_in_the_runs_trace() {
        let provider = SdkTracerProvider::builder().build();
        let layer = TelemetryLayer::new(Some(provider.tracer("test")), None);
        let subscriber = tracing_subscriber::registry().with(layer.with_filter(Surroundings));
        let (given, other) = tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(target: "claij.delivery", parent: None, "claij.delivery",
                run_id = "r1.2", webhook_id = "msg_1", webhook_type = "run.completed",
                attempt = 3u32, host = "127.0.0.1:9", status = tracing::field::Empty,
                outcome = tracing::field::Empty);
            span.record("outcome", "delivered");
            let other = tracing::info_span!(target: "claij_server", "claij.delivery");
            (traceparent_of(&span), traceparent_of(&other))
        });
        let expected = ids::traceparent(
            trace_of("r1"),
            ids::delivery_span("msg_1", 3),
            TraceFlags::SAMPLED,
        );
        assert_eq!(given.as_deref(), Some(expected.as_str()));
        assert_eq!(other, None, "another target is not the layer's");
    }

    #[test]
    fn without_traces_a_delivery_is_given_no_context() {
        let layer = TelemetryLayer::new(None, None);
        let subscriber = tracing_subscriber::registry().with(layer.with_filter(Surroundings));
        let given = tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(target: "claij.delivery", "claij.delivery",
                run_id = "r1", webhook_id = "msg_1", attempt = 1u32);
            traceparent_of(&span)
        });
        assert_eq!(given, None);
    }
}
