//! Log lines, on stderr: plain text for `claij serve`, `claij mcp serve` and `claij worker`
//! (the default), or one JSON object per line for every command with `--log-format json`.
//!
//! A JSON line has `timestamp`, `level`, `target`, `message` and the event's own fields;
//! written while an action runs, also the `run`, `state` and `attempt` of the engine's
//! `attempt` span and, when the run is traced (OpenTelemetry), its `trace_id` and
//! `span_id`: the line can be found from the span in a trace viewer, and the other way.
//! `RUST_LOG` set to a plain level (`info`, `debug`, …) raises or lowers the level;
//! warnings by default.
//!
//! The process has one tracing subscriber, built here: the log lines' layer and, when
//! telemetry exports (`App::tracing_layer`), telemetry's beside it (which sees the
//! server's callback deliveries and the worker's queue samples whatever the logs' level).
//! Each layer has its own filter: neither hides from the other what it wants.

use std::io::Write as _;
use std::sync::OnceLock;
use std::time::SystemTime;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Registry;
use tracing_subscriber::filter::{LevelFilter, filter_fn};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::cli::LogFormat;

/// A layer of the subscriber beside the logs' (telemetry's).
pub(crate) type Beside = Box<dyn Layer<Registry> + Send + Sync>;

static FORMAT: OnceLock<LogFormat> = OnceLock::new();

/// The level `RUST_LOG` asks for, warnings by default.
fn level() -> Level {
    std::env::var("RUST_LOG")
        .ok()
        .and_then(|l| l.trim().parse::<Level>().ok())
        .unwrap_or(Level::WARN)
}

/// Sets logging up as the command line asks, as the process starts: JSON lines start now,
/// for every command (with telemetry's layer `beside`); text waits for the servers
/// ([`for_servers`]).
pub(crate) fn start(format: LogFormat, beside: Option<Beside>) {
    let _ = FORMAT.set(format);
    if format == LogFormat::Json {
        let level = level();
        // Spans are kept whatever their level: the events inside take their fields.
        let lines = JsonLines.with_filter(filter_fn(move |meta| {
            meta.is_span() || *meta.level() <= level
        }));
        let subscriber = tracing_subscriber::registry().with(beside).with(lines);
        let _ = tracing::subscriber::set_global_default(subscriber);
    }
}

/// Logging for the long-running commands (errors of tools, the transports' own messages):
/// text on stderr unless JSON lines are on already, with telemetry's layer `beside`.
/// Stdout stays free (the MCP protocol over stdio).
pub(crate) fn for_servers(beside: Option<Beside>) {
    if FORMAT.get() == Some(&LogFormat::Json) {
        return;
    }
    let text = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_filter(LevelFilter::from_level(level()));
    let _ = tracing_subscriber::registry()
        .with(beside)
        .with(text)
        .try_init();
}

/// The fields of a span, kept with it for the events written inside it.
struct SpanFields(Map<String, Value>);

/// Collects fields as JSON values.
struct Fields<'a>(&'a mut Map<String, Value>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0
            .insert(field.name().to_owned(), Value::from(value.to_string()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_owned(), Value::from(format!("{value:?}")));
    }
}

/// The trace and span ids of a W3C `traceparent` (`00-TRACE-SPAN-FLAGS`).
fn ids_of(traceparent: &str) -> Option<(&str, &str)> {
    let mut parts = traceparent.split('-');
    let (_version, trace, span) = (parts.next()?, parts.next()?, parts.next()?);
    (trace.len() == 32 && span.len() == 16).then_some((trace, span))
}

/// Writes each event it is given as one JSON line on stderr (those at or above the level,
/// as its filter in [`start`] lets through).
struct JsonLines;

impl JsonLines {
    /// The line of `event`: its own fields, then those of the spans it is inside.
    fn line<S>(event: &Event<'_>, ctx: &Context<'_, S>) -> Map<String, Value>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let meta = event.metadata();
        let mut line = Map::new();
        line.insert(
            "timestamp".into(),
            Value::from(humantime::format_rfc3339_millis(SystemTime::now()).to_string()),
        );
        line.insert("level".into(), Value::from(meta.level().as_str()));
        line.insert("target".into(), Value::from(meta.target()));
        event.record(&mut Fields(&mut line));
        for span in ctx.event_scope(event).into_iter().flatten() {
            let extensions = span.extensions();
            let Some(SpanFields(fields)) = extensions.get::<SpanFields>() else {
                continue;
            };
            for (key, value) in fields {
                if key == "traceparent" {
                    if let Some((trace, span)) = value.as_str().and_then(ids_of)
                        && !line.contains_key("trace_id")
                    {
                        line.insert("trace_id".into(), Value::from(trace));
                        line.insert("span_id".into(), Value::from(span));
                    }
                } else if !line.contains_key(key) {
                    line.insert(key.clone(), value.clone());
                }
            }
        }
        line
    }
}

impl<S> Layer<S> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Map::new();
        attrs.record(&mut Fields(&mut fields));
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(SpanFields(fields));
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(SpanFields(fields)) = span.extensions_mut().get_mut::<SpanFields>()
        {
            values.record(&mut Fields(fields));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let line = Value::Object(Self::line(event, &ctx));
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_gives_its_ids_and_garbage_none() {
        assert_eq!(
            ids_of("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
            Some(("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"))
        );
        assert_eq!(ids_of("00-short-b7ad6b7169203331-01"), None);
        assert_eq!(ids_of(""), None);
    }
}
