//! The dynamic transition schemas made from the servers' catalogs.
//!
//! Names (served by [`McpSchemas`]):
//! - `mcp:request`, `mcp:response`: every server the client knows;
//! - `mcp:NAME:request`, `mcp:A,B:response`: the named servers only (what a hat uses);
//! - `mcp:NAME:call`: exactly one request, given at the top level of the event (no
//!   `requests` batch) — for small models, which otherwise go on adding requests.
//!
//! A request event holds `requests`, a batch of one or more requests, each
//! `{"server", "method", "params"}`; the request schema's `items` is a `oneOf` with one
//! branch per tool (`tools/call`: the name as a `const`, the tool's `inputSchema` as
//! `arguments`, its description kept), one per server with resources (`resources/read`
//! of a known URI) and one per prompt (`prompts/get` with its arguments) — and, for a
//! server that completes arguments, one per prompt with arguments (`completion/complete`
//! of one of them: the values the server suggests for what was typed so far).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use claij_core::{DynamicSchemas, SchemaError};
use serde_json::{Map, Value, json};

use crate::catalog::Catalog;
use crate::client::McpClient;

/// What a schema name asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SchemaName {
    /// The servers named (`None`: all of them).
    servers: Option<Vec<String>>,
    /// `request`, `response` or `call`.
    kind: SchemaKind,
}

/// The two dynamic schemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SchemaKind {
    /// What the calling state emits: a batch of requests.
    Request,
    /// What the `mcp` state answers: their results.
    Response,
    /// Exactly one request, its fields at the top level of the event.
    Call,
}

/// Parses `mcp:request`, `mcp:NAME,…:response`, …; `None` for other names.
fn parse_name(name: &str) -> Option<SchemaName> {
    let rest = name.strip_prefix("mcp:")?;
    let (servers, kind) = match rest.rsplit_once(':') {
        Some((servers, kind)) => (Some(servers), kind),
        None => (None, rest),
    };
    let kind = match kind {
        "request" => SchemaKind::Request,
        "response" => SchemaKind::Response,
        "call" => SchemaKind::Call,
        _ => return None,
    };
    let servers = match servers {
        None => None,
        Some(list) => {
            let names: Vec<String> = list.split(',').map(str::to_owned).collect();
            let valid = |n: &String| {
                !n.is_empty()
                    && n.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            };
            if !names.iter().all(valid) {
                return None;
            }
            Some(names)
        }
    };
    Some(SchemaName { servers, kind })
}

/// A tool's input schema made safe to embed: its own `$schema` removed (the document is
/// draft 2020-12; the keywords servers use mean the same there), and, when it has
/// definitions of its own, an `$id` of its own (`urn:claij-mcp:SERVER:TOOL`) so that its
/// `#/$defs/…` references resolve inside it, not against the document's shared schemas.
fn embeddable(server: &str, tool: &str, schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut map = map.clone();
            map.remove("$schema");
            map.remove("$id");
            if map.contains_key("$defs") || map.contains_key("definitions") {
                let safe = |s: &str| -> String {
                    s.chars()
                        .map(|c| {
                            if c.is_ascii_alphanumeric() || "-._".contains(c) {
                                c
                            } else {
                                '_'
                            }
                        })
                        .collect()
                };
                map.insert(
                    "$id".into(),
                    json!(format!("urn:claij-mcp:{}:{}", safe(server), safe(tool))),
                );
            }
            if !map.contains_key("type") {
                map.insert("type".into(), json!("object"));
            }
            Value::Object(map)
        }
        _ => json!({"type": "object"}),
    }
}

fn branch(server: &str, method: &str, description: Option<&Value>, params: Value) -> Value {
    let mut b = json!({
        "type": "object",
        "required": ["server", "method", "params"],
        "properties": {
            "server": {"const": server},
            "method": {"const": method},
            "params": params,
        },
        "additionalProperties": false,
    });
    if let Some(d) = description.filter(|d| d.is_string()) {
        b["description"] = d.clone();
    }
    b
}

/// The `oneOf` branches of one server's catalog.
fn request_branches(server: &str, catalog: &Catalog) -> Vec<Value> {
    let mut out = Vec::new();
    for tool in &catalog.tools {
        let Some(name) = tool["name"].as_str() else {
            continue;
        };
        out.push(branch(
            server,
            "tools/call",
            tool.get("description"),
            json!({
                "type": "object",
                "required": ["name", "arguments"],
                "properties": {
                    "name": {"const": name},
                    "arguments": embeddable(server, name, &tool["inputSchema"]),
                },
                "additionalProperties": false,
            }),
        ));
    }
    let uris: Vec<&Value> = catalog
        .resources
        .iter()
        .filter_map(|r| r.get("uri").filter(|u| u.is_string()))
        .collect();
    if !uris.is_empty() {
        let listing: Vec<String> = catalog
            .resources
            .iter()
            .filter_map(|r| {
                let uri = r["uri"].as_str()?;
                Some(match r["description"].as_str().or(r["name"].as_str()) {
                    Some(d) => format!("{uri}: {d}"),
                    None => uri.to_owned(),
                })
            })
            .collect();
        out.push(branch(
            server,
            "resources/read",
            Some(&json!(format!(
                "Read a resource of `{server}`: {}",
                listing.join("; ")
            ))),
            json!({
                "type": "object",
                "required": ["uri"],
                "properties": {"uri": {"enum": uris}},
                "additionalProperties": false,
            }),
        ));
    }
    for prompt in &catalog.prompts {
        let Some(name) = prompt["name"].as_str() else {
            continue;
        };
        let mut properties = Map::new();
        let mut required = Vec::new();
        for arg in prompt["arguments"].as_array().into_iter().flatten() {
            let Some(arg_name) = arg["name"].as_str() else {
                continue;
            };
            let mut p = json!({"type": "string"});
            if let Some(d) = arg.get("description").filter(|d| d.is_string()) {
                p["description"] = d.clone();
            }
            properties.insert(arg_name.to_owned(), p);
            if arg["required"] == true {
                required.push(json!(arg_name));
            }
        }
        let mut params = json!({
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"const": name},
                "arguments": {
                    "type": "object",
                    "properties": properties,
                    "required": required,
                    "additionalProperties": false,
                },
            },
            "additionalProperties": false,
        });
        if !required.is_empty() {
            params["required"] = json!(["name", "arguments"]);
        }
        out.push(branch(
            server,
            "prompts/get",
            prompt.get("description"),
            params,
        ));
        if catalog.completions && !properties.is_empty() {
            out.push(completion_branch(server, name, properties.keys()));
        }
    }
    out
}

/// A `completion/complete` branch for the arguments `args` of the prompt `prompt`.
fn completion_branch<'a>(
    server: &str,
    prompt: &str,
    args: impl Iterator<Item = &'a String>,
) -> Value {
    let args: Vec<&String> = args.collect();
    branch(
        server,
        "completion/complete",
        Some(&json!(format!(
            "Complete an argument of the prompt `{prompt}` of `{server}`: the values it \
             suggests for what was typed so far (`value`; `context.arguments`: the ones \
             already chosen)"
        ))),
        json!({
            "type": "object",
            "required": ["ref", "argument"],
            "properties": {
                "ref": {
                    "type": "object",
                    "required": ["type", "name"],
                    "properties": {"type": {"const": "ref/prompt"}, "name": {"const": prompt}},
                    "additionalProperties": false,
                },
                "argument": {
                    "type": "object",
                    "required": ["name", "value"],
                    "properties": {"name": {"enum": args}, "value": {"type": "string"}},
                    "additionalProperties": false,
                },
                "context": {
                    "type": "object",
                    "properties": {
                        "arguments": {"type": "object", "additionalProperties": {"type": "string"}},
                    },
                    "additionalProperties": false,
                },
            },
            "additionalProperties": false,
        }),
    )
}

/// The request schema over `catalogs` (server name → catalog).
fn request_schema(catalogs: &[(String, Catalog)]) -> Value {
    let branches: Vec<Value> = catalogs
        .iter()
        .flat_map(|(server, catalog)| request_branches(server, catalog))
        .collect();
    let items = if branches.is_empty() {
        // Nothing to call: no request can be valid.
        json!(false)
    } else {
        json!({"oneOf": branches})
    };
    json!({
        "type": "object",
        "description": "Requests to MCP servers, run in order; their results come back to this state.",
        "required": ["requests"],
        "properties": {
            "requests": {"type": "array", "minItems": 1, "items": items}
        },
    })
}

/// The single-request schema over `catalogs`: one of the request branches, at the top
/// level of the event (which also carries its `id`).
fn call_schema(catalogs: &[(String, Catalog)]) -> Value {
    let branches: Vec<Value> = catalogs
        .iter()
        .flat_map(|(server, catalog)| request_branches(server, catalog))
        .map(|mut branch| {
            // The event's `id` sits beside the request's fields.
            branch["properties"]["id"] = json!({});
            branch
        })
        .collect();
    if branches.is_empty() {
        return json!(false);
    }
    json!({
        "description": "One request to an MCP server; its result comes back.",
        "oneOf": branches,
    })
}

/// The response schema for `servers`.
fn response_schema(servers: &[String]) -> Value {
    json!({
        "type": "object",
        "description": "The results of the requests, in order.",
        "required": ["results"],
        "properties": {
            "results": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["server", "method"],
                    "properties": {
                        "server": {"enum": servers},
                        "method": {"type": "string"},
                        "result": {"type": "object"},
                        "error": {
                            "type": "object",
                            "required": ["message"],
                            "properties": {
                                "code": {"type": "integer"},
                                "message": {"type": "string"},
                            },
                        },
                        "notifications": {"type": "array"},
                    },
                },
            },
        },
    })
}

/// Where a server's catalog comes from: its connection, or a replayed listing.
enum Listed {
    Live(Arc<crate::connection::Connection>),
    Replayed(Arc<Catalog>),
}

type Memo = HashMap<String, (Vec<(String, u64)>, Arc<Value>)>;

/// The [`DynamicSchemas`] provider of the MCP client: serves `mcp:…` names from the
/// connected servers' current catalogs, rebuilding a schema only when a catalog changed
/// (the same `Arc` is returned otherwise, so the engine does not recompile it).
pub struct McpSchemas {
    client: Weak<McpClient>,
    memo: Mutex<Memo>,
}

impl McpSchemas {
    /// A provider over `client`'s connections.
    pub fn new(client: &Arc<McpClient>) -> Self {
        Self {
            client: Arc::downgrade(client),
            memo: Mutex::new(HashMap::new()),
        }
    }
}

impl DynamicSchemas for McpSchemas {
    fn serves(&self, name: &str) -> bool {
        parse_name(name).is_some()
    }

    fn resolve(&self, name: &str) -> Result<Arc<Value>, SchemaError> {
        let parsed = parse_name(name)
            .ok_or_else(|| SchemaError::new(format!("`{name}` is not an MCP schema name")))?;
        let client = self
            .client
            .upgrade()
            .ok_or_else(|| SchemaError::new("the MCP client is gone"))?;
        let servers = match parsed.servers {
            Some(servers) => servers,
            None => client.connected_names(),
        };
        let mut listed = Vec::with_capacity(servers.len());
        for server in &servers {
            let source = match client.connection(server) {
                Some(connection) => Listed::Live(connection),
                None => Listed::Replayed(client.replayed_catalog(server).ok_or_else(|| {
                    SchemaError::new(format!(
                        "`{name}`: the MCP server `{server}` is not connected"
                    ))
                })?),
            };
            listed.push((server.clone(), source));
        }
        // A replayed listing never changes.
        let stamp: Vec<(String, u64)> = listed
            .iter()
            .map(|(server, source)| match source {
                Listed::Live(c) => (server.clone(), c.generation()),
                Listed::Replayed(_) => (server.clone(), u64::MAX),
            })
            .collect();
        let mut memo = self.memo.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((seen, value)) = memo.get(name)
            && *seen == stamp
        {
            return Ok(value.clone());
        }
        let value = Arc::new(match parsed.kind {
            SchemaKind::Request | SchemaKind::Call => {
                let catalogs: Vec<(String, Catalog)> = listed
                    .iter()
                    .map(|(server, source)| {
                        let catalog = match source {
                            Listed::Live(c) => c.catalog(),
                            Listed::Replayed(catalog) => Catalog::clone(catalog),
                        };
                        (server.clone(), catalog)
                    })
                    .collect();
                if parsed.kind == SchemaKind::Call {
                    call_schema(&catalogs)
                } else {
                    request_schema(&catalogs)
                }
            }
            SchemaKind::Response => response_schema(&servers),
        });
        memo.insert(name.to_owned(), (stamp, value.clone()));
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use claij_core::CompiledSchema;

    #[test]
    fn names_parse() {
        assert_eq!(
            parse_name("mcp:request"),
            Some(SchemaName {
                servers: None,
                kind: SchemaKind::Request
            })
        );
        assert_eq!(
            parse_name("mcp:a,b.c:response"),
            Some(SchemaName {
                servers: Some(vec!["a".into(), "b.c".into()]),
                kind: SchemaKind::Response
            })
        );
        assert_eq!(
            parse_name("mcp:fs:call"),
            Some(SchemaName {
                servers: Some(vec!["fs".into()]),
                kind: SchemaKind::Call
            })
        );
        assert_eq!(parse_name("mcp:tools"), None);
        assert_eq!(parse_name("mcp:a b:request"), None);
        assert_eq!(parse_name("other:request"), None);
    }

    fn catalog() -> Catalog {
        Catalog {
            tools: vec![json!({
                "name": "get-sum", "description": "Adds two numbers",
                "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                    "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}
            })],
            resources: vec![json!({"uri": "demo://a", "name": "a"})],
            prompts: vec![
                json!({"name": "args-prompt", "arguments": [{"name": "city", "required": true}, {"name": "state"}]}),
            ],
            completions: false,
        }
    }

    #[test]
    fn a_server_that_completes_arguments_is_offered_completions_of_its_prompts() {
        let without = request_schema(&[("ev".into(), catalog())]);
        let ask = json!({"requests": [{"server": "ev", "method": "completion/complete",
            "params": {"ref": {"type": "ref/prompt", "name": "args-prompt"},
                       "argument": {"name": "city", "value": "Pa"}}}]});
        let compiled = CompiledSchema::compile(without).unwrap();
        assert!(
            !compiled.is_valid(&ask),
            "no completions capability, no completions"
        );

        let with = request_schema(&[(
            "ev".into(),
            Catalog {
                completions: true,
                ..catalog()
            },
        )]);
        let compiled = CompiledSchema::compile(with).unwrap();
        assert!(compiled.is_valid(&ask), "{:?}", compiled.issues(&ask));
        let with_context = json!({"requests": [{"server": "ev", "method": "completion/complete",
            "params": {"ref": {"type": "ref/prompt", "name": "args-prompt"},
                       "argument": {"name": "state", "value": ""},
                       "context": {"arguments": {"city": "Paris"}}}}]});
        assert!(
            compiled.is_valid(&with_context),
            "{:?}",
            compiled.issues(&with_context)
        );
        for bad in [
            json!({"requests": [{"server": "ev", "method": "completion/complete",
                "params": {"ref": {"type": "ref/prompt", "name": "args-prompt"},
                           "argument": {"name": "country", "value": ""}}}]}),
            json!({"requests": [{"server": "ev", "method": "completion/complete",
                "params": {"ref": {"type": "ref/prompt", "name": "other"},
                           "argument": {"name": "city", "value": ""}}}]}),
        ] {
            assert!(!compiled.is_valid(&bad), "accepted {bad}");
        }
    }

    #[test]
    fn request_schema_accepts_each_kind_and_rejects_bad_arguments() {
        let schema = request_schema(&[("ev".into(), catalog())]);
        assert_eq!(
            schema["properties"]["requests"]["items"]["oneOf"][0]["description"],
            "Adds two numbers"
        );
        let compiled = CompiledSchema::compile(schema).unwrap();
        let ok = json!({"requests": [
            {"server": "ev", "method": "tools/call", "params": {"name": "get-sum", "arguments": {"a": 1, "b": 2}}},
            {"server": "ev", "method": "resources/read", "params": {"uri": "demo://a"}},
            {"server": "ev", "method": "prompts/get", "params": {"name": "args-prompt", "arguments": {"city": "Paris"}}}
        ]});
        assert!(compiled.is_valid(&ok), "{:?}", compiled.issues(&ok));
        for bad in [
            json!({"requests": [{"server": "ev", "method": "tools/call", "params": {"name": "get-sum", "arguments": {"a": "x", "b": 2}}}]}),
            json!({"requests": [{"server": "ev", "method": "tools/call", "params": {"name": "nope", "arguments": {}}}]}),
            json!({"requests": [{"server": "ev", "method": "resources/read", "params": {"uri": "demo://zzz"}}]}),
            json!({"requests": [{"server": "ev", "method": "prompts/get", "params": {"name": "args-prompt", "arguments": {}}}]}),
            json!({"requests": [{"server": "other", "method": "tools/call", "params": {"name": "get-sum", "arguments": {"a": 1, "b": 2}}}]}),
            json!({"requests": []}),
        ] {
            assert!(!compiled.is_valid(&bad), "accepted {bad}");
        }
    }

    #[test]
    fn the_call_schema_takes_exactly_one_request_beside_the_id() {
        let compiled = CompiledSchema::compile(call_schema(&[("ev".into(), catalog())])).unwrap();
        let ok = json!({"id": ["a", "b"], "server": "ev", "method": "tools/call",
            "params": {"name": "get-sum", "arguments": {"a": 1, "b": 2}}});
        assert!(compiled.is_valid(&ok), "{:?}", compiled.issues(&ok));
        for bad in [
            json!({"requests": [{"server": "ev", "method": "tools/call", "params": {"name": "get-sum", "arguments": {"a": 1, "b": 2}}}]}),
            json!({"server": "ev", "method": "tools/call", "params": {"name": "get-sum", "arguments": {"a": "x", "b": 2}}}),
            json!({"server": "ev", "method": "tools/call", "params": {"name": "get-sum", "arguments": {"a": 1, "b": 2}}, "more": 1}),
        ] {
            assert!(!compiled.is_valid(&bad), "accepted {bad}");
        }
        assert_eq!(call_schema(&[]), json!(false));
    }

    #[test]
    fn a_tool_schema_with_its_own_defs_resolves_them_itself() {
        let catalog = Catalog {
            tools: vec![json!({
                "name": "add person",
                "inputSchema": {"type": "object", "required": ["who"],
                    "properties": {"who": {"$ref": "#/$defs/Person"}},
                    "$defs": {"Person": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}}}
            })],
            ..Catalog::default()
        };
        let schema = request_schema(&[("py".into(), catalog)]);
        // The document's own shared schemas sit at the root, as the engine puts them.
        let effective = claij_core::schema::compilable_effective(
            &claij_core::schema::effective_schema("a", "b", Some(&schema)),
            &serde_json::from_value(json!({"Person": {"type": "integer"}})).unwrap(),
        );
        let compiled = CompiledSchema::compile(effective).unwrap();
        let call = |who: Value| json!({"id": ["a", "b"], "requests": [{"server": "py", "method": "tools/call", "params": {"name": "add person", "arguments": {"who": who}}}]});
        assert!(
            compiled.is_valid(&call(json!({"name": "Ada"}))),
            "{:?}",
            compiled.issues(&call(json!({"name": "Ada"})))
        );
        assert!(!compiled.is_valid(&call(json!(7))));
    }

    #[test]
    fn no_tools_means_no_valid_request() {
        let compiled = CompiledSchema::compile(request_schema(&[])).unwrap();
        assert!(!compiled.is_valid(
            &json!({"requests": [{"server": "x", "method": "tools/call", "params": {}}]})
        ));
    }
}
