//! How to reach a server: the entries of a document's `servers` section (or the CLI's).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use claij_core::Fsm;
use claij_engine::capability::{Field, Need, NeedsOf, Touch};

use crate::error::McpError;

/// One server: how to reach it, how long a request may take, which roots it is shown.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSpec {
    /// How to reach it.
    pub transport: Transport,
    /// Timeout of one request (default [`DEFAULT_TIMEOUT`]).
    pub timeout: Duration,
    /// Roots advertised to the server, as URIs (`file:///…`).
    pub roots: Vec<String>,
    /// The only tools shown to models and callable, when given (`None`: every tool the
    /// server lists). A small model's prompt holds a handful of tools, not a server's all.
    pub tools: Option<Vec<String>>,
    /// The least severe log message the server is to send (`logging/setLevel` after the
    /// handshake; `None`: the server's own choice).
    pub log_level: Option<String>,
    /// How long a durable run holds the server's request open when the server asks a
    /// person a question (`elicitation/create`), at most the request's timeout less a
    /// second (default [`DEFAULT_HOLD`]; zero: never held, the run stops for the question
    /// at once).
    pub hold_questions: Duration,
}

/// The log levels of MCP (RFC 5424's), least severe first.
pub const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// How a server is reached.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    /// A child process speaking MCP on stdin/stdout (no shell).
    Stdio {
        /// The program, looked up on `PATH`.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment variables.
        env: BTreeMap<String, String>,
        /// Its working directory.
        cwd: Option<PathBuf>,
    },
    /// A streamable HTTP endpoint, e.g. `http://127.0.0.1:3001/mcp`.
    Http {
        /// The endpoint.
        url: String,
    },
}

/// What each field of a server's entry in a document's `servers` touches outside the
/// run: the program a stdio server starts, the variables it is given, its working
/// directory and the roots shown to it (files), the URL an HTTP server is reached at
/// (and, with it, the operator's stored credential for it, which the policy decides on
/// its own: see [`claij_engine::Policy::credential`]).
pub const SERVER_FIELDS: &[Field] = &[
    Field::new("/command", Touch::Program),
    Field::inert("/args"),
    Field::new("/env", Touch::Environment),
    Field::new("/cwd", Touch::File),
    Field::new("/url", Touch::Host),
    Field::inert("/timeout"),
    Field::new("/roots", Touch::File),
    Field::inert("/tools"),
    Field::inert("/log_level"),
    Field::inert("/hold_questions"),
];

/// What the server `name` of `fsm` would touch, each need where the document writes it
/// (a root's `file://` URI as its path).
pub fn server_needs(fsm: &Fsm, name: &str) -> Vec<Need> {
    let Some(entry) = fsm.servers.get(name) else {
        return Vec::new();
    };
    let at = claij_engine::capability::server_path(fsm, name);
    let mut needs = NeedsOf {
        config: entry,
        at: &at,
        fsm,
    }
    .from_fields(SERVER_FIELDS);
    for need in &mut needs {
        if need.touch == Touch::File
            && let Some(path) = need.value.strip_prefix("file://")
        {
            need.value = path.to_owned();
        }
    }
    needs
}

/// Timeout of one request when a server's entry does not say.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a question's request is held open when a server's entry does not say.
pub const DEFAULT_HOLD: Duration = Duration::from_secs(30);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    timeout: Option<Value>,
    #[serde(default)]
    roots: Vec<String>,
    tools: Option<Vec<String>>,
    log_level: Option<String>,
    hold_questions: Option<Value>,
}

impl ServerSpec {
    /// Parses one entry of a `servers` section.
    pub fn from_value(name: &str, value: &Value) -> Result<Self, McpError> {
        let bad = |message: String| McpError::Spec {
            server: name.to_owned(),
            message,
        };
        let raw = RawSpec::deserialize(value).map_err(|e| bad(e.to_string()))?;
        let transport = match (raw.command, raw.url) {
            (Some(command), None) => Transport::Stdio {
                command,
                args: raw.args,
                env: raw.env,
                cwd: raw.cwd,
            },
            (None, Some(url)) if raw.args.is_empty() && raw.env.is_empty() && raw.cwd.is_none() => {
                Transport::Http { url }
            }
            (None, Some(_)) => {
                return Err(bad(
                    "`args`, `env` and `cwd` belong to `command` servers".into()
                ));
            }
            _ => return Err(bad("give either `command` (stdio) or `url` (HTTP)".into())),
        };
        Ok(ServerSpec {
            transport,
            timeout: parse_duration("timeout", raw.timeout.as_ref(), DEFAULT_TIMEOUT, false)
                .map_err(bad)?,
            hold_questions: parse_duration(
                "hold_questions",
                raw.hold_questions.as_ref(),
                DEFAULT_HOLD,
                true,
            )
            .map_err(bad)?,
            roots: raw.roots.iter().map(|r| root_uri(r)).collect(),
            tools: raw.tools,
            log_level: match raw.log_level {
                Some(level) if !LOG_LEVELS.contains(&level.as_str()) => {
                    return Err(bad(format!(
                        "log_level `{level}` is not one of {}",
                        LOG_LEVELS.join(", ")
                    )));
                }
                level => level,
            },
        })
    }

    /// A child-process server from a command line, with the default settings.
    pub fn command(command: impl Into<String>, args: impl IntoIterator<Item = String>) -> Self {
        ServerSpec {
            transport: Transport::Stdio {
                command: command.into(),
                args: args.into_iter().collect(),
                env: BTreeMap::new(),
                cwd: None,
            },
            timeout: DEFAULT_TIMEOUT,
            roots: Vec::new(),
            tools: None,
            log_level: None,
            hold_questions: DEFAULT_HOLD,
        }
    }

    /// A streamable HTTP server, with the default settings.
    pub fn http(url: impl Into<String>) -> Self {
        ServerSpec {
            transport: Transport::Http { url: url.into() },
            timeout: DEFAULT_TIMEOUT,
            roots: Vec::new(),
            tools: None,
            log_level: None,
            hold_questions: DEFAULT_HOLD,
        }
    }

    /// The same, with this request timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The same, showing only these tools: what a document's `tools` list does, for a
    /// server declared by hand ([`crate::McpClient::declare`]).
    pub fn with_tools(mut self, tools: &[&str]) -> Self {
        self.tools = Some(tools.iter().map(|t| (*t).to_owned()).collect());
        self
    }

    /// The same, asking the server for log messages from `level` up (one of
    /// [`LOG_LEVELS`]): what a document's `log_level` does, for a server declared by hand.
    pub fn with_log_level(mut self, level: &str) -> Self {
        self.log_level = Some(level.to_owned());
        self
    }

    /// Whether the tool named `name` may be shown and called.
    pub fn exposes_tool(&self, name: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|tools| tools.iter().any(|t| t == name))
    }

    /// The same, advertising these roots (paths or URIs): what a document's `roots` does,
    /// for a server declared by hand ([`crate::McpClient::declare`]).
    pub fn with_roots(mut self, roots: &[&str]) -> Self {
        self.roots = roots.iter().map(|r| root_uri(r)).collect();
        self
    }
}

/// The duration `field` gives (seconds, or a duration like `"30s"`), else `default`;
/// zero only when `zero_allowed`.
fn parse_duration(
    field: &str,
    value: Option<&Value>,
    default: Duration,
    zero_allowed: bool,
) -> Result<Duration, String> {
    let duration = match value {
        None => return Ok(default),
        Some(Value::Number(n)) => n
            .as_f64()
            .filter(|s| *s >= 0.0 && s.is_finite())
            .map(Duration::from_secs_f64)
            .ok_or_else(|| format!("{field} `{n}` is not a number of seconds"))?,
        Some(Value::String(s)) => humantime::parse_duration(s)
            .map_err(|e| format!("{field} `{s}` is not a duration: {e}"))?,
        Some(other) => return Err(format!("{field} `{other}` is not a duration")),
    };
    if duration.is_zero() && !zero_allowed {
        return Err(format!("{field} must be more than zero"));
    }
    Ok(duration)
}

/// A root as a URI: URIs stay, paths become `file://` URIs (relative ones made absolute).
fn root_uri(root: &str) -> String {
    if root.contains("://") {
        return root.to_owned();
    }
    let path = PathBuf::from(root);
    let abs = if path.is_absolute() {
        path
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    format!("file://{}", abs.display())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stdio_and_http_specs_parse_and_bad_ones_are_named() {
        let s = ServerSpec::from_value(
            "fs",
            &json!({"command": "npx", "args": ["a"], "env": {"X": "1"}, "timeout": "5s"}),
        )
        .unwrap();
        assert!(
            matches!(&s.transport, Transport::Stdio { args, env, .. } if args == &["a"] && env["X"] == "1")
        );
        assert_eq!(s.timeout, Duration::from_secs(5));
        let h = ServerSpec::from_value("web", &json!({"url": "http://127.0.0.1:1/mcp"})).unwrap();
        assert!(matches!(h.transport, Transport::Http { .. }));
        let e = ServerSpec::from_value("bad", &json!({"comand": "x"})).unwrap_err();
        assert!(e.to_string().contains("`bad`"), "{e}");
        let e = ServerSpec::from_value("both", &json!({"command": "x", "url": "http://a"}))
            .unwrap_err();
        assert!(e.to_string().contains("either"), "{e}");
        let e = ServerSpec::from_value("slow", &json!({"command": "x", "timeout": "soon"}))
            .unwrap_err();
        assert!(e.to_string().contains("soon"), "{e}");
        let e = ServerSpec::from_value("few", &json!({"command": "x", "tools": "get-sum"}))
            .unwrap_err();
        assert!(e.to_string().contains("`few`"), "{e}");
    }

    #[test]
    fn a_questions_hold_defaults_to_30_seconds_and_may_be_zero() {
        let x = ServerSpec::from_value("x", &json!({"command": "x"})).unwrap();
        assert_eq!(x.hold_questions, DEFAULT_HOLD);
        let never =
            ServerSpec::from_value("x", &json!({"command": "x", "hold_questions": 0})).unwrap();
        assert_eq!(never.hold_questions, Duration::ZERO);
        let long =
            ServerSpec::from_value("x", &json!({"command": "x", "hold_questions": "2m"})).unwrap();
        assert_eq!(long.hold_questions, Duration::from_secs(120));
        let e = ServerSpec::from_value("x", &json!({"command": "x", "hold_questions": "a while"}))
            .unwrap_err();
        assert!(e.to_string().contains("hold_questions `a while`"), "{e}");
        let e = ServerSpec::from_value("x", &json!({"command": "x", "timeout": 0})).unwrap_err();
        assert!(
            e.to_string().contains("timeout must be more than zero"),
            "{e}"
        );
    }

    #[test]
    fn a_tools_list_limits_what_is_exposed() {
        let all = ServerSpec::command("x", []);
        assert!(all.exposes_tool("anything"));
        let few = ServerSpec::from_value(
            "few",
            &json!({"command": "x", "tools": ["echo", "get-sum"]}),
        )
        .unwrap();
        assert!(few.exposes_tool("get-sum"));
        assert!(!few.exposes_tool("get-tiny-image"));
    }

    #[test]
    fn roots_become_file_uris() {
        let s = ServerSpec::command("x", []).with_roots(&["/tmp/a", "file:///b"]);
        assert_eq!(s.roots, ["file:///tmp/a", "file:///b"]);
    }
}
