//! Every field of every action this binary registers, and of an MCP server's entry, says
//! what it touches outside the run (claij-engine's `capability`): a field added without
//! saying fails here, and so does a field said to touch something whose value the
//! action's `needs` does not report.

use std::sync::Arc;

use claij_core::{JsonPath, KnownActions};
use claij_engine::action::unclassified;
use claij_engine::capability::{NeedsOf, Touch, unclassified_in};
use serde_json::{Map, Value, json};

/// The registry `claij serve`, `claij worker` and `claij run` assemble.
fn registry_of_the_binary() -> Arc<claij_engine::Engine> {
    let layer = Arc::new(claij_llm::LlmLayer::default());
    let app = match crate::app::App::start() {
        Ok(app) => app,
        Err(e) => panic!("the application starts: {e}"),
    };
    Arc::new(app.engine(true, layer))
}

/// A document with one MCP server `X`, for the needs of states that name servers.
fn with_a_server(registry: &claij_engine::ActionRegistry) -> claij_core::Fsm {
    let document = json!({
        "id": "sample",
        "servers": {"X": {"command": "sample-program", "env": {"SAMPLE": "1"}, "cwd": "/sample", "roots": ["/sample"]}},
        "states": [{"id": "a", "action": "transform", "config": {"template": "{}"}}, {"id": "end", "action": "end"}],
        "xitions": [{"id": ["start", "a"]}, {"id": ["a", "end"]}]
    });
    match claij_core::load_value("sample", document, registry) {
        Ok(fsm) => fsm,
        Err(d) => panic!("the sample document loads: {d}"),
    }
}

/// A config holding a sample value at `pointer` (objects and arrays made on the way).
fn sample_config(pointer: &str, touch: Touch) -> Value {
    let value = match touch {
        Touch::Environment => json!({"SAMPLE": "1"}),
        Touch::Servers => json!(["X"]),
        _ => json!("sample"),
    };
    let segments: Vec<&str> = pointer.split('/').skip(1).collect();
    segments.iter().rev().fold(value, |inner, segment| {
        if let Ok(i) = segment.parse::<usize>() {
            let mut items = vec![Value::Null; i];
            items.push(inner);
            Value::Array(items)
        } else {
            let mut map = Map::new();
            map.insert((*segment).to_owned(), inner);
            Value::Object(map)
        }
    })
}

#[test]
fn every_config_field_of_every_registered_action_says_what_it_touches() {
    let engine = registry_of_the_binary();
    let registry = engine.registry();
    let names = registry.action_names();
    for expected in ["llm", "mcp", "command", "fsm", "fork", "transform", "human"] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
    let fsm = with_a_server(registry);
    for name in &names {
        let action = registry.action(name).map(Arc::clone);
        let action = action.unwrap_or_else(|| panic!("`{name}` is registered"));
        let missing = unclassified(action.as_ref());
        assert!(
            missing.is_empty(),
            "the `{name}` action's config fields {missing:?} do not say what they touch (Action::touches)"
        );
        for field in action.touches() {
            if field.touch == Touch::Nothing {
                continue;
            }
            let config = sample_config(field.pointer, field.touch);
            let needs = action.needs(NeedsOf {
                config: &config,
                at: &JsonPath::root(),
                fsm: &fsm,
            });
            assert!(
                needs.iter().any(|n| n.touch == field.touch),
                "`{name}`: {config} at {} touches {:?}, but its needs are {needs:?}",
                field.pointer,
                field.touch
            );
        }
    }
}

#[test]
fn every_field_of_an_mcp_servers_entry_says_what_it_touches() {
    let meta: Value = serde_json::from_str(claij_core::META_SCHEMA).unwrap_or_default();
    let server = &meta["$defs"]["server"];
    assert!(server.is_object(), "the meta-schema describes a server");
    let missing = unclassified_in(server, claij_mcp::spec::SERVER_FIELDS);
    assert!(
        missing.is_empty(),
        "an MCP server's fields {missing:?} do not say what they touch (claij_mcp::spec::SERVER_FIELDS)"
    );
    let engine = registry_of_the_binary();
    let fsm = with_a_server(engine.registry());
    let found: Vec<Touch> = claij_mcp::spec::server_needs(&fsm, "X")
        .into_iter()
        .map(|n| n.touch)
        .collect();
    for touch in [Touch::Program, Touch::Environment, Touch::File] {
        assert!(found.contains(&touch), "{touch:?} in {found:?}");
    }
}

#[test]
fn the_check_fails_for_a_field_that_does_not_say() {
    // The check itself: a config schema with a field no `Field` covers is reported.
    let schema = json!({"type": "object", "properties": {"template": {}, "url": {}}});
    let fields = [claij_engine::Field::inert("/template")];
    assert_eq!(unclassified_in(&schema, &fields), ["/url"]);
}
