//! API keys: held in a type that never prints them.

use std::fmt;

/// An API key. `Debug` and `Display` print `<redacted>`; the only way to the text is
/// [`expose`](Secret::expose), used when a request's headers are built.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// The key itself, for an `Authorization` header.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Removes every occurrence of the key from `text` (for error messages that quote a
    /// server's answer, which might echo it).
    pub fn scrub(&self, text: &str) -> String {
        if self.0.len() < 4 {
            return text.to_owned();
        }
        text.replace(&self.0, "<redacted>")
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}
