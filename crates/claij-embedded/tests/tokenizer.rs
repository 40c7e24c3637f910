//! claij's tokenizer against llama.cpp's, id for id: `tokenizer-reference.json` holds the
//! ids llama.cpp gives a varied set of strings (ASCII, digits, punctuation, other
//! scripts, emoji, JSON, whitespace runs, ChatML control tokens written out), made by
//! `tokenizer_reference.py` beside it. The tokenizer is read from the model file claij
//! runs (`scripts/setup/model`), whose metadata is the reference file's.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use candle_core::quantized::gguf_file;
use claij_embedded::tokenizer::Tokenizer;
use claij_embedded::{cache_root, model_path};
use serde::Deserialize;

#[derive(Deserialize)]
struct Reference {
    model: String,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    text: String,
    ids: Vec<u32>,
}

fn reference() -> Reference {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tokenizer-reference.json");
    let text = std::fs::read_to_string(&path).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn tokenizer() -> Tokenizer {
    let path = model_path(&cache_root());
    assert!(
        path.is_file(),
        "the embedded model is missing at {}: run scripts/setup/model (or `claij model fetch`)",
        path.display()
    );
    let mut reader = BufReader::new(File::open(&path).unwrap());
    let content = gguf_file::Content::read(&mut reader).unwrap();
    Tokenizer::from_gguf(&content).unwrap()
}

/// The tokens of `ids` as text, for a readable difference.
fn pieces(tok: &Tokenizer, ids: &[u32]) -> Vec<String> {
    ids.iter()
        .map(|id| String::from_utf8_lossy(tok.token_bytes(*id)).into_owned())
        .collect()
}

#[test]
fn the_tokenizer_gives_llama_cpps_ids() {
    let reference = reference();
    assert!(
        reference.model.starts_with("SmolLM2-135M-Instruct"),
        "{}",
        reference.model
    );
    let tok = tokenizer();
    let mut differ = Vec::new();
    for case in &reference.cases {
        let ours = tok.encode_with_specials(&case.text);
        if ours != case.ids {
            differ.push(format!(
                "{:?}\n  llama.cpp: {:?} {:?}\n  claij:     {:?} {:?}",
                case.text,
                case.ids,
                pieces(&tok, &case.ids),
                ours,
                pieces(&tok, &ours)
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "{} of {} texts tokenize differently:\n{}",
        differ.len(),
        reference.cases.len(),
        differ.join("\n")
    );
    // The comparison covered what it is meant to: the cases are there, control tokens
    // among them, and decoding gives every text back.
    assert!(reference.cases.len() >= 50, "{}", reference.cases.len());
    let im_start = tok.special("<|im_start|>").unwrap();
    assert!(reference.cases.iter().any(|c| c.ids.contains(&im_start)));
    for case in &reference.cases {
        assert_eq!(
            String::from_utf8_lossy(&tok.decode(&case.ids, true)),
            case.text
        );
    }
}
