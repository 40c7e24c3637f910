//! Trail to prompts.
