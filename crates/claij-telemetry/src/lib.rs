//! # claij-telemetry
//!
//! claij's runs as OpenTelemetry traces and metrics, exported over OTLP/HTTP (protobuf)
//! when the standard variables ask for it ([`Telemetry::from_env`]:
//! `OTEL_EXPORTER_OTLP_ENDPOINT`, or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` and
//! `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`; `OTEL_SERVICE_NAME`, `OTEL_TRACES_SAMPLER`, …
//! as the SDK reads them). Without them nothing is built and nothing is paid.
//!
//! A run tree is one trace: its id is derived from the root run's id, so every process
//! that takes a run of the tree up (a resume, a worker, a child continued) adds to the
//! same trace, under the span of the run it continues. The spans follow the GenAI
//! semantic conventions: `invoke_workflow {fsm}` per run (per stretch of it driven by one
//! process), a span per state attempt (`{state}`, with its outcome), `chat {model}` per
//! model call with the `gen_ai.*` attributes — tokens as the trail records them — and
//! claij's own (`claij.enforce`, `claij.cost_usd`), and `execute_tool {tool}` per MCP tool
//! call of an `mcp` state. What a model was sent and answered is recorded on its `chat`
//! span only when the user opts in (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`,
//! [`content`]). The engine reports runs through
//! its [`Observer`] (see [`trace::TraceObserver`]); the binary
//! installs it once, where the engine is assembled.
//!
//! What happens around runs — `claij serve`'s callback deliveries (`deliver {type}` spans
//! of the run's trace, `claij.webhook.deliveries`) and `claij worker`'s queue
//! (`claij.queue.runs`) — those surfaces report through `tracing`, as any layer sees it:
//! [`Telemetry::layer`] ([`layer::TelemetryLayer`]) turns it into spans and metrics; the
//! binary adds it to its tracing subscriber, next to its logs.
//!
//! # Modules
//!
//! - `trace`: `TraceObserver`, runs as spans.
//! - `metrics`: `MetricsObserver`, runs as the GenAI client metrics and claij's own.
//! - `layer`: `TelemetryLayer`, the `tracing` layer that sees deliveries and queue samples.
//! - `content`: the opt-in to recording what models were sent and answered.
//! - `ids` (private): the trace and span ids derived from run ids.

pub mod content;
mod ids;
pub mod layer;
pub mod metrics;
pub mod trace;

use std::sync::Arc;

use claij_engine::Observer;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig as _, WithTonicConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

pub use layer::TelemetryLayer;
pub use metrics::MetricsObserver;
pub use trace::TraceObserver;

/// The variables that turn trace export on: an endpoint for all signals, or for traces.
pub const ENDPOINT_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];

/// The variables that turn metric export on: an endpoint for all signals, or for metrics.
pub const METRICS_ENDPOINT_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];

/// The `gen_ai.provider.name` of a model as the trail names it (`provider/model`; the
/// embedded model has no prefix, and is claij's own).
pub(crate) fn provider_of(model: &str) -> &str {
    model.split_once('/').map_or("claij", |(p, _)| p)
}

/// Telemetry could not be set up as the environment asks.
#[derive(Debug, thiserror::Error)]
#[error("OpenTelemetry: {0}")]
pub struct TelemetryError(String);

/// Export, set up: the observers to install on engines, the layer to add to the tracing
/// subscriber, and the providers to flush at exit.
pub struct Telemetry {
    traces: Option<(SdkTracerProvider, Arc<TraceObserver>)>,
    metrics: Option<(SdkMeterProvider, Arc<MetricsObserver>)>,
    /// What the surfaces report around runs, into the same providers.
    layer: TelemetryLayer,
    /// The gRPC exporters' runtime, when one exports over gRPC.
    runtime: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("traces", &self.traces.is_some())
            .field("metrics", &self.metrics.is_some())
            .field("grpc", &self.runtime.is_some())
            .finish()
    }
}

/// The resource every signal carries: `service.name` is `claij` unless
/// `OTEL_SERVICE_NAME` says otherwise (the SDK reads it, and `OTEL_RESOURCE_ATTRIBUTES`).
fn resource() -> Resource {
    let mut resource = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("claij");
    }
    resource.build()
}

fn failed(
    what: &str,
) -> impl FnOnce(opentelemetry_otlp::ExporterBuildError) -> TelemetryError + '_ {
    move |e| TelemetryError(format!("cannot build the OTLP {what} exporter: {e}"))
}

/// How OTLP is sent: `OTEL_EXPORTER_OTLP_PROTOCOL` (or the signal's own
/// `OTEL_EXPORTER_OTLP_{TRACES,METRICS}_PROTOCOL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `http/protobuf` (the default): `…/v1/traces`, `…/v1/metrics`.
    HttpProtobuf,
    /// `grpc`: the OTLP gRPC services (port 4317 by convention).
    Grpc,
}

impl Protocol {
    /// The protocol the environment asks for `signal` (`TRACES`, `METRICS`).
    fn from_env(signal: &str) -> Result<Protocol, TelemetryError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let named = var(&format!("OTEL_EXPORTER_OTLP_{signal}_PROTOCOL"))
            .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"));
        match named.as_deref().map(str::trim) {
            None | Some("http/protobuf") => Ok(Protocol::HttpProtobuf),
            Some("grpc") => Ok(Protocol::Grpc),
            Some(other) => Err(TelemetryError(format!(
                "OTLP protocol `{other}` is not supported: use `http/protobuf` or `grpc`"
            ))),
        }
    }
}

/// Where one signal goes: the protocol, and the URL when not from the `OTEL_*` variables
/// (the full URL for HTTP, `…/v1/traces`; the server's for gRPC).
#[derive(Debug, Clone)]
pub struct Export {
    /// How it is sent.
    pub protocol: Protocol,
    /// Where; `None`: as the `OTEL_*` variables say.
    pub url: Option<String>,
}

/// The gRPC exporter's TLS for an `https` endpoint: the webpki roots.
fn grpc_tls() -> opentelemetry_otlp::tonic_types::transport::ClientTlsConfig {
    opentelemetry_otlp::tonic_types::transport::ClientTlsConfig::new().with_enabled_roots()
}

/// Whether `url` (or, without one, the endpoint the variables give `signal`) is https.
fn is_https(url: Option<&str>, signal: &str) -> bool {
    let from_env = || {
        std::env::var(format!("OTEL_EXPORTER_OTLP_{signal}_ENDPOINT"))
            .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT"))
            .ok()
    };
    url.map(str::to_owned)
        .or_else(from_env)
        .is_some_and(|u| u.trim().starts_with("https://"))
}

impl Telemetry {
    /// Export as the standard `OTEL_*` variables configure it: traces when an endpoint for
    /// them is given (and `OTEL_TRACES_EXPORTER` is not `none`), metrics likewise
    /// (`OTEL_METRICS_EXPORTER`), each over the protocol asked for
    /// (`OTEL_EXPORTER_OTLP_PROTOCOL`: `http/protobuf` by default, or `grpc`); `None` when
    /// neither is, or `OTEL_SDK_DISABLED=true`.
    pub fn from_env() -> Result<Option<Telemetry>, TelemetryError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let off = |name: &str| var(name).is_some_and(|v| v.eq_ignore_ascii_case("none"));
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        let traces = !off("OTEL_TRACES_EXPORTER") && ENDPOINT_VARS.iter().any(|v| var(v).is_some());
        let metrics =
            !off("OTEL_METRICS_EXPORTER") && METRICS_ENDPOINT_VARS.iter().any(|v| var(v).is_some());
        if !traces && !metrics {
            return Ok(None);
        }
        let export = |on: bool, signal: &str| -> Result<Option<Export>, TelemetryError> {
            Ok(on
                .then(|| Protocol::from_env(signal))
                .transpose()?
                .map(|protocol| Export {
                    protocol,
                    url: None,
                }))
        };
        Telemetry::otlp(export(traces, "TRACES")?, export(metrics, "METRICS")?).map(Some)
    }

    /// Export over OTLP/HTTP: traces when `traces` is given, to its URL (the full URL,
    /// `…/v1/traces`) or, with `Some(None)`, to where the `OTEL_*` variables say; metrics
    /// likewise (`…/v1/metrics`). The other `OTEL_*` variables apply.
    pub fn otlp_http(
        traces: Option<Option<&str>>,
        metrics: Option<Option<&str>>,
    ) -> Result<Telemetry, TelemetryError> {
        let http = |url: Option<&str>| Export {
            protocol: Protocol::HttpProtobuf,
            url: url.map(str::to_owned),
        };
        Telemetry::otlp(traces.map(http), metrics.map(http))
    }

    /// Export traces and metrics as given (none of a signal with `None`). The other
    /// `OTEL_*` variables apply.
    pub fn otlp(
        traces: Option<Export>,
        metrics: Option<Export>,
    ) -> Result<Telemetry, TelemetryError> {
        let grpc = [&traces, &metrics]
            .into_iter()
            .flatten()
            .any(|e| e.protocol == Protocol::Grpc);
        // gRPC's channels live on a runtime of their own (the SDK exports from threads of
        // its own, outside any runtime), entered while they are built.
        let runtime = grpc
            .then(|| {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("claij-otlp")
                    .enable_all()
                    .build()
                    .map_err(|e| {
                        TelemetryError(format!("cannot start the gRPC exporter's runtime: {e}"))
                    })
            })
            .transpose()?;
        let _entered = runtime.as_ref().map(tokio::runtime::Runtime::enter);
        let traces = match traces {
            Some(export) => {
                let exporter = match export.protocol {
                    Protocol::HttpProtobuf => {
                        let mut exporter = opentelemetry_otlp::SpanExporter::builder().with_http();
                        if let Some(url) = &export.url {
                            exporter = exporter.with_endpoint(url);
                        }
                        exporter.build()
                    }
                    Protocol::Grpc => {
                        let mut exporter = opentelemetry_otlp::SpanExporter::builder().with_tonic();
                        if let Some(url) = &export.url {
                            exporter = exporter.with_endpoint(url);
                        }
                        if is_https(export.url.as_deref(), "TRACES") {
                            exporter = exporter.with_tls_config(grpc_tls());
                        }
                        exporter.build()
                    }
                };
                let provider = SdkTracerProvider::builder()
                    .with_batch_exporter(exporter.map_err(failed("span"))?)
                    .with_id_generator(ids::RunIds::default())
                    .with_resource(resource())
                    .build();
                let observer = Arc::new(
                    TraceObserver::new(provider.tracer("claij"))
                        .recording_content(content::capture_from_env()),
                );
                Some((provider, observer))
            }
            None => None,
        };
        let metrics = match metrics {
            Some(export) => {
                let exporter = match export.protocol {
                    Protocol::HttpProtobuf => {
                        let mut exporter =
                            opentelemetry_otlp::MetricExporter::builder().with_http();
                        if let Some(url) = &export.url {
                            exporter = exporter.with_endpoint(url);
                        }
                        exporter.build()
                    }
                    Protocol::Grpc => {
                        let mut exporter =
                            opentelemetry_otlp::MetricExporter::builder().with_tonic();
                        if let Some(url) = &export.url {
                            exporter = exporter.with_endpoint(url);
                        }
                        if is_https(export.url.as_deref(), "METRICS") {
                            exporter = exporter.with_tls_config(grpc_tls());
                        }
                        exporter.build()
                    }
                };
                let provider = SdkMeterProvider::builder()
                    .with_periodic_exporter(exporter.map_err(failed("metric"))?)
                    .with_resource(resource())
                    .build();
                let observer = Arc::new(MetricsObserver::new(&provider.meter("claij")));
                Some((provider, observer))
            }
            None => None,
        };
        drop(_entered);
        let layer = TelemetryLayer::new(
            traces.as_ref().map(|(p, _)| p.tracer("claij")),
            metrics.as_ref().map(|(p, _)| p.meter("claij")).as_ref(),
        );
        Ok(Telemetry {
            traces,
            metrics,
            layer,
            runtime,
        })
    }

    /// The observers to install on engines ([`Engine::observed_by`](claij_engine::Engine::observed_by)):
    /// the spans' and the metrics', as exported.
    pub fn observers(&self) -> Vec<Arc<dyn Observer>> {
        let mut out: Vec<Arc<dyn Observer>> = Vec::new();
        if let Some((_, traces)) = &self.traces {
            out.push(traces.clone());
        }
        if let Some((_, metrics)) = &self.metrics {
            out.push(metrics.clone());
        }
        out
    }

    /// The layer to add to the process's tracing subscriber (with its filter: it sees
    /// the `claij.delivery` spans and `claij.queue` events only, whatever the logs' level):
    /// callback deliveries and the queue, as spans and metrics exported with the runs'.
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        self.layer.clone().with_filter(layer::Surroundings)
    }

    /// Sends what is buffered and stops the exporters (call once, before the process
    /// exits).
    pub fn shutdown(&self) -> Result<(), TelemetryError> {
        let spans = self.traces.as_ref().map(|(p, _)| p.shutdown());
        let metrics = self.metrics.as_ref().map(|(p, _)| p.shutdown());
        match (spans, metrics) {
            (Some(Err(e)), _) => Err(TelemetryError(format!("cannot flush the spans: {e}"))),
            (_, Some(Err(e))) => Err(TelemetryError(format!("cannot flush the metrics: {e}"))),
            _ => Ok(()),
        }
    }
}
