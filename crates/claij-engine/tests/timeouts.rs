//! Each state's attempt limit as the registry resolves it: the state's `timeout`, the
//! document's, the operator's default for the action, the action's own.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::time::Duration;

use claij_core::{LimitSource, Timeout, load_str};
use claij_engine::ActionRegistry;

const DOC: &str = "id: t
states:
  - {id: run, action: command, config: {argv: ['true']}}
  - {id: own, action: command, config: {timeout: 3s, argv: ['true']}}
  - {id: child, action: fsm, config: {fsm: {id: other}, success_to: ask}}
  - {id: ask, action: human}
  - {id: z, action: end}
xitions:
  - id: [start, run]
  - id: [run, own]
  - id: [own, child]
  - id: [child, ask]
  - id: [ask, z]
";

fn limits(registry: &ActionRegistry, doc: &str) -> Vec<(Timeout, LimitSource)> {
    let fsm = load_str("t.yaml", doc, registry).unwrap_or_else(|e| panic!("{e}"));
    ["run", "own", "child", "ask"]
        .iter()
        .map(|id| {
            let limit = registry.attempt_limit(&fsm, fsm.state(id).unwrap());
            (limit.timeout, limit.source)
        })
        .collect()
}

fn after(secs: u64) -> Timeout {
    Timeout::After(Duration::from_secs(secs))
}

#[test]
fn each_action_has_a_default_the_operator_then_the_document_then_the_state_override() {
    let mut registry = ActionRegistry::durable();
    assert_eq!(
        limits(&registry, DOC),
        [
            (after(600), LimitSource::BuiltIn),
            (after(3), LimitSource::State),
            (after(3600), LimitSource::BuiltIn),
            (Timeout::Unbounded, LimitSource::BuiltIn),
        ]
    );
    registry.set_default_timeout("command", after(2)).unwrap();
    registry.set_default_timeout("human", after(9)).unwrap();
    assert_eq!(
        limits(&registry, DOC),
        [
            (after(2), LimitSource::Operator),
            (after(3), LimitSource::State),
            (after(3600), LimitSource::BuiltIn),
            (after(9), LimitSource::Operator),
        ]
    );
    let documented = DOC.replace("id: t\n", "id: t\nconfig: {timeout: none}\n");
    assert_eq!(
        limits(&registry, &documented),
        [
            (Timeout::Unbounded, LimitSource::Document),
            (after(3), LimitSource::State),
            (Timeout::Unbounded, LimitSource::Document),
            (Timeout::Unbounded, LimitSource::Document),
        ]
    );
}

#[test]
fn an_operator_default_for_no_action_is_refused() {
    let mut registry = ActionRegistry::durable();
    let refused = registry
        .set_default_timeout("comand", after(2))
        .unwrap_err();
    assert_eq!(refused.action, "comand");
    assert!(refused.to_string().contains("command"), "{refused}");
}
