//! What runs spend, and the budgets that cap it: the [`Ledger`] a run tree's budget
//! keeps in this process (what the tree spent, what calls in flight may still cost, the
//! budgeted run's time running), and the [`Meter`] one attempt's model calls go through:
//! checked before they are made against what they could cost at most, recorded in the
//! store as in flight (so that a crash cannot lose their cost), and charged once they
//! answered.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use claij_core::Usage;
use claij_core::budget::{Budget, BudgetPause, Intent, Limit, PendingCalls, Spend};
use claij_core::store::{RunStore, StoreError};

/// The budget of one run, shared by the runs below it, as this process knows it: the
/// limit, what the run's tree had spent when the ledger was made plus what this process
/// charged since, the reservations of calls in flight, and the ledger of the budgeted run
/// above (whose budget the tree shares too). Cheap to clone.
#[derive(Clone)]
pub struct Ledger(Arc<Node>);

struct Node {
    run: String,
    limit: Mutex<Budget>,
    book: Mutex<Book>,
    parent: Option<Ledger>,
}

struct Book {
    /// The tree's tokens, cost and calls; the budgeted run's own time before `since`.
    spent: Spend,
    /// What calls in flight could still cost.
    reserved: Spend,
    /// When this process took the budgeted run up (its time runs), if it did.
    since: Option<Instant>,
}

impl Ledger {
    /// The ledger of run `run` with `limit`: its tree `spent` so far (its own time
    /// running in `spent.time_ms`), running now when `running` (this process drives it),
    /// under the ledger `parent` of the budgeted run above, if any.
    pub(crate) fn new(
        run: &str,
        limit: Budget,
        spent: Spend,
        running: bool,
        parent: Option<Ledger>,
    ) -> Ledger {
        Ledger(Arc::new(Node {
            run: run.to_owned(),
            limit: Mutex::new(limit),
            book: Mutex::new(Book {
                spent,
                reserved: Spend::default(),
                since: running.then(Instant::now),
            }),
            parent,
        }))
    }

    /// The run whose budget this is.
    pub fn run(&self) -> &str {
        &self.0.run
    }

    /// The budget.
    pub fn limit(&self) -> Budget {
        *self.0.limit.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The ledgers from this one up, nearest first.
    fn chain(&self) -> impl Iterator<Item = &Ledger> {
        std::iter::successors(Some(self), |l| l.0.parent.as_ref())
    }

    /// Whether some budget of the chain limits tokens or cost (calls' prompts must then
    /// be counted before they are made).
    pub fn limits_tokens_or_cost(&self) -> bool {
        self.chain().any(|l| l.limit().limits_tokens_or_cost())
    }

    /// The tree's spend as this ledger sees it now (time: the budgeted run's, while it
    /// runs counted to now).
    fn spent_now(book: &Book) -> Spend {
        let mut spent = book.spent;
        spent.add_calls(&book.reserved);
        if let Some(since) = book.since {
            spent.time_ms = spent
                .time_ms
                .saturating_add(u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX));
        }
        spent
    }

    /// Why this ledger's run stops: `over` of its `budget`, with `spent` so far and
    /// `asked` for the call refused (by `model`).
    fn pause(
        &self,
        over: Limit,
        budget: Budget,
        spent: Spend,
        asked: Spend,
        model: Option<&str>,
    ) -> Box<BudgetPause> {
        Box::new(BudgetPause {
            run: self.0.run.clone(),
            limit: over,
            budget,
            spent,
            asked,
            model: model.map(str::to_owned),
        })
    }

    /// Reserves `asked` in every budget of the chain, or says which one it would exceed.
    fn reserve(&self, asked: &Spend, model: Option<&str>) -> Result<(), Box<BudgetPause>> {
        let nodes: Vec<&Ledger> = self.chain().collect();
        // Every book of the chain locked (nearest first, always in that order), checked,
        // then charged: concurrent branches cannot both take the last of a budget.
        let mut books: Vec<_> = nodes
            .iter()
            .map(|l| l.0.book.lock().unwrap_or_else(|p| p.into_inner()))
            .collect();
        for (node, book) in nodes.iter().zip(&books) {
            let limit = node.limit();
            let spent = Self::spent_now(book);
            if let Some(over) = limit.exceeded_by(&spent, asked) {
                return Err(node.pause(over, limit, spent, *asked, model));
            }
        }
        for book in &mut books {
            book.reserved.add_calls(asked);
        }
        Ok(())
    }

    /// Charges what calls cost (`spent`) to every budget of the chain, releasing what
    /// they had reserved (`reserved`).
    pub(crate) fn charge(&self, reserved: &Spend, spent: &Spend) {
        for node in self.chain() {
            let mut book = node.0.book.lock().unwrap_or_else(|p| p.into_inner());
            book.reserved = minus(&book.reserved, reserved);
            book.spent.add_calls(spent);
        }
    }

    /// The first budget of the chain that is gone past (tokens, cost, calls: by what
    /// calls actually cost) or used up (time), if any: a run stops for it before its next
    /// attempt, whatever that attempt would do.
    pub(crate) fn exceeded(&self) -> Option<Box<BudgetPause>> {
        self.chain().find_map(|node| {
            let limit = node.limit();
            let book = node.0.book.lock().unwrap_or_else(|p| p.into_inner());
            let spent = Self::spent_now(&book);
            limit
                .exceeded_by(&spent, &Spend::default())
                .map(|over| node.pause(over, limit, spent, Spend::default(), None))
        })
    }
}

/// The ledger of the budgets above a run whose parent is `parent`, from the store: each
/// budgeted ancestor's limit and its tree's spend (a child continued on its own, its
/// ancestors not running in this process).
pub(crate) async fn stored_ledger(
    store: &dyn RunStore,
    parent: &str,
) -> Result<Option<Ledger>, StoreError> {
    let mut ancestors = Vec::new();
    let mut next = Some(parent.to_owned());
    while let Some(id) = next {
        let record = store.run(&id).await?;
        next = record.parent.clone();
        ancestors.push(record);
    }
    let mut ledger = None;
    for record in ancestors.into_iter().rev() {
        if let Some(limit) = record.budget {
            let mut spent = store.tree_spend(&record.id).await?;
            spent.time_ms = record.spend.time_ms;
            ledger = Some(Ledger::new(&record.id, limit, spent, false, ledger));
        }
    }
    Ok(ledger)
}

/// Milliseconds from `at` to now (none when `at` is in the future).
pub(crate) fn millis_since(at: std::time::SystemTime) -> u64 {
    let since = std::time::SystemTime::now()
        .duration_since(at)
        .unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

/// `a - b`, floored at nothing.
fn minus(a: &Spend, b: &Spend) -> Spend {
    Spend {
        input_tokens: a.input_tokens.saturating_sub(b.input_tokens),
        output_tokens: a.output_tokens.saturating_sub(b.output_tokens),
        cost_usd: (a.cost_usd - b.cost_usd).max(0.0),
        calls: a.calls.saturating_sub(b.calls),
        time_ms: a.time_ms,
        waiting_ms: a.waiting_ms,
    }
}

/// Why a model call may not be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refusal {
    /// It could go past a budget: the run stops for it.
    #[error("{0}")]
    Budget(Box<BudgetPause>),
    /// The call in flight could not be recorded in the store.
    #[error("the model call could not be recorded as in flight: {0}")]
    Store(StoreError),
}

/// The model calls of one attempt: every call an action makes (a state's answer, the
/// summary its model writes, the sampling an MCP server asks for during a tool call) goes
/// through it — [`before_call`](Self::before_call), then [`after_call`](Self::after_call)
/// — and the attempt's trail entry records what they cost together. Cheap to clone; a
/// meter made with [`Meter::unmetered`] checks and records nothing.
#[derive(Clone, Default)]
pub struct Meter(Option<Arc<MeterInner>>);

struct MeterInner {
    ledger: Option<Ledger>,
    durable: Option<(Arc<dyn RunStore>, String, String)>,
    tally: Mutex<Tally>,
}

impl Tally {
    /// What the calls that reported it cost, the calls that reported none counted in
    /// its `calls`.
    fn reported(&self) -> Option<Usage> {
        let mut usage = self.usage.clone()?;
        if self.unreported > 0 {
            usage.calls = Some(usage.calls.unwrap_or(1) + self.unreported);
        }
        Some(usage)
    }
}

#[derive(Default)]
struct Tally {
    /// What the calls that answered cost.
    usage: Option<Usage>,
    /// The calls made, at most what each could cost (kept in the store until the commit).
    pending: PendingCalls,
    /// What calls in flight could cost (asked, not answered yet).
    outstanding: Spend,
    /// The budget a call was refused for, if one was.
    pause: Option<Box<BudgetPause>>,
    /// Calls that failed before reporting what they cost.
    unreported: u32,
}

impl Meter {
    /// A meter that checks and records nothing (calls outside any run).
    pub fn unmetered() -> Meter {
        Meter(None)
    }

    /// The meter of one attempt of run `run_id`: calls checked against `ledger`, and (for
    /// durable runs) recorded in flight in `store` for `owner`.
    pub(crate) fn new(
        ledger: Option<Ledger>,
        durable: Option<(Arc<dyn RunStore>, String, String)>,
    ) -> Meter {
        Meter(Some(Arc::new(MeterInner {
            ledger,
            durable,
            tally: Mutex::new(Tally::default()),
        })))
    }

    fn tally(&self) -> Option<std::sync::MutexGuard<'_, Tally>> {
        self.0
            .as_ref()
            .map(|m| m.tally.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Whether a call's prompt must be counted to say what it could cost at most: a
    /// budget limits tokens or cost, or the run is durable (its calls in flight are
    /// recorded, at most, so that a crash cannot lose what they cost).
    pub fn needs_estimates(&self) -> bool {
        self.0.as_ref().is_some_and(|m| {
            m.durable.is_some() || m.ledger.as_ref().is_some_and(Ledger::limits_tokens_or_cost)
        })
    }

    /// Before a call to `model` that could cost at most `at_most` (its prompt's tokens and
    /// `max_tokens` at the model's prices, one call): refused when it could go past a
    /// budget of the run tree — the attempt then stops the run for it —, else reserved and
    /// (durable runs) recorded in the store as in flight.
    pub async fn before_call(&self, model: &str, at_most: Spend) -> Result<(), Refusal> {
        self.admit(model, at_most, true).await
    }

    /// [`before_call`](Self::before_call) for a call the attempt can do without (a
    /// summary): its refusal does not stop the run.
    pub async fn before_optional_call(&self, model: &str, at_most: Spend) -> Result<(), Refusal> {
        self.admit(model, at_most, false).await
    }

    async fn admit(&self, model: &str, at_most: Spend, stops: bool) -> Result<(), Refusal> {
        let Some(inner) = &self.0 else {
            return Ok(());
        };
        if let Some(ledger) = &inner.ledger
            && let Err(pause) = ledger.reserve(&at_most, Some(model))
        {
            if stops && let Some(mut tally) = self.tally() {
                tally.pause.get_or_insert_with(|| pause.clone());
            }
            return Err(Refusal::Budget(pause));
        }
        let pending = self.tally().map(|mut tally| {
            tally.outstanding.add_calls(&at_most);
            tally.pending.models.push(model.to_owned());
            tally.pending.at_most.add_calls(&at_most);
            tally.pending.clone()
        });
        if let (Some((store, run, owner)), Some(pending)) = (&inner.durable, pending)
            && let Err(e) = store.note_pending(run, owner, &pending).await
        {
            self.after_call(&at_most, None);
            return Err(Refusal::Store(e));
        }
        Ok(())
    }

    /// Before a side-effecting call (an MCP tool call, a program): in a durable run, notes
    /// `intent` in the store as in flight (with the attempt's model calls), so that a run
    /// taken over after a crash records that the call may have happened and makes it
    /// again under the same key. Fails only when the store cannot note it (the call must
    /// not be made then).
    pub async fn before_side_effect(&self, intent: Intent) -> Result<(), StoreError> {
        let Some(inner) = &self.0 else {
            return Ok(());
        };
        let Some((store, run, owner)) = &inner.durable else {
            return Ok(());
        };
        let pending = self.tally().map(|mut tally| {
            tally.pending.intents.push(intent);
            tally.pending.clone()
        });
        match pending {
            Some(pending) => store.note_pending(run, owner, &pending).await,
            None => Ok(()),
        }
    }

    /// After the call [`before_call`](Self::before_call) let through with `at_most`:
    /// what it cost (`None`: it failed before reporting any; it counts as a call, of no
    /// tokens — its entry then names the model and has no usage, as a provider's failure
    /// does).
    pub fn after_call(&self, at_most: &Spend, usage: Option<&Usage>) {
        let Some(inner) = &self.0 else {
            return;
        };
        let cost = usage.map_or(
            Spend {
                calls: 1,
                ..Spend::default()
            },
            Spend::of_usage,
        );
        // A budget gone past by what the call actually cost stops the run before its
        // next attempt (`Ledger::exceeded`).
        if let Some(ledger) = &inner.ledger {
            ledger.charge(at_most, &cost);
        }
        if let Some(mut tally) = self.tally() {
            tally.outstanding = minus(&tally.outstanding, at_most);
            match (usage, &mut tally.usage) {
                (None, _) => tally.unreported += 1,
                (Some(u), Some(sum)) => sum.add(u),
                (Some(u), None) => tally.usage = Some(u.clone()),
            }
        }
    }

    /// What the attempt's calls cost, when any reported it (the calls that reported none
    /// counted in its `calls`).
    pub(crate) fn usage(&self) -> Option<Usage> {
        self.tally().and_then(|t| t.reported())
    }

    /// What the attempt's calls cost, with the calls still in flight counted at most (an
    /// attempt cut short: its calls may have been paid for).
    pub(crate) fn usage_with_outstanding(&self) -> Option<Usage> {
        let tally = self.tally()?;
        let out = tally.outstanding;
        if out.calls == 0 {
            return tally.reported();
        }
        let mut usage = tally.reported().unwrap_or(Usage {
            calls: Some(0),
            ..Usage::default()
        });
        usage.add(&out.as_usage());
        Some(usage)
    }

    /// The budget a call of the attempt was refused for, if one was.
    pub(crate) fn pause(&self) -> Option<Box<BudgetPause>> {
        self.tally().and_then(|t| t.pause.clone())
    }

    /// Charges what an action reported without calling through the meter (an action of
    /// a library user's that calls a model itself).
    pub(crate) fn charge_reported(&self, usage: &Usage) {
        if let Some(ledger) = self.0.as_ref().and_then(|m| m.ledger.as_ref()) {
            ledger.charge(&Spend::default(), &Spend::of_usage(usage));
        }
    }
}
