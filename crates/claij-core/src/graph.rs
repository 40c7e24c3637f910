//! Graph export: an FSM drawn as a Graphviz DOT digraph or as a Mermaid
//! `stateDiagram-v2`.
//!
//! Both drawings show the same things, in document order, so the same document always
//! gives the same text:
//! - the `start` pseudo-state as a small filled dot (Mermaid: `[*]`);
//! - every state labelled with its id and its action (`chairman` / `(llm)`); terminal
//!   states (action `end`) with a double border (Mermaid: a `terminal` class and an
//!   arrow to `[*]`);
//! - every transition (self-transitions included), labelled with its `label`, else its
//!   `description` shortened to about 40 characters, else nothing; `omit: true`
//!   transitions dotted (DOT only: Mermaid cannot style one transition);
//! - each state's `on_failure` route red and dashed with an "on failure" note (Mermaid:
//!   the note as a suffix of the label).
//!
//! DOT nodes are named by their state ids (quoted). Mermaid state ids are restricted, so
//! each state gets a stable, collision-free Mermaid id (`s_` then the id with letters
//! and digits kept, `_` doubled and other bytes as `_hh`: `fetch-data` is
//! `s_fetch_2ddata`) and is shown under its real id with `state "label" as id`.

use std::fmt::{self, Write as _};

use crate::fsm::{Fsm, START, State, Transition};

/// Longest edge label taken from a description, in characters (ellipsis included).
const DESCRIPTION_LABEL_CHARS: usize = 40;

/// The note on a state's `on_failure` route.
const ON_FAILURE: &str = "on failure";

/// Renders `fsm` as a Graphviz DOT digraph, for `dot -Tsvg` and friends.
///
/// `start` is a small filled point, terminal states have two peripheries, `omit: true`
/// transitions are dotted and `on_failure` routes are red, dashed and noted "on failure".
/// Descriptions become tooltips (shown by SVG viewers).
pub fn to_dot(fsm: &Fsm) -> String {
    let mut out = String::new();
    // Writing into a `String` cannot fail.
    let _ = write_dot(fsm, &mut out);
    out
}

/// Renders `fsm` as a Mermaid `stateDiagram-v2` (for Markdown renderers and the web
/// page).
///
/// `start` is `[*]`, every terminal state has a transition to `[*]` and the `terminal`
/// class, and `on_failure` routes carry "(on failure)" after their label.
pub fn to_mermaid(fsm: &Fsm) -> String {
    let mut out = String::new();
    // Writing into a `String` cannot fail.
    let _ = write_mermaid(fsm, &mut out);
    out
}

fn write_dot(fsm: &Fsm, out: &mut String) -> fmt::Result {
    writeln!(out, "digraph {} {{", dot_str(&fsm.id))?;
    let title = format!("{} v{}", fsm.id, fsm.version);
    write!(
        out,
        "    graph [label={}, labelloc=t, rankdir=LR, fontname=\"Helvetica\"",
        dot_str(&title)
    )?;
    if let Some(description) = non_blank(fsm.description.as_deref()) {
        write!(out, ", tooltip={}", dot_str(description))?;
    }
    writeln!(out, "];")?;
    writeln!(
        out,
        "    node [shape=box, style=rounded, fontname=\"Helvetica\"];"
    )?;
    writeln!(out, "    edge [fontname=\"Helvetica\", fontsize=10];")?;
    writeln!(out)?;
    writeln!(
        out,
        "    {} [shape=point, width=0.15, label=\"\", tooltip=\"start\"];",
        dot_str(START)
    )?;
    for state in &fsm.states {
        write!(
            out,
            "    {} [label={}",
            dot_str(&state.id),
            dot_str(&state_label(state, "\n"))
        )?;
        if state.is_terminal() {
            out.push_str(", peripheries=2");
        }
        if let Some(description) = non_blank(state.description.as_deref()) {
            write!(out, ", tooltip={}", dot_str(description))?;
        }
        writeln!(out, "];")?;
    }
    writeln!(out)?;
    for t in &fsm.transitions {
        let on_failure = is_failure_route(fsm, t);
        let label = match (edge_label(t), on_failure) {
            (Some(label), true) => Some(format!("{label}\n({ON_FAILURE})")),
            (None, true) => Some(ON_FAILURE.to_owned()),
            (label, false) => label,
        };
        let mut attrs: Vec<String> = Vec::new();
        if let Some(label) = label {
            attrs.push(format!("label={}", dot_str(&label)));
        }
        if on_failure {
            attrs.extend(["color=red", "fontcolor=red", "style=dashed"].map(String::from));
        } else if t.omit {
            attrs.push("style=dotted".to_owned());
        }
        if let Some(description) = non_blank(t.description.as_deref()) {
            attrs.push(format!("tooltip={}", dot_str(description)));
        }
        write!(out, "    {} -> {}", dot_str(&t.from), dot_str(&t.to))?;
        if !attrs.is_empty() {
            write!(out, " [{}]", attrs.join(", "))?;
        }
        writeln!(out, ";")?;
    }
    writeln!(out, "}}")
}

fn write_mermaid(fsm: &Fsm, out: &mut String) -> fmt::Result {
    writeln!(out, "stateDiagram-v2")?;
    // The FSM id is a name (letters, digits, `-`, `_`, `.`): safe in a comment.
    writeln!(out, "    %% {} v{}", mermaid_text(&fsm.id), fsm.version)?;
    writeln!(out, "    direction LR")?;
    writeln!(
        out,
        "    classDef terminal font-weight:bold,stroke-width:3px"
    )?;
    for state in &fsm.states {
        writeln!(
            out,
            "    state \"{}\" as {}",
            mermaid_text(&state_label(state, " ")),
            mermaid_id(&state.id)
        )?;
    }
    for t in &fsm.transitions {
        let from = if t.is_entry() {
            "[*]".to_owned()
        } else {
            mermaid_id(&t.from)
        };
        write!(out, "    {from} --> {}", mermaid_id(&t.to))?;
        let label = match (edge_label(t), is_failure_route(fsm, t)) {
            (Some(label), true) => Some(format!("{label} ({ON_FAILURE})")),
            (None, true) => Some(ON_FAILURE.to_owned()),
            (label, false) => label,
        };
        if let Some(label) = label.map(|l| mermaid_text(&l))
            && !label.is_empty()
        {
            write!(out, " : {label}")?;
        }
        writeln!(out)?;
    }
    let terminals: Vec<String> = fsm
        .states
        .iter()
        .filter(|s| s.is_terminal())
        .map(|s| mermaid_id(&s.id))
        .collect();
    for id in &terminals {
        writeln!(out, "    {id} --> [*]")?;
    }
    if !terminals.is_empty() {
        writeln!(out, "    class {} terminal", terminals.join(","))?;
    }
    Ok(())
}

/// A state's label: its id and, after `separator`, its action in parentheses.
fn state_label(state: &State, separator: &str) -> String {
    format!("{}{separator}({})", state.id, state.action)
}

/// A transition's label: its `label`, else its description shortened, else none.
fn edge_label(t: &Transition) -> Option<String> {
    if let Some(label) = non_blank(t.label.as_deref()) {
        return Some(label.to_owned());
    }
    non_blank(t.description.as_deref()).map(|d| shorten(d, DESCRIPTION_LABEL_CHARS))
}

/// Whether `t` is its source state's `on_failure` route.
fn is_failure_route(fsm: &Fsm, t: &Transition) -> bool {
    !t.is_entry()
        && fsm
            .state(&t.from)
            .and_then(|s| s.settings.on_failure.as_deref())
            == Some(&*t.to)
}

fn non_blank(text: Option<&str>) -> Option<&str> {
    text.filter(|t| !t.trim().is_empty())
}

/// `text` on one line (whitespace runs become one space), cut to at most `max`
/// characters with an ellipsis when longer.
fn shorten(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let kept: String = flat.chars().take(max.saturating_sub(1)).collect();
    format!("{}…", kept.trim_end())
}

/// `text` as a quoted DOT string: quotes and backslashes escaped, newlines as `\n`,
/// `&` as `&amp;` (Graphviz reads HTML entities in labels), other control characters
/// dropped (tabs become spaces).
fn dot_str(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '&' => out.push_str("&amp;"),
            '\t' => out.push(' '),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A state's Mermaid id: `s_` then the id with letters and digits kept, `_` doubled and
/// every other byte written `_hh` (lowercase hex). Only letters, digits and `_` remain,
/// which Mermaid accepts everywhere (keywords such as `end`, `state` or `note` cannot
/// occur: every id starts with `s_`), and different ids stay different.
fn mermaid_id(id: &str) -> String {
    let mut out = String::with_capacity(id.len() + 2);
    out.push_str("s_");
    for b in id.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' => out.push(char::from(b)),
            b'_' => out.push_str("__"),
            other => {
                let _ = write!(out, "_{other:02x}");
            }
        }
    }
    out
}

/// `text` made safe inside a Mermaid state description (`"…"`) or transition label
/// (after ` : `): one line, and the characters Mermaid's lexer stops at or reads
/// specially written as Mermaid entity codes (`#quot;`, `#58;`, …), which Mermaid turns
/// back into the characters when it draws. `direction` is broken up too: Mermaid reads
/// `direction LR` anywhere on a line as a layout statement.
fn mermaid_text(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = String::with_capacity(flat.len());
    for (i, c) in flat.char_indices() {
        match c {
            '"' => out.push_str("#quot;"),
            '#' => out.push_str("#35;"),
            ';' => out.push_str("#59;"),
            ':' => out.push_str("#58;"),
            '%' => out.push_str("#37;"),
            '&' => out.push_str("#amp;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '\\' => out.push_str("#92;"),
            '{' => out.push_str("#123;"),
            '}' => out.push_str("#125;"),
            'd' | 'D'
                if flat
                    .get(i..i + "direction".len())
                    .is_some_and(|w| w.eq_ignore_ascii_case("direction")) =>
            {
                let _ = write!(out, "#{};", u32::from(c));
            }
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Fsm {
        match crate::load_str("t.yaml", text, &crate::BuiltinNames) {
            Ok(fsm) => fsm,
            Err(e) => panic!("test document does not load: {e}"),
        }
    }

    const REVIEW: &str = r#"
id: review
version: 2
description: A small review loop.
states:
  - id: chairman
    action: llm
    config: {on_failure: failed}
  - id: reviewer
    action: llm
  - id: end
    action: end
  - id: failed
    action: end
xitions:
  - id: [start, chairman]
    description: A patch to review, with a goal and some further words of context.
  - id: [chairman, reviewer]
    label: review
  - id: [reviewer, chairman]
    description: Comments.
  - id: [reviewer, reviewer]
    label: think again
  - id: [chairman, end]
  - id: [chairman, failed]
    label: gave up
    omit: true
  - id: [reviewer, end]
    omit: true
"#;

    /// The line of `text` that contains `needle`.
    fn line_with<'a>(text: &'a str, needle: &str) -> &'a str {
        match text.lines().find(|l| l.contains(needle)) {
            Some(line) => line,
            None => panic!("no line contains {needle:?} in:\n{text}"),
        }
    }

    /// Whether `dot -Tsvg` accepts `source`. Graphviz is required (scripts/test installs
    /// it): a missing `dot` is an error, not a pass.
    fn dot_accepts(source: &str) -> Result<(), String> {
        use std::io::Write;
        use std::process::{Command, Stdio};
        let mut child = Command::new("dot")
            .arg("-Tsvg")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                format!("cannot run `dot` ({e}): install Graphviz (scripts/test says how)")
            })?;
        let written = child
            .stdin
            .take()
            .map(|mut stdin| stdin.write_all(source.as_bytes()));
        let output = child
            .wait_with_output()
            .map_err(|e| format!("dot did not finish: {e}"))?;
        if let Some(Err(e)) = written {
            return Err(format!("cannot write to dot: {e}"));
        }
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "dot exited with {}: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    }

    #[test]
    fn dot_draws_start_terminals_and_labelled_states() {
        let dot = to_dot(&load(REVIEW));
        assert!(dot.starts_with("digraph \"review\" {\n"), "{dot}");
        assert!(dot.trim_end().ends_with('}'), "{dot}");
        assert!(dot.contains("label=\"review v2\""), "{dot}");
        assert!(
            line_with(&dot, "\"start\" [").contains("shape=point"),
            "{dot}"
        );
        let chairman = line_with(&dot, "\"chairman\" [");
        assert!(
            chairman.contains("label=\"chairman\\n(llm)\""),
            "{chairman}"
        );
        assert!(!chairman.contains("peripheries"), "{chairman}");
        for terminal in ["\"end\" [", "\"failed\" ["] {
            let line = line_with(&dot, terminal);
            assert!(line.contains("peripheries=2"), "{line}");
            assert!(line.contains("(end)"), "{line}");
        }
    }

    #[test]
    fn dot_labels_and_styles_edges() {
        let dot = to_dot(&load(REVIEW));
        // label wins; else the description, shortened with an ellipsis.
        assert!(
            line_with(&dot, "\"chairman\" -> \"reviewer\"").contains("label=\"review\""),
            "{dot}"
        );
        let entry = line_with(&dot, "\"start\" -> \"chairman\"");
        assert!(
            entry.contains("label=\"A patch to review, with a goal and some…\""),
            "{entry}"
        );
        assert!(
            line_with(&dot, "\"reviewer\" -> \"chairman\"").contains("label=\"Comments.\""),
            "{dot}"
        );
        // Neither label nor description: no label at all.
        assert!(
            !line_with(&dot, "\"chairman\" -> \"end\"").contains("label="),
            "{dot}"
        );
        // omit: dotted.
        let omitted = line_with(&dot, "\"reviewer\" -> \"end\"");
        assert!(omitted.contains("style=dotted"), "{omitted}");
        // The on_failure route: red, dashed, noted (its omit does not hide that).
        let failure = line_with(&dot, "\"chairman\" -> \"failed\"");
        assert!(
            failure.contains("label=\"gave up\\n(on failure)\""),
            "{failure}"
        );
        assert!(failure.contains("color=red"), "{failure}");
        assert!(failure.contains("style=dashed"), "{failure}");
        // Self-transitions render.
        assert!(
            line_with(&dot, "\"reviewer\" -> \"reviewer\"").contains("label=\"think again\""),
            "{dot}"
        );
    }

    #[test]
    fn output_follows_document_order_and_is_deterministic() {
        let fsm = load(REVIEW);
        let dot = to_dot(&fsm);
        assert_eq!(dot, to_dot(&load(REVIEW)));
        assert_eq!(to_mermaid(&fsm), to_mermaid(&load(REVIEW)));
        let positions: Vec<usize> = fsm
            .transitions
            .iter()
            .map(|t| {
                let edge = format!("{} -> {}", dot_str(&t.from), dot_str(&t.to));
                dot.find(&edge).unwrap_or(usize::MAX)
            })
            .collect();
        assert!(positions.iter().all(|&p| p != usize::MAX), "{dot}");
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
    }

    #[test]
    fn mermaid_draws_start_terminals_and_routes() {
        let mermaid = to_mermaid(&load(REVIEW));
        assert!(mermaid.starts_with("stateDiagram-v2\n"), "{mermaid}");
        assert!(
            mermaid.contains("state \"chairman (llm)\" as s_chairman\n"),
            "{mermaid}"
        );
        assert!(
            mermaid.contains("[*] --> s_chairman : A patch to review, with a goal and some…\n"),
            "{mermaid}"
        );
        assert!(
            mermaid.contains("s_chairman --> s_reviewer : review\n"),
            "{mermaid}"
        );
        assert!(mermaid.contains("s_chairman --> s_end\n"), "{mermaid}");
        assert!(
            mermaid.contains("s_chairman --> s_failed : gave up (on failure)\n"),
            "{mermaid}"
        );
        assert!(
            mermaid.contains("s_reviewer --> s_reviewer : think again\n"),
            "{mermaid}"
        );
        assert!(mermaid.contains("s_end --> [*]\n"), "{mermaid}");
        assert!(mermaid.contains("s_failed --> [*]\n"), "{mermaid}");
        assert!(
            mermaid.contains("class s_end,s_failed terminal\n"),
            "{mermaid}"
        );
        assert!(!mermaid.contains("s_chairman --> [*]"), "{mermaid}");
    }

    const AWKWARD: &str = r#"
id: odd.names-1
states:
  - id: fetch-data
    action: command
    description: "Runs \"fetch\" in C:\\data"
  - id: fetch_data
    action: transform
  - id: v1.2
    action: end
xitions:
  - id: [start, fetch-data]
    label: "say \"hi\"\nthen C:\\dir; #1 & <b> 100% {x}"
  - id: [fetch-data, fetch_data]
    description: "change direction LR: now"
  - id: [fetch_data, fetch_data]
  - id: [fetch_data, v1.2]
"#;

    #[test]
    fn dot_escapes_quotes_backslashes_newlines_and_entities() {
        let dot = to_dot(&load(AWKWARD));
        let entry = line_with(&dot, "\"start\" -> \"fetch-data\"");
        assert!(
            entry.contains(r#"label="say \"hi\"\nthen C:\\dir; #1 &amp; <b> 100% {x}""#),
            "{entry}"
        );
        let state = line_with(&dot, "\"fetch-data\" [");
        assert!(
            state.contains(r#"tooltip="Runs \"fetch\" in C:\\data""#),
            "{state}"
        );
        assert!(dot.contains("\"v1.2\" [label=\"v1.2\\n(end)\""), "{dot}");
        assert!(dot.contains("\"fetch_data\" -> \"fetch_data\";"), "{dot}");
    }

    #[test]
    fn mermaid_sanitizes_ids_and_escapes_labels() {
        let mermaid = to_mermaid(&load(AWKWARD));
        // Ids with `-` and `.` get distinct ids of letters, digits and `_` only.
        assert!(
            mermaid.contains("state \"fetch-data (command)\" as s_fetch_2ddata\n"),
            "{mermaid}"
        );
        assert!(
            mermaid.contains("state \"fetch_data (transform)\" as s_fetch__data\n"),
            "{mermaid}"
        );
        assert!(
            mermaid.contains("state \"v1.2 (end)\" as s_v1_2e2\n"),
            "{mermaid}"
        );
        for line in mermaid.lines().skip(1) {
            let line = line.trim();
            let ids = if let Some(rest) = line.strip_prefix("state ") {
                rest.rsplit(" as ").next().unwrap_or("").to_owned()
            } else if line.contains(" --> ") {
                line.split(" : ").next().unwrap_or("").replace(" --> ", " ")
            } else {
                continue;
            };
            for id in ids.split(' ').filter(|id| *id != "[*]") {
                assert!(
                    id.starts_with("s_")
                        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                    "bad Mermaid id {id:?} in {line:?}"
                );
            }
        }
        // Labels: one line, no raw character that Mermaid stops at.
        let entry = line_with(&mermaid, "[*] --> s_fetch_2ddata");
        let label = entry.split(" : ").nth(1).unwrap_or("");
        assert_eq!(
            label,
            "say #quot;hi#quot; then C#58;#92;dir#59; #35;1 #amp; #lt;b#gt; 100#37; #123;x#125;"
        );
        let next = line_with(&mermaid, "s_fetch_2ddata --> s_fetch__data");
        assert!(
            next.contains(" : change #100;irection LR#58; now"),
            "{next}"
        );
        assert!(
            mermaid.contains("    s_fetch__data --> s_fetch__data\n"),
            "{mermaid}"
        );
        assert!(mermaid.contains("s_v1_2e2 --> [*]\n"), "{mermaid}");
    }

    #[test]
    fn mermaid_ids_never_collide() {
        let ids = ["a-b", "a_b", "a_2db", "a.b", "a__b", "a_2eb", "a", "A"];
        let mapped: std::collections::HashSet<String> = ids.iter().map(|i| mermaid_id(i)).collect();
        assert_eq!(mapped.len(), ids.len(), "{mapped:?}");
    }

    #[test]
    fn shorten_cuts_on_characters() {
        assert_eq!(shorten("short", 40), "short");
        assert_eq!(shorten("a\n  b", 40), "a b");
        let long = "é".repeat(50);
        let cut = shorten(&long, 40);
        assert_eq!(cut.chars().count(), 40);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn graphviz_accepts_the_dot() {
        let example = include_str!("../../../examples/code-review.yaml");
        let documents = [
            ("review", load(REVIEW)),
            ("awkward", load(AWKWARD)),
            (
                "code-review",
                match crate::load_str("code-review.yaml", example, &crate::BuiltinNames) {
                    Ok(fsm) => fsm,
                    Err(e) => panic!("the example does not load: {e}"),
                },
            ),
        ];
        for (name, fsm) in documents {
            if let Err(e) = dot_accepts(&to_dot(&fsm)) {
                panic!("{name}: {e}\n{}", to_dot(&fsm));
            }
        }
    }
}
