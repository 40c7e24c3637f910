//! Record and replay (the cassette): every exchange of a run with the world outside it
//! stored in a file — model calls, the programs `command` states start, the requests
//! `mcp` states make and the listings of the document's servers — each with a digest of
//! the request, the request, and what came back; and runs answered from such a file with
//! no network, no server started and no program run. Replay fails loudly on a request the
//! file does not hold, naming its digest and the state.
//!
//! The file is JSON: `{"claij_exchanges": 2, "exchanges": [entry, …]}`. A model entry is
//! `{"digest", "state", "model", "request", "response" | "error"}`; an `error`
//! (`{"provider", "message", "transient"}`: a call that failed after its retries, or a
//! request the provider refused, such as one that does not fit the embedded model's
//! context) replays as that failure. The digest is SHA-256 over the request's JSON (model
//! name, messages, enforcement, decoding settings under `sampling`): keys and URLs are
//! not part of it, so a file recorded against one server replays anywhere.
//!
//! Other entries carry a `kind` (an entry without one is a model's): `{"kind": "program" | "mcp", "digest",
//! "state", "request", "reply"}` (see [`claij_engine::cassette`]); their digest is
//! SHA-256 over the kind and the request's JSON with its keys sorted. Equal requests are
//! answered in the order they were recorded. A file of version 1 (written before there
//! were kinds, or merged by `claij eval`) holds models' exchanges only: replaying it,
//! programs run and servers are started as they were then.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use claij_engine::cassette::{Cassette, Kind, canonical};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::provider::ProviderError;
use crate::request::{ModelRequest, ModelResponse};

/// One stored exchange.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Exchange {
    /// What it is with: `program`, `mcp` (absent: a model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// SHA-256 of the request (hex).
    pub digest: String,
    /// The state that asked (for a server's listing, the document).
    pub state: String,
    /// The model (as named in the run; empty for other kinds).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model: String,
    /// The request (for people reading the file; replay goes by the digest).
    pub request: Value,
    /// The answer (absent when the call failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<ModelResponse>,
    /// The failure (absent when the call was answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RecordedFailure>,
    /// What came back (for other kinds than a model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<Value>,
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

/// The version of the files that hold whole runs (1: models' exchanges only).
const WHOLE_RUN: u32 = 2;

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
        /// The replies of the other kinds' exchanges by digest, in recorded order.
        replies: Mutex<HashMap<String, VecDeque<Value>>>,
        /// Whether the file holds the whole run (version 2): programs and MCP servers
        /// are answered from it too, not started.
        whole: bool,
    },
}

/// The digest of a request (hex SHA-256 of its JSON).
pub fn digest(request: &ModelRequest) -> String {
    hex(&serde_json::to_vec(request).unwrap_or_default())
}

/// The digest of a request of `kind` (hex SHA-256 of the kind and the request's JSON,
/// its keys sorted).
pub fn kind_digest(kind: Kind, request: &Value) -> String {
    let json = serde_json::to_vec(&json!([kind.as_str(), canonical(request)])).unwrap_or_default();
    hex(&json)
}

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What a request of another kind is, in a replay's failure: the program's argv, or the
/// server and method.
fn described(kind: Kind, request: &Value) -> String {
    match kind {
        Kind::Program => format!("the program {}", request["argv"]),
        Kind::Mcp => format!(
            "`{}` on the MCP server `{}`",
            request["method"].as_str().unwrap_or_default(),
            request["server"].as_str().unwrap_or_default()
        ),
    }
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
        let mut replies: HashMap<String, VecDeque<Value>> = HashMap::new();
        for (i, e) in file.exchanges.into_iter().enumerate() {
            if let Some(kind) = &e.kind {
                let Some(reply) = e.reply else {
                    return Err(io(format!(
                        "exchange {i} (state `{}`, kind `{kind}`) holds no `reply`",
                        e.state
                    )));
                };
                replies.entry(e.digest).or_default().push_back(reply);
                continue;
            }
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
            replies: Mutex::new(replies),
            whole: file.claij_exchanges >= WHOLE_RUN,
        })
    }

    /// The recorded answer to `request`, or its recorded failure (replay); `None` when
    /// recording.
    pub fn answer(
        &self,
        request: &ModelRequest,
        state: &str,
    ) -> Option<Result<ModelResponse, ProviderError>> {
        let Tape::Replay { path, answers, .. } = self else {
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
        Self::write(
            path,
            exchanges,
            Exchange {
                kind: None,
                digest: digest(request),
                state: state.to_owned(),
                model: request.model.clone(),
                request: serde_json::to_value(request).unwrap_or(Value::Null),
                response,
                error,
                reply: None,
            },
        )
    }

    /// Appends `exchange` and rewrites the file.
    fn write(
        path: &Path,
        exchanges: &Mutex<Vec<Exchange>>,
        exchange: Exchange,
    ) -> Result<(), RecordError> {
        let mut exchanges = exchanges.lock().unwrap_or_else(|p| p.into_inner());
        exchanges.push(exchange);
        let file = ExchangeFile {
            claij_exchanges: WHOLE_RUN,
            exchanges: exchanges.clone(),
        };
        let text = serde_json::to_string_pretty(&file).unwrap_or_default();
        std::fs::write(path, text + "\n").map_err(|e| RecordError::Io {
            path: path.to_owned(),
            message: e.to_string(),
        })
    }
}

/// The tape is the run's cassette: programs' and MCP servers' exchanges are recorded on
/// it, or answered from it, beside the models'.
impl Cassette for Tape {
    fn replaying(&self) -> bool {
        matches!(self, Tape::Replay { whole: true, .. })
    }

    fn replay(&self, kind: Kind, state: &str, request: &Value) -> Result<Value, String> {
        let Tape::Replay { path, replies, .. } = self else {
            return Err("this tape records; it answers nothing".to_owned());
        };
        let d = kind_digest(kind, request);
        let mut replies = replies.lock().unwrap_or_else(|p| p.into_inner());
        replies
            .get_mut(&d)
            .and_then(VecDeque::pop_front)
            .ok_or_else(|| {
                format!(
                    "replay: {} holds no reply to {} asked by `{state}` (request {request}, digest {d}); the run differs from the recorded one (record it again with --record)",
                    path.display(),
                    described(kind, request),
                )
            })
    }

    fn record(
        &self,
        kind: Kind,
        state: &str,
        request: &Value,
        reply: &Value,
    ) -> Result<(), String> {
        let Tape::Record { path, exchanges } = self else {
            return Ok(());
        };
        Self::write(
            path,
            exchanges,
            Exchange {
                kind: Some(kind.as_str().to_owned()),
                digest: kind_digest(kind, request),
                state: state.to_owned(),
                model: String::new(),
                request: request.clone(),
                response: None,
                error: None,
                reply: Some(reply.clone()),
            },
        )
        .map_err(|e| e.to_string())
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
    fn programs_and_servers_replay_beside_models_and_a_miss_names_the_state() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tape.json");
        let recorder = Tape::record(&path);
        assert!(!recorder.replaying());
        let answer = ModelResponse {
            text: "{}".into(),
            tool_call: None,
            tokens: None,
            retries: 0,
        };
        recorder
            .store(&request("a"), "s", &Ok(answer.clone()))
            .unwrap();
        let run = json!({"argv": ["sh", "-c", "date"], "stdin": {"a": 1, "b": 2}, "env": {}});
        Cassette::record(&recorder, Kind::Program, "p", &run, &json!({"n": 1})).unwrap();
        Cassette::record(&recorder, Kind::Program, "p", &run, &json!({"n": 2})).unwrap();
        let call = json!({"server": "fs", "method": "tools/call", "params": {"name": "x"}});
        Cassette::record(&recorder, Kind::Mcp, "m", &call, &json!({"result": {}})).unwrap();

        let player = Tape::replay(&path).unwrap();
        assert!(player.replaying());
        assert_eq!(player.answer(&request("a"), "s").unwrap(), Ok(answer));
        // Keys in another order are the same request; equal requests answer in order.
        let reordered = json!({"env": {}, "stdin": {"b": 2, "a": 1}, "argv": ["sh", "-c", "date"]});
        assert_eq!(
            player.replay(Kind::Program, "p", &reordered).unwrap(),
            json!({"n": 1})
        );
        assert_eq!(
            player.replay(Kind::Program, "p", &run).unwrap(),
            json!({"n": 2})
        );
        let miss = player.replay(Kind::Program, "p", &run).unwrap_err();
        assert!(
            miss.contains("asked by `p`") && miss.contains("sh"),
            "{miss}"
        );
        // The same request of another kind is another exchange.
        assert!(player.replay(Kind::Mcp, "m", &run).is_err());
        assert_eq!(
            player.replay(Kind::Mcp, "m", &call).unwrap(),
            json!({"result": {}})
        );
    }

    #[test]
    fn a_file_of_models_only_replays_models_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tape.json");
        let old = r#"{"claij_exchanges": 1, "exchanges": [{"digest": "d", "state": "s", "model": "m", "request": {}, "response": {"text": "{}"}}]}"#;
        std::fs::write(&path, old).unwrap();
        let player = Tape::replay(&path).unwrap();
        assert!(!player.replaying(), "programs run, servers start");
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
