//! Record and replay: every model exchange of a run stored in a file (a digest of the
//! request, the request, the answer or the provider's failure), and runs answered from
//! such a file with no network. Replay fails loudly on a request the file does not hold,
//! naming its digest, state and model.
//!
//! The file is JSON: `{"claij_exchanges": 1, "exchanges": [{"digest", "state", "model",
//! "request", "response" | "error"}, …]}`; an `error` (`{"provider", "message",
//! "transient"}`: a call that failed after its retries, or a request the provider refused,
//! such as one that does not fit the embedded model's context) replays as that failure. The digest is SHA-256 over the request's JSON (model
//! name, messages, enforcement, decoding settings under `sampling`): keys and URLs are
//! not part of it, so a file recorded against one server replays anywhere. Equal
//! requests are answered in the order they were recorded.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::provider::ProviderError;
use crate::request::{ModelRequest, ModelResponse};

/// One stored exchange.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Exchange {
    /// SHA-256 of the request (hex).
    pub digest: String,
    /// The state that asked.
    pub state: String,
    /// The model (as named in the run).
    pub model: String,
    /// The request (for people reading the file; replay goes by the digest).
    pub request: Value,
    /// The answer (absent when the call failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<ModelResponse>,
    /// The failure (absent when the call was answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RecordedFailure>,
}

/// A call that failed, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedFailure {
    /// The provider's name.
    pub provider: String,
    /// What happened (never a key: provider errors never carry one).
    pub message: String,
    /// Whether it was a failure that may pass (retried, and still failing).
    #[serde(default)]
    pub transient: bool,
}

impl RecordedFailure {
    /// The failure as recorded, for a provider error; `None` for a replay's own miss.
    fn of(error: &ProviderError) -> Option<Self> {
        match error {
            ProviderError::Transient {
                provider, message, ..
            } => Some(Self {
                provider: provider.clone(),
                message: message.clone(),
                transient: true,
            }),
            ProviderError::Permanent { provider, message } => Some(Self {
                provider: provider.clone(),
                message: message.clone(),
                transient: false,
            }),
            ProviderError::NotRecorded(_) => None,
        }
    }

    /// The provider error it replays as.
    fn replayed(self) -> ProviderError {
        if self.transient {
            ProviderError::Transient {
                provider: self.provider,
                message: self.message,
                retry_after: None,
            }
        } else {
            ProviderError::Permanent {
                provider: self.provider,
                message: self.message,
            }
        }
    }
}

/// What a recorded call gave.
type Outcome = Result<ModelResponse, ProviderError>;

#[derive(Debug, Serialize, Deserialize)]
struct ExchangeFile {
    claij_exchanges: u32,
    exchanges: Vec<Exchange>,
}

/// Record/replay failed.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The file could not be read or written.
    #[error("exchange file {path}: {message}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

/// What happens to model calls.
#[derive(Debug)]
pub enum Tape {
    /// Calls go to the providers and are appended to the file (rewritten after each).
    Record {
        /// The file.
        path: PathBuf,
        /// What was recorded so far.
        exchanges: Mutex<Vec<Exchange>>,
    },
    /// Calls are answered from the file.
    Replay {
        /// The file.
        path: PathBuf,
        /// Answers (or failures) by digest, in recorded order.
        answers: Mutex<HashMap<String, VecDeque<Outcome>>>,
    },
}

/// The digest of a request (hex SHA-256 of its JSON).
pub fn digest(request: &ModelRequest) -> String {
    let json = serde_json::to_vec(request).unwrap_or_default();
    let hash = Sha256::digest(&json);
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

impl Tape {
    /// Records into `path` (created or truncated when the first exchange is written).
    pub fn record(path: &Path) -> Self {
        Tape::Record {
            path: path.to_owned(),
            exchanges: Mutex::new(Vec::new()),
        }
    }

    /// Replays from `path`.
    pub fn replay(path: &Path) -> Result<Self, RecordError> {
        let io = |message: String| RecordError::Io {
            path: path.to_owned(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| io(e.to_string()))?;
        let file: ExchangeFile =
            serde_json::from_str(&text).map_err(|e| io(format!("not an exchange file: {e}")))?;
        let mut answers: HashMap<String, VecDeque<Outcome>> = HashMap::new();
        for (i, e) in file.exchanges.into_iter().enumerate() {
            let outcome = match (e.response, e.error) {
                (Some(response), None) => Ok(response),
                (None, Some(error)) => Err(error.replayed()),
                _ => {
                    return Err(io(format!(
                        "exchange {i} (state `{}`) must hold exactly one of `response` and `error`",
                        e.state
                    )));
                }
            };
            answers.entry(e.digest).or_default().push_back(outcome);
        }
        Ok(Tape::Replay {
            path: path.to_owned(),
            answers: Mutex::new(answers),
        })
    }

    /// The recorded answer to `request`, or its recorded failure (replay); `None` when
    /// recording.
    pub fn answer(
        &self,
        request: &ModelRequest,
        state: &str,
    ) -> Option<Result<ModelResponse, ProviderError>> {
        let Tape::Replay { path, answers } = self else {
            return None;
        };
        let d = digest(request);
        let mut answers = answers.lock().unwrap_or_else(|p| p.into_inner());
        Some(
            answers
                .get_mut(&d)
                .and_then(VecDeque::pop_front)
                .unwrap_or_else(|| {
                    Err(ProviderError::NotRecorded(format!(
                        "replay: {} holds no answer to the request of state `{state}` to model `{}` (digest {d}); the run differs from the recorded one (record it again with --record)",
                        path.display(),
                        request.model
                    )))
                }),
        )
    }

    /// Stores an exchange, answered or failed (recording); a no-op when replaying.
    pub fn store(
        &self,
        request: &ModelRequest,
        state: &str,
        outcome: &Outcome,
    ) -> Result<(), RecordError> {
        let Tape::Record { path, exchanges } = self else {
            return Ok(());
        };
        let (response, error) = match outcome {
            Ok(response) => (Some(response.clone()), None),
            Err(e) => match RecordedFailure::of(e) {
                Some(failure) => (None, Some(failure)),
                None => return Ok(()),
            },
        };
        let mut exchanges = exchanges.lock().unwrap_or_else(|p| p.into_inner());
        exchanges.push(Exchange {
            digest: digest(request),
            state: state.to_owned(),
            model: request.model.clone(),
            request: serde_json::to_value(request).unwrap_or(Value::Null),
            response,
            error,
        });
        let file = ExchangeFile {
            claij_exchanges: 1,
            exchanges: exchanges.clone(),
        };
        let text = serde_json::to_string_pretty(&file).unwrap_or_default();
        std::fs::write(path, text + "\n").map_err(|e| RecordError::Io {
            path: path.to_owned(),
            message: e.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::enforce::Mode;
    use crate::request::{Decoding, Enforcement};
    use claij_core::Message;

    fn request(text: &str) -> ModelRequest {
        ModelRequest {
            traceparent: None,
            model: "m".into(),
            messages: vec![Message::user(text)],
            enforcement: Enforcement {
                mode: Mode::Prompt,
                schema: Value::Null,
                tools: Vec::new(),
            },
            decoding: Decoding::default(),
        }
    }

    #[test]
    fn answers_and_failures_replay_as_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tape.json");
        let recorder = Tape::record(&path);
        let answer = ModelResponse {
            text: "{}".into(),
            tool_call: None,
            tokens: None,
            retries: 0,
        };
        let refused = ProviderError::Permanent {
            provider: "embedded".into(),
            message: "the prompt does not fit".into(),
        };
        let flaky = ProviderError::Transient {
            provider: "p".into(),
            message: "503".into(),
            retry_after: None,
        };
        recorder
            .store(&request("a"), "s", &Ok(answer.clone()))
            .unwrap();
        recorder
            .store(&request("b"), "s", &Err(refused.clone()))
            .unwrap();
        recorder
            .store(&request("c"), "s", &Err(flaky.clone()))
            .unwrap();
        // A replay's own miss is not a provider's answer: never recorded.
        recorder
            .store(
                &request("d"),
                "s",
                &Err(ProviderError::NotRecorded("x".into())),
            )
            .unwrap();

        let player = Tape::replay(&path).unwrap();
        assert_eq!(player.answer(&request("a"), "s").unwrap(), Ok(answer));
        assert_eq!(player.answer(&request("b"), "s").unwrap(), Err(refused));
        assert_eq!(player.answer(&request("c"), "s").unwrap(), Err(flaky));
        let miss = player.answer(&request("d"), "s").unwrap().unwrap_err();
        assert!(matches!(miss, ProviderError::NotRecorded(m) if m.contains("state `s`")));
        assert!(Tape::record(&path).answer(&request("a"), "s").is_none());
    }

    #[test]
    fn an_exchange_with_neither_answer_nor_failure_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tape.json");
        let bad = r#"{"claij_exchanges": 1, "exchanges": [{"digest": "d", "state": "s", "model": "m", "request": {}}]}"#;
        std::fs::write(&path, bad).unwrap();
        let e = Tape::replay(&path).unwrap_err().to_string();
        assert!(e.contains("exchange 0 (state `s`)"), "{e}");
    }
}
