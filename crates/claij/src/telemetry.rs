//! OpenTelemetry, when the binary is built with it (feature `otel`, on by default) and the
//! standard `OTEL_*` variables ask for it: set up once as the process starts (outside the
//! async runtime: the exporter's client blocks on a thread of its own), installed on every
//! engine the application assembles ([`crate::app`]) and in the tracing subscriber
//! ([`crate::logs`]), flushed as it exits.

use claij_engine::Engine;

use crate::logs::Beside;

/// Trace export as the environment asks for it (none when it does not).
pub(crate) struct Telemetry {
    #[cfg(feature = "otel")]
    export: Option<claij_telemetry::Telemetry>,
}

impl Telemetry {
    /// Sets trace export up as the environment asks (nothing when it does not).
    pub(crate) fn start() -> Result<Telemetry, String> {
        Ok(Telemetry {
            #[cfg(feature = "otel")]
            export: claij_telemetry::Telemetry::from_env().map_err(|e| e.to_string())?,
        })
    }

    /// `engine`, observed by the trace exporter when there is one.
    pub(crate) fn install(&self, engine: Engine) -> Engine {
        #[cfg(feature = "otel")]
        if let Some(export) = &self.export {
            return export
                .observers()
                .into_iter()
                .fold(engine, Engine::observed_by);
        }
        engine
    }

    /// The layer to add to the process's tracing subscriber beside the logs: what the
    /// server and the worker report around runs (callback deliveries, the queue), as
    /// spans and metrics; none without export.
    pub(crate) fn layer(&self) -> Option<Beside> {
        #[cfg(feature = "otel")]
        if let Some(export) = &self.export {
            return Some(Box::new(export.layer()));
        }
        None
    }

    /// Sends the spans still buffered.
    pub(crate) fn finish(&self) {
        #[cfg(feature = "otel")]
        if let Some(export) = &self.export
            && let Err(e) = export.shutdown()
        {
            note!("claij: {e}");
        }
    }
}
