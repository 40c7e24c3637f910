//! The W3C trace context (a `traceparent` value) a `tracing` layer gives a span that calls
//! another service, so that the called service's spans join the caller's trace.
//!
//! A layer that traces (claij-telemetry's) puts a [`Traceparent`] in the extensions of the
//! spans it makes a call's span of (`tracing_subscriber`'s registry keeps them); the code
//! making the call (claij-server's callback deliveries) reads it from its span there and
//! sends it along. Neither knows the other: this type is all they share. No layer that
//! traces, no [`Traceparent`]: nothing is sent.

/// A span's W3C trace context, as a `traceparent` header carries it
/// (`00-{trace id}-{span id}-{flags}`), kept in the span's extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Traceparent(pub String);
