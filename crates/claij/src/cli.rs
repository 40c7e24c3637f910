//! The command line: subcommands and their options.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

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

Exit status: 0 success; 1 the run failed or was interrupted, or a document is invalid;
2 bad invocation (unreadable or invalid document, input refused).")]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check FSM documents: meta-schema, structure, schemas, actions and their config.
    ///
    /// Every problem of every file is listed, each with file, JSON path and reason.
    /// Exits 0 when all are valid, 1 otherwise.
    #[command(after_help = "Example:\n  claij validate examples/*.yaml")]
    Validate {
        /// The documents (JSON or YAML).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print the problems as JSON (one object per file) on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Run an FSM to its end and print the final event as JSON on stdout.
    ///
    /// Progress (state, attempt, elapsed) goes to stderr. Ctrl-C interrupts the run:
    /// in-flight programs are killed and the trail ends with an `interrupted` entry.
    /// Exits 0 when the run completed, 1 when it failed or was interrupted, 2 when the
    /// invocation, the document or the input is refused.
    #[command(after_help = "Examples:
  claij run flow.yaml --input '{\"text\": \"hello\"}'
  claij run flow.yaml --input @event.json --trail trail.jsonl
  echo '{\"text\": \"hi\"}' | claij run flow.yaml --input -")]
    Run(RunArgs),
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
}

/// Graph output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GraphFormat {
    /// Graphviz DOT.
    Dot,
    /// Mermaid state diagram.
    Mermaid,
    /// SVG, rendered by Graphviz `dot`.
    Svg,
}

/// The options of `claij run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The FSM document.
    pub file: PathBuf,
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
    /// The run's id (default: generated).
    #[arg(long)]
    pub run_id: Option<String>,
    /// No progress on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}
