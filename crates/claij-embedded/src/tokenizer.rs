//! The GPT-2 style byte-level BPE tokenizer carried in a GGUF file's metadata
//! (`tokenizer.ggml.tokens`, `tokenizer.ggml.merges`, `tokenizer.ggml.token_type`).
//!
//! Pre-tokenization follows SmolLM2's: digits split one by one, then the GPT-2 split
//! pattern (contractions, letters, numbers, punctuation, whitespace) without a prefix
//! space. Control tokens (`<|im_start|>`, …) are matched as whole strings first.

use std::collections::HashMap;

use candle_core::quantized::gguf_file;
use toktrie::{TokRxInfo, TokTrie, TokenId, TokenizerEnv};

use crate::error::LoadError;

/// GGUF `token_type` of control tokens.
const TOKEN_TYPE_CONTROL: i32 = 3;

/// A byte-level BPE tokenizer read from GGUF metadata.
pub struct Tokenizer {
    /// Token id by its byte-level string.
    vocab: HashMap<String, TokenId>,
    /// The bytes each token stands for (control tokens: their text).
    token_bytes: Vec<Vec<u8>>,
    /// Merge rank by pair of byte-level strings.
    merges: HashMap<(String, String), u32>,
    /// Control tokens by their text, longest first.
    specials: Vec<(String, TokenId)>,
    /// Control token flags by id.
    is_special: Vec<bool>,
    byte_to_char: [char; 256],
    eos: TokenId,
    bos: Option<TokenId>,
    trie: TokTrie,
}

fn md<'a>(
    ct: &'a gguf_file::Content,
    key: &'static str,
) -> Result<&'a gguf_file::Value, LoadError> {
    ct.metadata.get(key).ok_or(LoadError::MissingMetadata(key))
}

fn md_u32(ct: &gguf_file::Content, key: &'static str) -> Option<u32> {
    ct.metadata.get(key).and_then(|v| v.to_u32().ok())
}

fn bad(key: &'static str, e: impl std::fmt::Display) -> LoadError {
    LoadError::BadMetadata {
        key,
        reason: e.to_string(),
    }
}

/// GPT-2's reversible map of bytes to printable characters.
fn byte_to_char_table() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next = 256u32;
    for b in 0..=255u8 {
        let printable = (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || b >= 0xAE;
        table[b as usize] = if printable {
            char::from(b)
        } else {
            let c = char::from_u32(next).unwrap_or('\u{FFFD}');
            next += 1;
            c
        };
    }
    table
}

impl Tokenizer {
    /// Reads the tokenizer from a GGUF file's metadata.
    pub fn from_gguf(ct: &gguf_file::Content) -> Result<Self, LoadError> {
        let model = md(ct, "tokenizer.ggml.model")?
            .to_string()
            .map_err(|e| bad("tokenizer.ggml.model", e))?;
        if model != "gpt2" {
            return Err(LoadError::UnsupportedTokenizer(model.clone()));
        }
        let tokens = md(ct, "tokenizer.ggml.tokens")?
            .to_vec()
            .map_err(|e| bad("tokenizer.ggml.tokens", e))?;
        let types: Vec<i32> = match ct.metadata.get("tokenizer.ggml.token_type") {
            Some(v) => v
                .to_vec()
                .map_err(|e| bad("tokenizer.ggml.token_type", e))?
                .iter()
                .map(|t| t.to_i32().unwrap_or(1))
                .collect(),
            None => Vec::new(),
        };
        let merges_md = md(ct, "tokenizer.ggml.merges")?
            .to_vec()
            .map_err(|e| bad("tokenizer.ggml.merges", e))?;
        let eos = md_u32(ct, "tokenizer.ggml.eos_token_id")
            .ok_or(LoadError::MissingMetadata("tokenizer.ggml.eos_token_id"))?;
        let bos = md_u32(ct, "tokenizer.ggml.bos_token_id");

        let byte_to_char = byte_to_char_table();
        let char_to_byte: HashMap<char, u8> = byte_to_char
            .iter()
            .enumerate()
            .map(|(b, c)| (*c, b as u8))
            .collect();

        let mut vocab = HashMap::with_capacity(tokens.len());
        let mut token_bytes = Vec::with_capacity(tokens.len());
        let mut specials = Vec::new();
        let mut is_special = Vec::with_capacity(tokens.len());
        let mut trie_words = Vec::with_capacity(tokens.len());
        for (id, token) in tokens.iter().enumerate() {
            let text = token
                .to_string()
                .map_err(|e| bad("tokenizer.ggml.tokens", e))?;
            let id = id as TokenId;
            let special = types.get(id as usize) == Some(&TOKEN_TYPE_CONTROL);
            vocab.insert(text.clone(), id);
            if special {
                specials.push((text.clone(), id));
                token_bytes.push(text.as_bytes().to_vec());
                let mut word = vec![TokTrie::SPECIAL_TOKEN_MARKER];
                word.extend_from_slice(text.as_bytes());
                trie_words.push(word);
            } else {
                let bytes: Vec<u8> = text
                    .chars()
                    .map(|c| char_to_byte.get(&c).copied())
                    .collect::<Option<Vec<u8>>>()
                    .unwrap_or_else(|| text.as_bytes().to_vec());
                token_bytes.push(bytes.clone());
                trie_words.push(bytes);
            }
            is_special.push(special);
        }
        specials.sort_by_key(|s| std::cmp::Reverse(s.0.len()));

        let mut merges = HashMap::with_capacity(merges_md.len());
        for (rank, m) in merges_md.iter().enumerate() {
            let m = m.to_string().map_err(|e| bad("tokenizer.ggml.merges", e))?;
            let Some((a, b)) = m.split_once(' ') else {
                return Err(bad(
                    "tokenizer.ggml.merges",
                    format!("merge {m:?} has no space"),
                ));
            };
            merges.insert((a.to_owned(), b.to_owned()), rank as u32);
        }

        let info = TokRxInfo {
            vocab_size: trie_words.len() as u32,
            tok_eos: eos,
            tok_bos: bos,
            tok_pad: md_u32(ct, "tokenizer.ggml.padding_token_id"),
            tok_unk: md_u32(ct, "tokenizer.ggml.unknown_token_id"),
            tok_end_of_turn: None,
        };
        let trie = TokTrie::from(&info, &trie_words);
        Ok(Self {
            vocab,
            token_bytes,
            merges,
            specials,
            is_special,
            byte_to_char,
            eos,
            bos,
            trie,
        })
    }

    /// The end-of-sequence token.
    pub fn eos(&self) -> TokenId {
        self.eos
    }

    /// The beginning-of-sequence token, if the model declares one.
    pub fn bos(&self) -> Option<TokenId> {
        self.bos
    }

    /// Number of tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.token_bytes.len()
    }

    /// The id of a control token given its text (`<|im_end|>`).
    pub fn special(&self, text: &str) -> Option<TokenId> {
        self.specials
            .iter()
            .find(|(t, _)| t == text)
            .map(|(_, id)| *id)
    }

    /// Whether `id` is a control token.
    pub fn is_special(&self, id: TokenId) -> bool {
        self.is_special.get(id as usize).copied().unwrap_or(false)
    }

    /// The bytes a token stands for (control tokens: their text).
    pub fn token_bytes(&self, id: TokenId) -> &[u8] {
        self.token_bytes
            .get(id as usize)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Encodes text, recognising control tokens written out in it.
    pub fn encode_with_specials(&self, text: &str) -> Vec<TokenId> {
        let mut out = Vec::new();
        let mut rest = text;
        'outer: while !rest.is_empty() {
            for (i, _) in rest.char_indices() {
                if let Some((s, id)) = self
                    .specials
                    .iter()
                    .find(|(s, _)| rest[i..].starts_with(s.as_str()))
                {
                    self.encode_into(&rest[..i], &mut out);
                    out.push(*id);
                    rest = &rest[i + s.len()..];
                    continue 'outer;
                }
            }
            self.encode_into(rest, &mut out);
            break;
        }
        out
    }

    /// Encodes plain text (control token texts are not recognised).
    pub fn encode(&self, text: &str) -> Vec<TokenId> {
        let mut out = Vec::new();
        self.encode_into(text, &mut out);
        out
    }

    fn encode_into(&self, text: &str, out: &mut Vec<TokenId>) {
        for piece in pre_tokenize(text) {
            self.bpe(piece.as_bytes(), out);
        }
    }

    /// Byte-level BPE of one pre-token.
    fn bpe(&self, bytes: &[u8], out: &mut Vec<TokenId>) {
        let mut symbols: Vec<String> = bytes
            .iter()
            .map(|b| self.byte_to_char[*b as usize].to_string())
            .collect();
        let whole: String = symbols.concat();
        if let Some(id) = self.vocab.get(&whole) {
            out.push(*id);
            return;
        }
        while symbols.len() > 1 {
            let best = symbols
                .windows(2)
                .enumerate()
                .filter_map(|(i, w)| {
                    self.merges
                        .get(&(w[0].clone(), w[1].clone()))
                        .map(|rank| (*rank, i))
                })
                .min();
            let Some((_, i)) = best else { break };
            let merged = format!("{}{}", symbols[i], symbols[i + 1]);
            symbols[i] = merged;
            symbols.remove(i + 1);
        }
        for s in symbols {
            match self.vocab.get(&s) {
                Some(id) => out.push(*id),
                // Unknown symbol (never happens with a complete byte-level vocabulary):
                // fall back to the longest known tokens of its bytes.
                None => {
                    let raw: Vec<u8> = s
                        .chars()
                        .filter_map(|c| self.byte_to_char.iter().position(|x| *x == c))
                        .map(|b| b as u8)
                        .collect();
                    out.extend(self.trie.greedy_tokenize(&raw));
                }
            }
        }
    }

    /// Decodes tokens to bytes (control tokens as their text when `specials`).
    pub fn decode(&self, tokens: &[TokenId], specials: bool) -> Vec<u8> {
        let mut out = Vec::new();
        for t in tokens {
            if specials || !self.is_special(*t) {
                out.extend_from_slice(self.token_bytes(*t));
            }
        }
        out
    }
}

impl TokenizerEnv for Tokenizer {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        match std::str::from_utf8(s) {
            Ok(text) => self.encode(text),
            Err(_) => self.trie.greedy_tokenize(s),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Letter,
    Number,
    Space,
    Other,
}

fn class(c: char) -> Class {
    if c.is_whitespace() {
        Class::Space
    } else if c.is_alphabetic() {
        Class::Letter
    } else if c.is_numeric() {
        Class::Number
    } else {
        Class::Other
    }
}

/// Splits text like SmolLM2's pre-tokenizer: every digit on its own, then the GPT-2
/// pattern `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`.
pub fn pre_tokenize(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if c.is_numeric() {
            if start < i {
                gpt2_split(&text[start..i], &mut out);
            }
            out.push(&text[i..i + c.len_utf8()]);
            start = i + c.len_utf8();
        }
    }
    if start < text.len() {
        gpt2_split(&text[start..], &mut out);
    }
    out
}

fn gpt2_split<'a>(text: &'a str, out: &mut Vec<&'a str>) {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let end_of = |k: usize| chars.get(k).map(|(i, _)| *i).unwrap_or(text.len());
    let mut k = 0;
    while k < chars.len() {
        let c = chars[k].1;
        // Contractions.
        if c == '\'' {
            let rest = &text[chars[k].0 + 1..];
            let n = ["re", "ve", "ll", "s", "t", "m", "d"]
                .iter()
                .find(|s| rest.starts_with(**s))
                .map(|s| s.len());
            if let Some(n) = n {
                out.push(&text[chars[k].0..chars[k].0 + 1 + n]);
                k += 1 + n;
                continue;
            }
        }
        // ` ?X+` for letters, numbers and other non-space characters.
        let (body, first) =
            if c == ' ' && k + 1 < chars.len() && class(chars[k + 1].1) != Class::Space {
                (class(chars[k + 1].1), k + 1)
            } else {
                (class(c), k)
            };
        if body != Class::Space {
            let mut j = first + 1;
            while j < chars.len() && class(chars[j].1) == body {
                j += 1;
            }
            out.push(&text[chars[k].0..end_of(j)]);
            k = j;
            continue;
        }
        // Whitespace: all but the last when a non-space follows, else all of it.
        let mut j = k + 1;
        while j < chars.len() && class(chars[j].1) == Class::Space {
            j += 1;
        }
        let stop = if j < chars.len() && j - k > 1 {
            j - 1
        } else {
            j
        };
        out.push(&text[chars[k].0..end_of(stop)]);
        k = stop;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pre_tokenizer_splits_like_gpt2_with_single_digits() {
        assert_eq!(
            pre_tokenize("Hello world, it's 2024!\n\n  ok"),
            vec![
                "Hello", " world", ",", " it", "'s", " ", "2", "0", "2", "4", "!", "\n\n ", " ok"
            ]
        );
        assert_eq!(pre_tokenize("a  b "), vec!["a", " ", " b", " "]);
        assert_eq!(
            pre_tokenize("{\"id\":[\"x\"]}"),
            vec!["{\"", "id", "\":[\"", "x", "\"]}"]
        );
    }

    #[test]
    fn byte_table_is_a_bijection() {
        let t = byte_to_char_table();
        let mut seen: Vec<char> = t.to_vec();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 256);
        assert_eq!(t[b' ' as usize], 'Ġ');
        assert_eq!(t[b'\n' as usize], 'Ċ');
    }
}
