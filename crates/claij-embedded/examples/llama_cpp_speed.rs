//! The engine's speed on this machine, for each GGUF named on the command line (default:
//! SmolLM2 and the two Qwen2.5-Coder files, those that are fetched): load time; prefill
//! tokens/s over a ~500-token ChatML prompt, computed from scratch each time (the key/value
//! cache cleared); decode tokens/s over up to 64 greedy tokens; medians over `--reps` runs;
//! and a warm prompt (same system message, new user message) showing prefix reuse.
//!
//! ```text
//! cargo run --release -p claij-embedded --example llama_cpp_speed -- \
//!     [--threads N] [--reps N] [--max-tokens N] [--json] [FILE…]
//! ```
//!
//! `--threads` defaults to every core the process may use. `--json` prints one JSON object
//! a line per file (the medians, each run's figures, the rendered prompt and the greedy
//! text, so that another engine can be given the same tokens:
//! `bench/embedded-vs-llama-cpp-python` does).
//! llama.cpp itself is always built optimised.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::path::PathBuf;

use claij_embedded::{GenerateOptions, LocalModel, Message, cache_root, known, ready_path};
use serde_json::json;

struct Args {
    threads: Option<usize>,
    reps: usize,
    max_tokens: usize,
    json: bool,
    files: Vec<PathBuf>,
}

fn args() -> Args {
    let mut args = Args {
        threads: None,
        reps: 5,
        max_tokens: 64,
        json: false,
        files: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut number = |name: &str| -> usize {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} takes a number"))
        };
        match a.as_str() {
            "--threads" => args.threads = Some(number("--threads")),
            "--reps" => args.reps = number("--reps").max(1),
            "--max-tokens" => args.max_tokens = number("--max-tokens"),
            "--json" => args.json = true,
            "--bench" => {}
            other if other.starts_with("--") => panic!("unknown option {other}"),
            file => args.files.push(PathBuf::from(file)),
        }
    }
    if args.files.is_empty() {
        let cache = cache_root();
        args.files = ["smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]
            .iter()
            .map(|name| ready_path(&cache, known(name).unwrap()))
            .filter(|f| f.is_file())
            .collect();
    }
    args
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

fn main() {
    let args = args();
    let system = Message::system(format!(
        "You are a storyteller. Your stories are long, detailed and vivid.{}",
        " The lighthouse stands on a rocky island far from the coast, and its keeper lives \
         there alone with his cat, his books and the sea."
            .repeat(18)
    ));
    let cold = [
        system.clone(),
        Message::user(
            "Tell me a long story about the lighthouse keeper and a storm. Write at least 400 words.",
        ),
    ];
    let warm = [
        system.clone(),
        Message::user("Tell me a long story about the keeper's cat. Write at least 400 words."),
    ];
    let greedy = GenerateOptions {
        temperature: 0.0,
        top_p: 1.0,
        seed: 1,
        max_tokens: args.max_tokens,
    };
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    for file in &args.files {
        let mut model =
            LocalModel::load_with_threads(file, threads).unwrap_or_else(|e| panic!("{e}"));
        let prompt = model.render(&cold).unwrap();
        let mut prefill = Vec::new();
        let mut prefill_secs = Vec::new();
        let mut decode = Vec::new();
        let mut first = None;
        for _ in 0..args.reps {
            model.clear_cache();
            let g = model.generate(&cold, &greedy, None, &mut |_| {}).unwrap();
            assert_eq!(g.prefilled_tokens, g.prompt_tokens, "a cold prompt");
            let secs = g.prompt_duration.as_secs_f64();
            prefill.push(g.prefilled_tokens as f64 / secs);
            prefill_secs.push(secs);
            decode.push(g.tokens_per_second());
            first.get_or_insert(g);
        }
        let first = first.expect("at least one run");
        let runs: Vec<_> = prefill
            .iter()
            .zip(&prefill_secs)
            .zip(&decode)
            .map(|((p, s), d)| {
                json!({"prefill_tokens_per_s": p, "prefill_s": s, "decode_tokens_per_s": d})
            })
            .collect();
        let w = model.generate(&warm, &greedy, None, &mut |_| {}).unwrap();
        let name = file.file_name().unwrap_or_default().to_string_lossy();
        let (prefill, prefill_secs, decode) =
            (median(prefill), median(prefill_secs), median(decode));
        if args.json {
            println!(
                "{}",
                json!({
                    "file": file,
                    "threads": threads,
                    "reps": args.reps,
                    "load_s": model.load_duration().as_secs_f64(),
                    "prompt_tokens": first.prompt_tokens,
                    "prefill_s": prefill_secs,
                    "prefill_tokens_per_s": prefill,
                    "decode_tokens": first.completion_tokens,
                    "decode_tokens_per_s": decode,
                    "warm_prefilled_tokens": w.prefilled_tokens,
                    "warm_prompt_tokens": w.prompt_tokens,
                    "warm_prompt_s": w.prompt_duration.as_secs_f64(),
                    "runs": runs,
                    "prompt": prompt,
                    "text": first.text,
                })
            );
        } else {
            println!(
                "{name} ({threads} threads): load {:.2} s; prefill {} tokens in {prefill_secs:.2} s = {prefill:.1} tok/s; \
                 decode {} tokens = {decode:.1} tok/s (medians of {}); \
                 warm prompt: {} of {} tokens computed in {:.2} s",
                model.load_duration().as_secs_f64(),
                first.prompt_tokens,
                first.completion_tokens,
                args.reps,
                w.prefilled_tokens,
                w.prompt_tokens,
                w.prompt_duration.as_secs_f64(),
            );
        }
    }
}
