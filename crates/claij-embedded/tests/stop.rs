//! A generation stops when its [`StopSignal`] is raised from another thread (an
//! interrupt, a timeout): on the real small model (SmolLM2-135M-Instruct), a long answer
//! ends with [`GenerateError::Stopped`] at the next token, long before `max_tokens`, and
//! the model answers the next prompt as usual.

#![cfg(feature = "llama-cpp")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

use std::path::PathBuf;
use std::sync::mpsc;

use claij_embedded::{
    GenerateError, GenerateOptions, LocalModel, Message, StopSignal, cache_root, known, ready_path,
};

fn smollm2() -> LocalModel {
    let path: PathBuf = ready_path(&cache_root(), known("smollm2-135m").unwrap());
    assert!(
        path.is_file(),
        "the model file {} is missing: run scripts/setup/model",
        path.display()
    );
    LocalModel::load_with_threads(&path, 1).unwrap()
}

const MAX_TOKENS: usize = 1000;

fn long_answer() -> (Vec<Message>, GenerateOptions) {
    let messages = vec![Message::user(
        "Write a very long story about a dragon who learns to bake bread. Many chapters.",
    )];
    let options = GenerateOptions {
        temperature: 0.0,
        max_tokens: MAX_TOKENS,
        ..GenerateOptions::default()
    };
    (messages, options)
}

#[test]
fn a_signal_raised_from_another_thread_stops_the_generation_at_the_next_token() {
    let mut model = smollm2();
    let (messages, options) = long_answer();
    let stop = StopSignal::new();
    let (first_text, text_came) = mpsc::channel::<()>();
    let (release, released) = mpsc::channel::<()>();
    let watched = stop.clone();
    let generating = std::thread::spawn(move || {
        let mut pieces = 0usize;
        let result = model.generate_until(&messages, &options, None, &watched, &mut |_| {
            pieces += 1;
            if pieces == 1 {
                // The first text is out: let the test raise the signal, and wait until it
                // has, so the check before the next token sees it.
                first_text.send(()).unwrap();
                released.recv().unwrap();
            }
        });
        (result, pieces, model)
    });
    text_came.recv().unwrap();
    stop.raise();
    release.send(()).unwrap();
    let (result, pieces, mut model) = generating.join().unwrap();
    match result {
        Err(GenerateError::Stopped { completion_tokens }) => {
            assert!(
                (1..=2).contains(&completion_tokens),
                "stopped after {completion_tokens} tokens of {MAX_TOKENS}"
            );
        }
        other => panic!("expected the generation to stop, got {other:?}"),
    }
    assert_eq!(pieces, 1, "no text after the signal");

    // The model is usable afterwards: the same prompt, not stopped, runs past that point.
    let (messages, options) = long_answer();
    let short = GenerateOptions {
        max_tokens: 8,
        ..options
    };
    let g = model
        .generate(&messages, &short, None, &mut |_| {})
        .unwrap();
    assert!(g.completion_tokens > 2, "{g:?}");
}

#[test]
fn a_signal_raised_before_the_generation_starts_stops_it_before_the_prompt_is_read() {
    let mut model = smollm2();
    let (messages, options) = long_answer();
    let stop = StopSignal::new();
    stop.raise();
    let mut text = String::new();
    let result = model.generate_until(&messages, &options, None, &stop, &mut |t| text.push_str(t));
    assert!(
        matches!(
            result,
            Err(GenerateError::Stopped {
                completion_tokens: 0
            })
        ),
        "{result:?}"
    );
    assert!(text.is_empty(), "{text:?}");
    assert!(
        GenerateError::Stopped {
            completion_tokens: 0
        }
        .to_string()
        .contains("stopped"),
    );
}
