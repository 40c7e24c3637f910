//! What a generation is asked for ([`GenerateOptions`]) and what it gives
//! ([`Generation`]), the signal that stops it early ([`StopSignal`]), and the streaming
//! of its text as whole UTF-8 characters.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The context a model is given: prompt and completion together fit in this many tokens.
pub const CONTEXT_TOKENS: u32 = 8192;

/// How tokens are chosen, and how many.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerateOptions {
    /// Softmax temperature; `0` picks the most likely token every time.
    pub temperature: f64,
    /// Top-p: choose among the most likely tokens whose probabilities add up to this.
    pub top_p: f64,
    /// The random seed: same seed, same messages, same output.
    pub seed: u64,
    /// At most this many new tokens.
    pub max_tokens: usize,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        Self {
            temperature: 0.7,
            top_p: 0.95,
            seed: 42,
            max_tokens: 512,
        }
    }
}

/// Stops a generation early: raised from any thread (an interrupt, a timeout, a caller
/// gone), it is seen before each new token and between the prompt's chunks, and the
/// generation then ends with [`GenerateError::Stopped`](crate::GenerateError::Stopped).
/// Clones share one signal.
#[derive(Debug, Clone, Default)]
pub struct StopSignal(Arc<AtomicBool>);

impl StopSignal {
    /// A signal not raised yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Raises the signal: the generation watching it stops at its next check.
    pub fn raise(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether the signal has been raised.
    pub fn is_raised(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// What a generation produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// The generated text (without the end-of-turn token).
    pub text: String,
    /// Tokens in the rendered prompt.
    pub prompt_tokens: usize,
    /// Prompt tokens actually computed: fewer than `prompt_tokens` when the model kept
    /// a common prefix from the previous generation's key/value cache.
    pub prefilled_tokens: usize,
    /// Tokens generated.
    pub completion_tokens: usize,
    /// Time to process the prompt (prefill) and compile or fetch the constraint.
    pub prompt_duration: Duration,
    /// Time spent generating the completion tokens.
    pub generate_duration: Duration,
}

impl Generation {
    /// Completion tokens per second of generation time.
    pub fn tokens_per_second(&self) -> f64 {
        let secs = self.generate_duration.as_secs_f64();
        if secs > 0.0 {
            self.completion_tokens as f64 / secs
        } else {
            0.0
        }
    }
}

/// Passes on the complete UTF-8 characters of `pending` and removes them, keeping an
/// unfinished character at its end for later; invalid bytes are passed on as
/// replacement characters. Nothing is passed on when there is nothing complete.
#[cfg_attr(not(feature = "llama-cpp"), allow(dead_code))]
pub(crate) fn emit_complete_chars(pending: &mut Vec<u8>, on_token: &mut dyn FnMut(&str)) {
    loop {
        match std::str::from_utf8(pending) {
            Ok(s) => {
                if !s.is_empty() {
                    on_token(s);
                }
                pending.clear();
                return;
            }
            Err(e) => {
                let cut = e.valid_up_to() + e.error_len().unwrap_or(0);
                if cut > 0 {
                    on_token(&String::from_utf8_lossy(&pending[..cut]));
                    pending.drain(..cut);
                }
                if e.error_len().is_none() {
                    // An unfinished character (or nothing) is left.
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `chunks` through [`emit_complete_chars`] as an engine does token by token,
    /// then flushes what is left as the engine does at the end; returns the pieces.
    fn stream(chunks: &[&[u8]]) -> Vec<String> {
        let mut pieces = Vec::new();
        let mut pending = Vec::new();
        for chunk in chunks {
            pending.extend_from_slice(chunk);
            emit_complete_chars(&mut pending, &mut |s| pieces.push(s.to_owned()));
        }
        if !pending.is_empty() {
            pieces.push(String::from_utf8_lossy(&pending).into_owned());
        }
        pieces
    }

    #[test]
    fn a_character_split_across_tokens_is_passed_on_whole() {
        // "é" is 0xC3 0xA9 and "€" is 0xE2 0x82 0xAC: tokens of byte-level BPE may split them.
        let pieces = stream(&[b"caf\xC3", b"\xA9 ", b"\xE2", b"\x82", b"\xAC!"]);
        assert_eq!(pieces.concat(), "café €!");
        assert!(pieces.iter().all(|p| !p.contains('\u{FFFD}')), "{pieces:?}");
        assert_eq!(pieces, ["caf", "é ", "€!"]);
    }

    #[test]
    fn invalid_bytes_become_replacement_characters_and_an_unfinished_tail_is_flushed() {
        let pieces = stream(&[b"a\xFFb", b"\xE2\x82"]);
        assert_eq!(pieces, ["a\u{FFFD}", "b", "\u{FFFD}"]);
    }

    #[test]
    fn a_raised_signal_is_seen_by_every_clone() {
        let signal = StopSignal::new();
        let seen_elsewhere = signal.clone();
        assert!(!seen_elsewhere.is_raised());
        let raiser = signal.clone();
        std::thread::spawn(move || raiser.raise()).join().unwrap();
        assert!(signal.is_raised() && seen_elsewhere.is_raised());
        assert!(!StopSignal::new().is_raised(), "a new signal is its own");
    }

    #[test]
    fn tokens_per_second_is_completion_tokens_over_generation_time() {
        let g = Generation {
            text: String::new(),
            prompt_tokens: 10,
            prefilled_tokens: 10,
            completion_tokens: 30,
            prompt_duration: Duration::from_millis(5),
            generate_duration: Duration::from_millis(1500),
        };
        assert!((g.tokens_per_second() - 20.0).abs() < 1e-9);
        let none = Generation {
            generate_duration: Duration::ZERO,
            ..g
        };
        assert_eq!(none.tokens_per_second(), 0.0);
    }
}
