//! Dropping the future of an embedded model's call (what an interrupt, a timeout or a
//! lost lease does) stops its generation thread: on the real small model
//! (SmolLM2-135M-Instruct), no text comes after the drop, the thread ends (it lets go of
//! what it held), and the model answers the next call.

#![cfg(feature = "llama-cpp")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use claij_core::prompts::{Message, Role};
use claij_engine::TextSink;
use claij_llm::providers::embedded::EmbeddedProvider;
use claij_llm::{Decoding, Enforcement, Mode, ModelRequest, Provider};

fn smollm2() -> EmbeddedProvider {
    let path = claij_embedded::ready_path(
        &claij_embedded::cache_root(),
        claij_embedded::known("smollm2-135m").unwrap(),
    );
    assert!(
        path.is_file(),
        "the model file {} is missing: run scripts/setup/model",
        path.display()
    );
    EmbeddedProvider::new(path)
}

fn request(max_tokens: u32) -> ModelRequest {
    ModelRequest {
        model: "smollm2-135m".into(),
        messages: vec![Message {
            role: Role::User,
            content:
                "Write a very long story about a dragon who learns to bake bread. Many chapters."
                    .into(),
        }],
        enforcement: Enforcement {
            mode: Mode::Prompt,
            schema: serde_json::json!({}),
            tools: Vec::new(),
        },
        decoding: Decoding {
            max_tokens: Some(max_tokens),
            ..Decoding::default()
        },
        traceparent: None,
    }
}

/// What the generation thread holds: it counts the text pieces, reports the first and
/// waits there until the test lets it go on.
struct Probe {
    pieces: AtomicUsize,
    first: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    release: Mutex<mpsc::Receiver<()>>,
}

#[tokio::test]
async fn dropping_the_call_stops_the_generation_thread() {
    let provider = smollm2();
    let long = request(1000);
    let (first_tx, first_rx) = tokio::sync::oneshot::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let probe = Arc::new(Probe {
        pieces: AtomicUsize::new(0),
        first: Mutex::new(Some(first_tx)),
        release: Mutex::new(release_rx),
    });
    let held = Arc::clone(&probe);
    let sink: TextSink = Arc::new(move |_text: &str| {
        if held.pieces.fetch_add(1, Ordering::SeqCst) == 0 {
            if let Some(tx) = held.first.lock().unwrap().take() {
                tx.send(()).unwrap();
            }
            // Go on only once the test has dropped the call.
            let _ = held.release.lock().unwrap().recv();
        }
    });
    let mut call = provider.complete_streaming(&long, sink);
    tokio::select! {
        answer = &mut call => panic!("the call ended before its first text was out: {answer:?}"),
        first = first_rx => first.unwrap(),
    }
    drop(call);
    release_tx.send(()).unwrap();

    // The thread ends: the sink it held is dropped. The bound is generous; what is asserted
    // is that it ends, and that no text came after the drop.
    let mut waited = Duration::ZERO;
    while Arc::strong_count(&probe) > 1 {
        assert!(
            waited < Duration::from_secs(600),
            "the generation thread still runs: {} pieces",
            probe.pieces.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        waited += Duration::from_millis(20);
    }
    assert_eq!(
        probe.pieces.load(Ordering::SeqCst),
        1,
        "text was generated after the call was dropped"
    );

    // The model is free and answers the next call.
    let answer = provider.complete(&request(4)).await.unwrap();
    assert!(answer.tokens.unwrap().output > 0, "{answer:?}");
}
