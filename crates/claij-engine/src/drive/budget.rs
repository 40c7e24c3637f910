//! The budget's side of a run's loop: the `on_budget` route, the run's spend counted to
//! now, the calls a crashed process had in flight recorded on takeover, and the usage an
//! attempt's entry records.

use claij_core::budget::{BudgetPause, Spend};
use claij_core::{Failure, FailureKind, State};
use serde_json::{Value, json};

use super::{CallRecord, RunState};
use crate::spend::Meter;

impl RunState<'_> {
    /// A budget would be gone past: follow the state's `on_budget` route (once per drive)
    /// with an event carrying the pause.
    pub(super) fn on_budget_route(
        &mut self,
        state: &State,
        pause: &BudgetPause,
        attempt: u32,
    ) -> Option<usize> {
        let target = state.settings.on_budget.as_ref()?;
        if std::mem::replace(&mut self.budget_routed, true) {
            return None;
        }
        let t = self.fsm.transition_idx(&state.id, target)?;
        let event = json!({
            "id": self.fsm.transitions[t].id_value,
            "budget": pause,
            "state": &*state.id,
        });
        self.append_full(t, event, attempt, CallRecord::default(), None, None);
        Some(t)
    }

    /// Records the calls a crashed process had in flight (the store kept them): an
    /// `interrupted` entry in the current state with what its model calls could cost at
    /// most, which is counted as spent (they may have been paid for), and the
    /// side-effecting calls it noted, with their keys, as calls that may have happened.
    /// The entry is a pause, not an attempt: the attempt made again has the key it had.
    pub(crate) fn record_lost_calls(&mut self, pending: &claij_core::PendingCalls) {
        let Some(state) = self
            .trail
            .iter()
            .rev()
            .find(|e| e.is_transition())
            .and_then(|e| e.to.as_deref())
            .and_then(|id| self.fsm.state(id))
        else {
            return;
        };
        let at_most = pending.at_most;
        let usage = at_most.as_usage();
        if let Some(ledger) = &self.ledger {
            ledger.charge(&Spend::default(), &Spend::of_usage(&usage));
        }
        let attempt = self.attempts_here() + 1;
        self.append_failure(
            state,
            Value::Null,
            Failure {
                kind: FailureKind::Interrupted,
                message: lost_calls_message(pending),
                errors: Vec::new(),
                attempt,
            },
            CallRecord {
                usage: Some(Box::new(usage)),
                ..CallRecord::default()
            },
            None,
        );
    }

    /// What the run spent, its time running counted to now.
    pub(crate) fn spend_now(&self) -> Spend {
        let mut spend = self.spend;
        spend.time_ms = spend
            .time_ms
            .saturating_add(u64::try_from(self.taken_up.elapsed().as_millis()).unwrap_or(u64::MAX));
        spend
    }
}

/// What the entry of calls lost in a crash says: the model calls and what they are
/// counted as, then the side-effecting calls and their keys.
fn lost_calls_message(pending: &claij_core::PendingCalls) -> String {
    let mut parts = Vec::new();
    if pending.at_most.calls > 0 || !pending.models.is_empty() {
        parts.push(format!(
            "the process running this attempt stopped during {} model call(s) ({}); they are counted as spent at most",
            pending.at_most.calls,
            pending.models.join(", ")
        ));
    }
    match pending.intents.as_slice() {
        [] => {}
        [one] => parts.push(format!(
            "{one} was in flight when the process stopped; it may have happened, and the attempt made again sends the same key"
        )),
        many => parts.push(format!(
            "{} were made or in flight when the process stopped; they may have happened, and the attempt made again sends the same keys",
            many.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
    if parts.is_empty() {
        parts.push("the process running this attempt stopped during it".to_owned());
    }
    parts.join("; ")
}

/// The usage an attempt's entry records: what its calls through the meter cost, else
/// what the action reported itself (charged to the budget now).
pub(super) fn metered(
    meter: &Meter,
    reported: Option<Box<claij_core::Usage>>,
) -> Option<Box<claij_core::Usage>> {
    match meter.usage() {
        Some(usage) => Some(Box::new(usage)),
        None => {
            if let Some(usage) = &reported {
                meter.charge_reported(usage);
            }
            reported
        }
    }
}
