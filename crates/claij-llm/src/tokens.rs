//! Counting prompt tokens with a real tokenizer: the model's own where its provider knows
//! it (the embedded models), else tiktoken's `o200k_base` (offline).

use claij_core::prompts::{Message, Projection};

use crate::layer::ResolvedModel;

/// Tokens of `messages` by `o200k_base`: each message's text plus 3 tokens of framing
/// (role and separators, as OpenAI's chat format counts them), plus 3 for the reply's
/// start. `None` if the tokenizer could not be built.
pub fn count_tokens(messages: &[Message]) -> Option<Vec<usize>> {
    let bpe = tiktoken_rs::o200k_base_singleton();
    Some(
        messages
            .iter()
            .map(|m| bpe.encode_with_special_tokens(&m.content).len() + 3)
            .collect(),
    )
}

/// The total of [`count_tokens`], reply priming included.
pub fn total(counts: &[usize]) -> usize {
    counts.iter().sum::<usize>() + 3
}

/// A prompt's tokens and what counted them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptTokens {
    /// One count per message.
    pub per_message: Vec<usize>,
    /// The whole prompt's tokens (framing and the reply's priming included).
    pub total: usize,
    /// What counted them: a model's own tokenizer and chat template, or tiktoken.
    pub tokenizer: String,
}

/// The prompt tokens of `messages` for `model`: by the model's own tokenizer and chat
/// template when its provider knows them (the embedded models, their file fetched), else
/// by tiktoken's `o200k_base` with chat framing ([`count_tokens`]).
pub async fn count_for(model: Option<&ResolvedModel>, messages: &[Message]) -> PromptTokens {
    if let Some(model) = model
        && let Some(Ok(per_message)) = model.provider.count_prompt_tokens(messages).await
    {
        return PromptTokens {
            total: per_message.iter().sum(),
            per_message,
            tokenizer: format!("{}'s own tokenizer and chat template", model.name),
        };
    }
    let per_message = count_tokens(messages).unwrap_or_default();
    PromptTokens {
        total: total(&per_message),
        per_message,
        tokenizer: "tiktoken o200k_base, with chat framing".to_owned(),
    }
}

/// The messages of `projection`, shrunk ([`Projection::shrink`]: the oldest collapsible
/// history first, never the system message, the state's input, its request or its latest
/// tool round) until `model` counts at most `max_prompt_tokens` of them ([`count_for`]).
/// When even the smallest form is over, it is sent as it is, with a warning in the log:
/// the provider says whether it fits its context.
pub async fn fit(
    projection: Projection,
    max_prompt_tokens: Option<u64>,
    model: Option<&ResolvedModel>,
) -> Vec<Message> {
    fit_counted(projection, max_prompt_tokens, model).await.0
}

/// [`fit`], with the count of the messages returned when it made one (with a budget).
pub async fn fit_counted(
    mut projection: Projection,
    max_prompt_tokens: Option<u64>,
    model: Option<&ResolvedModel>,
) -> (Vec<Message>, Option<u64>) {
    let Some(max) = max_prompt_tokens else {
        return (projection.messages(), None);
    };
    loop {
        let messages = projection.messages();
        let counted = count_for(model, &messages).await.total as u64;
        if counted <= max {
            return (messages, Some(counted));
        }
        if !projection.shrink() {
            tracing::warn!(
                tokens = counted,
                max_prompt_tokens = max,
                "the prompt is over max_prompt_tokens with its history collapsed as far as it goes"
            );
            return (messages, Some(counted));
        }
    }
}
