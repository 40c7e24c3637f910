//! OpenTelemetry, when the binary is built with it (feature `otel`, on by default) and the
//! standard `OTEL_*` variables ask for it: set up once as the process starts (outside the
//! async runtime: the exporter's client blocks on a thread of its own), installed on every
//! engine the binary assembles, flushed as it exits.

use claij_engine::Engine;

#[cfg(feature = "otel")]
static TELEMETRY: std::sync::OnceLock<Option<claij_telemetry::Telemetry>> =
    std::sync::OnceLock::new();

/// Sets trace export up as the environment asks (nothing when it does not).
pub(crate) fn start() -> Result<(), String> {
    #[cfg(feature = "otel")]
    {
        let telemetry = claij_telemetry::Telemetry::from_env().map_err(|e| e.to_string())?;
        let _ = TELEMETRY.set(telemetry);
    }
    Ok(())
}

/// `engine`, observed by the trace exporter when there is one.
pub(crate) fn install(engine: Engine) -> Engine {
    #[cfg(feature = "otel")]
    if let Some(Some(telemetry)) = TELEMETRY.get() {
        return telemetry
            .observers()
            .into_iter()
            .fold(engine, Engine::observed_by);
    }
    engine
}

/// Sends the spans still buffered.
pub(crate) fn finish() {
    #[cfg(feature = "otel")]
    if let Some(Some(telemetry)) = TELEMETRY.get()
        && let Err(e) = telemetry.shutdown()
    {
        note!("claij: {e}");
    }
}
