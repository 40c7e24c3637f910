//! # claij-telemetry
//!
//! claij's runs as OpenTelemetry traces, exported over OTLP/HTTP (protobuf) when the
//! standard variables ask for it ([`Telemetry::from_env`]: `OTEL_EXPORTER_OTLP_ENDPOINT`
//! or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`; `OTEL_SERVICE_NAME`, `OTEL_TRACES_SAMPLER`, …
//! as the SDK reads them). Without them nothing is built and nothing is paid.
//!
//! A run tree is one trace: its id is derived from the root run's id, so every process
//! that takes a run of the tree up (a resume, a worker, a child continued) adds to the
//! same trace, under the span of the run it continues. The spans follow the GenAI
//! semantic conventions: `invoke_workflow {fsm}` per run (per stretch of it driven by one
//! process), a span per state attempt (`{state}`, with its outcome), `chat {model}` per
//! model call with the `gen_ai.*` attributes — tokens as the trail records them — and
//! claij's own (`claij.enforce`, `claij.cost_usd`), and `execute_tool {tool}` per MCP tool
//! call of an `mcp` state. The engine reports runs through
//! its [`Observer`](claij_engine::Observer) (see [`trace::TraceObserver`]); the binary
//! installs it once, where the engine is assembled.

mod ids;
pub mod trace;

use std::sync::Arc;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;

pub use trace::TraceObserver;

/// The variables that turn trace export on: an endpoint for all signals, or for traces.
pub const ENDPOINT_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];

/// Telemetry could not be set up as the environment asks.
#[derive(Debug, thiserror::Error)]
#[error("OpenTelemetry: {0}")]
pub struct TelemetryError(String);

/// Trace export, set up: the observer to install on engines, and the provider to flush
/// at exit.
pub struct Telemetry {
    provider: SdkTracerProvider,
    observer: Arc<TraceObserver>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry").finish_non_exhaustive()
    }
}

impl Telemetry {
    /// Trace export as the standard `OTEL_*` variables configure it: `None` when no OTLP
    /// endpoint is given, or `OTEL_SDK_DISABLED=true`, or `OTEL_TRACES_EXPORTER=none`.
    pub fn from_env() -> Result<Option<Telemetry>, TelemetryError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
            || var("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"));
        if disabled || ENDPOINT_VARS.iter().all(|name| var(name).is_none()) {
            return Ok(None);
        }
        Telemetry::otlp_http(None).map(Some)
    }

    /// Trace export over OTLP/HTTP to `traces_url` (the full URL, `…/v1/traces`), or, with
    /// `None`, to where the `OTEL_*` variables say; the other `OTEL_*` variables apply.
    pub fn otlp_http(traces_url: Option<&str>) -> Result<Telemetry, TelemetryError> {
        use opentelemetry_otlp::WithExportConfig as _;
        // Err: another provider was installed first, which serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut exporter = opentelemetry_otlp::SpanExporter::builder().with_http();
        if let Some(url) = traces_url {
            exporter = exporter.with_endpoint(url);
        }
        let exporter = exporter
            .build()
            .map_err(|e| TelemetryError(format!("cannot build the OTLP exporter: {e}")))?;
        let mut resource = Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("claij");
        }
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_id_generator(ids::RunIds::default())
            .with_resource(resource.build())
            .build();
        let tracer = provider.tracer("claij");
        Ok(Telemetry {
            provider,
            observer: Arc::new(TraceObserver::new(tracer)),
        })
    }

    /// The observer that turns runs into spans, for [`Engine::observed_by`](claij_engine::Engine::observed_by).
    pub fn observer(&self) -> Arc<TraceObserver> {
        self.observer.clone()
    }

    /// Sends what is buffered and stops the exporter (call once, before the process exits).
    pub fn shutdown(&self) -> Result<(), TelemetryError> {
        self.provider
            .shutdown()
            .map_err(|e| TelemetryError(format!("cannot flush the spans: {e}")))
    }
}
