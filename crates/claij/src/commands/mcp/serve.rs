//! `claij mcp serve`: FSMs and bots as MCP tools over stdio or streamable HTTP.

use std::sync::Arc;

use claij_mcp_server::{BotHost, HttpSettings, McpServer, Runtime, serve_http, serve_stdio};
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::cli::McpServeArgs;
use crate::commands::load;
use crate::serving::stop_on_signals;
use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, store};

/// `claij mcp serve`.
pub(super) async fn serve(app: &App, args: McpServeArgs) -> u8 {
    crate::logs::for_servers(app.tracing_layer());
    // Over HTTP: the token, and an address beyond loopback refused without one, before
    // anything else is opened.
    let http = match args.http.map(|addr| http_settings(&args, addr)).transpose() {
        Ok(h) => h,
        Err(e) => {
            note!("claij: {e:#}");
            return EXIT_USAGE;
        }
    };
    let store = match store::open(&args.store).await {
        Ok(Some(s)) => s,
        Ok(None) => {
            note!(
                "claij: `claij mcp serve` keeps runs in a store (they outlive the server); `--store memory` cannot"
            );
            return EXIT_USAGE;
        }
        Err(e) => {
            note!("claij: {e:#}");
            return EXIT_USAGE;
        }
    };
    let runtime = Runtime {
        engine: Arc::new(app.default_engine()),
        store,
    };
    let mut fsms = Vec::new();
    let mut refused = false;
    for file in &args.files {
        match load(runtime.engine.registry(), file) {
            Ok(fsm) => fsms.push(Arc::new(fsm)),
            Err(d) => {
                note!("claij: {d}");
                refused = true;
            }
        }
    }
    // The MCP servers the FSMs use are started now, as `claij run` starts them: their
    // `mcp:…` schemas resolve before the first call, and a server that cannot start is
    // said at once.
    let mcp = app.mcp();
    for fsm in &fsms {
        if let Err(e) = mcp.connect(fsm).await {
            note!("claij: {e}");
            refused = true;
        }
    }
    if !refused
        && let Err(e) =
            crate::serving::register_served(&runtime.engine, &runtime.store, &fsms).await
    {
        note!("claij: {e:#}");
        return EXIT_FAILED;
    }
    let workspace = match args
        .workspace
        .clone()
        .map_or_else(std::env::current_dir, Ok)
    {
        Ok(w) => w,
        Err(e) => {
            note!("claij: cannot find the current directory (give --workspace): {e}");
            return EXIT_USAGE;
        }
    };
    let mut bots = Vec::new();
    for dir in &args.bots {
        match BotHost::load(dir, &workspace, &runtime) {
            Ok(bot) => bots.push(bot),
            Err(e) => {
                note!("claij: {e}");
                refused = true;
            }
        }
    }
    if refused {
        return EXIT_USAGE;
    }
    if fsms.is_empty() && bots.is_empty() {
        note!("claij: nothing to serve: give FSM files and/or --bot DIR");
        return EXIT_USAGE;
    }
    let server = match McpServer::new(runtime.clone(), fsms, bots) {
        Ok(s) => s,
        Err(e) => {
            note!("claij: {e}");
            return EXIT_USAGE;
        }
    };
    let tools = server.tools().len();
    let result = match http {
        None => {
            note!(
                "claij: serving {tools} MCP tool(s) over stdio; runs kept in {}",
                runtime.store.describe()
            );
            serve_stdio(server).await
        }
        Some((addr, settings)) => {
            let shutdown = CancellationToken::new();
            stop_on_signals(shutdown.clone());
            serve_http(server, addr, &settings, shutdown, |bound| {
                note!(
                    "claij: serving {tools} MCP tool(s) at http://{bound}{}; runs kept in {}",
                    claij_mcp_server::HTTP_PATH,
                    runtime.store.describe()
                );
            })
            .await
        }
    };
    match result {
        Ok(()) => EXIT_OK,
        Err(e) => {
            note!("claij: {e}");
            EXIT_FAILED
        }
    }
}

/// How `--http ADDR` is exposed: refused (beyond loopback without a token) or its settings.
fn http_settings(
    args: &McpServeArgs,
    addr: std::net::SocketAddr,
) -> anyhow::Result<(std::net::SocketAddr, HttpSettings)> {
    let token = crate::serving::token(&args.token)?;
    claij_door::check_exposure(addr, token.as_ref())?;
    Ok((
        addr,
        HttpSettings {
            allowed_hosts: args.allow_hosts.clone(),
            token,
            body_limit: args.door.body_limit,
            limits: args.door.limits(),
            max_sessions: args.door.max_sessions,
            max_streams: args.door.max_streams,
        },
    ))
}
