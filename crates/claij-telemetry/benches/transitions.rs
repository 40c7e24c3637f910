//! What tracing costs a transition: the engine's 1,000-transition ping-pong loop (the
//! workload of claij-engine's `transitions` bench) with no telemetry, and with every run,
//! attempt and transition traced and exported over OTLP/HTTP to a local receiver (a
//! thread here that answers every export 200, so the export's cost is claij's side only).
//!
//! `cargo bench -p claij-telemetry --bench transitions`; criterion reports time per
//! transition (throughput in elements = transitions).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

#[path = "../../claij-engine/benches/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

use claij_telemetry::Telemetry;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const TRANSITIONS: u64 = 1_000;

/// Answers every request on `stream` with an empty 200 until the client closes it.
fn answer(stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let lower = line.to_ascii_lowercase();
            if let Some(value) = lower.strip_prefix("content-length:") {
                length = value.trim().parse().unwrap_or(0);
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let reply =
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if writer.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

/// A receiver on a loopback port, in threads of its own; returns its traces URL.
fn receiver() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || answer(stream));
        }
    });
    url
}

fn bench(c: &mut Criterion) {
    // What the binary does first: ring as the process's TLS provider (reqwest is built
    // without one).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let telemetry = Telemetry::otlp_http(Some(Some(&receiver())), None).unwrap();
    let (plain, fsm) = common::ping_pong(TRANSITIONS);
    let (traced, _) = common::ping_pong(TRANSITIONS);
    let traced = telemetry
        .observers()
        .into_iter()
        .fold(traced, claij_engine::Engine::observed_by);
    let (plain, traced) = (Arc::new(plain), Arc::new(traced));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("tracing");
    group.throughput(Throughput::Elements(TRANSITIONS));
    for (name, engine) in [("off", &plain), ("exported over OTLP/HTTP", &traced)] {
        group.bench_function(format!("1000-transition loop, telemetry {name}"), |b| {
            b.iter(|| common::run_loop(&runtime, engine, &fsm))
        });
    }
    group.finish();
    telemetry.shutdown().unwrap();
}

criterion_group!(benches, bench);
criterion_main!(benches);
