//! Counting prompt tokens with a real tokenizer (tiktoken's `o200k_base`, offline).

use claij_core::prompts::Message;

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
