//! Moving a parked run to another version of its FSM: what the trail records of it (a
//! `migrated` entry, see [`MigrationEvent`]) and how a trail that passed through one is
//! read (the states it names before the move are renamed by the move's map).
//!
//! The checks that decide whether a run can move, and the move itself, are the engine's
//! (`claij_engine::migrate`) and the store's
//! ([`Runs::migrate_run`](crate::store::Runs::migrate_run)).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::trail::{FailureKind, TrailEntry};

/// Where the states of the old version go in the new one: `OLD → NEW` (`--map OLD=NEW`);
/// a state not named keeps its name.
pub type StateMap = BTreeMap<String, String>;

/// A definition a run is pinned to, and the state it is in there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pin {
    /// The FSM's version.
    pub version: u32,
    /// The definition's content hash.
    pub hash: String,
    /// The run's state in it.
    pub state: String,
}

/// The event of a `migrated` trail entry: the run moved from one definition to another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigrationEvent {
    /// Where it was.
    pub from: Pin,
    /// Where it is now.
    pub to: Pin,
    /// The states renamed by the move (empty: every state kept its name).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub map: StateMap,
}

/// The migration an entry records, if it is a `migrated` entry.
pub fn migration_of(entry: &TrailEntry) -> Option<MigrationEvent> {
    entry
        .failure
        .as_deref()
        .filter(|f| f.kind == FailureKind::Migrated)
        .and_then(|_| serde_json::from_value(entry.event.clone()).ok())
}

/// The state `name` of an older version as the newest version names it: renamed by each
/// migration's map in turn.
pub fn renamed<'m>(name: &str, maps: impl IntoIterator<Item = &'m StateMap>) -> Arc<str> {
    let mut name = name.to_owned();
    for map in maps {
        if let Some(new) = map.get(&name) {
            name = new.clone();
        }
    }
    name.into()
}

/// The transition that led into the run's current state, as `(from, to)` in the names of
/// the version the run is pinned to now: the last transition of the trail, its states
/// renamed by the migrations recorded after it.
pub fn entered_by(trail: &[TrailEntry]) -> Option<(Arc<str>, Arc<str>)> {
    let at = trail.iter().rposition(TrailEntry::is_transition)?;
    let entry = &trail[at];
    let maps: Vec<StateMap> = trail[at + 1..]
        .iter()
        .filter_map(migration_of)
        .map(|m| m.map)
        .collect();
    let to = entry.to.as_deref()?;
    Some((renamed(&entry.from, &maps), renamed(to, &maps)))
}

/// The versions a run's trail passed through, in order (each once per stretch).
pub fn versions(trail: &[TrailEntry]) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::new();
    for entry in trail {
        if out.last() != Some(&entry.version) {
            out.push(entry.version);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trail::Failure;
    use serde_json::json;
    use std::time::SystemTime;

    fn entry(seq: u64, version: u32, from: &str, to: Option<&str>) -> TrailEntry {
        TrailEntry {
            seq,
            fsm: "f".into(),
            version,
            from: from.into(),
            to: to.map(Into::into),
            event: json!({}),
            at: SystemTime::UNIX_EPOCH,
            attempt: 1,
            model: None,
            enforce: None,
            summary: None,
            votes: None,
            usage: None,
            duration_ms: None,
            failure: None,
        }
    }

    fn migrated(seq: u64, map: &[(&str, &str)]) -> TrailEntry {
        let event = MigrationEvent {
            from: Pin {
                version: 1,
                hash: "a".into(),
                state: "approve".into(),
            },
            to: Pin {
                version: 2,
                hash: "b".into(),
                state: "review".into(),
            },
            map: map
                .iter()
                .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
                .collect(),
        };
        TrailEntry {
            event: serde_json::to_value(&event).unwrap_or_default(),
            failure: Some(Box::new(Failure {
                kind: FailureKind::Migrated,
                message: "migrated".into(),
                errors: Vec::new(),
                attempt: 1,
            })),
            ..entry(seq, 2, "review", None)
        }
    }

    #[test]
    fn the_transition_into_a_state_is_renamed_by_later_migrations() {
        let trail = vec![
            entry(0, 1, "start", Some("draft")),
            entry(1, 1, "draft", Some("approve")),
            migrated(2, &[("approve", "review")]),
        ];
        let (from, to) = entered_by(&trail).unwrap_or_else(|| panic!("a transition"));
        assert_eq!((&*from, &*to), ("draft", "review"));
        assert_eq!(versions(&trail), vec![1, 2]);
        assert!(migration_of(&trail[2]).is_some());
        assert!(migration_of(&trail[1]).is_none());
        // Without a map the names stand.
        let trail = vec![entry(0, 1, "start", Some("draft")), migrated(1, &[])];
        let (from, to) = entered_by(&trail).unwrap_or_else(|| panic!("a transition"));
        assert_eq!((&*from, &*to), ("start", "draft"));
    }
}
