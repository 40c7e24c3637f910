//! Run ids.

/// A new run id: time-ordered, unique enough for one store (`r-` + 12 hex digits of
/// milliseconds + 8 random hex digits).
pub fn new_run_id() -> String {
    use std::hash::{BuildHasher, RandomState};
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let random = RandomState::new().hash_one(millis) as u32;
    format!("r-{millis:012x}{random:08x}")
}
