//! Holding an MCP server's request open while the run waits on its question: the run is
//! committed suspended on the question (answerable from any process, as any question is),
//! with a hold saying this process keeps the request open until a time. An answerer that
//! comes before then records the answer and hands the run back to the queue; the holder,
//! watching the store, claims it again and gives the answer to the server in the request
//! it waits on — the tool runs once. When the hold ends unanswered, the holder claims the
//! run, writes the wait without the hold, and the attempt ends: the run waits on the
//! question, and the attempt is made again once it is answered.

use std::time::{Duration, SystemTime};

use claij_core::store::{Checkpoint, ClaimFrom, Lease, RunRecord, RunStatus, Wait};
use claij_core::{Answer, Failure, FailureKind, Question, State, TrailEntry};

use super::{CallRecord, RunState, to_micros};
use crate::action::Suspension;
use crate::durable::Durable;
use crate::questions::recorded;

/// How often a holder looks for an answer.
const POLL: Duration = Duration::from_millis(100);

/// How long past its end a hold still waits for an answerer it saw half-way (the run
/// claimed, the answer not yet handed back), and an answerer for a holder to take the run.
pub(crate) const GRACE: Duration = Duration::from_secs(2);

/// How a hold ended.
pub(super) enum Held {
    /// Answered in time: the run is this process's again; `entries` (the question's
    /// pause, the answer) are stored.
    Answered {
        answer: Answer,
        entries: Vec<TrailEntry>,
    },
    /// Not answered in time: the run waits on the question (`wait`); `entries` (the
    /// question's pause) are stored.
    Released {
        wait: Box<Wait>,
        entries: Vec<TrailEntry>,
    },
    /// Nothing was written (the store refused the suspension): the run stops for the
    /// question as one that is not held.
    Refused,
    /// The run was taken elsewhere meanwhile (interrupted, or answered and continued by
    /// another process once the hold was over).
    Lost,
}

/// What the holder saw of the run at one look.
enum Seen {
    /// Still waiting on the question, unanswered.
    Waiting,
    /// An answerer has it (claimed, not yet handed back).
    Answering,
    /// Answered and handed back to the queue: for the holder to take.
    HandedBack,
    /// Gone elsewhere: ended, or driven by another process.
    Gone,
}

fn seen(record: &RunRecord, question_seq: u64) -> Seen {
    match (record.status, &record.lease) {
        (RunStatus::Suspended, _) if record.trail_len == question_seq + 1 => Seen::Waiting,
        (RunStatus::Running, None) if record.trail_len > question_seq + 1 => Seen::HandedBack,
        (RunStatus::Running, Some(_)) if record.trail_len == question_seq + 1 => Seen::Answering,
        _ => Seen::Gone,
    }
}

impl RunState<'_> {
    /// What a run stopped for `question` in `state` waits for.
    pub(super) fn question_wait(&self, state: &State, question: &Question) -> Wait {
        let mut wait = self.wait_for(state, Suspension::default());
        wait.transitions = Vec::new();
        wait.schema = question.schema.clone();
        wait.prompt = Some(question.message.clone());
        wait.question = Some(Box::new(question.clone()));
        wait
    }

    /// The pause entry of attempt `attempt` of `state` stopping for `question`.
    pub(super) fn question_pause(
        &self,
        state: &State,
        question: &Question,
        attempt: u32,
        call: CallRecord,
        duration: Option<Duration>,
        at: SystemTime,
    ) -> TrailEntry {
        let failure = Failure {
            kind: FailureKind::Question,
            message: format!(
                "the MCP server `{}` asks: {}",
                question.server, question.message
            ),
            errors: Vec::new(),
            attempt,
        };
        let event = serde_json::to_value(question).unwrap_or_default();
        self.failure_entry(state, event, failure, call, duration, at)
    }

    /// Holds the request that asked `question` (attempt `attempt` of `state`) open for
    /// up to `window`, the run suspended on it meanwhile.
    pub(super) async fn hold(
        &self,
        state: &State,
        attempt: u32,
        question: &Question,
        window: Duration,
    ) -> Held {
        let Some(durable) = &self.durable else {
            return Held::Refused;
        };
        let now = SystemTime::now();
        let pause = self.question_pause(
            state,
            question,
            attempt,
            CallRecord::default(),
            None,
            to_micros(now),
        );
        let until = now + window;
        let mut wait = self.question_wait(state, question);
        wait.held = Some(Lease {
            owner: durable.owner.clone(),
            until,
        });
        let mut entries = self.trail[self.committed..].to_vec();
        entries.push(pause.clone());
        durable.begin_hold();
        let written = durable
            .store
            .commit(Checkpoint {
                run_id: self.run_id.clone(),
                owner: durable.owner.clone(),
                entries,
                status: RunStatus::Suspended,
                state: state.id.to_string(),
                context: self.context_dirty.then(|| self.context.clone()),
                wait: Some(wait.clone()),
                lease_until: None,
                published: self.published.clone(),
                spend: self.spend_now(),
            })
            .await;
        if let Err(e) = written {
            tracing::warn!(run = %self.run_id, error = %e, "could not hold a question's request");
            durable.end_hold(&self.run_id);
            return Held::Refused;
        }
        for o in &self.observers {
            o.entry_appended(&self.run_id, &pause);
            o.question_held(&self.run_id, question, until);
        }
        wait.held = None;
        self.watch(durable, state, pause, wait, until).await
    }

    /// Watches the store for an answer until `until` (sooner if the run is cancelled).
    async fn watch(
        &self,
        durable: &Durable,
        state: &State,
        pause: TrailEntry,
        wait: Wait,
        until: SystemTime,
    ) -> Held {
        let store = &durable.store;
        let lost = || {
            durable
                .lost
                .store(true, std::sync::atomic::Ordering::SeqCst);
            Held::Lost
        };
        loop {
            let now = SystemTime::now();
            let over = now >= until || self.cancel.is_cancelled();
            let seen = match store.run(&self.run_id).await {
                Ok(record) => seen(&record, pause.seq),
                // A passing store error: look again (the hold's end still bounds this).
                Err(_) if now < until + GRACE => Seen::Answering,
                Err(_) => Seen::Gone,
            };
            match seen {
                Seen::HandedBack => {
                    return self.take_back(durable, pause).await.unwrap_or_else(lost);
                }
                Seen::Gone => return lost(),
                Seen::Answering if now >= until + GRACE => return lost(),
                Seen::Waiting if over => {
                    let claim = store
                        .claim(
                            &self.run_id,
                            // The wait the question's pause began.
                            ClaimFrom::Suspended {
                                trail_len: pause.seq + 1,
                            },
                            &durable.owner,
                            durable.lease_until(),
                        )
                        .await;
                    // Refused: an answerer just claimed it; the next look says more.
                    if claim.is_ok() {
                        return self.release(durable, state, pause, wait).await;
                    }
                }
                Seen::Waiting | Seen::Answering => {}
            }
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = self.cancel.cancelled(), if !over => {}
            }
        }
    }

    /// Claims the run handed back with the answer; the entries after `pause` (the answer).
    async fn take_back(&self, durable: &Durable, pause: TrailEntry) -> Option<Held> {
        durable
            .store
            .claim(
                &self.run_id,
                ClaimFrom::Stale {
                    dead_owners: Vec::new(),
                },
                &durable.owner,
                durable.lease_until(),
            )
            .await
            .ok()?;
        let after = durable
            .store
            .trail(&self.run_id, pause.seq + 1)
            .await
            .ok()?;
        let answer = after
            .iter()
            .filter(|e| {
                e.failure
                    .as_deref()
                    .is_some_and(|f| f.kind == FailureKind::Answer)
            })
            .find_map(|e| recorded(&e.event))
            .map(|(_, answer)| answer)?;
        durable.end_hold(&self.run_id);
        let mut entries = vec![pause];
        entries.extend(after);
        Some(Held::Answered { answer, entries })
    }

    /// Writes the wait without its hold (the run claimed for that), leaving it suspended.
    async fn release(
        &self,
        durable: &Durable,
        state: &State,
        pause: TrailEntry,
        wait: Wait,
    ) -> Held {
        let written = durable
            .store
            .commit(Checkpoint {
                run_id: self.run_id.clone(),
                owner: durable.owner.clone(),
                entries: Vec::new(),
                status: RunStatus::Suspended,
                state: state.id.to_string(),
                context: None,
                wait: Some(wait.clone()),
                lease_until: None,
                published: Vec::new(),
                spend: self.spend_now(),
            })
            .await;
        durable.end_hold(&self.run_id);
        match written {
            Ok(()) => Held::Released {
                wait: Box::new(wait),
                entries: vec![pause],
            },
            Err(_) => Held::Lost,
        }
    }
}
