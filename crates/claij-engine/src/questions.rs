//! The questions MCP servers put to a person during one attempt (`elicitation/create`).
//! In a durable run, a question is answered from the answers the run was given at this
//! state (recorded in its trail); else the run is suspended on it while the server's
//! request is held open ([`Questions::hold`]: an answer given meanwhile goes straight back
//! to the server), or it stops the run: the attempt ends, the run is suspended on the
//! question, and the answer it is resumed with lets the attempt be made again — the
//! server, asking again, gets that answer. Without a store there is nowhere to wait, and
//! the person is asked where the action runs (the terminal).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use claij_core::budget::is_pause;
use claij_core::{Answer, FailureKind, Question, TrailEntry};
use serde_json::Value;

use crate::error::InputError;

/// One attempt's questions: what it can answer, and the one it stopped for.
#[derive(Clone, Default)]
pub struct Questions(Option<Arc<Inner>>);

struct Inner {
    answered: Vec<(Question, Answer)>,
    asked: Mutex<Option<Question>>,
    /// Where holds are asked for: the loop driving the attempt.
    holds: Option<mpsc::UnboundedSender<HoldRequest>>,
}

/// A question to hold the server's request open for, and where its answer goes (`None`:
/// none came within the hold; the run waits on the question, or was taken elsewhere).
pub(crate) struct HoldRequest {
    pub question: Question,
    pub window: Duration,
    pub reply: oneshot::Sender<Option<Answer>>,
}

impl Questions {
    /// No waiting: questions are for whoever can answer where the action runs.
    pub fn none() -> Self {
        Self(None)
    }

    /// A durable attempt's questions, answered by the answers given since the state was
    /// entered (the `answer` entries of `trail` after its last transition).
    pub(crate) fn durable(
        trail: &[TrailEntry],
        holds: Option<mpsc::UnboundedSender<HoldRequest>>,
    ) -> Self {
        let answered = trail
            .iter()
            .rev()
            .take_while(|e| !e.is_transition())
            .filter(|e| is_pause(e))
            .filter(|e| {
                e.failure
                    .as_deref()
                    .is_some_and(|f| f.kind == FailureKind::Answer)
            })
            .filter_map(|e| recorded(&e.event))
            .collect();
        Self(Some(Arc::new(Inner {
            answered,
            asked: Mutex::new(None),
            holds,
        })))
    }

    /// Whether a question with no answer stops the run (a durable run) rather than being
    /// put to someone where the action runs.
    pub fn wait_for_answers(&self) -> bool {
        self.0.is_some()
    }

    /// The answer the run was given to `question` (the same server, message and schema).
    pub fn answer_for(&self, question: &Question) -> Option<Answer> {
        self.0
            .as_ref()?
            .answered
            .iter()
            .find_map(|(q, a)| (q == question).then(|| a.clone()))
    }

    /// Holds the server's request open for `question` for up to `window`: the run is
    /// suspended on it meanwhile (answerable from any process), and an answer given in
    /// time is returned here, to go back to the server. `None` when nothing came in time
    /// (the run then waits on the question, and the attempt, whatever it makes of the
    /// missing answer, is not recorded), or when the run cannot hold (then it stops for
    /// the question as [`ask`](Self::ask) does).
    pub async fn hold(&self, question: Question, window: Duration) -> Option<Answer> {
        let inner = self.0.as_ref()?;
        let Some(holds) = inner.holds.as_ref().filter(|_| !window.is_zero()) else {
            self.ask(question);
            return None;
        };
        let (reply, answer) = oneshot::channel();
        let request = HoldRequest {
            question: question.clone(),
            window,
            reply,
        };
        if holds.send(request).is_err() {
            self.ask(question);
            return None;
        }
        answer.await.ok().flatten()
    }

    /// Stops the run for `question` once the attempt ends (the first one asked counts).
    pub fn ask(&self, question: Question) {
        if let Some(inner) = &self.0 {
            inner
                .asked
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert(question);
        }
    }

    /// The question the attempt stopped for, if any.
    pub fn asked(&self) -> Option<Question> {
        self.0
            .as_ref()?
            .asked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// An `answer` entry's event: `{"question": …, "answer": ElicitResult}`.
pub(crate) fn recorded(event: &Value) -> Option<(Question, Answer)> {
    let question: Question = serde_json::from_value(event.get("question")?.clone()).ok()?;
    let answer = Answer::parse(event.get("answer")?).ok()?;
    Some((question, answer))
}

/// `input` as an answer to `question`, or why not (the field and the rule).
pub(crate) fn checked_answer(question: &Question, input: &Value) -> Result<Answer, InputError> {
    question
        .answer(input)
        .map_err(|message| InputError::Answer {
            server: question.server.clone(),
            message,
        })
}

/// The event of the entry recording `answer` to `question`.
pub(crate) fn answer_event(question: &Question, answer: &Answer) -> Value {
    serde_json::json!({"question": question, "answer": answer.to_result()})
}
