//! The llama.cpp engine's speed on this machine, for each GGUF named on the command line
//! (default: SmolLM2 and the two Qwen2.5-Coder files under the cache): load time, prefill
//! tokens/s over a ~300-token prompt, decode tokens/s over 64 free tokens (greedy), and a
//! warm prompt (same system message, new user message) showing prefix reuse.
//!
//! `cargo run -p claij-embedded --features llama-cpp --example llama_cpp_speed [-- FILE…]`
//! (llama.cpp itself is always built optimised).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::path::PathBuf;

use claij_core::prompts::Message;
use claij_embedded::{GenerateOptions, LlamaCppModel, cache_root, model_path};

fn main() {
    let mut files: Vec<PathBuf> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .map(PathBuf::from)
        .collect();
    if files.is_empty() {
        let cache = cache_root();
        files = vec![
            model_path(&cache),
            cache.join("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
            cache.join("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
        ];
    }
    let system = Message::system(format!(
        "You route customer messages to the billing, technical or general team.{}",
        " Be concise and exact, and answer in one short sentence.".repeat(20)
    ));
    let greedy = GenerateOptions {
        temperature: 0.0,
        top_p: 1.0,
        seed: 1,
        max_tokens: 64,
    };
    for file in files.iter().filter(|f| f.is_file()) {
        let mut model = LlamaCppModel::load(file).unwrap();
        let cold = [
            system.clone(),
            Message::user(
                "The PhotoSync app crashes every time I open an album. What should I do?",
            ),
        ];
        let a = model.generate(&cold, &greedy, None, &mut |_| {}).unwrap();
        let warm = [
            system.clone(),
            Message::user("I was charged twice this month. What should I do?"),
        ];
        let b = model.generate(&warm, &greedy, None, &mut |_| {}).unwrap();
        println!(
            "{}: load {:.2} s; prefill {} tokens in {:.2} s = {:.1} tok/s; decode {} tokens = {:.1} tok/s; \
             warm prompt: {} of {} tokens computed in {:.2} s",
            file.file_name().unwrap_or_default().to_string_lossy(),
            model.load_duration().as_secs_f64(),
            a.prefilled_tokens,
            a.prompt_duration.as_secs_f64(),
            a.prefilled_tokens as f64 / a.prompt_duration.as_secs_f64(),
            a.completion_tokens,
            a.tokens_per_second(),
            b.prefilled_tokens,
            b.prompt_tokens,
            b.prompt_duration.as_secs_f64(),
        );
    }
}
