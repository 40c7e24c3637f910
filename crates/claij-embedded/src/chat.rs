//! The chat template (Jinja, from the GGUF's `tokenizer.chat_template`) rendered with
//! minijinja.

use minijinja::{Environment, Error, ErrorKind, context};

use crate::error::{GenerateError, LoadError};

/// ChatML, used when a model file carries no template.
pub const CHATML: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/// One message of a conversation, as a chat template reads it: its role (`system`,
/// `user`, `assistant`) and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Who it is from, as the template names it.
    pub role: String,
    /// The text.
    pub content: String,
}

impl Message {
    /// A message from `role`.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: role.into(),
            content: content.into(),
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::new("system", content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new("user", content)
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new("assistant", content)
    }
}

/// A compiled chat template.
pub struct ChatTemplate {
    source: String,
    bos: String,
    eos: String,
}

fn raise_exception(message: String) -> Result<String, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

fn environment<'s>() -> Environment<'s> {
    let mut env = Environment::new();
    env.add_function("raise_exception", raise_exception);
    env
}

impl ChatTemplate {
    /// Compiles `source`; `bos`/`eos` are the texts of those tokens, for templates that
    /// use them.
    pub fn new(source: &str, bos: &str, eos: &str) -> Result<Self, LoadError> {
        environment()
            .template_from_str(source)
            .map_err(|e| LoadError::Template(e.to_string()))?;
        Ok(Self {
            source: source.to_owned(),
            bos: bos.to_owned(),
            eos: eos.to_owned(),
        })
    }

    /// Renders the conversation followed by the opening of the assistant's turn.
    pub fn render(&self, messages: &[Message]) -> Result<String, GenerateError> {
        let messages: Vec<_> = messages
            .iter()
            .map(|m| context! { role => m.role.clone(), content => m.content.clone() })
            .collect();
        // Compiling this small template again is cheaper than keeping an environment
        // that borrows its source.
        let env = environment();
        let template = env
            .template_from_str(&self.source)
            .map_err(|e| GenerateError::Template(e.to_string()))?;
        template
            .render(context! {
                messages => messages,
                add_generation_prompt => true,
                bos_token => self.bos.clone(),
                eos_token => self.eos.clone(),
            })
            .map_err(|e| GenerateError::Template(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chatml_renders_roles_and_the_generation_prompt() {
        let t = ChatTemplate::new(CHATML, "", "<|im_end|>");
        let t = match t {
            Ok(t) => t,
            Err(e) => panic!("{e}"),
        };
        let out = t
            .render(&[Message::system("Be brief."), Message::user("Hi")])
            .unwrap_or_default();
        assert_eq!(
            out,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
    }
}
