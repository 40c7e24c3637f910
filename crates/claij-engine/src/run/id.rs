//! Run ids.

/// A new run id: a UUIDv7 in its standard hyphenated form
/// (`0192f3a4-5b6c-7d8e-9f01-23456789abcd`): time-ordered (ids sort by creation, to the
/// millisecond) and random past that. Child runs add `.SEQ` (and `.K` for a branch) to
/// their parent's id; a UUID holds no `.`, so the parent part is never ambiguous.
///
/// Public for callers that choose a run's id before starting it
/// ([`RunOptions::run_id`](crate::RunOptions::run_id)), to show it first, say.
pub fn new_run_id() -> String {
    uuid::Uuid::now_v7().hyphenated().to_string()
}

#[cfg(test)]
mod tests {
    use super::new_run_id;

    #[test]
    fn run_ids_are_uuid_v7_and_sort_in_the_order_they_were_made() {
        let ids: Vec<String> = (0..1000).map(|_| new_run_id()).collect();
        for id in &ids {
            let parsed = uuid::Uuid::parse_str(id).unwrap();
            assert_eq!(parsed.get_version_num(), 7, "{id}");
            assert_eq!(parsed.hyphenated().to_string(), *id, "standard form");
            assert!(!id.contains('.'), "{id}: child ids append `.SEQ`");
        }
        for pair in ids.windows(2) {
            assert!(pair[0] < pair[1], "{} then {}", pair[0], pair[1]);
        }
    }
}
