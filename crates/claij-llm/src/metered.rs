//! Model calls under a run's budget: before a call, what it could cost at most (its
//! prompt's tokens and `max_tokens` at the model's prices) goes through the attempt's
//! [`Meter`] — refused when it could go past a budget of the run tree, else recorded as in
//! flight —; after it, what it cost.

use claij_core::{Spend, Usage};
use claij_engine::{Meter, Refusal};

use crate::layer::{LlmLayer, ResolvedModel};
use crate::provider::ProviderError;
use crate::request::{ModelRequest, ModelResponse};
use crate::tokens;
use claij_engine::TextSink;

/// The answer tokens a call is assumed to take at most when neither the state nor the
/// model sets `max_tokens` (set it for a tighter bound).
pub const ASSUMED_MAX_TOKENS: u64 = 4096;

/// Why a metered call gave no answer.
#[derive(Debug)]
pub enum CallFailure {
    /// The meter refused it (a budget, or the store).
    Refused(Refusal),
    /// The provider failed (retries exhausted, or a permanent failure).
    Provider(ProviderError),
}

/// What `response` cost: its tokens, and their cost at `model`'s price.
pub fn usage_of(model: &ResolvedModel, response: &ModelResponse) -> Usage {
    let tokens = response.tokens.unwrap_or_default();
    Usage {
        input_tokens: tokens.input,
        output_tokens: tokens.output,
        cached_tokens: tokens.cached,
        cost_usd: model
            .price
            .map(|p| p.cost(tokens.input, tokens.output, tokens.cached.unwrap_or(0))),
        http_retries: (response.retries > 0).then_some(response.retries),
        calls: None,
    }
}

/// What `request` to `model` could cost at most: its prompt (`prompt_tokens` when already
/// counted, else counted by the model's own tokenizer where claij runs it, else tiktoken;
/// its schema and tools as text) and its `max_tokens`, at the model's price — or just one
/// call when nothing needs the estimate (no budget on tokens or cost, no store to record
/// the call in flight in).
pub async fn at_most(
    model: &ResolvedModel,
    request: &ModelRequest,
    prompt_tokens: Option<u64>,
    meter: &Meter,
) -> Spend {
    if !meter.needs_estimates() {
        return Spend {
            calls: 1,
            ..Spend::default()
        };
    }
    let mut prompt = match prompt_tokens {
        Some(counted) => counted,
        None => {
            tokens::count_for(Some(model), &request.messages)
                .await
                .total as u64
        }
    };
    let enforcement = &request.enforcement;
    if !enforcement.schema.is_null() || !enforcement.tools.is_empty() {
        let text = serde_json::to_string(enforcement).unwrap_or_default();
        let bpe = tiktoken_rs::o200k_base_singleton();
        prompt += bpe.encode_with_special_tokens(&text).len() as u64;
    }
    let answer = request
        .decoding
        .max_tokens
        .map_or(ASSUMED_MAX_TOKENS, u64::from);
    Spend {
        input_tokens: prompt,
        output_tokens: answer,
        cost_usd: model.price.map_or(0.0, |p| p.cost(prompt, answer, 0)),
        calls: 1,
        ..Spend::default()
    }
}

impl LlmLayer {
    /// [`call`](Self::call) through `meter`: refused when it could go past a budget (an
    /// `optional` call's refusal — a summary's — does not stop the run), recorded in flight,
    /// and charged with what it cost, which is returned with the answer. `prompt_tokens`:
    /// the request's prompt, when already counted.
    #[allow(clippy::too_many_arguments)]
    pub async fn metered_call(
        &self,
        model: &ResolvedModel,
        request: &ModelRequest,
        state: &str,
        on_text: Option<&TextSink>,
        meter: &Meter,
        optional: bool,
        prompt_tokens: Option<u64>,
    ) -> Result<(ModelResponse, Usage), CallFailure> {
        let asked = at_most(model, request, prompt_tokens, meter).await;
        let allowed = if optional {
            meter.before_optional_call(&model.name, asked).await
        } else {
            meter.before_call(&model.name, asked).await
        };
        allowed.map_err(CallFailure::Refused)?;
        match self.call(model, request, state, on_text).await {
            Ok(response) => {
                let usage = usage_of(model, &response);
                meter.after_call(&asked, Some(&usage));
                Ok((response, usage))
            }
            Err(e) => {
                meter.after_call(&asked, None);
                Err(CallFailure::Provider(e))
            }
        }
    }
}
