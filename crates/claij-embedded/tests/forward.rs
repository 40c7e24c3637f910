//! The forward pass of `claij_embedded::llama` against candle-transformers'
//! `quantized_llama` on the real embedded model (fetched by `scripts/setup/model`): the
//! same next-token scores for a prompt (prefilled in one pass) and for each token decoded
//! after it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::fs::File;
use std::io::BufReader;

use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::models::quantized_llama::ModelWeights;
use claij_embedded::llama::Llama;
use claij_embedded::{cache_root, model_path};

fn read() -> (gguf_file::Content, BufReader<File>) {
    let path = model_path(&cache_root());
    assert!(
        path.is_file(),
        "the embedded model is missing at {}: run scripts/setup/model",
        path.display()
    );
    let mut reader = BufReader::new(File::open(&path).unwrap());
    let content = gguf_file::Content::read(&mut reader).unwrap();
    (content, reader)
}

fn scores(logits: &Tensor) -> Vec<f32> {
    logits.squeeze(0).unwrap().to_vec1().unwrap()
}

fn argmax(v: &[f32]) -> usize {
    v.iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(i, _)| i)
        .unwrap()
}

/// Largest difference between two score vectors, relative to the largest score.
fn relative_gap(a: &[f32], b: &[f32]) -> f32 {
    let scale = a.iter().fold(0f32, |m, x| m.max(x.abs())).max(1.0);
    a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs())) / scale
}

fn models() -> (ModelWeights, Llama) {
    let device = Device::Cpu;
    let (content, mut reader) = read();
    let reference = ModelWeights::from_gguf(content, &mut reader, &device).unwrap();
    let (content, mut reader) = read();
    let ours = Llama::from_gguf(content, &mut reader, &device).unwrap();
    (reference, ours)
}

/// A prompt long enough for the prefill path (many rows): 300 tokens.
fn prompt() -> Vec<u32> {
    (0..300u32).map(|i| (i * 7919 + 13) % 49_000 + 17).collect()
}

fn tokens(ids: &[u32]) -> Tensor {
    Tensor::new(ids, &Device::Cpu)
        .unwrap()
        .unsqueeze(0)
        .unwrap()
}

/// With quantized prefill, the computation is the reference's. The prompt's scores are
/// the same to the last bit and so is the cache it leaves; decoding after it folds the
/// query heads that share a key/value head into one product, which rounds differently,
/// so the 24 greedy steps that follow agree to a few percent.
#[test]
fn the_same_scores_as_the_reference_with_quantized_prefill() {
    let (mut reference, mut ours) = models();
    ours.quantized_prefill(true);
    let prompt = prompt();
    let a = scores(&reference.forward(&tokens(&prompt), 0).unwrap());
    let b = scores(&ours.forward(&tokens(&prompt), 0).unwrap());
    assert_eq!(a.len(), b.len());
    let gap = relative_gap(&a, &b);
    assert!(gap < 1e-5, "prefill scores differ by {gap} of the largest");
    let mut next = argmax(&a) as u32;
    assert_eq!(argmax(&b) as u32, next);
    for step in 0..24 {
        let position = prompt.len() + step;
        let a = scores(&reference.forward(&tokens(&[next]), position).unwrap());
        let b = scores(&ours.forward(&tokens(&[next]), position).unwrap());
        let gap = relative_gap(&a, &b);
        assert!(
            gap < 0.05,
            "step {step}: scores differ by {gap} of the largest"
        );
        next = argmax(&a) as u32;
    }

    ours.clear_cache();
    reference.clear_kv_cache();
    let a = scores(&reference.forward(&tokens(&prompt[..20]), 0).unwrap());
    let b = scores(&ours.forward(&tokens(&prompt[..20]), 0).unwrap());
    assert!(relative_gap(&a, &b) < 1e-5, "after clearing the cache");
}

/// The default f32 prefill keeps the activations unquantized: the scores move by a few
/// percent at most, and the prompt's next token is the same.
#[test]
fn f32_prefill_stays_close_to_the_reference() {
    let (mut reference, mut ours) = models();
    let prompt = prompt();
    let a = scores(&reference.forward(&tokens(&prompt), 0).unwrap());
    let b = scores(&ours.forward(&tokens(&prompt), 0).unwrap());
    let gap = relative_gap(&a, &b);
    assert!(gap < 0.06, "prefill scores differ by {gap} of the largest");
    assert_eq!(argmax(&a), argmax(&b), "prefill picks another token");
    let next = argmax(&a) as u32;
    let a = scores(&reference.forward(&tokens(&[next]), prompt.len()).unwrap());
    let b = scores(&ours.forward(&tokens(&[next]), prompt.len()).unwrap());
    let gap = relative_gap(&a, &b);
    assert!(
        gap < 0.06,
        "the next step's scores differ by {gap} of the largest"
    );
}
