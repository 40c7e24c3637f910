//! [`TraceObserver`]: a run's life as spans, from what the engine tells its observers.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use claij_core::budget::is_pause;
use claij_core::{State, TrailEntry};
use claij_engine::{Call, CallSite, Commit, ModelExchange, Observer, RunBegan, RunStatus};
use opentelemetry::trace::{
    Link, SpanBuilder, SpanContext, SpanKind, Status, TraceContextExt, TraceFlags, TraceState,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::SdkTracer;
use serde_json::Value;

use crate::ids::{self, run_span, trace_of, with_ids};

/// The spans of the runs under way in this process.
struct RunSpans {
    /// The run's span (its stretch in this process).
    run: Context,
    /// The attempt under way, if one is, and when it began.
    attempt: Option<(Context, SystemTime)>,
    /// The run's `mcp` states (their attempts' results answer MCP requests).
    mcp_states: HashSet<String>,
    /// The event that brought the run to an `mcp` state (its requests), while it is there.
    entered: Option<Value>,
    /// What the attempt's model call was sent and answered, as its span's attributes, when
    /// content is recorded: until the attempt's entry makes the span.
    exchange: Option<Vec<KeyValue>>,
}

/// When a call made during an attempt begun at `began` started: the entry's duration is
/// its attempt's, so the call lies within the attempt.
fn call_start(entry: &TrailEntry, began: Option<SystemTime>) -> SystemTime {
    let took = Duration::from_millis(entry.duration_ms.unwrap_or(0));
    let started = entry.at.checked_sub(took).unwrap_or(entry.at);
    began.map_or(started, |b| started.max(b))
}

/// Turns the runs an engine drives into spans: `invoke_workflow {fsm}` per run, one per
/// state attempt, `chat {model}` per model call (from the trail entry that records it),
/// `execute_tool {tool}` per MCP tool call of an `mcp` state.
pub struct TraceObserver {
    tracer: SdkTracer,
    runs: Mutex<HashMap<String, RunSpans>>,
    /// Whether `chat` spans record what the model was sent and answered.
    content: bool,
}

impl std::fmt::Debug for TraceObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceObserver").finish_non_exhaustive()
    }
}

/// The context of a span another process started (or will have started): the run's first
/// stretch, whose ids are derived from its id.
pub(crate) fn remote(run_id: &str) -> Context {
    Context::new().with_remote_span_context(SpanContext::new(
        trace_of(run_id),
        run_span(run_id),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    ))
}

impl TraceObserver {
    /// An observer making spans with `tracer`.
    pub fn new(tracer: SdkTracer) -> Self {
        TraceObserver {
            tracer,
            runs: Mutex::new(HashMap::new()),
            content: false,
        }
    }

    /// Whether `chat` spans record what the model was sent and answered
    /// (`gen_ai.system_instructions`, `gen_ai.input.messages`, `gen_ai.output.messages`):
    /// off unless the user opts in ([`crate::content::capture_from_env`]).
    pub fn recording_content(mut self, content: bool) -> Self {
        self.content = content;
        self
    }

    fn with_runs<T>(&self, f: impl FnOnce(&mut HashMap<String, RunSpans>) -> T) -> T {
        let mut runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut runs)
    }

    /// Where a run's span goes: under its parent's attempt when the parent runs here; else
    /// under the first stretch of its parent (a child) or of itself (a run taken up again).
    fn parent_of(&self, runs: &HashMap<String, RunSpans>, began: &RunBegan<'_>) -> Context {
        if began.resumed {
            return remote(began.run_id);
        }
        match began.parent {
            Some(parent) => match runs.get(parent) {
                Some(spans) => spans
                    .attempt
                    .as_ref()
                    .map_or_else(|| spans.run.clone(), |(cx, _)| cx.clone()),
                None => remote(parent),
            },
            None => Context::new(),
        }
    }
}

/// The attributes of a model call, from the entry that records it.
fn chat_attributes(entry: &TrailEntry, model: &str) -> Vec<KeyValue> {
    let provider = crate::provider_of(model);
    let mut attributes = vec![
        KeyValue::new("gen_ai.operation.name", "chat"),
        KeyValue::new("gen_ai.provider.name", provider.to_owned()),
        KeyValue::new("gen_ai.request.model", model.to_owned()),
        KeyValue::new("gen_ai.response.model", model.to_owned()),
        KeyValue::new("claij.state", entry.from.to_string()),
    ];
    if let Some(usage) = entry.usage.as_deref() {
        attributes.push(KeyValue::new(
            "gen_ai.usage.input_tokens",
            i64::try_from(usage.input_tokens).unwrap_or(i64::MAX),
        ));
        attributes.push(KeyValue::new(
            "gen_ai.usage.output_tokens",
            i64::try_from(usage.output_tokens).unwrap_or(i64::MAX),
        ));
        if let Some(cost) = usage.cost_usd {
            attributes.push(KeyValue::new("claij.cost_usd", cost));
        }
        attributes.push(KeyValue::new(
            "claij.model_calls",
            i64::from(usage.calls.unwrap_or(1)),
        ));
    }
    if let Some(enforce) = &entry.enforce {
        attributes.push(KeyValue::new("claij.enforce", enforce.clone()));
    }
    attributes
}

/// The spans of the MCP requests an `mcp` attempt made (`requested`: the event that
/// brought the run to the state, `{"requests": […]}` or one request; `answered`: the
/// event it left with, `{"results": […]}` in the same order): `execute_tool {tool}` for a
/// tool call, `{method}` for another request; with the server's error, when it failed.
fn mcp_requests(requested: Option<&Value>, answered: &Value) -> Vec<(SpanBuilder, Option<String>)> {
    let Some(results) = answered.get("results").and_then(Value::as_array) else {
        return Vec::new();
    };
    let requests: Vec<&Value> = match requested {
        Some(event) => match event.get("requests").and_then(Value::as_array) {
            Some(list) => list.iter().collect(),
            None => vec![event],
        },
        None => Vec::new(),
    };
    results
        .iter()
        .enumerate()
        .map(|(i, result)| {
            let method = result["method"].as_str().unwrap_or("?").to_owned();
            let server = result["server"].as_str().unwrap_or("?").to_owned();
            let tool = requests
                .get(i)
                .and_then(|r| r["params"]["name"].as_str())
                .filter(|_| method == "tools/call");
            let mut attributes = vec![
                KeyValue::new("claij.mcp.server", server),
                KeyValue::new("claij.mcp.method", method.clone()),
            ];
            let name = match tool {
                Some(tool) => {
                    attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
                    attributes.push(KeyValue::new("gen_ai.tool.name", tool.to_owned()));
                    format!("execute_tool {tool}")
                }
                None => method,
            };
            let failed = result.get("error").map(|e| match e.as_str() {
                Some(text) => text.to_owned(),
                None => e.to_string(),
            });
            let builder = SpanBuilder::from_name(name)
                .with_kind(SpanKind::Client)
                .with_attributes(attributes);
            (builder, failed)
        })
        .collect()
}

impl Observer for TraceObserver {
    fn run_began(&self, began: &RunBegan<'_>) {
        self.with_runs(|runs| {
            let parent = self.parent_of(runs, began);
            let mut attributes = vec![
                KeyValue::new("gen_ai.operation.name", "invoke_workflow"),
                KeyValue::new("claij.run.id", began.run_id.to_owned()),
                KeyValue::new("claij.fsm.id", began.fsm.id.to_string()),
                KeyValue::new("claij.fsm.version", i64::from(began.fsm.version)),
                KeyValue::new("claij.resumed", began.resumed),
            ];
            if let Some(p) = began.parent {
                attributes.push(KeyValue::new("claij.parent.run.id", p.to_owned()));
            }
            let builder = SpanBuilder::from_name(format!("invoke_workflow {}", began.fsm.id))
                .with_kind(SpanKind::Internal)
                .with_attributes(attributes);
            let span = if began.resumed {
                // It goes on from where the run was left (its first stretch, also its
                // parent): a span link, so viewers show the resume as following from it.
                let left = Link::with_context(parent.span().span_context().clone());
                builder
                    .with_links(vec![left])
                    .start_with_context(&self.tracer, &parent)
            } else {
                // A run's first stretch has the span its later ones (and its children
                // elsewhere) continue.
                with_ids(trace_of(began.run_id), run_span(began.run_id), || {
                    builder.start_with_context(&self.tracer, &parent)
                })
            };
            let run = parent.with_span(span);
            if let Some(old) = runs.insert(
                began.run_id.to_owned(),
                RunSpans {
                    run,
                    attempt: None,
                    mcp_states: began
                        .fsm
                        .states
                        .iter()
                        .filter(|s| &*s.action == "mcp")
                        .map(|s| s.id.to_string())
                        .collect(),
                    entered: None,
                    exchange: None,
                },
            ) {
                old.run.span().end();
            }
        });
    }

    fn attempt_started(&self, run_id: &str, state: &State, attempt: u32) {
        self.with_runs(|runs| {
            let Some(spans) = runs.get_mut(run_id) else {
                return;
            };
            if let Some((open, _)) = spans.attempt.take() {
                open.span().end();
            }
            spans.exchange = None;
            let now = SystemTime::now();
            let span = SpanBuilder::from_name(state.id.to_string())
                .with_kind(SpanKind::Internal)
                .with_attributes([
                    KeyValue::new("claij.state", state.id.to_string()),
                    KeyValue::new("claij.action", state.action.to_string()),
                    KeyValue::new("claij.attempt", i64::from(attempt)),
                ])
                .with_start_time(now)
                .start_with_context(&self.tracer, &spans.run);
            spans.attempt = Some((spans.run.with_span(span), now));
        });
    }

    fn entry_appended(&self, run_id: &str, entry: &TrailEntry) {
        self.with_runs(|runs| {
            let Some(spans) = runs.get_mut(run_id) else {
                return;
            };
            let (under, began) = match &spans.attempt {
                Some((cx, at)) => (cx, Some(*at)),
                None => (&spans.run, None),
            };
            let trace = under.span().span_context().trace_id();
            // A call's span has the id its `traceparent` gave the called service.
            let call_span = |call: Call| ids::call_span(run_id, &entry.from, entry.attempt, call);
            if let Some(model) = &entry.model {
                let mut attributes = chat_attributes(entry, model);
                attributes.extend(spans.exchange.take().unwrap_or_default());
                let builder = SpanBuilder::from_name(format!("chat {model}"))
                    .with_kind(SpanKind::Client)
                    .with_start_time(call_start(entry, began))
                    .with_attributes(attributes);
                let chat = with_ids(trace, call_span(Call::Model), || {
                    builder.start_with_context(&self.tracer, under)
                });
                under.with_span(chat).span().end_with_timestamp(entry.at);
            }
            if entry.is_transition() && spans.mcp_states.contains(&*entry.from) {
                let started = call_start(entry, began);
                let requests = mcp_requests(spans.entered.as_ref(), &entry.event);
                for (n, (builder, failed)) in requests.into_iter().enumerate() {
                    let builder = builder.with_start_time(started);
                    let span = with_ids(trace, call_span(Call::Request(n)), || {
                        builder.start_with_context(&self.tracer, under)
                    });
                    let cx = under.with_span(span);
                    if let Some(message) = failed {
                        cx.span().set_status(Status::error(message));
                    }
                    cx.span().end_with_timestamp(entry.at);
                }
            }
            if let Some(to) = &entry.to {
                spans.entered = spans
                    .mcp_states
                    .contains(&**to)
                    .then(|| entry.event.clone());
            }
            let attempt = match spans.attempt.take() {
                Some((attempt, _)) => attempt,
                // An entry made outside an attempt (a person's answer, a wait's expiry):
                // a span of the state it leaves, at the entry's time.
                None => {
                    let span = SpanBuilder::from_name(entry.from.to_string())
                        .with_kind(SpanKind::Internal)
                        .with_start_time(entry.at)
                        .with_attributes([
                            KeyValue::new("claij.state", entry.from.to_string()),
                            KeyValue::new("claij.attempt", i64::from(entry.attempt)),
                        ])
                        .start_with_context(&self.tracer, &spans.run);
                    spans.run.with_span(span)
                }
            };
            let span = attempt.span();
            match (&entry.to, entry.failure.as_deref()) {
                (Some(to), _) => {
                    span.set_attribute(KeyValue::new("claij.outcome", "transition"));
                    span.set_attribute(KeyValue::new("claij.to", to.to_string()));
                }
                (None, Some(failure)) => {
                    span.set_attribute(KeyValue::new("claij.outcome", failure.kind.to_string()));
                    if !is_pause(entry) {
                        span.set_status(Status::error(failure.message.clone()));
                    }
                }
                (None, None) => {}
            }
            span.end_with_timestamp(entry.at);
        });
    }

    fn wants_content(&self) -> bool {
        self.content
    }

    fn model_exchanged(&self, call: &CallSite<'_>, exchange: &ModelExchange<'_>) {
        let attributes = crate::content::attributes(exchange);
        self.with_runs(|runs| {
            if let Some(spans) = runs.get_mut(call.run_id) {
                spans.exchange = Some(attributes);
            }
        });
    }

    fn call_context(&self, call: &CallSite<'_>) -> Option<String> {
        self.with_runs(|runs| {
            let (attempt, _) = runs.get(call.run_id)?.attempt.as_ref()?;
            let context = attempt.span().span_context().clone();
            context.is_sampled().then(|| {
                let span = match call.call {
                    Call::Attempt => context.span_id(),
                    other => ids::call_span(call.run_id, call.state, call.attempt, other),
                };
                ids::traceparent(context.trace_id(), span, context.trace_flags())
            })
        })
    }

    fn committed(&self, run_id: &str, commit: &Commit<'_>) {
        self.with_runs(|runs| {
            let Some(spans) = runs.get(run_id) else {
                return;
            };
            let span = SpanBuilder::from_name("commit")
                .with_kind(SpanKind::Client)
                .with_start_time(commit.began)
                .with_attributes([
                    KeyValue::new("claij.commit.entries", commit.entries as i64),
                    KeyValue::new("claij.status", commit.status.as_str()),
                ])
                .start_with_context(&self.tracer, &spans.run);
            let cx = spans.run.with_span(span);
            if let Some(error) = commit.error {
                cx.span().set_status(Status::error(error.to_owned()));
            }
            cx.span().end_with_timestamp(commit.began + commit.took);
        });
    }

    fn run_finished(&self, run_id: &str, status: RunStatus) {
        self.with_runs(|runs| {
            let Some(spans) = runs.remove(run_id) else {
                return;
            };
            if let Some((open, _)) = spans.attempt {
                open.span().end();
            }
            let span = spans.run.span();
            span.set_attribute(KeyValue::new("claij.status", status.as_str()));
            if status == RunStatus::Failed {
                span.set_status(Status::error("the run failed"));
            }
            span.end();
        });
    }
}
