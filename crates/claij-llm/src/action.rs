//! The `llm` action: project the trail into messages, choose the model and the
//! enforcement mode, call, extract the one JSON object, emit it.

use std::sync::Arc;
use std::time::Instant;

use claij_core::prompts::{PromptOptions, project, tool_rounds};
use claij_core::{FailureKind, Usage};
use claij_engine::capability::{Field, Touch};
use claij_engine::{
    Action, ActionError, ActionInput, ActionOutput, BoxFuture, Call, ModelExchange, Outcome,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::enforce::{self, Mode, Route};
use crate::extract::extract_object;
use crate::layer::{LlmLayer, ResolvedModel};
use crate::metered::CallFailure;
use crate::provider::ProviderError;
use crate::request::{Decoding, Enforcement, ModelRequest, ModelResponse};
use crate::summary;
use crate::tokens;
use crate::vote;

/// Validation failures of one model, in a state, before the next fallback model is used.
pub const DEFAULT_ESCALATE_AFTER: u32 = 2;

/// Rounds a tool-use loop may make in one visit of its state unless `max_tool_rounds`
/// says otherwise.
pub const DEFAULT_MAX_TOOL_ROUNDS: u32 = 25;

/// The event field naming the model that should answer it (a chairman picking a
/// reviewer's model).
pub const EVENT_MODEL_FIELD: &str = "llm";

/// An `llm` state's `config`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct LlmStateConfig {
    /// The model (a `[models]` name or `PROVIDER/MODEL-ID`).
    #[serde(default)]
    pub model: Option<String>,
    /// Models to escalate to after repeated validation failures (default: the config
    /// file's `fallback`).
    #[serde(default)]
    pub fallback: Option<Vec<String>>,
    /// Validation failures per model before escalating (default 2).
    #[serde(default)]
    pub escalate_after: Option<u32>,
    /// The enforcement mode (default: the best the provider supports).
    #[serde(default)]
    pub enforce: Option<Mode>,
    /// The most prompt tokens the state may send (counted by the model's own tokenizer
    /// where known, else tiktoken): the oldest collapsible history gives way first
    /// ([`crate::tokens::fit`]). Default: the room the model's context leaves, when its
    /// provider knows it ([`Provider::prompt_room`](crate::Provider::prompt_room): the
    /// embedded models), else no cap.
    #[serde(default)]
    pub max_prompt_tokens: Option<u64>,
    /// Rounds the state's tool-use loop may make in one visit (default
    /// [`DEFAULT_MAX_TOOL_ROUNDS`]): after the last, the loop's route is withdrawn and the
    /// model must answer, so that a loop always ends.
    #[serde(default)]
    pub max_tool_rounds: Option<u32>,
    /// Whether the state's tool-use loop must be used before the model answers
    /// (default [`ToolChoice::Auto`]: the model chooses).
    #[serde(default)]
    pub tool_choice: Option<ToolChoice>,
    /// How many answers decide the route by majority (default 1: the one answer). The
    /// extra answers are sampled; their votes are recorded in the trail ([`crate::vote`]).
    #[serde(default)]
    pub vote: Option<u32>,
    /// Decoding settings (`temperature`, `top_p`, `seed`, `max_tokens`).
    #[serde(default, flatten)]
    pub decoding: Decoding,
}

/// How an `llm` state with a tool-use loop ([`claij_core::Fsm::tool_loop`]) uses it: the
/// `tool_choice` of its config, after the option of the same name in the vendors' APIs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolChoice {
    /// Each answer calls tools or leaves the state, as the model chooses.
    #[default]
    Auto,
    /// The first answer of each visit calls tools: until one round is made, the loop's
    /// route is the only one offered (the constraint allows no other, and an answer on
    /// another route is refused and asked again); after it, the model chooses. For a
    /// model that would rather guess than look (docs/EMBEDDED-MODEL.md, "The tool-use
    /// loop").
    First,
}

/// The `llm` action.
pub struct LlmAction {
    layer: Arc<LlmLayer>,
}

impl LlmAction {
    /// The action over `layer`.
    pub fn new(layer: Arc<LlmLayer>) -> Self {
        Self { layer }
    }
}

impl Action for LlmAction {
    fn config_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "model": {"type": "string", "minLength": 1},
                "fallback": {"type": "array", "items": {"type": "string", "minLength": 1}},
                "escalate_after": {"type": "integer", "minimum": 1},
                "max_prompt_tokens": {"type": "integer", "minimum": 1},
                "max_tool_rounds": {"type": "integer", "minimum": 1},
                "tool_choice": {"enum": ["auto", "first"]},
                "vote": {"type": "integer", "minimum": 1, "maximum": vote::MAX_VOTES},
                "enforce": {"enum": ["prompt", "json_schema", "tools", "grammar"]},
                "temperature": {"type": "number", "minimum": 0},
                "top_p": {"type": "number", "minimum": 0, "maximum": 1},
                "seed": {"type": "integer", "minimum": 0},
                "max_tokens": {"type": "integer", "minimum": 1}
            },
            "patternProperties": {"^x-": {}},
            "additionalProperties": false
        })
    }

    /// The models named (the operator's configured ones, called with their providers'
    /// keys, which never leave the process); the rest shapes the call.
    fn touches(&self) -> &'static [Field] {
        const FIELDS: &[Field] = &[
            Field::new("/model", Touch::Model),
            Field::new("/fallback", Touch::Model),
            Field::inert("/escalate_after"),
            Field::inert("/max_prompt_tokens"),
            Field::inert("/max_tool_rounds"),
            Field::inert("/tool_choice"),
            Field::inert("/vote"),
            Field::inert("/enforce"),
            Field::inert("/temperature"),
            Field::inert("/top_p"),
            Field::inert("/seed"),
            Field::inert("/max_tokens"),
        ];
        FIELDS
    }

    fn run<'a>(&'a self, input: ActionInput<'a>) -> BoxFuture<'a, Result<Outcome, ActionError>> {
        Box::pin(async move { self.attempt(input).await.map(Outcome::Emit) })
    }
}

/// What a vote's extra answers are asked with: the first answer's model, request and
/// prompt size.
struct Ballot<'a> {
    model: &'a ResolvedModel,
    request: &'a ModelRequest,
    input: &'a ActionInput<'a>,
    prompt_tokens: Option<u64>,
}

/// Why `event`, an answer in `state`, may not take its route in this visit of the state's
/// tool-use loop: the loop's route once its `max_rounds` are used up (`withdrawn`), or any
/// other before its first round under `tool_choice: first` (`required`).
fn loop_refusal(
    state: &str,
    event: &Value,
    withdrawn: Option<&str>,
    required: Option<&str>,
    max_rounds: usize,
) -> Option<String> {
    let takes = |to: &str| event.get("id") == Some(&json!([state, to]));
    if withdrawn.is_some_and(takes) {
        return Some(format!(
            "`{state}` has made the {max_rounds} rounds of tool calls it may make in one visit \
             (max_tool_rounds): answer with another `id`"
        ));
    }
    required.filter(|h| !takes(h)).map(|h| {
        format!(
            "`{state}` calls its tools before it answers (tool_choice: first): answer with the \
             `id` [\"{state}\",\"{h}\"] and the calls to make"
        )
    })
}

/// The event a model's answer makes, if it makes one: a tool call's arguments with its
/// route, else the one JSON object of its text (unwrapped from `json_schema`'s wrapper).
fn answer_of(response: &ModelResponse, enforcement: &Enforcement) -> Option<Value> {
    match &response.tool_call {
        Some((name, args)) => enforce::tool_event(enforcement, name, args),
        None => extract_object(&response.text)
            .ok()
            .map(|v| enforce::unwrap_answer(enforcement.mode, v)),
    }
}

impl LlmAction {
    async fn attempt(&self, input: ActionInput<'_>) -> Result<ActionOutput, ActionError> {
        let config: LlmStateConfig = serde_json::from_value(input.state.config.clone())
            .map_err(|e| ActionError::fatal(format!("bad `llm` config: {e}")))?;
        let (model, mode) = self.choose(&input, &config)?;
        let max_rounds = config.max_tool_rounds.unwrap_or(DEFAULT_MAX_TOOL_ROUNDS) as usize;
        let tool_loop = input.fsm.tool_loop(&input.state.id).map(|h| h.id.clone());
        let rounds = tool_loop
            .as_ref()
            .map_or(0, |_| tool_rounds(input.fsm, input.trail, &input.state.id));
        // The loop's route, once its rounds are used up: withdrawn from the answer.
        let withdrawn = tool_loop.clone().filter(|_| rounds >= max_rounds);
        // The loop's route alone, until a first round is made (`tool_choice: first`).
        let required =
            tool_loop.filter(|_| rounds == 0 && config.tool_choice == Some(ToolChoice::First));
        let mut routes = shown_routes(&input)?;
        if routes.iter().any(|r| Some(r.to) != withdrawn.as_deref()) {
            routes.retain(|r| Some(r.to) != withdrawn.as_deref());
        }
        if routes.iter().any(|r| Some(r.to) == required.as_deref()) {
            routes.retain(|r| Some(r.to) == required.as_deref());
        }
        let enforcement = enforce::build(mode, &routes, &input.fsm.schemas);
        let projection = project(
            input.fsm,
            input.trail,
            &input.state.id,
            &PromptOptions {
                dynamic: Some(input.schemas),
                constrained: mode.writes_shape(),
                max_tool_rounds: Some(max_rounds),
                prompting: self.layer.prompting(),
            },
        );
        let budget = prompt_budget(&config, &model);
        let (messages, prompt_tokens) = tokens::fit_counted(projection, budget, Some(&model)).await;
        let decoding = config.decoding.or(model.decoding);
        let request = ModelRequest {
            model: model.model_id.clone(),
            messages,
            enforcement,
            decoding,
            traceparent: input.trace_context(Call::Model),
        };
        let started = Instant::now();
        let (response, usage) = self
            .layer
            .metered_call(
                &model,
                &request,
                &input.state.id,
                input.text_sink().as_ref(),
                input.meter,
                false,
                prompt_tokens,
            )
            .await
            .map_err(|e| match e {
                CallFailure::Provider(e) => provider_failure(e, &model).enforced(mode.to_string()),
                // A budget's refusal stops the run (the engine reads it from the meter).
                CallFailure::Refused(refusal) => ActionError::failed(refusal.to_string()),
            })?;
        tracing::debug!(
            state = %input.state.id,
            model = %model.name,
            latency_ms = started.elapsed().as_millis() as u64,
            "model answered"
        );
        input.report_exchange(&ModelExchange {
            messages: &request.messages,
            text: &response.text,
            tool_call: response.tool_call.as_ref().map(|(n, a)| (n.as_str(), a)),
        });
        let event = match &response.tool_call {
            Some((name, args)) => enforce::tool_event(&request.enforcement, name, args)
                .ok_or_else(|| {
                    ActionError::parse(
                        format!(
                            "the model called tool `{name}`, which is not one of: {}",
                            request
                                .enforcement
                                .tools
                                .iter()
                                .map(|t| t.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                        json!({"tool": name, "arguments": args}),
                    )
                    .with_model(&model.name, Some(usage.clone()))
                    .enforced(mode.to_string())
                })?,
            None => match extract_object(&response.text) {
                Ok(v) => enforce::unwrap_answer(mode, v),
                Err(e) => {
                    return Err(ActionError::parse(
                        format!("the model's answer is not one JSON object: {e}"),
                        Value::String(response.text.clone()),
                    )
                    .with_model(&model.name, Some(usage))
                    .enforced(mode.to_string()));
                }
            },
        };
        let mut usage = usage;
        let (event, votes) = match config.vote.or(model.vote).filter(|k| *k > 1) {
            Some(k) => {
                let ballot = Ballot {
                    model: &model,
                    request: &request,
                    input: &input,
                    prompt_tokens,
                };
                self.poll(k, event, &ballot, &mut usage).await
            }
            None => (event, None),
        };
        if let Some(message) = loop_refusal(
            &input.state.id,
            &event,
            withdrawn.as_deref(),
            required.as_deref(),
            max_rounds,
        ) {
            return Err(ActionError {
                kind: FailureKind::UnknownTransition,
                message,
                output: event,
                retryable: true,
                model_call: None,
            }
            .with_model(&model.name, Some(usage))
            .enforced(mode.to_string()));
        }
        let summary = summary::write(
            &self.layer,
            &model,
            input.fsm,
            input.state,
            &request.messages,
            &event,
            request.decoding,
            input.meter,
        )
        .await
        .map(|(text, spent)| {
            usage.add(&spent);
            text
        });
        Ok(ActionOutput {
            event,
            context: None,
            model: Some(model.name.clone()),
            usage: Some(Box::new(usage)),
            enforce: Some(mode.to_string()),
            summary,
            votes,
            published: Vec::new(),
        })
    }

    /// `vote: k`: k − 1 more answers to `ballot`'s request, sampled ([`vote::sampled`]),
    /// their tokens added to `usage`; the winning answer ([`vote::winner`]) and every
    /// answer's route, `first`'s leading.
    async fn poll(
        &self,
        k: u32,
        first: Value,
        ballot: &Ballot<'_>,
        usage: &mut Usage,
    ) -> (Value, Option<Vec<Value>>) {
        let input = ballot.input;
        let mut routes = vec![first.get("id").cloned()];
        let mut samples = Vec::new();
        for i in 1..k.min(vote::MAX_VOTES) {
            let sample = ModelRequest {
                decoding: vote::sampled(ballot.request.decoding, i),
                ..ballot.request.clone()
            };
            // Optional calls: a budget that one would overrun ends the voting, not the run.
            let answer = match self
                .layer
                .metered_call(
                    ballot.model,
                    &sample,
                    &input.state.id,
                    None,
                    input.meter,
                    true,
                    ballot.prompt_tokens,
                )
                .await
            {
                Ok((response, spent)) => {
                    usage.add(&spent);
                    answer_of(&response, &sample.enforcement)
                }
                Err(CallFailure::Refused(_)) => break,
                Err(CallFailure::Provider(e)) => {
                    tracing::warn!(state = %input.state.id, error = %e, "a vote's answer failed");
                    None
                }
            };
            routes.push(answer.as_ref().and_then(|a| a.get("id")).cloned());
            samples.push(answer);
        }
        let event = match vote::winner(&routes) {
            Some(chosen) if chosen > 0 => samples
                .get_mut(chosen - 1)
                .and_then(Option::take)
                .unwrap_or(first),
            _ => first,
        };
        let votes = routes
            .into_iter()
            .map(|r| r.unwrap_or(Value::Null))
            .collect();
        (event, Some(votes))
    }

    /// The model and the enforcement mode of this attempt. The model: state
    /// `config.model` > the event's `llm` (checked) > the run's > the default. The mode:
    /// the state's `enforce` > the model's > the best its provider supports, or that best
    /// when the provider lacks the mode asked for. Then, every `escalate_after` validation
    /// failures of the state's visit, one step up: the next stronger mode the provider
    /// supports (unless the model says `escalate_enforce = false`), then the fallback
    /// models in order, each in its own mode.
    fn choose(
        &self,
        input: &ActionInput<'_>,
        config: &LlmStateConfig,
    ) -> Result<(ResolvedModel, Mode), ActionError> {
        let layer = &self.layer;
        let event_model = input.event.get(EVENT_MODEL_FIELD).and_then(Value::as_str);
        let primary = match (&config.model, event_model) {
            (Some(m), _) => layer.resolve(m),
            (None, Some(m)) => layer.resolve(m).map_err(|e| {
                format!(
                    "the event's `{EVENT_MODEL_FIELD}` names a model that is not configured: {e}"
                )
            }),
            (None, None) => layer.for_run(input.scope.model),
        }
        .map_err(ActionError::fatal)?;
        let failures = input
            .failures_here()
            .filter(|e| {
                e.failure.as_ref().is_some_and(|f| {
                    matches!(
                        f.kind,
                        FailureKind::Validation
                            | FailureKind::Parse
                            | FailureKind::UnknownTransition
                    )
                })
            })
            .count() as u32;
        let step = (failures
            / config
                .escalate_after
                .unwrap_or(DEFAULT_ESCALATE_AFTER)
                .max(1)) as usize;
        let caps = primary.provider.capabilities();
        let asked = config.enforce.or(primary.enforce);
        let ladder = if primary.escalate_enforce {
            caps.ladder(asked)
        } else {
            vec![caps.usable(asked)]
        };
        if let Some(mode) = ladder.get(step) {
            return Ok((primary, *mode));
        }
        let fallback = config
            .fallback
            .clone()
            .unwrap_or_else(|| layer.config().fallback.clone());
        let Some(name) = fallback.get(step - ladder.len()).or(fallback.last()) else {
            // Nowhere further to go: the strongest step again.
            let strongest = ladder.last().copied().unwrap_or(Mode::Prompt);
            return Ok((primary, strongest));
        };
        let model = layer
            .resolve(name)
            .map_err(|e| ActionError::fatal(format!("fallback model: {e}")))?;
        let mode = model
            .provider
            .capabilities()
            .usable(config.enforce.or(model.enforce));
        Ok((model, mode))
    }
}

/// The most prompt tokens a step of a state with `config` may send to `model`: the
/// state's `max_prompt_tokens`, else the room the model's context leaves the prompt
/// ([`Provider::prompt_room`](crate::Provider::prompt_room)), else none.
pub fn prompt_budget(config: &LlmStateConfig, model: &ResolvedModel) -> Option<u64> {
    config.max_prompt_tokens.or_else(|| {
        model
            .provider
            .prompt_room(&config.decoding.or(model.decoding))
    })
}

/// The model and the mode a state's first attempt uses, chosen as the `llm` action
/// chooses them with no `llm` field in the event and no failure yet: the state's
/// `config.model` > the command's `--model` ([`LlmLayer::prefer`]) > the default, and the state's `enforce` > the model's >
/// the best its provider supports (what `claij prompt` shows).
pub fn first_choice(
    layer: &LlmLayer,
    state_config: &Value,
) -> Result<(ResolvedModel, Mode), String> {
    let config: LlmStateConfig = serde_json::from_value(state_config.clone())
        .map_err(|e| format!("bad `llm` config: {e}"))?;
    let model = match &config.model {
        Some(name) => layer.resolve(name)?,
        None => layer.for_run(None)?,
    };
    let mode = model
        .provider
        .capabilities()
        .usable(config.enforce.or(model.enforce));
    Ok((model, mode))
}

/// The transitions a model is offered: those leaving the state not marked `omit` (all of
/// them when every one is), each with its effective schema.
fn shown_routes<'a>(input: &ActionInput<'a>) -> Result<Vec<Route<'a>>, ActionError> {
    let all = input
        .outgoing_schemas()
        .map_err(|e| ActionError::fatal(format!("a transition's schema: {}", e.message)))?;
    let any_shown = all.iter().any(|(t, _)| !t.omit);
    Ok(all
        .into_iter()
        .filter(|(t, _)| !any_shown || !t.omit)
        .map(|(t, schema)| Route {
            id: &t.id_value,
            to: &t.to,
            description: t.description.as_deref(),
            schema,
        })
        .collect())
}

fn provider_failure(e: ProviderError, model: &ResolvedModel) -> ActionError {
    let err = match &e {
        // Retries were exhausted: the attempt fails; another attempt may succeed.
        ProviderError::Transient { .. } => {
            ActionError::failed(format!("model `{}`: {e} (retries exhausted)", model.name))
        }
        ProviderError::Permanent { .. } | ProviderError::NotRecorded(_) => {
            ActionError::fatal(format!("model `{}`: {e}", model.name))
        }
    };
    err.with_model(&model.name, None)
}
