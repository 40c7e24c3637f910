//! `Idempotency-Key` on `POST /runs`: a client that retries a start (its request timed
//! out, its connection dropped) gets the run its first request started, not a second one.
//!
//! The key is stored with the run (`http:KEY`, apart from the keys of dispatched events
//! and of `claij runs submit`), under the store's unique index: of concurrent starts with
//! one key exactly one creates a run. A start whose key names a run is answered with that
//! run (200) when it asks for the same FSM and input, and refused (422, nothing changed)
//! when it asks for another.

use axum::http::HeaderMap;
use claij_core::store::RunRecord;
use claij_core::trail::without_id;
use serde_json::Value;

use crate::problem::{PlacedError, Problem};
use crate::state::AppState;

/// The request header.
pub(crate) const HEADER: &str = "idempotency-key";

/// The longest key taken.
const MAX_KEY: usize = 255;

/// Where a problem with the header is.
const PLACE: &str = "header Idempotency-Key";

/// The key a request names, as stored (`http:KEY`): 1 to 255 visible ASCII characters.
pub(crate) fn stored_key(headers: &HeaderMap) -> Result<Option<String>, Problem> {
    let Some(value) = headers.get(HEADER) else {
        return Ok(None);
    };
    let bad = |why: &str| {
        Problem::bad_request(format!("the Idempotency-Key header {why}"))
            .with_errors(vec![PlacedError::at(PLACE, why)])
    };
    let key = value
        .to_str()
        .map_err(|_| bad("is not visible ASCII"))?
        .trim();
    if key.is_empty() {
        return Err(bad("is empty"));
    }
    if key.len() > MAX_KEY {
        return Err(bad("is longer than 255 characters"));
    }
    if !key.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
        return Err(bad("is not visible ASCII"));
    }
    Ok(Some(format!("http:{key}")))
}

/// The run a stored key names, if any.
pub(crate) async fn run_by_key(state: &AppState, key: &str) -> Result<Option<RunRecord>, Problem> {
    state
        .store
        .run_by_key(key)
        .await
        .map_err(|e| Problem::from_store(&e))
}

/// Refuses a start that reuses `record`'s key for another FSM or input (a retry repeats
/// its request; the other fields are not compared).
pub(crate) async fn check_same_start(
    state: &AppState,
    record: &RunRecord,
    fsm: &str,
    version: Option<u32>,
    input: &Value,
) -> Result<(), Problem> {
    let reused =
        |what: &str, place: &str| {
            Problem::refused(
            "idempotency-key-reused",
            "Idempotency key reused",
            format!(
                "the Idempotency-Key names run `{}`, started with another {what}; nothing changed",
                record.id
            ),
        )
        .with_errors(vec![PlacedError::at(place, format!("not the {what} of run `{}`", record.id))])
        };
    if record.fsm_id != fsm || version.is_some_and(|v| v != record.version) {
        return Err(reused("FSM", "$.fsm"));
    }
    let first = state
        .store
        .trail_page(&record.id, 0, 1)
        .await
        .map_err(|e| Problem::from_store(&e))?;
    let started_with = first.first().map(|e| &e.event);
    if !started_with.is_some_and(|started| same_input(started, input)) {
        return Err(reused("input", "$.input"));
    }
    Ok(())
}

/// Whether `given` is the input a run started with (`started`, which has the entry's `id`
/// added when the input left it out).
fn same_input(started: &Value, given: &Value) -> bool {
    let id_agrees = match given.get("id") {
        Some(id) => started.get("id") == Some(id),
        None => true,
    };
    id_agrees && without_id(started) == without_id(given)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use axum::http::HeaderValue;
    use serde_json::json;

    fn headers(value: &[u8]) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(HEADER, HeaderValue::from_bytes(value).unwrap());
        h
    }

    #[test]
    fn a_key_is_stored_apart_from_other_keys() {
        assert_eq!(stored_key(&HeaderMap::new()).unwrap(), None);
        assert_eq!(
            stored_key(&headers(b"order-42")).unwrap().as_deref(),
            Some("http:order-42")
        );
    }

    #[test]
    fn empty_long_or_binary_keys_are_refused_with_the_place() {
        for bad in [&b" "[..], &[b'k'; 256][..], &b"caf\xc3\xa9"[..]] {
            let problem = stored_key(&headers(bad)).unwrap_err();
            assert_eq!(problem.errors[0].place, PLACE, "{bad:?}");
        }
    }

    #[test]
    fn the_same_input_with_or_without_its_entry_id() {
        let started = json!({"id": ["start", "a"], "text": "hi"});
        assert!(same_input(&started, &json!({"text": "hi"})));
        assert!(same_input(
            &started,
            &json!({"id": ["start", "a"], "text": "hi"})
        ));
        assert!(!same_input(
            &started,
            &json!({"id": ["start", "b"], "text": "hi"})
        ));
        assert!(!same_input(&started, &json!({"text": "ho"})));
        assert!(!same_input(&started, &json!({})));
    }
}
