//! The embedded model's speed on this machine: load time, prompt processing, tokens per
//! second with and without a schema constraint, and peak memory (VmHWM).
//!
//! `cargo bench -p claij-embedded --bench generate` (needs `scripts/setup/model`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::time::Instant;

use claij_core::prompts::{Message, PromptOptions, system_message};
use claij_core::schema::compilable_effective;
use claij_core::{BuiltinNames, load_file};
use claij_embedded::{Constraint, EmbeddedModel, GenerateOptions, cache_root, model_path};
use serde_json::json;

/// Peak resident memory of this process, from /proc (Linux), in MiB.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// CPU time this process has used so far (all threads), from /proc (Linux), in seconds:
/// on a shared machine, tokens per CPU second say more than tokens per wall second.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/schedstat").ok()?;
    let ns: f64 = stat.split_whitespace().next()?.parse().ok()?;
    Some(ns / 1e9)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `cargo bench` passes `--bench`; nothing to filter here.
    let path = model_path(&cache_root());
    if !path.is_file() {
        return Err(format!("{} is missing: run scripts/setup/model", path.display()).into());
    }
    let started = Instant::now();
    let mut model = EmbeddedModel::load(&path)?;
    let load = started.elapsed();
    println!("model: {}", path.display());
    println!("load time: {:.0} ms", load.as_secs_f64() * 1000.0);

    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/triage.yaml");
    let fsm = load_file(std::path::Path::new(root), &BuiltinNames).map_err(|e| format!("{e:?}"))?;
    let system = system_message(
        &fsm,
        "extract",
        fsm.transition("start", "extract"),
        &PromptOptions::default(),
    );
    let event = json!({"id": ["start", "extract"], "text": "Hi, this is Maria Lopez. Since this morning the PhotoSync app crashes every time I open an album, and I have a client presentation at 3pm today. Please help!"});
    let messages = [Message::system(system), Message::user(event.to_string())];
    let schema = compilable_effective(&fsm.output_schema("extract"), fsm.defs());
    let compile_started = Instant::now();
    let constraint = Constraint::from_schema(&schema)?;
    println!(
        "schema compile (load-time check): {:.1} ms",
        compile_started.elapsed().as_secs_f64() * 1000.0
    );

    let free = [
        Message::system("You are a helpful assistant."),
        Message::user("Tell me a short story about a lighthouse keeper."),
    ];
    let rounds = 3;
    for (label, msgs, constraint, max_tokens) in [
        ("unconstrained", &free[..], None, 128),
        (
            "constrained (triage extract)",
            &messages[..],
            Some(&constraint),
            400,
        ),
    ] {
        let mut tokens = 0;
        let mut gen_secs = 0.0;
        let mut prompt_secs = 0.0;
        let mut prompt_tokens = 0;
        let cpu_before = cpu_seconds();
        for seed in 0..rounds {
            let options = GenerateOptions {
                temperature: 0.7,
                top_p: 0.95,
                seed,
                max_tokens,
            };
            let g = model.generate(msgs, &options, constraint, &mut |_| {})?;
            tokens += g.completion_tokens;
            gen_secs += g.generate_duration.as_secs_f64();
            prompt_secs += g.prompt_duration.as_secs_f64();
            prompt_tokens += g.prompt_tokens;
        }
        println!(
            "{label}: {:.1} tokens/s ({tokens} tokens in {gen_secs:.2} s over {rounds} runs); prompt {:.0} tokens/s ({} tokens, {:.0} ms each)",
            tokens as f64 / gen_secs,
            prompt_tokens as f64 / prompt_secs,
            prompt_tokens / rounds as usize,
            prompt_secs * 1000.0 / rounds as f64,
        );
        if let (Some(a), Some(b)) = (cpu_before, cpu_seconds()) {
            println!(
                "  CPU time (main thread): {:.2} s, {:.1} generated tokens per CPU second (prompts included)",
                b - a,
                tokens as f64 / (b - a)
            );
        }
    }
    match peak_rss_mib() {
        Some(mib) => println!("peak memory (VmHWM): {mib:.0} MiB"),
        None => println!("peak memory: unavailable (no /proc/self/status)"),
    }
    Ok(())
}
