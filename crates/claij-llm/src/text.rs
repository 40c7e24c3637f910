//! Free-text completions outside any state's schemas: what an MCP server's sampling
//! request (`sampling/createMessage`) asks of the client. The answer is plain text, not an
//! event, so nothing is enforced; the model is chosen like a state's (a named model, else
//! the run's, else the command's, else the default) and the call goes through the same
//! retries and tape.

use claij_core::prompts::Message;
use claij_engine::Meter;

use crate::enforce::Mode;
use crate::layer::LlmLayer;
use crate::metered::CallFailure;
use crate::request::{Decoding, Enforcement, ModelRequest, Tokens};

/// What to complete.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TextRequest {
    /// The model (a configured name); `None`: the run's model, else the layer's choice
    /// ([`LlmLayer::for_run`]).
    pub model: Option<String>,
    /// The model of the run asking, when it has one of its own (`RunOptions::model`).
    pub run_model: Option<String>,
    /// The conversation, system message first when there is one.
    pub messages: Vec<Message>,
    /// Decoding settings (the model's configured defaults fill the gaps).
    pub decoding: Decoding,
}

/// The model's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct TextAnswer {
    /// What it said.
    pub text: String,
    /// The model that said it (its configured name).
    pub model: String,
    /// Token counts, where reported.
    pub tokens: Option<Tokens>,
    /// What the call cost (its tokens at the model's price).
    pub usage: claij_core::Usage,
}

impl LlmLayer {
    /// Completes `request` with free text. `on_behalf_of` names who asked (a state, or
    /// `server NAME`), for logs and the tape; `meter` is the asking attempt's (the call is
    /// checked against the run's budget and charged to it; [`Meter::unmetered`] outside
    /// runs), `optional` when the attempt can do without the answer (its refusal for a
    /// budget then does not stop the run). Errors are messages fit to send back to the one
    /// who asked; they never carry keys.
    pub async fn complete_text(
        &self,
        request: TextRequest,
        on_behalf_of: &str,
        meter: &Meter,
        optional: bool,
    ) -> Result<TextAnswer, String> {
        let model = match &request.model {
            Some(name) => self.resolve(name)?,
            None => self.for_run(request.run_model.as_deref())?,
        };
        let call = ModelRequest {
            traceparent: None,
            model: model.model_id.clone(),
            messages: request.messages,
            enforcement: Enforcement {
                mode: Mode::Prompt,
                schema: serde_json::Value::Null,
                tools: Vec::new(),
            },
            decoding: request.decoding.or(model.decoding),
        };
        let (response, usage) = self
            .metered_call(&model, &call, on_behalf_of, None, meter, optional, None)
            .await
            .map_err(|e| match e {
                CallFailure::Refused(refusal) => format!("model `{}`: {refusal}", model.name),
                CallFailure::Provider(e) => format!("model `{}`: {e}", model.name),
            })?;
        Ok(TextAnswer {
            text: response.text,
            model: model.name,
            tokens: response.tokens,
            usage,
        })
    }
}
