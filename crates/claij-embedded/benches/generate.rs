//! The embedded model's speed on this machine: load time, prompt processing (cold: the
//! key/value cache cleared before each prompt), tokens per second with and without a
//! schema constraint, and peak memory (VmHWM).
//!
//! `cargo bench -p claij-embedded --bench generate [-- FILE]` (default: the default model,
//! which `scripts/setup/model` fetches).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

#[path = "../tests/support/conversation.rs"]
mod conversation;
use conversation::conversation;

use std::time::Instant;

use claij_core::schema::compilable_effective;
use claij_core::{BuiltinNames, load_file};
use claij_embedded::{Constraint, GenerateOptions, LocalModel, Message, cache_root, model_path};
use serde_json::json;

/// Peak resident memory of this process, from /proc (Linux), in MiB.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// CPU time this process has used so far (all threads, user and system), from /proc
/// (Linux, in USER_HZ = 1/100 s), in seconds: on a shared machine, tokens per CPU second
/// say more than tokens per wall second.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // After the command name in parentheses: state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `cargo bench` passes `--bench`: only other arguments name a file.
    let path = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .map_or_else(|| model_path(&cache_root()), std::path::PathBuf::from);
    if !path.is_file() {
        return Err(format!("{} is missing: run scripts/setup/model", path.display()).into());
    }
    let started = Instant::now();
    let mut model = LocalModel::load(&path)?;
    let load = started.elapsed();
    println!("model: {}", path.display());
    println!("load time: {:.0} ms", load.as_secs_f64() * 1000.0);

    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/triage.yaml");
    let fsm = load_file(std::path::Path::new(root), &BuiltinNames).map_err(|e| format!("{e:?}"))?;
    let event = json!({"id": ["start", "extract"], "text": "Hi, this is Maria Lopez. Since this morning the PhotoSync app crashes every time I open an album, and I have a client presentation at 3pm today. Please help!"});
    let messages = conversation(&fsm, "extract", ("start", "extract"), &event);
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
        let mut prefilled_tokens = 0;
        let cpu_before = cpu_seconds();
        for seed in 0..rounds {
            let options = GenerateOptions {
                temperature: 0.7,
                top_p: 0.95,
                seed,
                max_tokens,
            };
            // Each prompt from scratch: the same prompt again would only compute its last
            // token (prefix reuse).
            model.clear_cache();
            let g = model.generate(msgs, &options, constraint, &mut |_| {})?;
            tokens += g.completion_tokens;
            gen_secs += g.generate_duration.as_secs_f64();
            prompt_secs += g.prompt_duration.as_secs_f64();
            prefilled_tokens += g.prefilled_tokens;
        }
        println!(
            "{label}: {:.1} tokens/s ({tokens} tokens in {gen_secs:.2} s over {rounds} runs); prompt {:.0} tokens/s ({} tokens, {:.0} ms each)",
            tokens as f64 / gen_secs,
            prefilled_tokens as f64 / prompt_secs,
            prefilled_tokens / rounds as usize,
            prompt_secs * 1000.0 / rounds as f64,
        );
        if let (Some(a), Some(b)) = (cpu_before, cpu_seconds()) {
            println!(
                "  CPU time (all threads): {:.2} s, {:.1} generated tokens per CPU second (prompts included)",
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
