//! `claij serve`: the HTTP API (claij-server) and the MCP endpoint on one port, given
//! the engine and the store assembled here.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use claij_core::Fsm;
use claij_engine::Policy;
use claij_engine::{BoxFuture, Engine};
use claij_mcp_server::{McpServer, Runtime};
use claij_server::{Assembly, Server, ServerConfig, Stores, WebhookSecret};
use claij_worker::{Worker, WorkerConfig};
use tokio_util::sync::CancellationToken;

use super::load;
use crate::app::App;
use crate::cli::ServeArgs;
use crate::serving::{documents, secret, stop_on_signals, token};
use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, store};

/// How the worker beside a plain `claij serve` works: as `claij worker` does by default
/// ([`super::worker::idle_poll`]), with a short grace period (the server's own runs do
/// not wait for it either).
fn beside_the_server(store: &dyn claij_core::store::RunStore) -> WorkerConfig {
    WorkerConfig {
        poll: super::worker::idle_poll(store),
        grace: Duration::from_secs(5),
        ..WorkerConfig::default()
    }
}

/// The engine of this process, over one model layer: a request's model is its run's
/// option, so every model of the configuration shares the layer's providers (an embedded
/// model is loaded once, whichever runs use it).
struct ServeAssembly {
    app: App,
    policy: Arc<Policy>,
    engine: Arc<Engine>,
    layer: Arc<claij_llm::LlmLayer>,
}

impl ServeAssembly {
    fn new(
        app: &App,
        config: Option<PathBuf>,
        model: Option<String>,
        policy: Arc<Policy>,
    ) -> anyhow::Result<Self> {
        let layer = Arc::new(crate::app::models(config.as_deref(), model)?.layer);
        let engine = Arc::new(app.engine(true, layer.clone()).governed_by(policy.clone()));
        Ok(ServeAssembly {
            app: app.clone(),
            policy,
            engine,
            layer,
        })
    }
}

impl Assembly for ServeAssembly {
    fn engine(&self) -> Arc<Engine> {
        self.engine.clone()
    }

    fn check_model(&self, model: &str) -> Result<(), String> {
        if self.layer.knows(model) {
            Ok(())
        } else {
            Err(format!(
                "no model `{model}` is configured (see `claij model list` and docs/MODELS.md)"
            ))
        }
    }

    fn prepare<'a>(&'a self, fsm: &'a Fsm) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            // Declaring a document's servers starts them: a client's document only those
            // the policy allows.
            let refused = self.policy.refusals(fsm, self.engine.registry());
            if let Some((need, why)) = refused.first() {
                return Err(format!("at {}: {why}", need.path));
            }
            self.app
                .mcp()
                .connect_governed(fsm, &self.policy)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

/// The webhook secret from --webhook-secret-file or CLAIJ_WEBHOOK_SECRET.
fn webhook_secret(args: &ServeArgs) -> anyhow::Result<Option<WebhookSecret>> {
    let secret = secret(
        args.webhook_secret_file.as_deref(),
        args.webhook_secret_env.as_ref(),
        "webhook secret",
    )?;
    Ok(secret.map(|s| WebhookSecret::new(&s)).transpose()?)
}

/// `claij serve`.
pub(super) async fn serve(app: &App, args: ServeArgs) -> u8 {
    crate::logs::for_servers(app.tracing_layer());
    let store = match store::open(&args.store).await {
        Ok(Some(s)) => s,
        Ok(None) => {
            note!(
                "claij: `claij serve` keeps runs in a store (they outlive the server); `--store memory` cannot"
            );
            return EXIT_USAGE;
        }
        Err(e) => {
            note!("claij: {e:#}");
            return EXIT_USAGE;
        }
    };
    let (token, webhook_secret) = match (token(&args.token), webhook_secret(&args)) {
        (Ok(t), Ok(w)) => (t, w),
        (Err(e), _) | (_, Err(e)) => {
            note!("claij: {e:#}");
            return EXIT_USAGE;
        }
    };
    let policy = match args.policy.policy() {
        Ok(p) => Arc::new(p),
        Err(e) => {
            note!("claij: {e}");
            return EXIT_USAGE;
        }
    };
    let assembly = match ServeAssembly::new(app, args.config.clone(), args.model.clone(), policy) {
        Ok(e) => Arc::new(e),
        Err(e) => {
            note!("claij: {e:#}");
            return EXIT_USAGE;
        }
    };
    let files = match documents(&args.files) {
        Ok(f) => f,
        Err(e) => {
            note!("claij: cannot list the documents: {e}");
            return EXIT_USAGE;
        }
    };
    let mut fsms = Vec::new();
    let mut refused = false;
    for file in &files {
        match load(assembly.engine.registry(), file) {
            Ok(fsm) => fsms.push(Arc::new(fsm)),
            Err(d) => {
                note!("claij: {d}");
                refused = true;
            }
        }
    }
    if refused {
        return EXIT_USAGE;
    }
    let stores = Stores {
        runs: store.clone(),
        webhooks: store.clone(),
        work_queue: store.clone(),
    };
    if let Err(e) = crate::serving::register_served(&assembly.engine, &stores.runs, &fsms).await {
        note!("claij: {e:#}");
        return EXIT_FAILED;
    }
    // The documents' triggers: published events start their runs (dispatched by the
    // worker beside the server, or by `claij worker` processes with --queue).
    for fsm in &fsms {
        if let Err(e) = assembly.engine.subscribe(store.as_ref(), fsm).await {
            note!("claij: {e}");
            return EXIT_FAILED;
        }
    }
    let config = ServerConfig {
        bind: args.bind,
        token,
        body_limit: args.door.body_limit,
        new_versions: args.allow_new_versions.clone(),
        allowed_hosts: args.allow_hosts.clone(),
        webhook_secret,
        public_url: args.public_url.clone(),
        queue: args.queue,
        limits: args.door.limits(),
        max_streams: args.door.max_streams,
        max_sessions: args.door.max_sessions,
        ..ServerConfig::default()
    };
    let mcp = match McpServer::new(
        Runtime {
            engine: assembly.engine.clone(),
            store: store.clone(),
        },
        fsms.clone(),
        Vec::new(),
    ) {
        Ok(m) => m,
        Err(e) => {
            note!("claij: {e}");
            return EXIT_USAGE;
        }
    };
    let served = fsms.len();
    let engine = assembly.engine.clone();
    let server = match Server::new(config, assembly, stores, fsms) {
        Ok(s) => s.with_mcp(mcp),
        Err(e) => {
            note!("claij: {e}");
            return EXIT_USAGE;
        }
    };
    match server.recover().await {
        Ok(0) => {}
        Ok(n) => note!("claij: continuing {n} run(s) left running or due in the store"),
        Err(e) => {
            note!("claij: {e}");
            return EXIT_FAILED;
        }
    }
    let shutdown = CancellationToken::new();
    stop_on_signals(shutdown.clone());
    // One process is enough: without --queue a worker runs beside the server on its
    // store (after `recover` has taken up what was left), firing expired waits, deadlines
    // and scheduled starts, waking parents whose children ended and dispatching published
    // events; the server follows what it drives as its own runs.
    let worker = (!args.queue).then(|| {
        let worker = Worker::new(
            engine,
            store.clone(),
            store.clone(),
            beside_the_server(store.as_ref()),
        )
        .observed_by(server.run_observer());
        tokio::spawn(worker.run(shutdown.clone()))
    });
    let described = store.describe();
    let result = server
        .serve(shutdown, |bound| {
            note!(
                "claij: serving {served} FSM(s) at http://{bound} (API, /openapi.json, /mcp); runs kept in {described}"
            );
        })
        .await;
    if let Some(worker) = worker {
        // Its runs go on for the grace period, then are handed back.
        match worker.await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => note!("claij: {e}"),
            Err(e) => note!("claij: the worker beside the server stopped: {e}"),
        }
    }
    match result {
        Ok(()) => EXIT_OK,
        Err(e) => {
            note!("claij: {e}");
            if matches!(
                e,
                claij_server::ServeError::Config(_) | claij_server::ServeError::Bind { .. }
            ) {
                EXIT_USAGE
            } else {
                EXIT_FAILED
            }
        }
    }
}
