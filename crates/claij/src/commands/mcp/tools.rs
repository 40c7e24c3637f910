//! `claij mcp tools`: what a server offers.

use std::fmt::Write as _;

use claij_mcp::{ClientHooks, Connection, ServerSpec};
use serde_json::{Value, json};

use crate::{EXIT_OK, EXIT_USAGE};

/// `claij mcp tools`.
pub(super) async fn tools(url: Option<String>, as_json: bool, command: Vec<String>) -> u8 {
    let Some(spec) = server_spec(url, command) else {
        return EXIT_USAGE;
    };
    let connection = match Connection::connect("server", &spec, ClientHooks::default()).await {
        Ok(c) => c,
        Err(e) => {
            note!("claij: {e}");
            return EXIT_USAGE;
        }
    };
    let catalog = connection.catalog();
    let info = connection.server_info().clone();
    connection.shutdown().await;
    let text = if as_json {
        let mut all = catalog.to_json();
        all["server"] = info["serverInfo"].clone();
        all["protocolVersion"] = info["protocolVersion"].clone();
        serde_json::to_string_pretty(&all).unwrap_or_default()
    } else {
        describe(&info, &catalog)
    };
    match out!("{text}") {
        Ok(()) => EXIT_OK,
        // The reader went away (`| head`): nothing more to say.
        Err(_) => EXIT_OK,
    }
}

/// The server a `claij mcp` subcommand talks to: `--url`, else the command after `--`
/// (`None`, said on stderr, when neither is given).
pub(super) fn server_spec(url: Option<String>, command: Vec<String>) -> Option<ServerSpec> {
    match (url, command.split_first()) {
        (Some(url), _) => Some(ServerSpec::http(url)),
        (None, Some((program, args))) => Some(ServerSpec::command(program.clone(), args.to_vec())),
        (None, None) => {
            note!("claij: give the server's command after `--`, or --url");
            None
        }
    }
}

fn one_line(v: &Value) -> String {
    let s = v.as_str().unwrap_or_default();
    let line = s.lines().next().unwrap_or_default();
    if line.chars().count() > 100 {
        format!("{}…", line.chars().take(100).collect::<String>())
    } else {
        line.to_owned()
    }
}

/// `name*: type` for each property (`*`: required).
fn arguments(schema: &Value) -> String {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    schema["properties"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, p)| {
            let star = if required.contains(&name.as_str()) {
                "*"
            } else {
                ""
            };
            let ty = p["type"].as_str().unwrap_or("any");
            format!("{name}{star}: {ty}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe(info: &Value, catalog: &claij_mcp::Catalog) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "server: {} {} (protocol {})",
        info["serverInfo"]["name"].as_str().unwrap_or("?"),
        info["serverInfo"]["version"].as_str().unwrap_or(""),
        info["protocolVersion"].as_str().unwrap_or("?")
    );
    let _ = writeln!(s, "\ntools ({}):", catalog.tools.len());
    for t in &catalog.tools {
        let _ = writeln!(
            s,
            "  {}({}) — {}",
            t["name"].as_str().unwrap_or("?"),
            arguments(&t["inputSchema"]),
            one_line(&t["description"])
        );
    }
    let _ = writeln!(s, "\nresources ({}):", catalog.resources.len());
    for r in &catalog.resources {
        let _ = writeln!(
            s,
            "  {} — {}",
            r["uri"].as_str().unwrap_or("?"),
            one_line(r.get("description").unwrap_or(&r["name"]))
        );
    }
    let completed = if catalog.completions {
        "; their arguments completed by the server"
    } else {
        ""
    };
    let _ = writeln!(s, "\nprompts ({}{completed}):", catalog.prompts.len());
    for p in &catalog.prompts {
        let args: Vec<String> = p["arguments"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| {
                let star = if a["required"] == json!(true) {
                    "*"
                } else {
                    ""
                };
                format!("{}{star}", a["name"].as_str().unwrap_or("?"))
            })
            .collect();
        let _ = writeln!(
            s,
            "  {}({}) — {}",
            p["name"].as_str().unwrap_or("?"),
            args.join(", "),
            one_line(&p["description"])
        );
    }
    s.trim_end().to_owned()
}
