//! Record and replay: every model exchange of a run stored in a file (a digest of the
//! request, the request, the answer), and runs answered from such a file with no
//! network. Replay fails loudly on a request the file does not hold, naming its digest,
//! state and model.
//!
//! The file is JSON: `{"claij_exchanges": 1, "exchanges": [{"digest", "state", "model",
//! "request", "response"}, …]}`. The digest is SHA-256 over the request's JSON (model
//! name, messages, enforcement, decoding settings under `sampling`): keys and URLs are
//! not part of it, so a file recorded against one server replays anywhere. Equal
//! requests are answered in the order they were recorded.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

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
    /// The answer.
    pub response: ModelResponse,
}

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
        /// Answers by digest, in recorded order.
        answers: Mutex<HashMap<String, VecDeque<ModelResponse>>>,
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
        let mut answers: HashMap<String, VecDeque<ModelResponse>> = HashMap::new();
        for e in file.exchanges {
            answers.entry(e.digest).or_default().push_back(e.response);
        }
        Ok(Tape::Replay {
            path: path.to_owned(),
            answers: Mutex::new(answers),
        })
    }

    /// The recorded answer to `request` (replay), `None` when recording.
    pub fn answer(
        &self,
        request: &ModelRequest,
        state: &str,
    ) -> Option<Result<ModelResponse, String>> {
        let Tape::Replay { path, answers } = self else {
            return None;
        };
        let d = digest(request);
        let mut answers = answers.lock().unwrap_or_else(|p| p.into_inner());
        Some(
            answers
                .get_mut(&d)
                .and_then(VecDeque::pop_front)
                .ok_or_else(|| {
                    format!(
                        "replay: {} holds no answer to the request of state `{state}` to model `{}` (digest {d}); the run differs from the recorded one (record it again with --record)",
                        path.display(),
                        request.model
                    )
                }),
        )
    }

    /// Stores an exchange (recording); a no-op when replaying.
    pub fn store(
        &self,
        request: &ModelRequest,
        state: &str,
        response: &ModelResponse,
    ) -> Result<(), RecordError> {
        let Tape::Record { path, exchanges } = self else {
            return Ok(());
        };
        let mut exchanges = exchanges.lock().unwrap_or_else(|p| p.into_inner());
        exchanges.push(Exchange {
            digest: digest(request),
            state: state.to_owned(),
            model: request.model.clone(),
            request: serde_json::to_value(request).unwrap_or(Value::Null),
            response: response.clone(),
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
