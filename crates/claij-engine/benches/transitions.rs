//! Engine overhead per transition: a two-state loop of 1,000 transitions with a
//! deterministic action and schema validation on (routing, validation, trail append).
//!
//! `cargo bench -p claij-engine --bench transitions`; criterion reports time per
//! transition (throughput in elements = transitions).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

mod common;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const TRANSITIONS: u64 = 1_000;

fn bench(c: &mut Criterion) {
    let (engine, fsm) = common::ping_pong(TRANSITIONS);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("{e}"),
    };
    let mut group = c.benchmark_group("engine");
    group.throughput(Throughput::Elements(TRANSITIONS));
    group.bench_function("1000-transition loop, validation on", |b| {
        b.iter(|| common::run_loop(&runtime, &engine, &fsm))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
