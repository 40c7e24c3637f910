//! The schemas of a document: the shared `schemas` (checked, then compiled beside each
//! other), each transition's schema (authored, `true`/absent, `false`, or a dynamic
//! `provider:name`), local `$ref`s resolved, and the effective schema (`id` added)
//! compiled, each problem reported at the keyword it names.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::diagnostic::{Collector, JsonPath, Problem};
use crate::fsm::TransitionSchema;
use crate::known_actions::KnownActions;
use crate::schema::{
    CompiledSchema, compilable_effective, effective_schema, local_ref_resolves, meta_errors,
    refs_in, with_defs,
};

/// The document's shared `schemas`, checked, as transition schemas see them.
pub(super) struct SharedSchemas {
    /// By name.
    defs: Map<String, Value>,
    /// `{"$defs": defs}`: where local `$ref`s resolve.
    root: Value,
    /// Whether every shared schema is sound; when one is not, no transition schema is
    /// compiled (each would fail on it again).
    sound: bool,
}

impl SharedSchemas {
    /// Checks every shared schema: its `$ref`s resolve, it is a valid JSON Schema, and,
    /// when all of them are, it compiles with the others beside it.
    pub(super) fn check(defs: &Map<String, Value>, found: &mut Collector) -> Self {
        let root = Value::Object(Map::from_iter([(
            "$defs".to_owned(),
            Value::Object(defs.clone()),
        )]));
        let at = |name: &str| JsonPath::root().join("schemas").join(name);
        let mut sound = true;
        for (name, schema) in defs {
            sound &= check_schema(schema, &root, &at(name), found);
        }
        if sound {
            for (name, schema) in defs {
                sound &= compile_authored(schema, defs, &at(name), found).is_some();
            }
        }
        Self {
            defs: defs.clone(),
            root,
            sound,
        }
    }

    /// A schema written elsewhere in the document (a trigger's), checked and compiled with
    /// the shared schemas beside it; `None` (with the problems reported) when it cannot be.
    pub(super) fn compile_at(
        &self,
        schema: &Value,
        at: &JsonPath,
        found: &mut Collector,
    ) -> Option<CompiledSchema> {
        if !check_schema(schema, &self.root, at, found) || !self.sound {
            return None;
        }
        compile_authored(schema, &self.defs, at, found)
    }
}

/// Checks a schema written at `at`: its `$ref`s resolve and it is a valid JSON Schema
/// (each bad keyword reported where it is written). Returns whether both hold.
fn check_schema(schema: &Value, root: &Value, at: &JsonPath, found: &mut Collector) -> bool {
    let refs_ok = refs_resolve(schema, root, at, found);
    let errors = meta_errors(schema);
    for e in &errors {
        found.push(
            Problem::BadSchema,
            at.join_pointer(&e.pointer),
            format!("not a valid JSON Schema: {}", e.message),
        );
    }
    refs_ok && errors.is_empty()
}

/// Compiles a schema written at `at`, the shared schemas beside it as `$defs`, reporting
/// a failure at the keyword it names (once, however many schemas share the keyword).
fn compile_authored(
    schema: &Value,
    defs: &Map<String, Value>,
    at: &JsonPath,
    found: &mut Collector,
) -> Option<CompiledSchema> {
    match CompiledSchema::compile(with_defs(schema, defs)) {
        Ok(compiled) => Some(compiled),
        Err(e) => {
            let here = match e.pointer.strip_prefix("/$defs/") {
                Some(inside) => JsonPath::root()
                    .join("schemas")
                    .join_pointer(&format!("/{inside}")),
                None => at.join_pointer(&e.pointer),
            };
            if !found.has_at(Problem::BadSchema, &here) {
                found.push(
                    Problem::BadSchema,
                    here,
                    format!("the schema does not compile: {}", e.message),
                );
            }
            None
        }
    }
}

/// Reports each `$ref` of `schema` that does not resolve; true when all do.
fn refs_resolve(schema: &Value, root: &Value, at: &JsonPath, found: &mut Collector) -> bool {
    let mut ok = true;
    for (pointer, target) in refs_in(schema) {
        let here = at.join_pointer(&pointer);
        match local_ref_resolves(&target, root) {
            Some(true) => {}
            Some(false) => {
                ok = false;
                let known: Vec<&String> = root
                    .get("$defs")
                    .and_then(Value::as_object)
                    .map(|m| m.keys().collect())
                    .unwrap_or_default();
                found.push(
                    Problem::UnresolvedRef,
                    here,
                    format!(
                        "`$ref` `{target}` does not resolve; shared schemas are referenced as `#/$defs/NAME` (defined: {})",
                        if known.is_empty() {
                            "none".to_owned()
                        } else {
                            known.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
                        }
                    ),
                );
            }
            None => {
                ok = false;
                found.push(
                    Problem::UnresolvedRef,
                    here,
                    format!("`$ref` `{target}` is not local; external schemas are not fetched, copy it into `schemas`"),
                );
            }
        }
    }
    ok
}

/// A transition's schema as the FSM keeps it: the authored form, the effective schema
/// (`id` added) and that compiled, each problem reported at `at`.
pub(super) fn transition_schema(
    authored: Option<Value>,
    (from, to): (&str, &str),
    at: &JsonPath,
    shared: &SharedSchemas,
    actions: &dyn KnownActions,
    found: &mut Collector,
) -> (TransitionSchema, Option<Value>, Option<Arc<CompiledSchema>>) {
    match authored {
        None | Some(Value::Bool(true)) => {
            let effective = effective_schema(from, to, None);
            let compiled = shared
                .sound
                .then(|| compile_effective(&effective, shared, at, found))
                .flatten();
            (TransitionSchema::Any, Some(effective), compiled)
        }
        Some(Value::Bool(false)) => {
            found.push(
                Problem::BadSchema,
                at.clone(),
                "`schema: false` accepts no event, so this transition could never be taken; remove the transition instead",
            );
            (TransitionSchema::Static(Value::Bool(false)), None, None)
        }
        Some(Value::String(name)) => {
            // A name not of the form `provider:name` is reported by the meta-schema.
            if !found.has_at(Problem::Format, at) && !actions.has_dynamic_schema(&name) {
                found.push(
                    Problem::UnknownDynamicSchema,
                    at.clone(),
                    format!("no provider serves the dynamic schema `{name}`"),
                );
            }
            (TransitionSchema::Dynamic(name), None, None)
        }
        Some(schema) => {
            let effective = effective_schema(from, to, Some(&schema));
            let compiled = (check_schema(&schema, &shared.root, at, found) && shared.sound)
                .then(|| compile_authored(&schema, &shared.defs, at, found))
                .flatten()
                .and_then(|_| compile_effective(&effective, shared, at, found));
            (TransitionSchema::Static(schema), Some(effective), compiled)
        }
    }
}

/// Compiles a transition's effective schema. The shared schemas (and the authored one,
/// if any) compiled already, so a failure here is the engine's doing; it is reported all
/// the same.
fn compile_effective(
    effective: &Value,
    shared: &SharedSchemas,
    at: &JsonPath,
    found: &mut Collector,
) -> Option<Arc<CompiledSchema>> {
    match CompiledSchema::compile(compilable_effective(effective, &shared.defs)) {
        Ok(c) => Some(Arc::new(c)),
        Err(e) => {
            found.push(
                Problem::BadSchema,
                at.clone(),
                format!(
                    "the schema does not compile once `id` is added: {}",
                    e.message
                ),
            );
            None
        }
    }
}
