//! The documentation's complete examples load, and the YAML and JSON versions in
//! docs/FORMAT.md are the same document; README's example commands name real files.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::path::Path;

use claij_engine::ActionRegistry;

fn repo_file(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// The fenced blocks of `lang` in `markdown`, in order.
fn blocks<'a>(markdown: &'a str, lang: &str) -> Vec<&'a str> {
    let fence = format!("```{lang}\n");
    let mut found = Vec::new();
    let mut rest = markdown;
    while let Some(start) = rest.find(&fence) {
        let body = &rest[start + fence.len()..];
        let Some(end) = body.find("\n```") else { break };
        found.push(&body[..end + 1]);
        rest = &body[end..];
    }
    found
}

#[test]
fn the_complete_example_in_format_md_loads_in_yaml_and_json_alike() {
    let doc = repo_file("docs/FORMAT.md");
    let registry = ActionRegistry::with_builtins();
    let yaml = blocks(&doc, "yaml")[0];
    let json = blocks(&doc, "json")[0];
    let from_yaml = claij_core::load_str("greet.yaml", yaml, &registry)
        .unwrap_or_else(|e| panic!("the YAML example does not load: {e}"));
    let from_json = claij_core::load_str("greet.json", json, &registry)
        .unwrap_or_else(|e| panic!("the JSON example does not load: {e}"));
    assert_eq!(from_yaml.document, from_json.document);
    assert!(from_yaml.states.len() >= 3);
}

#[test]
fn readme_commands_name_files_that_exist() {
    let readme = repo_file("README.md");
    for word in readme.split(|c: char| c.is_whitespace() || "()[]`".contains(c)) {
        let word = word.trim_end_matches([',', ':', '.']);
        let path = word.strip_prefix('@').unwrap_or(word);
        if (path.starts_with("examples/")
            || path.starts_with("docs/")
            || path.starts_with("scripts/"))
            && !path.contains('*')
            && !path.ends_with('/')
        {
            let (file, anchor) = path.split_once('#').unwrap_or((path, ""));
            let file = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../..")
                .join(file);
            assert!(
                file.exists(),
                "README.md names {path}, which does not exist"
            );
            if !anchor.is_empty() {
                let text = std::fs::read_to_string(&file).unwrap_or_default();
                assert!(
                    text.lines()
                        .filter(|l| l.starts_with('#'))
                        .filter_map(|l| l.trim_start_matches('#').strip_prefix(' '))
                        .any(|heading| slug(heading) == anchor),
                    "README.md links {path}, but no heading of it has that anchor"
                );
            }
        }
    }
}

/// A heading's anchor as GitHub makes it: lowercase, spaces as `-`, punctuation dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}
