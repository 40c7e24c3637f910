//! What is asked of a model and what it answers, independent of any wire format.

use std::fmt;
use std::str::FromStr;

use claij_core::prompts::Message;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Decoding settings: how the model chooses its tokens and how many (each left to the
/// provider's default when absent). The keys are the TOML and state-config keys.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Decoding {
    /// Temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Top-p: choose among the most likely tokens whose probabilities add up to this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// A seed, where the provider honours one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// At most this many output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
}

impl Decoding {
    /// Each setting of `self`, else `defaults`' (a state's over its model's).
    pub fn or(self, defaults: Decoding) -> Decoding {
        Decoding {
            temperature: self.temperature.or(defaults.temperature),
            top_p: self.top_p.or(defaults.top_p),
            seed: self.seed.or(defaults.seed),
            max_tokens: self.max_tokens.or(defaults.max_tokens),
        }
    }
}

/// One transition offered as a tool (mode `tools`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool's name (derived from the target state).
    pub name: String,
    /// What taking the transition means.
    pub description: String,
    /// The arguments' schema: the transition's schema without `id`, `$ref`s inlined.
    pub parameters: Value,
    /// The transition's id `[from, to]`, added to the arguments to make the event.
    pub id: Value,
}

/// An enforcement mode (`config.enforce`; what each does: [`crate::enforce`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Ask, parse, validate.
    Prompt,
    /// The provider's structured output with the wrapped union.
    JsonSchema,
    /// One tool per transition.
    Tools,
    /// Token-level constrained decoding (reserved for the embedded model).
    Grammar,
}

impl Mode {
    /// How firmly the mode holds an answer to the schemas: `prompt` (asked) < `tools`
    /// (arguments shaped by the provider) < `json_schema` (the provider's structured
    /// output) < `grammar` (every token constrained).
    pub fn strength(self) -> u8 {
        match self {
            Mode::Prompt => 0,
            Mode::Tools => 1,
            Mode::JsonSchema => 2,
            Mode::Grammar => 3,
        }
    }

    /// Whether the answer's shape is written by the decoder rather than by the model
    /// reading a template: `grammar` (every token) and `json_schema` (the provider's
    /// structured output). The request then leaves out the answer's template
    /// ([`claij_core::prompts::PromptOptions::constrained`]): measured on the labelled
    /// set, the template costs small models answers they get right without it
    /// (docs/EMBEDDED-MODEL.md).
    pub fn writes_shape(self) -> bool {
        matches!(self, Mode::JsonSchema | Mode::Grammar)
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Prompt => "prompt",
            Mode::JsonSchema => "json_schema",
            Mode::Tools => "tools",
            Mode::Grammar => "grammar",
        })
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        serde_json::from_value(Value::String(s.to_owned())).map_err(|_| {
            format!("unknown enforcement mode `{s}` (prompt, json_schema, tools, grammar)")
        })
    }
}

/// How the answer is constrained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Enforcement {
    /// The mode.
    pub mode: Mode,
    /// The schema an answer must satisfy: for `json_schema` the wrapped union (an object
    /// whose `event` holds an `anyOf` of the transitions' schemas); for `grammar` the
    /// plain union (`anyOf`), which a constrained decoder takes as is. `$defs` inlined.
    pub schema: Value,
    /// For `tools`: one tool per transition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
}

/// A request to a model.
#[derive(Clone, Serialize)]
pub struct ModelRequest {
    /// The provider's model id.
    pub model: String,
    /// The conversation (system first).
    pub messages: Vec<Message>,
    /// How the answer is constrained.
    pub enforcement: Enforcement,
    /// Decoding settings. Serialized as `sampling`, the key recordings were made with:
    /// the request's JSON is its identity on a tape (`record::digest`).
    #[serde(rename = "sampling")]
    pub decoding: Decoding,
    /// The W3C `traceparent` of the call when the run is traced: sent as a header by the
    /// HTTP providers. Not part of the request's identity on a tape.
    #[serde(skip)]
    pub traceparent: Option<String>,
}

impl std::fmt::Debug for ModelRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelRequest")
            .field("model", &self.model)
            .field("messages", &self.messages.len())
            .field("mode", &self.enforcement.mode)
            .field("decoding", &self.decoding)
            .finish()
    }
}

/// Token counts of one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    /// Prompt tokens.
    pub input: u64,
    /// Completion tokens.
    pub output: u64,
    /// Prompt tokens served from a cache, where reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached: Option<u64>,
}

/// What a model answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelResponse {
    /// The text of the answer (empty when it called a tool).
    #[serde(default)]
    pub text: String,
    /// The tool it called, with its arguments (mode `tools`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call: Option<(String, Value)>,
    /// Token counts, where reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Tokens>,
    /// Transient failures retried before this answer came (not recorded: a replay has
    /// none).
    #[serde(skip)]
    pub retries: u32,
}
