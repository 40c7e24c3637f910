//! What runs spend and what they may: [`Spend`] (tokens, cost, model calls, time running
//! and waiting), [`Budget`] (limits on tokens, cost, calls and time, as a document's
//! `config.budget` or `claij run --budget` give them), [`BudgetPause`] (why a run tree
//! stopped for its budget) and [`PendingCalls`] (model calls in flight, kept by the store
//! so that a crash cannot lose what they cost).

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::trail::{FailureKind, TrailEntry, Usage};

/// What a run (or a run tree) spent: tokens, cost, model calls, and the time it spent
/// running and waiting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    /// Prompt tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Completion tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Cost in US dollars (calls to models without a price count nothing).
    #[serde(default)]
    pub cost_usd: f64,
    /// Model calls.
    #[serde(default)]
    pub calls: u64,
    /// Time running (its states' work), in milliseconds.
    #[serde(default)]
    pub time_ms: u64,
    /// Time suspended (waiting for a person, a timer, children or a budget), in
    /// milliseconds.
    #[serde(default)]
    pub waiting_ms: u64,
}

impl Spend {
    /// Tokens in and out.
    pub fn tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// Adds `other`'s tokens, cost and calls (not its times).
    pub fn add_calls(&mut self, other: &Spend) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cost_usd += other.cost_usd;
        self.calls = self.calls.saturating_add(other.calls);
    }

    /// Adds everything `other` holds, times included.
    pub fn add(&mut self, other: &Spend) {
        self.add_calls(other);
        self.time_ms = self.time_ms.saturating_add(other.time_ms);
        self.waiting_ms = self.waiting_ms.saturating_add(other.waiting_ms);
    }

    /// The tokens, cost and calls of one usage record (its `calls`, else one call).
    pub fn of_usage(usage: &Usage) -> Spend {
        Spend {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cost_usd: usage.cost_usd.unwrap_or(0.0),
            calls: u64::from(usage.calls.unwrap_or(1)),
            ..Spend::default()
        }
    }

    /// The usage record of these tokens, cost and calls (the inverse of
    /// [`Spend::of_usage`]; the times are not part of a usage record).
    pub fn as_usage(&self) -> Usage {
        Usage {
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cost_usd: Some(self.cost_usd),
            calls: Some(u32::try_from(self.calls).unwrap_or(u32::MAX)),
            ..Usage::default()
        }
    }

    /// The tokens, cost and calls of one trail entry: its usage, or one call without
    /// usage when it names a model (a call that failed before it reported any).
    pub fn of_entry(entry: &TrailEntry) -> Spend {
        match (&entry.usage, &entry.model) {
            (Some(usage), _) => Spend::of_usage(usage),
            (None, Some(_)) => Spend {
                calls: 1,
                ..Spend::default()
            },
            (None, None) => Spend::default(),
        }
    }

    /// The tokens, cost and calls of some trail entries.
    pub fn of_entries(entries: &[TrailEntry]) -> Spend {
        entries.iter().fold(Spend::default(), |mut sum, e| {
            sum.add_calls(&Spend::of_entry(e));
            sum
        })
    }
}

impl fmt::Display for Spend {
    /// `812 tokens (700 in, 112 out), $0.000400, 3 call(s), 1.8s running, 2h waiting`
    /// (waiting only when it did).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} tokens ({} in, {} out), ${:.6}, {} call(s), {} running",
            self.tokens(),
            self.input_tokens,
            self.output_tokens,
            self.cost_usd,
            self.calls,
            millis(self.time_ms)
        )?;
        if self.waiting_ms > 0 {
            write!(f, ", {} waiting", millis(self.waiting_ms))?;
        }
        Ok(())
    }
}

/// Milliseconds as a short duration (`1.8s`, `2h 3m`).
fn millis(ms: u64) -> String {
    if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        humantime::format_duration(Duration::from_secs(ms / 1000)).to_string()
    }
}

/// What a run tree may spend. Each limit is optional; a run's budget caps what the run and
/// all its children (sub-FSMs, branches) spend together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// Tokens in and out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Cost in US dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Model calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<u64>,
    /// Time running, in milliseconds (time suspended does not count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_ms: Option<u64>,
}

/// A budget limit a run would go past.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Limit {
    /// Tokens in and out.
    Tokens,
    /// Cost.
    Cost,
    /// Model calls.
    Calls,
    /// Time running.
    Time,
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Limit::Tokens => "tokens",
            Limit::Cost => "cost",
            Limit::Calls => "calls",
            Limit::Time => "time",
        })
    }
}

impl Budget {
    /// Whether no limit is set.
    pub fn is_empty(&self) -> bool {
        *self == Budget::default()
    }

    /// Whether a limit on tokens or cost is set (a model call's prompt must then be
    /// counted before it is made).
    pub fn limits_tokens_or_cost(&self) -> bool {
        self.tokens.is_some() || self.cost_usd.is_some()
    }

    /// This budget with the limits `over` sets put in place of its own.
    pub fn overridden_by(&self, over: &Budget) -> Budget {
        Budget {
            tokens: over.tokens.or(self.tokens),
            cost_usd: over.cost_usd.or(self.cost_usd),
            calls: over.calls.or(self.calls),
            time_ms: over.time_ms.or(self.time_ms),
        }
    }

    /// The first limit that `spent` plus `asked` goes past (time: reaches), if any.
    pub fn exceeded_by(&self, spent: &Spend, asked: &Spend) -> Option<Limit> {
        let mut total = *spent;
        total.add_calls(asked);
        if self.tokens.is_some_and(|l| total.tokens() > l) {
            return Some(Limit::Tokens);
        }
        // A cent's millionth of slack: sums of float prices must not cross on rounding.
        if self.cost_usd.is_some_and(|l| total.cost_usd > l + 1e-9) {
            return Some(Limit::Cost);
        }
        if self.calls.is_some_and(|l| total.calls > l) {
            return Some(Limit::Calls);
        }
        if self.time_ms.is_some_and(|l| spent.time_ms >= l) {
            return Some(Limit::Time);
        }
        None
    }

    /// Parses `cost=0.50,tokens=200k,calls=20,time=10m` (any of them, in any order;
    /// tokens and calls take `k` and `m` suffixes; cost may start with `$`).
    pub fn parse(text: &str) -> Result<Budget, String> {
        let mut budget = Budget::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part.split_once('=').ok_or_else(|| {
                format!("`{part}` is not KEY=VALUE (keys: tokens, cost, calls, time)")
            })?;
            let (key, value) = (key.trim(), value.trim());
            match key {
                "tokens" => budget.tokens = Some(count(value).map_err(|e| format!("tokens: {e}"))?),
                "calls" => budget.calls = Some(count(value).map_err(|e| format!("calls: {e}"))?),
                "cost" => {
                    let amount: f64 = value
                        .trim_start_matches('$')
                        .parse()
                        .map_err(|_| format!("cost: `{value}` is not an amount (like 0.50)"))?;
                    if !amount.is_finite() || amount < 0.0 {
                        return Err(format!("cost: `{value}` is not an amount of 0 or more"));
                    }
                    budget.cost_usd = Some(amount);
                }
                "time" => {
                    let d = humantime::parse_duration(value)
                        .map_err(|e| format!("time: `{value}`: {e} (like 90s, 10m, 1h)"))?;
                    budget.time_ms = Some(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
                }
                other => {
                    return Err(format!(
                        "unknown budget `{other}`; one of tokens, cost, calls, time"
                    ));
                }
            }
        }
        if budget.is_empty() {
            return Err("an empty budget; give one of tokens, cost, calls, time (like cost=0.50,tokens=200k)".into());
        }
        Ok(budget)
    }
}

/// A count with an optional `k` (thousand) or `m` (million) suffix.
pub fn count(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, scale) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1_000.0),
        Some((i, 'm' | 'M')) => (&t[..i], 1_000_000.0),
        _ => (t, 1.0),
    };
    let n: f64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a count (like 5000, 200k, 1.5m)"))?;
    if !n.is_finite() || n < 0.0 {
        return Err(format!("`{text}` is not a count of 0 or more"));
    }
    Ok((n * scale).round() as u64)
}

impl fmt::Display for Budget {
    /// `cost=0.5,tokens=200000,calls=20,time=10m`: what [`Budget::parse`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(c) = self.cost_usd {
            parts.push(format!("cost={c}"));
        }
        if let Some(t) = self.tokens {
            parts.push(format!("tokens={t}"));
        }
        if let Some(c) = self.calls {
            parts.push(format!("calls={c}"));
        }
        if let Some(t) = self.time_ms {
            parts.push(format!(
                "time={}",
                humantime::format_duration(Duration::from_millis(t))
            ));
        }
        f.write_str(&parts.join(","))
    }
}

/// Why a run stopped for a budget: whose budget, which limit, what the run tree had spent
/// and what the call it was about to make asked for at most. Kept in the suspended run's
/// wait, in its `budget` trail entry and in the event an `on_budget` route carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetPause {
    /// The run whose budget it is (the run itself, or the ancestor whose budget the tree
    /// shares).
    pub run: String,
    /// The limit gone past.
    pub limit: Limit,
    /// The budget.
    pub budget: Budget,
    /// What that run's tree had spent (its time: that run's time running).
    pub spent: Spend,
    /// What the call about to be made could cost at most (nothing when the limit was
    /// crossed by a call's actual cost, or by time).
    pub asked: Spend,
    /// The model that was about to be called, when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl fmt::Display for BudgetPause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let limit = match self.limit {
            Limit::Tokens => format!("{} tokens", self.budget.tokens.unwrap_or_default()),
            Limit::Cost => format!("${}", self.budget.cost_usd.unwrap_or_default()),
            Limit::Calls => format!("{} calls", self.budget.calls.unwrap_or_default()),
            Limit::Time => format!(
                "{} running",
                humantime::format_duration(Duration::from_millis(
                    self.budget.time_ms.unwrap_or_default()
                ))
            ),
        };
        write!(
            f,
            "the budget of run `{}` ({limit}) would be exceeded: spent {}",
            self.run, self.spent
        )?;
        if self.asked.calls > 0 {
            write!(
                f,
                "; the call to {} asks up to {} tokens, ${:.6}",
                self.model.as_deref().unwrap_or("the model"),
                self.asked.tokens(),
                self.asked.cost_usd
            )?;
        }
        Ok(())
    }
}

/// Calls a run has in flight (made, not yet committed with their trail entry): the model
/// calls, at most what they can cost, and the side-effecting calls (intents). The store
/// keeps them until the next commit; a run taken over after a crash records the model
/// calls as spent (at most), since they may have been paid for, and the intents as calls
/// that may have happened, which the re-attempt makes again under the same keys.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PendingCalls {
    /// The models called.
    pub models: Vec<String>,
    /// What the calls can cost at most.
    pub at_most: Spend,
    /// The side-effecting calls made (MCP tool calls, programs run, HTTP requests), in
    /// order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intents: Vec<Intent>,
}

/// A side-effecting call an attempt is about to make, noted in the store before it is
/// made: what kind of call, to what, and the idempotency key it carries. Never its
/// arguments or environment (they may hold secrets).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    /// What kind of call.
    pub kind: IntentKind,
    /// The tool called, the program run (as the document names it, `argv[0]`), or the
    /// HTTP request (`METHOD URL`, the URL without credentials, query or fragment).
    pub name: String,
    /// The MCP server the tool is called on (tool calls only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The idempotency key the call carries (`RUN:SEQ` for a program or an HTTP request,
    /// `RUN:SEQ:N` for the attempt's `N`th MCP request).
    pub key: String,
}

/// The kinds of side-effecting call an [`Intent`] notes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IntentKind {
    /// An MCP `tools/call`.
    Tool,
    /// A `command` state's program.
    Program,
    /// An `http` state's request (any method but `GET`, `HEAD` and `OPTIONS`).
    Request,
}

impl std::fmt::Display for Intent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.kind, &self.server) {
            (IntentKind::Tool, Some(server)) => write!(
                f,
                "a call to tool `{}` of MCP server `{server}` (key `{}`)",
                self.name, self.key
            ),
            (IntentKind::Tool, None) => {
                write!(f, "a call to tool `{}` (key `{}`)", self.name, self.key)
            }
            (IntentKind::Program, _) => {
                write!(f, "a run of program `{}` (key `{}`)", self.name, self.key)
            }
            (IntentKind::Request, _) => {
                write!(f, "the HTTP request `{}` (key `{}`)", self.name, self.key)
            }
        }
    }
}

/// Whether an entry records a pause rather than an attempt: a run stopped for its budget
/// there (`budget`) or for a server's question (`question`), the answer it was given
/// (`answer`), its move to another version of its FSM (`migrated`), or a model call lost
/// in a crash counted as spent (`interrupted` with usage). Such entries are not attempts and are not shown to models.
pub fn is_pause(entry: &TrailEntry) -> bool {
    entry.failure.as_deref().is_some_and(|f| {
        matches!(
            f.kind,
            FailureKind::Budget
                | FailureKind::Question
                | FailureKind::Answer
                | FailureKind::Migrated
        ) || (f.kind == FailureKind::Interrupted && entry.usage.is_some())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_parse_and_print_back() {
        let b = Budget::parse("cost=$0.50, tokens=200k,calls=20,time=10m").unwrap();
        assert_eq!(b.cost_usd, Some(0.5));
        assert_eq!(b.tokens, Some(200_000));
        assert_eq!(b.calls, Some(20));
        assert_eq!(b.time_ms, Some(600_000));
        assert_eq!(Budget::parse(&b.to_string()).unwrap(), b);
        assert_eq!(
            Budget::parse("tokens=1.5m").unwrap().tokens,
            Some(1_500_000)
        );
        for bad in [
            "",
            "cost",
            "cost=abc",
            "cost=-1",
            "tokens=lots",
            "time=soon",
            "money=3",
        ] {
            let e = Budget::parse(bad).unwrap_err();
            assert!(!e.is_empty(), "{bad}");
        }
        assert!(Budget::parse("money=3").unwrap_err().contains("money"));
    }

    #[test]
    fn a_document_s_budget_and_on_budget_routes_load() {
        let doc = r#"
id: capped
config: {budget: {tokens: 200k, cost: 0.5, calls: 20, time: 10m}}
states:
  - id: ask
    action: transform
    config: {template: '{"id": ["ask", "done"]}', on_budget: cheap}
  - {id: done, action: end}
  - {id: cheap, action: end}
xitions:
  - id: [start, ask]
  - id: [ask, done]
  - id: [ask, cheap]
"#;
        let fsm = crate::load_str("capped.yaml", doc, &crate::BuiltinNames).unwrap();
        assert_eq!(
            fsm.settings.budget,
            Some(Budget {
                tokens: Some(200_000),
                cost_usd: Some(0.5),
                calls: Some(20),
                time_ms: Some(600_000),
            })
        );
        assert_eq!(
            fsm.state("ask").unwrap().settings.on_budget.as_deref(),
            Some("cheap")
        );
        assert_eq!(fsm.state("ask").unwrap().config.get("on_budget"), None);
    }

    #[test]
    fn limits_are_crossed_by_what_is_asked_not_only_what_is_spent() {
        let b = Budget {
            cost_usd: Some(1.0),
            tokens: Some(1000),
            ..Budget::default()
        };
        let spent = Spend {
            input_tokens: 500,
            output_tokens: 100,
            cost_usd: 0.9,
            calls: 3,
            ..Spend::default()
        };
        let small = Spend {
            input_tokens: 100,
            cost_usd: 0.05,
            calls: 1,
            ..Spend::default()
        };
        assert_eq!(b.exceeded_by(&spent, &small), None);
        let big = Spend {
            input_tokens: 100,
            cost_usd: 0.2,
            calls: 1,
            ..Spend::default()
        };
        assert_eq!(b.exceeded_by(&spent, &big), Some(Limit::Cost));
        let long = Spend {
            input_tokens: 450,
            calls: 1,
            ..Spend::default()
        };
        assert_eq!(b.exceeded_by(&spent, &long), Some(Limit::Tokens));
        let timed = Budget {
            time_ms: Some(1000),
            ..Budget::default()
        };
        let ran = Spend {
            time_ms: 1000,
            ..Spend::default()
        };
        assert_eq!(
            timed.exceeded_by(&ran, &Spend::default()),
            Some(Limit::Time)
        );
        assert_eq!(
            b.overridden_by(&Budget {
                cost_usd: Some(2.0),
                ..Budget::default()
            }),
            Budget {
                cost_usd: Some(2.0),
                tokens: Some(1000),
                ..Budget::default()
            }
        );
    }
}
