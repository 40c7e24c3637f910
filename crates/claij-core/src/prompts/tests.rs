//! The projection of trails into prompts, case by case.

use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{Value, json};

use super::*;
use crate::known_actions::{BuiltinNames, ConfigIssue, KnownActions};
use crate::schema::{SchemaError, ValidationIssue};
use crate::trail::FailureKind;

const DOC: &str = r##"
id: t
prompts: ["FSM-PROMPT"]
schemas:
  thing:
    type: object
    description: ZEBRA-DEF-42
    required: [n]
    properties: {n: {type: integer}}
states:
  - {id: asker, action: llm, prompts: ["STATE-PROMPT"]}
  - {id: tool, action: command, config: {program: "x"}}
  - {id: hidden, action: transform}
  - {id: done, action: end}
  - {id: gave-up, action: end}
xitions:
  - id: [start, asker]
    description: The input.
    prompts: ["ENTRY-PROMPT"]
    schema: {$ref: "#/$defs/thing"}
  - id: [asker, tool]
    description: Run the tool.
    prompts: ["TOOL-PROMPT"]
    schema: {type: object, required: [arg], properties: {arg: {type: string}}}
  - id: [tool, asker]
    description: The tool's output.
    prompts: ["BACK-PROMPT"]
    schema: {type: object, required: [thing], properties: {thing: {$ref: "#/$defs/thing"}}}
  - id: [asker, hidden]
    omit: true
  - id: [hidden, asker]
    omit: true
  - id: [asker, done]
    description: Finished.
    schema: {type: object, required: [answer], properties: {answer: {type: string}}}
  - id: [asker, gave-up]
    description: The engine gives up.
    omit: true
"##;

fn fsm() -> Fsm {
    crate::load_str("t.yaml", DOC, &BuiltinNames).unwrap()
}

pub(super) fn step(seq: u64, from: &str, to: &str, event: Value) -> TrailEntry {
    TrailEntry {
        seq,
        fsm: "t".into(),
        version: 1,
        from: from.into(),
        to: Some(to.into()),
        event,
        at: SystemTime::UNIX_EPOCH,
        attempt: 1,
        model: None,
        usage: None,
        enforce: None,
        summary: None,
        votes: None,
        duration_ms: None,
        failure: None,
    }
}

/// A transition entry whose event is `fields` plus the `id` of [from, to].
pub(super) fn hop(seq: u64, from: &str, to: &str, fields: Value) -> TrailEntry {
    let mut event = serde_json::Map::new();
    event.insert("id".into(), json!([from, to]));
    if let Value::Object(map) = fields {
        event.extend(map);
    }
    step(seq, from, to, Value::Object(event))
}

pub(super) fn failed(seq: u64, from: &str, event: Value, kind: FailureKind) -> TrailEntry {
    TrailEntry {
        to: None,
        failure: Some(Box::new(Failure {
            kind,
            message: "the answer was rejected".into(),
            errors: vec![
                ValidationIssue {
                    instance_path: "/arg".into(),
                    schema_path: "/properties/arg/type".into(),
                    message: "5 is not of type \"string\"".into(),
                },
                ValidationIssue {
                    instance_path: String::new(),
                    schema_path: "/required".into(),
                    message: "\"extra\" is required".into(),
                },
            ],
            attempt: 2,
        })),
        ..step(seq, from, "", event)
    }
}

/// The input, the model asking the tool, the tool answering: a round through `tool`.
fn round_trip() -> [TrailEntry; 3] {
    [
        hop(0, "start", "asker", json!({"n": 1})),
        hop(1, "asker", "tool", json!({"arg": "a"})),
        hop(2, "tool", "asker", json!({"thing": {"n": 2}})),
    ]
}

pub(super) fn roles(messages: &[Message]) -> Vec<Role> {
    messages.iter().map(|m| m.role).collect()
}

/// `request` (a [`task_message`]) with `document` shown as its input: after the prompts,
/// before the answer instructions.
fn with_input(request: &str, document: &str) -> String {
    let at = request
        .find("Answer with")
        .unwrap_or_else(|| panic!("answer instructions in {request}"));
    let (prompts, answer) = request.split_at(at);
    format!("{prompts}Input:\n{document}\n\n{answer}")
}

/// No message carries the labels of the former layout, nor the routing `id` of a
/// document the model was handed.
fn assert_plainly_asked(messages: &[Message]) {
    for old in [
        "DOCUMENT",
        "INPUT-SCHEMA",
        "OUTPUT-SCHEMA",
        "User messages show",
        "\"id\":[\"start\"",
    ] {
        for m in messages {
            assert!(!m.content.contains(old), "{old} in {}", m.content);
        }
    }
}

/// How often `needle` occurs in all of `messages`.
fn count(messages: &[Message], needle: &str) -> usize {
    messages
        .iter()
        .map(|m| m.content.matches(needle).count())
        .sum()
}

/// The effective schema of the transition `from` → `to`, as compact JSON.
fn effective(fsm: &Fsm, from: &str, to: &str) -> String {
    fsm.transition(from, to)
        .unwrap()
        .effective
        .as_ref()
        .unwrap()
        .to_string()
}

#[test]
fn roles_follow_the_producing_state_and_each_answer_follows_its_request() {
    let fsm = fsm();
    let trail = round_trip();
    let opts = PromptOptions::default();
    let m = trail_to_prompts(&fsm, &trail, "asker", &opts);
    // The input and the tool's result are not messages of their own: each shows inside
    // the request of the model state it leads into.
    assert_eq!(
        roles(&m),
        [Role::System, Role::User, Role::Assistant, Role::User]
    );
    // The assistant's message is the event itself, as compact JSON, after the request it
    // answered: the state's task as entered from `start`, showing the run's input.
    assert_eq!(m[2].content, r#"{"id":["asker","tool"],"arg":"a"}"#);
    assert_eq!(
        m[1].content,
        with_input(
            &task_message(&fsm, "asker", fsm.transition("start", "asker"), &opts),
            r#"{"n":1}"#
        )
    );
    // The conversation ends with the request to the state now, entered from the tool and
    // showing the tool's result.
    assert_eq!(
        m[3].content,
        with_input(
            &task_message(&fsm, "asker", fsm.transition("tool", "asker"), &opts),
            r#"{"thing":{"n":2}}"#
        )
    );
    assert!(m[3].content.contains("BACK-PROMPT") && !m[3].content.contains("ENTRY-PROMPT"));
    assert!(!m[3].content.contains(r#"{"n":1}"#), "{}", m[3].content);
    assert_plainly_asked(&m);
}

#[test]
fn the_input_is_inside_the_request_without_its_id_and_without_a_schema() {
    let fsm = fsm();
    let trail = [hop(0, "start", "asker", json!({"n": 1}))];
    let opts = PromptOptions::default();
    let m = trail_to_prompts(&fsm, &trail, "asker", &opts);
    assert_eq!(roles(&m), [Role::System, Role::User]);
    let request = &m[1].content;
    assert!(
        request.starts_with("STATE-PROMPT\n\nENTRY-PROMPT\n\nInput:\n{\"n\":1}\n\nAnswer with"),
        "{request}"
    );
    assert_eq!(
        *request,
        with_input(
            &task_message(&fsm, "asker", fsm.transition("start", "asker"), &opts),
            r#"{"n":1}"#
        )
    );
    // Neither the input's schema nor its routing `id`.
    assert!(
        !request.contains(&effective(&fsm, "start", "asker")),
        "{request}"
    );
    assert!(
        !request.contains(r##""$ref":"#/$defs/thing""##),
        "{request}"
    );
    assert_plainly_asked(&m);
}

#[test]
fn a_document_no_model_state_reads_is_a_message_of_its_own() {
    let fsm = crate::load_str(
        "w.yaml",
        r#"
id: w
states:
  - {id: fetch, action: command, config: {program: "x"}}
  - {id: clean, action: command, config: {program: "y"}}
  - {id: ask, action: llm, prompts: ["ASK-PROMPT"]}
  - {id: done, action: end}
xitions:
  - id: [start, fetch]
  - id: [fetch, clean]
  - id: [clean, ask]
  - id: [ask, done]
"#,
        &BuiltinNames,
    )
    .unwrap();
    let trail = [
        hop(0, "start", "fetch", json!({"url": "U"})),
        hop(1, "fetch", "clean", json!({"page": "P"})),
        hop(2, "clean", "ask", json!({"text": "T"})),
    ];
    let opts = PromptOptions::default();
    let m = trail_to_prompts(&fsm, &trail, "ask", &opts);
    assert_eq!(
        roles(&m),
        [Role::System, Role::User, Role::User, Role::User]
    );
    // The run's input, then a program's result, each without its `id`.
    assert_eq!(m[1].content, "Input:\n{\"url\":\"U\"}");
    assert_eq!(m[2].content, "Result of `fetch`:\n{\"page\":\"P\"}");
    // What leads into the model state is its request's input.
    assert_eq!(
        m[3].content,
        with_input(
            &task_message(&fsm, "ask", fsm.transition("clean", "ask"), &opts),
            r#"{"text":"T"}"#
        )
    );
    assert!(m[3].content.starts_with("ASK-PROMPT\n\nInput:\n"));
    assert_plainly_asked(&m);
}

#[test]
fn the_request_gives_prompts_then_the_input_then_routes_then_the_schema_then_the_answer_s_shape() {
    let fsm = fsm();
    let opts = PromptOptions::default();
    let m = trail_to_prompts(&fsm, &round_trip(), "asker", &opts);
    let t = &m.last().unwrap().content;
    let at = |needle: &str| t.find(needle).unwrap_or_else(|| panic!("{needle} in {t}"));
    assert!(at("STATE-PROMPT") < at("BACK-PROMPT"));
    assert!(at("BACK-PROMPT") < at("\n\nInput:\n{\"thing\":{\"n\":2}}\n\n"));
    assert!(at("Input:") < at("Answer with one JSON object. Its `id` picks"));
    assert!(at("Answer with") < at("must be one of:"));
    let expected = format!(
        "\n\nIt must satisfy this JSON Schema:\n\
             {{\"oneOf\":[{},{}]}}\n\
             An answer looks like this, each <…> replaced by a value:\n\
             {{\"arg\": \"<text>\", \"id\": [\"asker\",\"tool\"]}}\n\
             {{\"answer\": \"<text>\", \"id\": [\"asker\",\"done\"]}}",
        effective(&fsm, "asker", "tool"),
        effective(&fsm, "asker", "done"),
    );
    assert!(t.ends_with(&expected), "{t}");
    assert!(!t.contains("OUTPUT-SCHEMA"), "{t}");
    assert!(!t.contains("FSM-PROMPT") && !t.contains("ENTRY-PROMPT") && !t.contains("TOOL-PROMPT"));
    // One way out: its schema alone.
    let one = task_message(&fsm, "tool", None, &opts);
    let expected = format!(
        "Answer with one JSON object. Its `id` picks what happens next and must be one of:\n\
         - [\"tool\",\"asker\"]: The tool's output.\n\n\
         It must satisfy this JSON Schema:\n{}\n\
         An answer looks like this, each <…> replaced by a value:\n\
         {{\"thing\": {{\"n\": <integer>}}, \"id\": [\"tool\",\"asker\"]}}",
        {
            // The schema whole: the one shared definition it refers to as its `$defs`.
            let mut schema = fsm
                .transition("tool", "asker")
                .unwrap()
                .effective
                .clone()
                .unwrap();
            schema["$defs"] = json!({"thing": fsm.schemas["thing"]});
            schema
        },
    );
    assert!(one.ends_with(&expected), "{one}");
    // No way out: nothing to answer.
    assert!(
        task_message(&fsm, "done", None, &opts)
            .ends_with("No transition leaves `done`: no answer is expected.")
    );
}

#[test]
fn routing_rules_list_exactly_the_shown_outgoing_ids() {
    let fsm = fsm();
    let s = task_message(&fsm, "asker", None, &PromptOptions::default());
    let rules: Vec<&str> = s.lines().filter(|l| l.starts_with("- ")).collect();
    // [asker, hidden] and [asker, gave-up] are omitted: never shown.
    assert_eq!(
        rules,
        [
            r#"- ["asker","tool"]: Run the tool."#,
            r#"- ["asker","done"]: Finished."#
        ]
    );
    assert!(s.contains("Its `id` picks what happens next and must be one of:"));
    assert!(!s.contains("hidden") && !s.contains("gave-up"), "{s}");
    // A state whose every way out is omitted still gets its routes.
    let h = task_message(&fsm, "hidden", None, &PromptOptions::default());
    let rules: Vec<&str> = h.lines().filter(|l| l.starts_with("- ")).collect();
    assert_eq!(rules, [r#"- ["hidden","asker"]"#]);
}

/// `count` answers with a shared schema, checked by a program that hands it back.
fn counting() -> Fsm {
    crate::load_str(
        "r.yaml",
        r##"
id: r
prompts: ["FSM-PROMPT"]
schemas:
  thing:
    type: object
    description: ZEBRA-DEF-42
    required: [n]
    properties: {n: {type: integer}}
states:
  - {id: count, action: llm, prompts: ["STATE-PROMPT"]}
  - {id: check, action: command, config: {program: "x"}}
  - {id: done, action: end}
xitions:
  - id: [start, count]
    prompts: ["ENTRY-PROMPT"]
    schema: {$ref: "#/$defs/thing"}
  - id: [count, check]
    schema: {$ref: "#/$defs/thing"}
  - id: [check, count]
    prompts: ["BACK-PROMPT"]
    schema: {$ref: "#/$defs/thing"}
  - id: [count, done]
"##,
        &BuiltinNames,
    )
    .unwrap()
}

#[test]
fn the_system_message_is_the_fsm_s_and_the_same_for_every_state() {
    let fsm = counting();
    let s = system_message(&fsm);
    // The FSM's prompts alone: no paragraph about the layout, no shared schemas (each
    // answer's JSON Schema carries those it refers to).
    assert_eq!(s, "FSM-PROMPT");
    for state_specific in [
        "STATE-PROMPT",
        "ENTRY-PROMPT",
        "BACK-PROMPT",
        "JSON Schema:",
        "Input:",
    ] {
        assert!(!s.contains(state_specific), "{state_specific} in {s}");
    }
    let trail = [hop(0, "start", "count", json!({"n": 1}))];
    let opts = PromptOptions::default();
    assert_eq!(trail_to_prompts(&fsm, &trail, "count", &opts)[0].content, s);
    assert_eq!(trail_to_prompts(&fsm, &trail, "check", &opts)[0].content, s);
}

#[test]
fn each_step_s_conversation_extends_the_previous_one() {
    // What lets an engine that keeps a prompt's prefix computed compute only what is new.
    let fsm = fsm();
    let opts = PromptOptions::default();
    let trail = [
        round_trip().to_vec(),
        vec![
            failed(
                3,
                "asker",
                json!({"id": ["asker", "tool"], "arg": 5}),
                FailureKind::Validation,
            ),
            hop(4, "asker", "done", json!({"answer": "x"})),
        ],
    ]
    .concat();
    // The model's steps: asked after entry 0, after entry 2 and after the failure.
    let first = trail_to_prompts(&fsm, &trail[..1], "asker", &opts);
    let second = trail_to_prompts(&fsm, &trail[..3], "asker", &opts);
    let third = trail_to_prompts(&fsm, &trail[..4], "asker", &opts);
    let after = trail_to_prompts(&fsm, &trail, "done", &opts);
    // The first request shows the run's input, and later steps show it the same way.
    assert!(first[1].content.contains("Input:\n{\"n\":1}"), "{first:#?}");
    for (earlier, later) in [(&first, &second), (&second, &third), (&third, &after)] {
        assert!(later.len() > earlier.len());
        assert_eq!(&later[..earlier.len()], &earlier[..]);
    }
    // What the model answered comes right after the request.
    assert_eq!(second[first.len()].role, Role::Assistant);
    assert_eq!(after[third.len()].role, Role::Assistant);
}

#[test]
fn a_state_without_a_model_gets_no_request() {
    let fsm = fsm();
    let trail = [
        round_trip().to_vec(),
        vec![hop(3, "asker", "done", json!({"answer": "x"}))],
    ]
    .concat();
    // A non-llm producer going to a terminal state: just the document.
    let fsm2 = crate::load_str(
        "u.yaml",
        "id: u\nstates: [{id: a, action: command}, {id: z, action: end}]\n\
             xitions: [{id: [start, a]}, {id: [a, z]}]\n",
        &BuiltinNames,
    )
    .unwrap();
    let m2 = trail_to_prompts(
        &fsm2,
        &[hop(0, "a", "z", json!({}))],
        "z",
        &PromptOptions::default(),
    );
    assert_eq!(roles(&m2), [Role::System, Role::User]);
    assert_eq!(m2[1].content, "Result of `a`:\n{}");
    // The llm's final answer is an assistant message as usual, and ends the conversation.
    let m = trail_to_prompts(&fsm, &trail, "done", &PromptOptions::default());
    assert_eq!(m.last().unwrap().role, Role::Assistant);
}

#[test]
fn omitted_transitions_are_skipped_but_failures_never() {
    let fsm = fsm();
    let trail = [
        step(
            0,
            "start",
            "asker",
            json!({"id": ["start", "asker"], "n": 1}),
        ),
        hop(1, "asker", "hidden", json!({"secret": 1})),
        failed(
            2,
            "hidden",
            json!({"id": ["hidden", "nowhere"]}),
            FailureKind::UnknownTransition,
        ),
        hop(3, "hidden", "asker", json!({"secret": 2})),
        hop(4, "asker", "tool", json!({"arg": "a"})),
    ];
    let m = trail_to_prompts(&fsm, &trail, "tool", &PromptOptions::default());
    // The omitted answer is not shown, nor the request it answered; the failure is, then
    // the request of `asker`'s next visit (its omitted input not inside it) and its answer.
    let n = m.len();
    assert!(n >= 4, "{m:#?}");
    assert_eq!(
        roles(&m[n - 3..]),
        [Role::User, Role::User, Role::Assistant]
    );
    assert!(
        m[n - 3]
            .content
            .starts_with("FAILURE (unknown-transition, attempt 2)"),
        "{}",
        m[n - 3].content
    );
    assert_eq!(
        m[n - 2].content,
        task_message(
            &fsm,
            "asker",
            fsm.transition("hidden", "asker"),
            &PromptOptions::default()
        )
    );
    assert_eq!(m[n - 1].content, r#"{"id":["asker","tool"],"arg":"a"}"#);
    assert_eq!(count(&m, "STATE-PROMPT"), 1, "{m:#?}");
    assert_eq!(count(&m, "secret"), 0);
}

#[test]
fn failures_show_errors_and_rejected_output_and_point_at_the_request_s_schema() {
    let fsm = fsm();
    let trail = [
        hop(0, "start", "asker", json!({"n": 1})),
        failed(
            1,
            "asker",
            json!({"id": ["asker", "tool"], "arg": 5}),
            FailureKind::Validation,
        ),
        failed(2, "asker", Value::Null, FailureKind::Parse),
    ];
    let m = trail_to_prompts(&fsm, &trail, "asker", &PromptOptions::default());
    // The request (showing the input), the two failures; the last failure asks again
    // itself.
    assert_eq!(
        roles(&m),
        [Role::System, Role::User, Role::User, Role::User]
    );
    // The request states the JSON Schema, once.
    let expected_schema = format!(
        "{{\"oneOf\":[{},{}]}}",
        effective(&fsm, "asker", "tool"),
        effective(&fsm, "asker", "done"),
    );
    assert!(m[1].content.contains("STATE-PROMPT"));
    assert!(m[1].content.contains("Input:\n{\"n\":1}"));
    assert!(m[1].content.contains(&format!(
        "It must satisfy this JSON Schema:\n{expected_schema}"
    )));
    let f = &m[2].content;
    assert_eq!(
        *f,
        "FAILURE (validation, attempt 2): the answer was rejected\n\
         ERRORS:\n\
         - at /arg: 5 is not of type \"string\"\n\
         - at /: \"extra\" is required\n\
         REJECTED-OUTPUT: {\"id\":[\"asker\",\"tool\"],\"arg\":5}\n\
         Answer again with exactly one JSON object that satisfies the JSON Schema of the \
         request above."
    );
    // No output, no REJECTED-OUTPUT line.
    assert!(m[3].content.starts_with("FAILURE (parse, attempt 2)"));
    assert!(!m[3].content.contains("REJECTED-OUTPUT"));
    assert!(m[3].content.ends_with(
        "\nAnswer again with exactly one JSON object that satisfies the JSON Schema of the \
         request above."
    ));
    let said = m
        .iter()
        .filter(|x| x.content.contains(&expected_schema))
        .count();
    assert_eq!(said, 1, "the JSON Schema once, however many attempts fail");
    assert_plainly_asked(&m);
}

#[test]
fn an_answer_s_schema_carries_the_shared_schemas_it_refers_to() {
    let fsm = counting();
    let trail = [
        hop(0, "start", "count", json!({"n": 1})),
        hop(1, "count", "check", json!({"n": 2})),
        hop(2, "check", "count", json!({"n": 3})),
        failed(
            3,
            "count",
            json!({"id": ["count", "check"]}),
            FailureKind::Validation,
        ),
    ];
    let m = trail_to_prompts(&fsm, &trail, "count", &PromptOptions::default());
    assert!(!m[0].content.contains("$defs"), "{}", m[0].content);
    // Both requests' schemas refer to the definition by $ref and carry it whole.
    let requests: Vec<&Message> = m
        .iter()
        .filter(|m| m.content.contains("It must satisfy this JSON Schema:"))
        .collect();
    assert_eq!(requests.len(), 2, "{m:#?}");
    let thing = serde_json::to_string(&fsm.schemas["thing"]).unwrap();
    for request in &requests {
        assert!(
            request.content.contains(r##""$ref":"#/$defs/thing""##)
                && request
                    .content
                    .contains(&format!(r#""$defs":{{"thing":{thing}}}"#)),
            "{}",
            request.content
        );
    }
    assert_eq!(count(&m, "ZEBRA-DEF-42"), requests.len());
}

#[test]
fn no_defs_section_without_shared_schemas() {
    let fsm = crate::load_str(
        "u.yaml",
        "id: u\nstates: [{id: a, action: llm}, {id: z, action: end}]\n\
             xitions: [{id: [start, a]}, {id: [a, z]}]\n",
        &BuiltinNames,
    )
    .unwrap();
    // Without prompts either, the system message asks for JSON alone.
    assert_eq!(system_message(&fsm), "Answer with one JSON object.");
}

#[test]
fn the_input_transition_is_the_last_one_into_the_state() {
    let fsm = fsm();
    let opts = PromptOptions::default();
    let trail = round_trip();
    let m = trail_to_prompts(&fsm, &trail[..1], "asker", &opts);
    let last = &m.last().unwrap().content;
    assert!(last.contains("ENTRY-PROMPT") && !last.contains("BACK-PROMPT"));
    let m = trail_to_prompts(&fsm, &trail, "asker", &opts);
    let last = &m.last().unwrap().content;
    assert!(last.contains("BACK-PROMPT") && !last.contains("ENTRY-PROMPT"));
    // Asked for another state than the last transition leads to: no input prompts.
    let m = trail_to_prompts(&fsm, &trail[..2], "asker", &opts);
    let last = &m.last().unwrap().content;
    assert!(last.contains("STATE-PROMPT"));
    assert!(!last.contains("TOOL-PROMPT") && !last.contains("ENTRY-PROMPT"));
    // Empty trail: the system message and the request.
    let m = trail_to_prompts(&fsm, &[], "asker", &opts);
    assert_eq!(roles(&m), [Role::System, Role::User]);
}

#[test]
fn example_answers_are_earlier_turns_after_the_system_message_with_their_id_last() {
    let routed = crate::load_str(
        "x.yaml",
        r#"
id: x
states:
  - id: route
    action: llm
    prompts: ["Choose the team."]
    examples:
      - input: {id: [start, route], problem: "charged twice"}
        output: {id: [route, billing], reason: "a payment"}
      - output: {reason: "a crash", id: [route, tech]}
  - {id: billing, action: end}
  - {id: tech, action: end}
xitions:
  - id: [start, route]
  - id: [route, billing]
    schema: {type: object, required: [reason], properties: {reason: {type: string}}}
  - id: [route, tech]
    schema: {type: object, required: [reason], properties: {reason: {type: string}}}
"#,
        &BuiltinNames,
    )
    .unwrap();
    let opts = PromptOptions::default();
    let trail = [hop(0, "start", "route", json!({"problem": "app crashes"}))];
    let m = trail_to_prompts(&routed, &trail, "route", &opts);
    assert_eq!(
        roles(&m),
        [
            Role::System,
            Role::User,
            Role::Assistant,
            Role::User,
            Role::Assistant,
            Role::User
        ]
    );
    // The note about examples is a paragraph of its own.
    assert_eq!(
        m[0].content,
        "Answer with one JSON object.\n\nMessages starting EXAMPLE show good answers of the \
         named state to other documents; they are not part of this conversation's case."
    );
    // The example's document without its routing `id`.
    assert_eq!(
        m[1].content,
        "EXAMPLE for `route`\nInput:\n{\"problem\":\"charged twice\"}"
    );
    assert_eq!(
        m[2].content,
        r#"{"reason":"a payment","id":["route","billing"]}"#
    );
    assert_eq!(m[3].content, "EXAMPLE for `route`");
    assert_eq!(
        m[4].content,
        r#"{"reason":"a crash","id":["route","tech"]}"#
    );
    // The request shows the case's input, not the examples'.
    assert!(
        m[5].content
            .starts_with("Choose the team.\n\nInput:\n{\"problem\":\"app crashes\"}\n\n"),
        "{}",
        m[5].content
    );
    assert!(!m[5].content.contains("charged twice"), "{}", m[5].content);
    assert_plainly_asked(&m);
    // The same turns head every step's conversation: a prefix that stays computed.
    let later = trail_to_prompts(&routed, &[], "route", &opts);
    assert_eq!(later[..5], m[..5]);
    // An FSM without examples says nothing about them.
    let plain = trail_to_prompts(&fsm(), &[], "asker", &opts);
    assert!(!plain[0].content.contains("EXAMPLE"));
    assert_eq!(roles(&plain), [Role::System, Role::User]);
}

struct Known;

impl KnownActions for Known {
    fn has_action(&self, action: &str) -> bool {
        BuiltinNames.has_action(action)
    }
    fn action_names(&self) -> Vec<String> {
        BuiltinNames.action_names()
    }
    fn check_config(&self, _: &str, _: &Value) -> Vec<ConfigIssue> {
        Vec::new()
    }
    fn has_dynamic_schema(&self, name: &str) -> bool {
        name == "mcp:request"
    }
}

struct Provider;

impl DynamicSchemas for Provider {
    fn serves(&self, name: &str) -> bool {
        name == "mcp:request"
    }
    fn resolve(&self, name: &str) -> Result<Arc<Value>, SchemaError> {
        if name == "mcp:request" {
            Ok(Arc::new(
                json!({"type": "object", "required": ["tool"], "properties": {"tool": {"enum": ["hostname"]}}}),
            ))
        } else {
            Err(SchemaError::new("unknown"))
        }
    }
}

#[test]
fn dynamic_schemas_are_resolved_or_named() {
    let fsm = crate::load_str(
            "d.yaml",
            "id: d\nstates: [{id: a, action: llm}, {id: m, action: mcp}, {id: z, action: end}]\n\
             xitions: [{id: [start, a]}, {id: [a, m], schema: 'mcp:request'}, {id: [m, a]}, {id: [a, z]}]\n",
            &Known,
        )
        .unwrap();
    let trail = [step(0, "start", "a", json!({"id": ["start", "a"]}))];
    let plain = trail_to_prompts(&fsm, &trail, "a", &PromptOptions::default());
    assert_eq!(roles(&plain), [Role::System, Role::User]);
    assert!(
        plain[1].content.contains(
            r#"{"x-dynamic-schema":"mcp:request","properties":{"id":{"const":["a","m"]}}}"#
        ),
        "{}",
        plain[1].content
    );
    let provider = Provider;
    let opts = PromptOptions {
        max_tool_rounds: None,
        dynamic: Some(&provider),
        constrained: false,
        prompting: Prompting::Claij,
    };
    let resolved = trail_to_prompts(&fsm, &trail, "a", &opts);
    assert!(
            resolved[1].content.contains(
                r#"{"type":"object","properties":{"tool":{"enum":["hostname"]},"id":{"const":["a","m"]}},"required":["tool","id"]}"#
            ),
            "{}",
            resolved[1].content
        );
    assert!(!resolved[1].content.contains("x-dynamic-schema"));
}

#[test]
fn messages_serialise_with_lowercase_roles() {
    let m = Message::assistant("{}");
    assert_eq!(
        serde_json::to_value(&m).unwrap(),
        json!({"role": "assistant", "content": "{}"})
    );
    let back: Message = serde_json::from_value(json!({"role": "system", "content": "x"})).unwrap();
    assert_eq!(back, Message::system("x"));
    assert_eq!(Role::User.to_string(), "user");
}

#[test]
fn the_request_shows_what_an_answer_looks_like_with_shared_definitions_followed() {
    let doc = crate::load_str(
        "s.yaml",
        r##"
id: s
schemas:
  facts:
    type: object
    required: [customer, urgency]
    properties:
      customer: {type: string, description: "The customer's name, or \"unknown\""}
      urgency: {enum: [low, high]}
states:
  - {id: extract, action: llm}
  - {id: route, action: llm}
  - {id: a, action: end}
  - {id: b, action: end}
xitions:
  - id: [start, extract]
  - id: [extract, route]
    schema: {$ref: "#/$defs/facts"}
  - id: [route, a]
    schema: {type: object, required: [reason], properties: {reason: {type: string}}}
  - id: [route, b]
    schema: {type: object, required: [reason], properties: {reason: {type: string}}}
"##,
        &BuiltinNames,
    )
    .unwrap();
    let opts = PromptOptions::default();
    let extract = task_message(&doc, "extract", None, &opts);
    // The shared definition's fields at the top level (not nested under its name), the
    // `id` last and exact.
    assert!(
        extract.ends_with(
            "An answer looks like this, each <…> replaced by a value:\n\
             {\"customer\": \"<The customer's name, or 'unknown'>\", \"urgency\": \"low\" | \"high\", \
             \"id\": [\"extract\",\"route\"]}"
        ),
        "{extract}"
    );
    // Routes that differ only by their `id`: one template, the `id`'s alternatives as an
    // enum's are shown.
    let route = task_message(&doc, "route", None, &opts);
    assert!(
        route
            .ends_with("\n{\"reason\": \"<text>\", \"id\": [\"route\",\"a\"] | [\"route\",\"b\"]}"),
        "{route}"
    );
}

#[test]
fn routes_of_different_shapes_get_a_template_each() {
    let doc = crate::load_str(
        "p.yaml",
        r#"
id: p
states:
  - {id: extract, action: llm}
  - {id: adult, action: end}
  - {id: minor, action: end}
xitions:
  - id: [start, extract]
  - id: [extract, adult]
    schema:
      type: object
      required: [age, tags]
      properties:
        age: {type: integer, minimum: 18, description: Age in years}
        tags: {type: array, items: {type: string}}
        note: {type: [string, "null"]}
        ok: {type: boolean}
  - id: [extract, minor]
    schema: {type: object, required: [age], properties: {age: {type: integer, maximum: 17}}}
"#,
        &BuiltinNames,
    )
    .unwrap();
    let t = task_message(&doc, "extract", None, &PromptOptions::default());
    let shapes = t.split("replaced by a value:\n").nth(1).unwrap();
    assert_eq!(
        shapes,
        "{\"age\": <integer ≥ 18: Age in years>, \"tags\": [\"<text>\", …], \
         \"note\": \"<text>\" | null, \"ok\": true | false, \"id\": [\"extract\",\"adult\"]}\n\
         {\"age\": <integer ≤ 17>, \"id\": [\"extract\",\"minor\"]}"
    );
}

#[test]
fn a_constrained_answer_s_request_leaves_out_the_template() {
    let fsm = fsm();
    let shown = task_message(&fsm, "asker", None, &PromptOptions::default());
    let constrained = PromptOptions {
        max_tool_rounds: None,
        constrained: true,
        ..PromptOptions::default()
    };
    let left_out = task_message(&fsm, "asker", None, &constrained);
    assert!(shown.contains("An answer looks like this"), "{shown}");
    assert!(
        !left_out.contains("An answer looks like this"),
        "{left_out}"
    );
    // Everything else is the same.
    assert!(shown.starts_with(&left_out));
}

/// `extract` answers with one of two undescribed routes; no shared schemas, no examples.
/// `fsm_prompts` is the FSM's `prompts:` line (or nothing).
fn extraction(fsm_prompts: &str) -> Fsm {
    let doc = format!(
        r#"
id: e
{fsm_prompts}
states:
  - {{id: extract, action: llm, prompts: ["Extract the customer's name."]}}
  - {{id: named, action: end}}
  - {{id: anonymous, action: end}}
xitions:
  - id: [start, extract]
    prompts: ["The text is an email."]
  - id: [extract, named]
    schema: {{type: object, required: [name], properties: {{name: {{type: string}}}}}}
  - id: [extract, anonymous]
"#
    );
    crate::load_str("e.yaml", &doc, &BuiltinNames).unwrap()
}

fn constrained() -> PromptOptions<'static> {
    PromptOptions {
        constrained: true,
        ..PromptOptions::default()
    }
}

#[test]
fn a_constrained_request_gives_the_json_schema_alone_unless_a_route_is_described() {
    let extraction = extraction("");
    let request = task_message(
        &extraction,
        "extract",
        extraction.transition("start", "extract"),
        &constrained(),
    );
    assert_eq!(
        request,
        format!(
            "Extract the customer's name.\n\nThe text is an email.\n\n\
             Answer with one JSON object that satisfies this JSON Schema:\n\
             {{\"oneOf\":[{},{}]}}",
            effective(&extraction, "extract", "named"),
            effective(&extraction, "extract", "anonymous"),
        )
    );
    // Unconstrained, the routes, the schema and the templates.
    let unconstrained = task_message(&extraction, "extract", None, &PromptOptions::default());
    assert!(
        unconstrained.contains(
            "must be one of:\n- [\"extract\",\"named\"]\n- [\"extract\",\"anonymous\"]\n\n"
        ),
        "{unconstrained}"
    );
    assert!(unconstrained.contains("An answer looks like this"));
    // A described route is worth reading: the routes stay, the template goes.
    let described = fsm();
    let request = task_message(&described, "asker", None, &constrained());
    assert!(
        request.contains("must be one of:\n- [\"asker\",\"tool\"]: Run the tool.\n"),
        "{request}"
    );
    assert!(request.contains("\n\nIt must satisfy this JSON Schema:\n{"));
    assert!(!request.contains("An answer looks like this"), "{request}");
}

#[test]
fn a_single_constrained_step_is_asked_as_plainly_as_the_baseline() {
    let trail = [hop(
        0,
        "start",
        "extract",
        json!({"text": "Hi, Maria Lopez here."}),
    )];
    for fsm_prompts in ["", "prompts: [\"You read support email.\"]"] {
        let fsm = extraction(fsm_prompts);
        let claij = trail_to_prompts(&fsm, &trail, "extract", &constrained());
        let baseline = trail_to_prompts(
            &fsm,
            &trail,
            "extract",
            &PromptOptions {
                prompting: Prompting::Plain,
                ..constrained()
            },
        );
        assert_eq!(claij, baseline, "{fsm_prompts}");
        assert_eq!(roles(&claij), [Role::System, Role::User]);
        assert!(
            claij[1]
                .content
                .contains("Input:\n{\"text\":\"Hi, Maria Lopez here.\"}\n\nAnswer with one JSON object that satisfies this JSON Schema:\n"),
            "{}",
            claij[1].content
        );
    }
}

fn plain() -> PromptOptions<'static> {
    PromptOptions {
        prompting: Prompting::Plain,
        ..PromptOptions::default()
    }
}

#[test]
fn plain_asks_once_with_the_instruction_the_input_and_the_schema() {
    let fsm = fsm();
    let trail = [hop(0, "start", "asker", json!({"n": 1}))];
    let messages = trail_to_prompts(&fsm, &trail, "asker", &plain());
    assert_eq!(roles(&messages), [Role::System, Role::User]);
    assert_eq!(messages[0].content, "FSM-PROMPT");
    let request = &messages[1].content;
    assert!(
        request.starts_with("STATE-PROMPT\n\nENTRY-PROMPT\n\nInput:\n{\"n\":1}\n\n"),
        "{request}"
    );
    // The schema the answer is held to, and none of claij's conversation.
    assert!(
        request.contains("JSON Schema:\n{\"oneOf\":[") && request.contains("[\"asker\",\"done\"]"),
        "{request}"
    );
    for claij_only in [
        "DOCUMENT",
        "INPUT-SCHEMA",
        "OUTPUT-SCHEMA",
        "[\"start\",\"asker\"]",
    ] {
        assert!(!request.contains(claij_only), "{claij_only} in {request}");
    }
}

#[test]
fn plain_shows_the_run_s_input_and_the_document_the_state_was_entered_with() {
    let fsm = fsm();
    let messages = trail_to_prompts(&fsm, &round_trip(), "asker", &plain());
    assert_eq!(roles(&messages), [Role::System, Role::User]);
    let request = &messages[1].content;
    assert!(request.contains("BACK-PROMPT"), "{request}");
    assert!(
        request.contains("Input:\n{\"n\":1}\n\nPrevious result:\n{\"thing\":{\"n\":2}}"),
        "{request}"
    );
}

#[test]
fn plain_answers_a_rejection_with_the_rejected_answer_and_why() {
    let fsm = fsm();
    let trail = [
        hop(0, "start", "asker", json!({"n": 1})),
        failed(1, "asker", json!({"arg": 5}), FailureKind::Validation),
    ];
    let messages = trail_to_prompts(&fsm, &trail, "asker", &plain());
    assert_eq!(
        roles(&messages),
        [Role::System, Role::User, Role::Assistant, Role::User]
    );
    assert_eq!(messages[2].content, "{\"arg\":5}");
    let why = &messages[3].content;
    assert!(
        why.starts_with("That answer was rejected: the answer was rejected\n- /arg: 5 is not"),
        "{why}"
    );
    assert!(why.ends_with("Answer again with one JSON object that satisfies the schema."));
}

#[test]
fn the_run_s_input_stays_when_the_visit_it_entered_is_omitted() {
    let fsm = fsm();
    let trail = [
        hop(0, "start", "asker", json!({"n": 1})),
        hop(1, "asker", "hidden", json!({"secret": 1})),
        hop(2, "hidden", "asker", json!({"secret": 2})),
        hop(3, "asker", "tool", json!({"arg": "a"})),
    ];
    let m = trail_to_prompts(&fsm, &trail, "tool", &PromptOptions::default());
    assert_eq!(count(&m, r#"{"n":1}"#), 1, "{m:#?}");
}
