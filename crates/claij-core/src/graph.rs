//! Graph export.
