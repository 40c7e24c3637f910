//! What in a document starts programs or reads the host's files: `command` states, MCP
//! servers started over stdio, and child FSMs named by file path (`fsm` and `fork`
//! states). A server that accepts documents from the network (`claij serve`) refuses
//! those uses unless its operator allows them by name; the documents the operator names
//! on the command line are trusted and not checked.

use std::fmt;

use claij_core::JsonPath;
use serde_json::Value;

/// One use of a privilege, and where the document makes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivilegedUse {
    /// Where in the document (`$.states[2].config.argv`).
    pub path: JsonPath,
    /// What it does.
    pub privilege: Privilege,
}

/// A privilege a document may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Privilege {
    /// A `command` state starts this program.
    Command {
        /// `argv[0]`.
        program: String,
    },
    /// An MCP server started as a child process over stdio.
    StdioServer {
        /// The server's name in the document.
        server: String,
        /// The program it starts.
        program: String,
    },
    /// A child FSM read from this file (relative to the working directory).
    ChildFile {
        /// The path as written.
        file: String,
    },
}

impl Privilege {
    /// The name an operator allows it by: the program, or the file.
    pub fn name(&self) -> &str {
        match self {
            Privilege::Command { program } | Privilege::StdioServer { program, .. } => program,
            Privilege::ChildFile { file } => file,
        }
    }
}

impl fmt::Display for Privilege {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Privilege::Command { program } => {
                write!(f, "a `command` state starts the program `{program}`")
            }
            Privilege::StdioServer { server, program } => write!(
                f,
                "the MCP server `{server}` is started over stdio as the program `{program}`"
            ),
            Privilege::ChildFile { file } => {
                write!(f, "a child FSM is read from the file `{file}`")
            }
        }
    }
}

/// Every privileged use `document` (an FSM document as JSON) makes, in document order.
pub fn privileged_uses(document: &Value) -> Vec<PrivilegedUse> {
    let mut uses = Vec::new();
    let root = JsonPath::root();
    if let Some(servers) = document.get("servers").and_then(Value::as_object) {
        for (name, spec) in servers {
            stdio_server(&root.join("servers").join(name), name, spec, &mut uses);
        }
    }
    let states = document.get("states").and_then(Value::as_array);
    for (i, state) in states.into_iter().flatten().enumerate() {
        let at = root.join("states").join(i);
        // Servers given in place on a state (the MCP hat), or in an `mcp` state's config.
        for (servers, base) in [
            (state.get("servers"), at.join("servers")),
            (
                state.get("config").and_then(|c| c.get("servers")),
                at.join("config").join("servers"),
            ),
        ] {
            if let Some(Value::Object(map)) = servers {
                for (name, spec) in map {
                    stdio_server(&base.join(name), name, spec, &mut uses);
                }
            }
        }
        let config = state.get("config");
        match state.get("action").and_then(Value::as_str) {
            Some("command") => {
                let program = config
                    .and_then(|c| c.get("argv"))
                    .and_then(|a| a.get(0))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                uses.push(PrivilegedUse {
                    path: at.join("config").join("argv"),
                    privilege: Privilege::Command { program },
                });
            }
            Some("fsm" | "fork") => {
                let config_at = at.join("config");
                for key in ["fsm", "branches"] {
                    match config.and_then(|c| c.get(key)) {
                        Some(Value::Array(items)) => {
                            for (j, item) in items.iter().enumerate() {
                                child_file(&config_at.join(key).join(j), item, &mut uses);
                            }
                        }
                        Some(one) => child_file(&config_at.join(key), one, &mut uses),
                        None => {}
                    }
                }
            }
            _ => {}
        }
    }
    uses
}

fn stdio_server(path: &JsonPath, name: &str, spec: &Value, uses: &mut Vec<PrivilegedUse>) {
    if let Some(program) = spec.get("command") {
        uses.push(PrivilegedUse {
            path: path.join("command"),
            privilege: Privilege::StdioServer {
                server: name.to_owned(),
                program: program.as_str().unwrap_or("").to_owned(),
            },
        });
    }
}

fn child_file(path: &JsonPath, reference: &Value, uses: &mut Vec<PrivilegedUse>) {
    let file = match reference {
        Value::String(file) => Some((path.clone(), file)),
        Value::Object(map) => match map.get("file") {
            Some(Value::String(file)) => Some((path.join("file"), file)),
            _ => None,
        },
        _ => None,
    };
    if let Some((path, file)) = file {
        uses.push(PrivilegedUse {
            path,
            privilege: Privilege::ChildFile { file: file.clone() },
        });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn found(document: Value) -> Vec<(String, String)> {
        privileged_uses(&document)
            .into_iter()
            .map(|u| (u.path.to_string(), u.privilege.name().to_owned()))
            .collect()
    }

    #[test]
    fn finds_every_program_and_file_with_its_place() {
        let document = json!({
            "id": "x",
            "servers": {"fs": {"command": "npx", "args": []}, "web": {"url": "http://h/mcp"}},
            "states": [
                {"id": "a", "action": "command", "config": {"argv": ["python3", "-c", "1"]}},
                {"id": "b", "action": "llm", "servers": {"git": {"command": "uvx"}}},
                {"id": "c", "action": "fsm", "config": {"fsm": ["one.yaml", {"id": "stored"}, {"file": "two.yaml"}]}},
                {"id": "d", "action": "fork", "config": {"branches": ["three.yaml", {"id": "s"}]}},
                {"id": "e", "action": "mcp", "config": {"servers": {"inline": {"command": "node"}}}},
                {"id": "f", "action": "transform", "config": {"template": "{}"}}
            ]
        });
        assert_eq!(
            found(document),
            [
                ("$.servers.fs.command", "npx"),
                ("$.states[0].config.argv", "python3"),
                ("$.states[1].servers.git.command", "uvx"),
                ("$.states[2].config.fsm[0]", "one.yaml"),
                ("$.states[2].config.fsm[2].file", "two.yaml"),
                ("$.states[3].config.branches[0]", "three.yaml"),
                ("$.states[4].config.servers.inline.command", "node"),
            ]
            .map(|(p, n)| (p.to_owned(), n.to_owned()))
        );
    }

    #[test]
    fn a_document_of_models_templates_and_stored_children_uses_none() {
        let document = json!({
            "id": "x",
            "servers": {"web": {"url": "http://h/mcp"}},
            "states": [
                {"id": "a", "action": "llm"},
                {"id": "b", "action": "fsm", "config": {"fsm": {"id": "other", "version": 2}}},
                {"id": "c", "action": "human"}
            ]
        });
        assert_eq!(found(document), []);
    }
}
