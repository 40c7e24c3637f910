//! [`MetricsObserver`]: what runs do, as OpenTelemetry metrics — the GenAI client metrics
//! (`gen_ai.client.token.usage`, `gen_ai.client.operation.duration`) and claij's own
//! (`claij.transitions`, `claij.attempts.failed`, `claij.runs.ended`,
//! `claij.store.commit.duration`). What happens around runs (callback deliveries, the
//! workers' queue) is measured by [`crate::layer`].

use claij_core::TrailEntry;
use claij_core::budget::is_pause;
use claij_engine::{Commit, Observer, RunStatus};
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, Meter};

/// Records the metrics of the runs an engine drives.
pub struct MetricsObserver {
    tokens: Histogram<u64>,
    duration: Histogram<f64>,
    transitions: Counter<u64>,
    failures: Counter<u64>,
    ended: Counter<u64>,
    commits: Histogram<f64>,
}

impl std::fmt::Debug for MetricsObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsObserver").finish_non_exhaustive()
    }
}

impl MetricsObserver {
    /// The instruments, made with `meter`.
    pub fn new(meter: &Meter) -> Self {
        MetricsObserver {
            tokens: meter
                .u64_histogram("gen_ai.client.token.usage")
                .with_unit("{token}")
                .with_description("Tokens used by model calls, by type (input, output)")
                .with_boundaries(vec![
                    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0,
                    1048576.0, 4194304.0, 16777216.0, 67108864.0,
                ])
                .build(),
            duration: meter
                .f64_histogram("gen_ai.client.operation.duration")
                .with_unit("s")
                .with_description("How long model calls took (their attempts)")
                .with_boundaries(vec![
                    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
                    40.96, 81.92,
                ])
                .build(),
            transitions: meter
                .u64_counter("claij.transitions")
                .with_unit("{transition}")
                .with_description("Transitions taken, by FSM and transition")
                .build(),
            failures: meter
                .u64_counter("claij.attempts.failed")
                .with_unit("{attempt}")
                .with_description("Failed attempts, by FSM, state and kind")
                .build(),
            ended: meter
                .u64_counter("claij.runs.ended")
                .with_unit("{run}")
                .with_description("Runs that ended or stopped here, by status")
                .build(),
            commits: meter
                .f64_histogram("claij.store.commit.duration")
                .with_unit("s")
                .with_description("How long checkpoints took to write, by outcome")
                .with_boundaries(vec![
                    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0,
                ])
                .build(),
        }
    }
}

impl Observer for MetricsObserver {
    fn entry_appended(&self, _run_id: &str, entry: &TrailEntry) {
        let fsm = KeyValue::new("claij.fsm.id", entry.fsm.to_string());
        if let Some(model) = &entry.model {
            let provider = crate::provider_of(model);
            let call = [
                KeyValue::new("gen_ai.operation.name", "chat"),
                KeyValue::new("gen_ai.provider.name", provider.to_owned()),
                KeyValue::new("gen_ai.request.model", model.clone()),
            ];
            if let Some(usage) = entry.usage.as_deref() {
                for (kind, count) in [
                    ("input", usage.input_tokens),
                    ("output", usage.output_tokens),
                ] {
                    let mut attributes = call.to_vec();
                    attributes.push(KeyValue::new("gen_ai.token.type", kind));
                    self.tokens.record(count, &attributes);
                }
            }
            if let Some(ms) = entry.duration_ms {
                self.duration.record(ms as f64 / 1000.0, &call);
            }
        }
        match (&entry.to, entry.failure.as_deref()) {
            (Some(to), _) => self.transitions.add(
                1,
                &[
                    fsm,
                    KeyValue::new("claij.from", entry.from.to_string()),
                    KeyValue::new("claij.to", to.to_string()),
                ],
            ),
            (None, Some(failure)) if !is_pause(entry) => self.failures.add(
                1,
                &[
                    fsm,
                    KeyValue::new("claij.state", entry.from.to_string()),
                    KeyValue::new("claij.failure.kind", failure.kind.to_string()),
                ],
            ),
            _ => {}
        }
    }

    fn run_finished(&self, _run_id: &str, status: RunStatus) {
        self.ended
            .add(1, &[KeyValue::new("claij.status", status.as_str())]);
    }

    fn committed(&self, _run_id: &str, commit: &Commit<'_>) {
        let outcome = if commit.error.is_some() {
            "failed"
        } else {
            "ok"
        };
        self.commits.record(
            commit.took.as_secs_f64(),
            &[KeyValue::new("claij.outcome", outcome)],
        );
    }
}
