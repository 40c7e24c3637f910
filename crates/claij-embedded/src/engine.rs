//! [`LocalModel`]: the model as callers use it, whatever this build has. With the
//! `llama-cpp` feature (the default) it is the llama.cpp engine,
//! [`LlamaCppModel`](crate::llama_cpp::LlamaCppModel). Without it, there is no engine:
//! [`LocalModel::load`] fails with [`LoadError::NoEngine`], which says so, and the rest of
//! the crate (the catalog and fetching, constraints) works as usual.

#[cfg(feature = "llama-cpp")]
pub use crate::llama_cpp::LlamaCppModel as LocalModel;

#[cfg(not(feature = "llama-cpp"))]
pub use no_engine::LocalModel;

#[cfg(not(feature = "llama-cpp"))]
mod no_engine {
    use std::path::Path;
    use std::time::Duration;

    use crate::chat::Message;
    use crate::constraint::Constraint;
    use crate::error::{GenerateError, LoadError};
    use crate::generation::{GenerateOptions, Generation, StopSignal};

    /// A loaded model, in a build without an engine: there never is one, since
    /// [`LocalModel::load`] always fails. Its methods are those of the llama.cpp engine's
    /// model, so callers build the same way with or without the `llama-cpp` feature.
    #[derive(Debug)]
    pub enum LocalModel {}

    impl LocalModel {
        /// Fails: this build has no engine ([`LoadError::NoEngine`]).
        pub fn load(path: &Path) -> Result<Self, LoadError> {
            Err(LoadError::NoEngine {
                path: path.to_path_buf(),
            })
        }

        /// Fails as [`LocalModel::load`] does.
        pub fn load_with_threads(path: &Path, _threads: usize) -> Result<Self, LoadError> {
            Self::load(path)
        }

        /// The file the model was loaded from.
        pub fn path(&self) -> &Path {
            match *self {}
        }

        /// How long loading took.
        pub fn load_duration(&self) -> Duration {
            match *self {}
        }

        /// How many distinct constraints have been compiled for this model so far.
        pub fn compiled_constraints(&self) -> usize {
            match *self {}
        }

        /// The prompt text the chat template makes of `messages`.
        pub fn render(&self, _messages: &[Message]) -> Result<String, GenerateError> {
            match *self {}
        }

        /// The token ids of `text`.
        pub fn tokenize(&self, _text: &str) -> Vec<u32> {
            match *self {}
        }

        /// Forgets the cached prompt.
        pub fn clear_cache(&mut self) {
            match *self {}
        }

        /// Generates the assistant's answer to `messages`.
        pub fn generate(
            &mut self,
            _messages: &[Message],
            _options: &GenerateOptions,
            _constraint: Option<&Constraint>,
            _on_token: &mut dyn FnMut(&str),
        ) -> Result<Generation, GenerateError> {
            match *self {}
        }

        /// Generates the assistant's answer to `messages` until `stop` is raised.
        pub fn generate_until(
            &mut self,
            _messages: &[Message],
            _options: &GenerateOptions,
            _constraint: Option<&Constraint>,
            _stop: &StopSignal,
            _on_token: &mut dyn FnMut(&str),
        ) -> Result<Generation, GenerateError> {
            match *self {}
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn loading_says_the_build_has_no_engine_and_names_the_file() {
            let err = LocalModel::load(Path::new("/models/some.gguf"))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(
                err.contains("/models/some.gguf")
                    && err.contains("built without the embedded engine")
                    && err.contains("`llama-cpp`"),
                "{err}"
            );
        }
    }
}
