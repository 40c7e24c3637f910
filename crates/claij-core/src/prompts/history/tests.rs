//! Visits in prompts: a tool-use loop's request said once and its old rounds collapsed,
//! finished visits shown as `keep` says, and shrinking to a budget.

use serde_json::json;

use super::super::tests::{failed, hop, roles};
use super::super::*;
use crate::fsm::Keep;
use crate::known_actions::BuiltinNames;
use crate::trail::FailureKind;

/// `ask` reads through a tool-use loop (`tools`, an `mcp` state), then `write` answers.
fn doc(keep: &str) -> String {
    format!(
        r#"
id: t
states:
  - {{id: ask, action: llm, prompts: ["ASK-PROMPT"]{keep}}}
  - {{id: tools, action: mcp}}
  - {{id: write, action: llm, prompts: ["WRITE-PROMPT"]}}
  - {{id: done, action: end}}
xitions:
  - id: [start, ask]
    schema: {{type: object, required: [question], properties: {{question: {{type: string}}}}}}
  - id: [ask, tools]
    schema: {{type: object, required: [requests]}}
  - id: [tools, ask]
    schema: {{type: object, required: [results]}}
  - id: [ask, write]
    schema: {{type: object, required: [notes], properties: {{notes: {{type: string}}}}}}
  - id: [write, done]
    schema: {{type: object, required: [answer], properties: {{answer: {{type: string}}}}}}
"#
    )
}

fn fsm(keep: &str) -> Fsm {
    crate::load_str("t.yaml", &doc(keep), &BuiltinNames).unwrap()
}

/// The question, then `rounds` tool rounds, each reading `file-N` (a long text back).
fn loop_trail(rounds: usize) -> Vec<TrailEntry> {
    let mut trail = vec![hop(0, "start", "ask", json!({"question": "Q?"}))];
    for i in 1..=rounds {
        let seq = trail.len() as u64;
        trail.push(hop(
            seq,
            "ask",
            "tools",
            json!({"requests": [{"server": "files", "method": "tools/call",
                "params": {"name": "read", "arguments": {"path": format!("file-{i}")}}}]}),
        ));
        trail.push(hop(
            seq + 1,
            "tools",
            "ask",
            json!({"results": [{"result": format!("TEXT-{i} {}", "word ".repeat(50))}]}),
        ));
    }
    trail
}

fn count(messages: &[Message], needle: &str) -> usize {
    messages
        .iter()
        .map(|m| m.content.matches(needle).count())
        .sum()
}

#[test]
fn a_tool_loop_says_its_request_once_and_shows_every_result_until_a_budget_says_otherwise() {
    let fsm = fsm("");
    let trail = loop_trail(5);
    let mut projection = project(&fsm, &trail, "ask", &PromptOptions::default());
    let messages = projection.messages();
    assert_eq!(count(&messages, "ASK-PROMPT"), 1, "{messages:#?}");
    assert_eq!(count(&messages, "It must satisfy this JSON Schema:"), 1);
    // The question is inside the request, once; the tool results are not absorbed.
    assert!(
        messages[1]
            .content
            .starts_with("ASK-PROMPT\n\nInput:\n{\"question\":\"Q?\"}\n\nAnswer with"),
        "{messages:#?}"
    );
    assert_eq!(count(&messages, "Q?"), 1);
    assert_eq!(count(&messages, "Input:"), 1);
    assert_eq!(count(&messages, "DOCUMENT"), 0);
    for i in 1..=5 {
        assert_eq!(count(&messages, &format!("\"file-{i}\"")), 1, "call {i}");
        assert_eq!(count(&messages, &format!("TEXT-{i} ")), 1, "result {i}");
    }
    let last = messages.last().unwrap();
    assert_eq!(last.role, Role::User);
    assert!(last.content.contains("TEXT-5 "), "{last:?}");
    assert!(last.content.starts_with("Result:\n{"), "{last:?}");
    assert!(last.content.contains("Go on with the request above"));
    // After the system message: the request, then call/result pairs.
    let roles = roles(&messages[1..]);
    assert_eq!(roles.len(), 11, "{roles:?}");
    assert_eq!(roles[0], Role::User);
    assert!(roles.windows(2).all(|w| w[0] != w[1]), "{roles:?}");
    // Shrinking: the oldest round's result gives way first, its call stays.
    assert!(projection.shrink());
    let shrunk = projection.messages();
    assert_eq!(count(&shrunk, "TEXT-1 "), 0);
    assert_eq!(count(&shrunk, "\"file-1\""), 1);
    let note = shrunk
        .iter()
        .find(|m| m.content.contains("are no longer shown"))
        .expect("a note for the collapsed round");
    assert!(
        note.content
            .starts_with("Result: (the results of the calls above, ")
            && note.content.ends_with("call again if you need them)"),
        "{note:?}"
    );
    assert_eq!(count(&shrunk, "are no longer shown"), 1);
    assert_eq!(count(&shrunk, "TEXT-2 "), 1);
}

#[test]
fn a_failure_inside_a_tool_loop_asks_again_without_repeating_the_request() {
    let fsm = fsm("");
    let mut trail = loop_trail(1);
    trail.push(failed(
        3,
        "ask",
        json!({"nonsense": 1}),
        FailureKind::Validation,
    ));
    let messages = trail_to_prompts(&fsm, &trail, "ask", &PromptOptions::default());
    assert_eq!(count(&messages, "ASK-PROMPT"), 1);
    let last = messages.last().unwrap();
    assert!(last.content.starts_with("FAILURE"), "{last:?}");
    assert!(last.content.contains("request above"));
}

#[test]
fn a_finished_tool_loop_is_summarised_by_default_and_shown_as_keep_says() {
    let mut trail = loop_trail(4);
    trail.push(failed(
        9,
        "ask",
        json!({"nonsense": 1}),
        FailureKind::Validation,
    ));
    trail.push(hop(10, "ask", "write", json!({"notes": "NOTES-OF-ASK"})));

    let fsm_default = fsm("");
    assert_eq!(fsm_default.keep("ask"), Keep::Summary);
    assert_eq!(fsm_default.keep("write"), Keep::Full);
    let messages = trail_to_prompts(&fsm_default, &trail, "write", &PromptOptions::default());
    let summary = messages
        .iter()
        .find(|m| m.content.starts_with("SUMMARY of `ask`"))
        .expect("a summary of the loop");
    assert!(
        summary.content.contains(
            "4 tool calls (read {\"path\":\"file-1\"}; read {\"path\":\"file-2\"}; \
             read {\"path\":\"file-3\"}; read {\"path\":\"file-4\"}). 1 failed attempt."
        ),
        "{summary:?}"
    );
    assert_eq!(count(&messages, "TEXT-"), 0);
    assert_eq!(count(&messages, "ASK-PROMPT"), 0);
    // The result: the model's answer where it was written, and `write`'s input.
    assert_eq!(count(&messages, "NOTES-OF-ASK"), 2);
    assert_eq!(
        messages.last().map(|m| m.content.contains("WRITE-PROMPT")),
        Some(true)
    );

    let full = trail_to_prompts(
        &fsm(", keep: full"),
        &trail,
        "write",
        &PromptOptions::default(),
    );
    assert_eq!(count(&full, "SUMMARY"), 0);
    assert_eq!(count(&full, "ASK-PROMPT"), 1);
    // A finished visit in full shows every result: no round is collapsed any more.
    for i in 1..=4 {
        assert_eq!(count(&full, &format!("TEXT-{i} ")), 1, "result {i}");
    }
    assert_eq!(count(&full, "FAILURE ("), 1);
    // In full, the request `ask` answered shows the question it was given.
    assert_eq!(
        count(&full, "Input:\n{\"question\":\"Q?\"}"),
        1,
        "{full:#?}"
    );

    let result = trail_to_prompts(
        &fsm(", keep: result"),
        &trail,
        "write",
        &PromptOptions::default(),
    );
    assert_eq!(count(&result, "SUMMARY"), 0);
    assert_eq!(count(&result, "read"), 0);
    assert_eq!(count(&result, "ASK-PROMPT"), 0);
    // It ends with ask's answer, then write's request.
    let n = result.len();
    assert_eq!(
        roles(&result[n - 2..]),
        [Role::Assistant, Role::User],
        "{result:#?}"
    );
    assert!(result[n - 2].content.contains("NOTES-OF-ASK"));
    assert!(result[n - 1].content.starts_with("WRITE-PROMPT\n\n"));
}

#[test]
fn shrinking_collapses_a_finished_visit_to_its_result_but_keeps_the_input_and_the_request() {
    let fsm = fsm(", keep: full");
    let mut trail = loop_trail(3);
    trail.push(hop(7, "ask", "write", json!({"notes": "NOTES-OF-ASK"})));
    let mut projection = project(&fsm, &trail, "write", &PromptOptions::default());
    let full = projection.messages();
    assert_eq!(count(&full, "TEXT-"), 3);
    assert_eq!(count(&full, "Q?"), 1, "inside ask's request: {full:#?}");
    let mut sizes = vec![full.iter().map(|m| m.content.len()).sum::<usize>()];
    while projection.shrink() {
        sizes.push(projection.messages().iter().map(|m| m.content.len()).sum());
    }
    assert!(sizes.windows(2).all(|w| w[1] <= w[0]), "{sizes:?}");
    assert!(
        sizes.len() > 2,
        "collapsed to the summary, then to the result: {sizes:?}"
    );
    let smallest = projection.messages();
    assert_eq!(count(&smallest, "TEXT-"), 0);
    // The request `ask` answered went, but not the question it showed: it stays as a
    // message of its own, then ask's answer (write's input), the system message and
    // write's request.
    assert_eq!(count(&smallest, "Q?"), 1, "{smallest:#?}");
    assert_eq!(
        roles(&smallest),
        [Role::System, Role::User, Role::Assistant, Role::User],
        "{smallest:#?}"
    );
    assert_eq!(smallest[0].content, system_message(&fsm));
    assert_eq!(smallest[1].content, "Input:\n{\"question\":\"Q?\"}");
    assert_eq!(
        smallest[2].content,
        r#"{"id":["ask","write"],"notes":"NOTES-OF-ASK"}"#
    );
    assert!(smallest[3].content.starts_with("WRITE-PROMPT\n\n"));
    // Nothing had to be dropped: collapsing was enough.
    assert_eq!(projection.dropped(), 0);
    assert_eq!(count(&smallest, "left out to fit the prompt"), 0);
}

#[test]
fn shrinking_a_tool_loop_under_way_keeps_its_request_and_latest_round() {
    let fsm = fsm("");
    let trail = loop_trail(4);
    let mut projection = project(&fsm, &trail, "ask", &PromptOptions::default());
    while projection.shrink() {}
    let smallest = projection.messages();
    assert_eq!(count(&smallest, "ASK-PROMPT"), 1);
    assert_eq!(count(&smallest, "TEXT-4 "), 1);
    assert_eq!(count(&smallest, "\"file-4\""), 1);
    for i in 1..=3 {
        assert_eq!(count(&smallest, &format!("\"file-{i}\"")), 0, "call {i}");
    }
    // The question (the visit's input) stays too.
    assert_eq!(count(&smallest, "Q?"), 1);
}

#[test]
fn a_loop_whose_rounds_are_used_up_is_told_to_answer_now() {
    let fsm = fsm("");
    let trail = loop_trail(3);
    assert_eq!(tool_rounds(&fsm, &trail, "ask"), 3);
    assert_eq!(tool_rounds(&fsm, &trail, "write"), 0);
    let opts = |max| PromptOptions {
        max_tool_rounds: Some(max),
        ..PromptOptions::default()
    };
    let going = trail_to_prompts(&fsm, &trail, "ask", &opts(4));
    assert!(
        going
            .last()
            .unwrap()
            .content
            .contains("Go on with the request above")
    );
    let used_up = trail_to_prompts(&fsm, &trail, "ask", &opts(3));
    let last = &used_up.last().unwrap().content;
    assert!(
        last.contains("That was the last call `ask` may make")
            && last.contains(r#"["ask","tools"]"#),
        "{last}"
    );
    // Only the latest result says so; the earlier ones read as they did.
    assert_eq!(count(&used_up, "last call"), 1);
    assert_eq!(count(&used_up, "Go on with"), 2, "rounds 1 and 2");
}

#[test]
fn a_tool_result_sent_both_as_text_and_structured_is_shown_once() {
    let fsm = fsm("");
    let mut trail = loop_trail(1);
    trail[2].event = json!({"id": ["tools", "ask"], "results": [
        {"server": "files", "method": "tools/call", "result": {
            "content": [{"type": "text", "text": "SAME-TEXT"}],
            "structuredContent": {"content": "SAME-TEXT"}}},
        {"server": "files", "method": "tools/call", "result": {
            "content": [], "structuredContent": {"only": "STRUCTURED-ONLY"}}}
    ]});
    let messages = trail_to_prompts(&fsm, &trail, "ask", &PromptOptions::default());
    assert_eq!(count(&messages, "SAME-TEXT"), 1, "{messages:#?}");
    assert_eq!(count(&messages, "STRUCTURED-ONLY"), 1);
    // The trail is untouched.
    assert!(
        trail[2].event["results"][0]["result"]
            .get("structuredContent")
            .is_some()
    );
}

#[test]
fn a_summary_the_model_wrote_stands_for_its_visit() {
    let mut trail = loop_trail(2);
    let mut left = hop(5, "ask", "write", json!({"notes": "NOTES-OF-ASK"}));
    left.summary = Some("I read file-1 and file-2; both say Q.".into());
    trail.push(left);
    let fsm = fsm(r#", keep: {summary: "Say what you read."}"#);
    assert_eq!(fsm.keep("ask"), Keep::Summary);
    assert_eq!(
        fsm.state("ask").unwrap().summary_prompt.as_deref(),
        Some("Say what you read.")
    );
    let messages = trail_to_prompts(&fsm, &trail, "write", &PromptOptions::default());
    assert_eq!(
        count(
            &messages,
            "SUMMARY of `ask`: I read file-1 and file-2; both say Q."
        ),
        1,
        "{messages:#?}"
    );
    assert_eq!(
        count(&messages, "tool calls"),
        0,
        "claij's own line gives way"
    );
    assert_eq!(count(&messages, "TEXT-"), 0);
    // The answer where it was written, and again as `write`'s input.
    assert_eq!(count(&messages, "NOTES-OF-ASK"), 2);
}

#[test]
fn a_later_state_reads_the_run_s_input_when_the_visit_it_entered_is_summarised() {
    let mut trail = loop_trail(2);
    trail.push(hop(5, "ask", "write", json!({"notes": "NOTES-OF-ASK"})));
    for keep in ["", ", keep: result"] {
        let messages = trail_to_prompts(&fsm(keep), &trail, "write", &PromptOptions::default());
        assert_eq!(count(&messages, "Q?"), 1, "keep{keep}: {messages:#?}");
    }
}

#[test]
fn plain_pastes_each_tool_result_back_with_the_line_asking_for_a_json_answer() {
    let fsm = fsm("");
    let plain = PromptOptions {
        prompting: Prompting::Plain,
        ..PromptOptions::default()
    };
    let messages = project(&fsm, &loop_trail(2), "ask", &plain).messages();
    // The request once, then each call as the assistant's and its result as the user's.
    assert_eq!(
        roles(&messages),
        [
            Role::System,
            Role::User,
            Role::Assistant,
            Role::User,
            Role::Assistant,
            Role::User
        ]
    );
    assert_eq!(count(&messages, "ASK-PROMPT"), 1, "{messages:#?}");
    for (i, result) in [(1, &messages[3]), (2, &messages[5])] {
        assert!(
            result.content.starts_with("Result:\n{\"results\":[")
                && result.content.contains(&format!("TEXT-{i} "))
                && result
                    .content
                    .ends_with("}\nAnswer with one JSON object that satisfies the schema."),
            "{result:?}"
        );
        // None of claij's follow-up: plain suggests neither answering nor calling again.
        assert!(!result.content.contains("Go on with"), "{result:?}");
    }
}
