//! The structural difference of two versions of an FSM document: which states,
//! transitions and shared schemas were added, removed or changed (and, for a changed one,
//! which of its fields), and which other top-level fields changed. What `claij defs diff`
//! shows, and what a migration of parked runs from one version to the next is checked
//! against.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

/// How one named part differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    /// Only in the newer version.
    Added,
    /// Only in the older version.
    Removed,
    /// In both, not the same.
    Changed,
}

/// One named part that differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    /// Added, removed or changed.
    pub change: ChangeKind,
    /// The part: a state's id, a transition as `from → to`, a schema's name, a field.
    pub name: String,
    /// For a changed state or transition: its fields that differ (`action`,
    /// `config.prompt`, `schema`, …), sorted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
}

/// What differs between two versions of a document.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DocumentDiff {
    /// States, by id.
    pub states: Vec<Change>,
    /// Transitions, by `from → to`.
    pub transitions: Vec<Change>,
    /// Shared schemas (`schemas`), by name.
    pub schemas: Vec<Change>,
    /// The other top-level fields (`description`, `config`, `servers`, …; `version`
    /// aside).
    pub document: Vec<Change>,
}

impl DocumentDiff {
    /// Whether the two versions are the same but for their version number.
    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
            && self.transitions.is_empty()
            && self.schemas.is_empty()
            && self.document.is_empty()
    }
}

/// What differs from the document `from` to the document `to` (both as JSON).
pub fn diff_documents(from: &Value, to: &Value) -> DocumentDiff {
    DocumentDiff {
        states: changes(&states(from), &states(to), true),
        transitions: changes(&transitions(from), &transitions(to), true),
        schemas: changes(
            &entries(doc_field(from, "schemas")),
            &entries(doc_field(to, "schemas")),
            false,
        ),
        document: changes(&rest(from), &rest(to), false),
    }
}

fn doc_field<'a>(doc: &'a Value, field: &str) -> &'a Value {
    doc.get(field).unwrap_or(&Value::Null)
}

/// A document's states, by id.
fn states(doc: &Value) -> BTreeMap<String, &Value> {
    keyed(doc_field(doc, "states"), |s| {
        s["id"].as_str().map(str::to_owned)
    })
}

/// A document's transitions, by `from → to`.
fn transitions(doc: &Value) -> BTreeMap<String, &Value> {
    keyed(doc_field(doc, "xitions"), |t| {
        match t["id"].as_array()?.as_slice() {
            [Value::String(a), Value::String(b)] => Some(format!("{a} → {b}")),
            _ => None,
        }
    })
}

/// An object's entries, by name.
fn entries(object: &Value) -> BTreeMap<String, &Value> {
    object
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v)).collect())
        .unwrap_or_default()
}

/// A document's top-level fields but its states, transitions, schemas and version.
fn rest(doc: &Value) -> BTreeMap<String, &Value> {
    let mut fields = entries(doc);
    for part in ["states", "xitions", "schemas", "version"] {
        fields.remove(part);
    }
    fields
}

/// The items of a list, by the key `key` finds (items without one are left out).
fn keyed(list: &Value, key: impl Fn(&Value) -> Option<String>) -> BTreeMap<String, &Value> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| Some((key(item)?, item)))
        .collect()
}

/// The changes from `a` to `b`, in name order; with `fields`, a changed item says which
/// of its fields differ.
fn changes(
    a: &BTreeMap<String, &Value>,
    b: &BTreeMap<String, &Value>,
    fields: bool,
) -> Vec<Change> {
    let mut names: Vec<&String> = a.keys().chain(b.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter_map(|name| {
            let (change, fields) = match (a.get(name), b.get(name)) {
                (Some(_), None) => (ChangeKind::Removed, Vec::new()),
                (None, Some(_)) => (ChangeKind::Added, Vec::new()),
                (Some(x), Some(y)) if x != y => {
                    let differing = if fields {
                        differing_fields(x, y)
                    } else {
                        Vec::new()
                    };
                    (ChangeKind::Changed, differing)
                }
                _ => return None,
            };
            Some(Change {
                change,
                name: name.clone(),
                fields,
            })
        })
        .collect()
}

/// The fields of two objects that differ, one level into `config` (`config.prompt`).
fn differing_fields(a: &Value, b: &Value) -> Vec<String> {
    let empty = serde_json::Map::new();
    let (a, b) = (
        a.as_object().unwrap_or(&empty),
        b.as_object().unwrap_or(&empty),
    );
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out = Vec::new();
    for key in keys {
        let (x, y) = (a.get(key), b.get(key));
        if x == y {
            continue;
        }
        match (x, y) {
            (Some(Value::Object(_)), Some(Value::Object(_))) if key == "config" => {
                let (x, y) = (x.unwrap_or(&Value::Null), y.unwrap_or(&Value::Null));
                out.extend(
                    differing_fields(x, y)
                        .into_iter()
                        .map(|inner| format!("config.{inner}")),
                );
            }
            _ => out.push(key.clone()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v1() -> Value {
        json!({
            "id": "approval", "version": 1, "description": "Approve a deploy.",
            "schemas": {"Approval": {"type": "object"}, "Old": {"type": "string"}},
            "states": [
                {"id": "approve", "action": "human", "config": {"prompt": "Approve?", "channel": "ops"}},
                {"id": "legacy", "action": "end"},
                {"id": "deploy", "action": "end"}
            ],
            "xitions": [
                {"id": ["start", "approve"]},
                {"id": ["approve", "deploy"], "schema": {"type": "object"}},
                {"id": ["approve", "legacy"]}
            ]
        })
    }

    #[test]
    fn the_same_document_at_another_version_differs_in_nothing() {
        let mut v2 = v1();
        v2["version"] = json!(2);
        let diff = diff_documents(&v1(), &v2);
        assert!(diff.is_empty(), "{diff:?}");
    }

    #[test]
    fn added_removed_and_changed_parts_are_named_with_their_fields() {
        let v2 = json!({
            "id": "approval", "version": 2, "description": "Approve or escalate a deploy.",
            "schemas": {"Approval": {"type": "object", "required": ["by"]}, "New": {}},
            "states": [
                {"id": "approve", "action": "human", "config": {"prompt": "Approve it?", "channel": "ops"}, "timeout": "1d"},
                {"id": "escalate", "action": "human"},
                {"id": "deploy", "action": "end"}
            ],
            "xitions": [
                {"id": ["start", "approve"]},
                {"id": ["approve", "deploy"], "schema": {"type": "object", "required": ["by"]}},
                {"id": ["approve", "escalate"]}
            ]
        });
        let diff = diff_documents(&v1(), &v2);
        let change = |change, name: &str, fields: &[&str]| Change {
            change,
            name: name.into(),
            fields: fields.iter().map(|f| (*f).to_owned()).collect(),
        };
        use ChangeKind::{Added, Changed, Removed};
        assert_eq!(
            diff.states,
            [
                change(Changed, "approve", &["config.prompt", "timeout"]),
                change(Added, "escalate", &[]),
                change(Removed, "legacy", &[]),
            ]
        );
        assert_eq!(
            diff.transitions,
            [
                change(Changed, "approve → deploy", &["schema"]),
                change(Added, "approve → escalate", &[]),
                change(Removed, "approve → legacy", &[]),
            ]
        );
        assert_eq!(
            diff.schemas,
            [
                change(Changed, "Approval", &[]),
                change(Added, "New", &[]),
                change(Removed, "Old", &[]),
            ]
        );
        assert_eq!(diff.document, [change(Changed, "description", &[])]);
        assert_eq!(
            serde_json::to_value(&diff.states[0]).unwrap(),
            json!({"change": "changed", "name": "approve", "fields": ["config.prompt", "timeout"]})
        );
    }
}
