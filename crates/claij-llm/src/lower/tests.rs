use serde_json::json;

use super::*;

fn kept(l: &Lowered) -> Vec<String> {
    l.notes
        .iter()
        .filter_map(|n| match n {
            Note::Kept { at, .. } => Some(at.clone()),
            Note::Relaxed { .. } => None,
        })
        .collect()
}

fn relaxed(l: &Lowered) -> Vec<(String, String)> {
    l.notes
        .iter()
        .filter_map(|n| match n {
            Note::Relaxed { at, keyword } => Some((at.clone(), keyword.clone())),
            Note::Kept { .. } => None,
        })
        .collect()
}

#[test]
fn all_of_is_merged_into_one_object() {
    let s = json!({"type": "object", "properties": {"id": {"const": ["a", "b"]}}, "required": ["id"],
        "allOf": [{"type": "object", "required": ["x"], "additionalProperties": false,
                   "properties": {"id": true, "x": {"type": "string", "maxLength": 5}}}]});
    let l = lower(&s, Target::JsonObject);
    assert!(l.exact(), "{:?}", l.notes);
    assert_eq!(
        l.schema,
        json!({"type": "object", "required": ["id", "x"], "additionalProperties": false,
            "properties": {"id": {"const": ["a", "b"]}, "x": {"type": "string", "maxLength": 5}}})
    );
}

#[test]
fn merging_intersects_types_enums_and_bounds_and_unions_required() {
    let s = json!({"allOf": [
        {"type": ["number", "string"], "minimum": 1, "maximum": 9, "enum": [1, 2, 3, "a"]},
        {"type": "integer", "minimum": 2, "maximum": 20, "enum": [2, 3, 4]}]});
    let l = lower(&s, Target::Tools);
    assert_eq!(
        l.schema,
        json!({"type": "integer", "minimum": 2, "maximum": 9, "enum": [2, 3]})
    );
    let s = json!({"allOf": [{"required": ["a"]}, {"required": ["b", "a"]}]});
    assert_eq!(
        lower(&s, Target::Tools).schema,
        json!({"required": ["a", "b"]})
    );
}

#[test]
fn a_closed_branch_drops_the_other_branch_s_extra_properties() {
    let s = json!({"allOf": [
        {"properties": {"a": {}}, "additionalProperties": false},
        {"properties": {"b": {"type": "string"}}}]});
    let l = lower(&s, Target::Tools);
    assert!(l.exact());
    assert_eq!(l.schema["properties"], json!({"a": {}}));
}

#[test]
fn conflicts_are_kept_as_written_and_said() {
    for (s, why) in [
        (json!({"allOf": [{"const": 1}, {"const": 2}]}), "`const`"),
        (
            json!({"allOf": [{"type": "string"}, {"type": "object"}]}),
            "no type",
        ),
        (json!({"allOf": [{"enum": [1]}, {"enum": [2]}]}), "no value"),
        (
            json!({"allOf": [{"properties": {"a": {}}, "additionalProperties": false},
                             {"required": ["b"], "properties": {"b": {}}}]}),
            "`b` is required",
        ),
        (
            json!({"allOf": [{"pattern": "a"}, {"pattern": "b"}]}),
            "`pattern` differs",
        ),
    ] {
        let l = lower(&s, Target::JsonObject);
        assert_eq!(l.schema, s, "kept as written");
        assert!(!l.complete());
        let shown = l
            .notes
            .iter()
            .map(Note::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        assert!(shown.contains(why), "{shown}");
        assert_eq!(kept(&l), vec!["/allOf".to_owned()]);
    }
}

#[test]
fn openai_strict_closes_objects_requires_everything_and_makes_optionals_nullable() {
    let s = json!({"type": "object", "required": ["a"], "properties": {
        "a": {"type": "string"},
        "b": {"type": "integer"},
        "c": {"enum": ["x", "y"]},
        "d": {"properties": {"e": {"type": "boolean"}}}}});
    let l = lower(&s, Target::OpenAiStrict);
    assert!(l.exact(), "{:?}", l.notes);
    assert_eq!(
        l.schema,
        json!({"type": "object", "additionalProperties": false, "required": ["a", "b", "c", "d"],
            "properties": {
                "a": {"type": "string"},
                "b": {"type": ["integer", "null"]},
                "c": {"anyOf": [{"enum": ["x", "y"]}, {"type": "null"}]},
                "d": {"type": ["object", "null"], "additionalProperties": false, "required": ["e"],
                    "properties": {"e": {"type": ["boolean", "null"]}}}}})
    );
}

#[test]
fn openai_strict_drops_what_it_does_not_enforce_and_says_so() {
    let s = json!({"type": "object", "required": ["s"], "properties": {
        "s": {"type": "string", "minLength": 1, "maxLength": 9, "format": "uri", "pattern": "^a"},
        "t": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}, "minProperties": 1});
    let l = lower(&s, Target::OpenAiStrict);
    assert!(l.complete() && !l.exact());
    assert_eq!(
        l.schema["properties"]["s"],
        json!({"type": "string", "pattern": "^a"})
    );
    assert_eq!(
        relaxed(&l),
        vec![
            ("/properties/s".into(), "format".into()),
            ("/properties/s".into(), "minLength".into()),
            ("/properties/s".into(), "maxLength".into()),
            ("/properties/t".into(), "oneOf".into()),
            ("".into(), "minProperties".into()),
        ]
    );
}

#[test]
fn openai_strict_keeps_what_it_cannot_say() {
    let s = json!({"type": "object", "required": ["a", "b", "c"], "properties": {
        "a": {}, "b": {"type": "array"}, "c": {"type": "object", "additionalProperties": {"type": "string"}}}});
    let l = lower(&s, Target::OpenAiStrict);
    assert!(!l.complete());
    assert_eq!(
        kept(&l),
        vec![
            "/properties/a",
            "/properties/b",
            "/properties/c/additionalProperties"
        ]
    );
}

#[test]
fn gemini_gets_enums_for_consts_and_no_additional_properties() {
    let s = json!({"type": "object", "additionalProperties": false, "$comment": "c",
        "properties": {"id": {"const": ["a", "b"]}, "n": {"type": "integer", "multipleOf": 2}}});
    let l = lower(&s, Target::Gemini);
    assert_eq!(
        l.schema,
        json!({"type": "object", "properties": {"id": {"enum": [["a", "b"]]}, "n": {"type": "integer"}}})
    );
    assert_eq!(
        relaxed(&l),
        vec![
            ("/properties/n".into(), "multipleOf".into()),
            ("".into(), "additionalProperties".into()),
        ]
    );
}

#[test]
fn json_object_drops_numeric_bounds_its_grammar_ignores() {
    let s = json!({"type": "integer", "minimum": 1, "maximum": 3});
    let l = lower(&s, Target::JsonObject);
    assert_eq!(l.schema, json!({"type": "integer"}));
    assert_eq!(relaxed(&l).len(), 2);
    let tools = lower(&s, Target::Tools);
    assert_eq!(tools.schema, s, "tool schemas keep them");
}

#[test]
fn strict_answers_lose_the_nulls_the_lowering_added() {
    let original = json!({"anyOf": [
        {"type": "object", "required": ["id"], "properties": {"id": {"const": ["s", "a"]}, "o": {"type": "string"}, "n": {"type": ["string", "null"]}}},
        {"type": "object", "required": ["id", "o"], "properties": {"id": {"const": ["s", "b"]}, "o": {"type": ["string", "null"]}}}]});
    assert_eq!(
        nulls::strip(&json!({"id": ["s", "a"], "o": null, "n": null}), &original),
        json!({"id": ["s", "a"], "n": null}),
        "`o` may be absent, not null; `n` may be null"
    );
    assert_eq!(
        nulls::strip(&json!({"id": ["s", "b"], "o": null}), &original),
        json!({"id": ["s", "b"], "o": null}),
        "required"
    );
    assert_eq!(
        nulls::fill(&json!({"id": ["s", "a"], "zz": 1}), &original),
        json!({"id": ["s", "a"], "o": null, "n": null})
    );
}

#[test]
fn the_checker_catches_an_unfaithful_lowering() {
    let original = json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "string", "maxLength": 3}}});
    let samples = faithful::samples(&original);
    assert!(samples.len() > 5);
    let good = lower(&original, Target::OpenAiStrict);
    let r = faithful::check(&original, &good, &samples).unwrap();
    assert!(r.disagreements.is_empty(), "{:?}", r.disagreements);
    assert!(r.admitted > 0 && r.admitted < r.checked);
    // A lowering that claims exactness but dropped `maxLength`.
    let lying = Lowered {
        schema: json!({"type": "object", "required": ["a"], "additionalProperties": false, "properties": {"a": {"type": "string"}}}),
        target: Target::OpenAiStrict,
        notes: Vec::new(),
    };
    let r = faithful::check(&original, &lying, &samples).unwrap();
    assert!(!r.disagreements.is_empty());
    // One that loses valid answers.
    let losing = Lowered {
        schema: json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}}),
        target: Target::Tools,
        notes: vec![Note::Relaxed {
            at: String::new(),
            keyword: "x".into(),
        }],
    };
    let r = faithful::check(&original, &losing, &samples).unwrap();
    assert!(
        r.disagreements
            .iter()
            .any(|d| d.why.starts_with("the original admits"))
    );
}

#[test]
fn what_is_beside_one_of_goes_into_each_branch() {
    // An MCP call as `mcp:NAME:call` builds it: the route's `id` required beside one
    // branch per tool (llama.cpp's grammar enforced the branch alone, and the model left
    // out the `id`).
    let call = json!({"type": "object", "required": ["id"], "properties": {"id": {"const": ["a", "a.mcp"]}},
    "description": "One request.",
    "oneOf": [
        {"type": "object", "required": ["method", "params"], "additionalProperties": false,
         "properties": {"method": {"const": "tools/call"}, "id": {}, "params": {"type": "object"}}},
        {"type": "object", "required": ["method", "uri"], "additionalProperties": false,
         "properties": {"method": {"const": "resources/read"}, "id": {}, "uri": {"type": "string"}}}
    ]});
    for target in [Target::JsonObject, Target::OpenAiStrict, Target::Gemini] {
        let l = lower(&call, target);
        let key = if target == Target::JsonObject {
            "oneOf"
        } else {
            "anyOf"
        };
        let top = l.schema.as_object().unwrap();
        assert_eq!(
            top.keys()
                .filter(|k| *k != "description")
                .collect::<Vec<_>>(),
            [key],
            "{target:?}: {}",
            l.schema
        );
        for branch in top[key].as_array().unwrap() {
            assert!(
                branch["required"]
                    .as_array()
                    .unwrap()
                    .contains(&json!("id")),
                "{branch}"
            );
            let id = &branch["properties"]["id"];
            assert!(
                id.get("const").is_some() || id.get("enum").is_some(),
                "{target:?}: {branch}"
            );
        }
        let samples = faithful::samples(&call);
        let r = faithful::check(&call, &l, &samples).unwrap();
        assert!(
            r.disagreements.is_empty(),
            "{target:?}: {:?}",
            r.disagreements
        );
    }
    // Tools read JSON Schema as written.
    assert_eq!(lower(&call, Target::Tools).schema["oneOf"], call["oneOf"]);
}
