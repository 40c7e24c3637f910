//! Live progress on stderr (state, attempt, elapsed), and the trail written as JSON lines
//! while it grows.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use claij_core::{FailureKind, State, TrailEntry};
use claij_engine::{Observer, RunStatus};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Prints one line per trail entry; on a terminal, a spinner shows the state being run,
/// its attempt and the time elapsed, ticking while a long action runs. The spinner is
/// put away while a person is being asked (`human` states), so it never draws over the
/// question.
pub(crate) struct Progress {
    started: Instant,
    spinner: Option<ProgressBar>,
    paused: AtomicBool,
}

impl Progress {
    /// Progress for a run starting now.
    pub(crate) fn new() -> Self {
        let spinner = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Self {
            started: Instant::now(),
            spinner,
            paused: AtomicBool::new(false),
        }
    }

    fn line(&self, text: String) {
        let text = format!("[{:>7.2}s] {text}", self.started.elapsed().as_secs_f64());
        match &self.spinner {
            Some(bar) if !self.paused.load(Ordering::Relaxed) => bar.println(text),
            // `note!`, not `eprintln!`: progress must never stop the run it reports on.
            _ => note!("{text}"),
        }
    }

    /// Hides the spinner (a person is about to be asked) or shows it again.
    fn pause_spinner(&self, bar: &ProgressBar, pause: bool) {
        if self.paused.swap(pause, Ordering::Relaxed) == pause {
            return;
        }
        if pause {
            bar.disable_steady_tick();
            bar.set_draw_target(ProgressDrawTarget::hidden());
        } else {
            bar.set_draw_target(ProgressDrawTarget::stderr());
            bar.enable_steady_tick(Duration::from_millis(120));
        }
    }
}

impl Observer for Progress {
    fn attempt_started(&self, _run_id: &str, state: &State, attempt: u32) {
        let text = format!("{} ({}) attempt {attempt}", state.id, state.action);
        match &self.spinner {
            Some(bar) => {
                let asks_a_person = &*state.action == "human";
                if asks_a_person {
                    self.pause_spinner(bar, true);
                    self.line(format!("▶ {text}"));
                } else {
                    self.pause_spinner(bar, false);
                    bar.set_message(text);
                }
            }
            None => self.line(format!("▶ {text}")),
        }
    }

    fn entry_appended(&self, _run_id: &str, entry: &TrailEntry) {
        let took = entry
            .duration_ms
            .map(|ms| format!(" ({ms} ms)"))
            .unwrap_or_default();
        match (&entry.to, &entry.failure) {
            (Some(to), _) => self.line(format!("✓ {} → {to}{took}", entry.from)),
            // A pause for a server's question, or its answer: not a failed attempt.
            (None, Some(f)) if matches!(f.kind, FailureKind::Question | FailureKind::Answer) => {
                let mark = if f.kind == FailureKind::Question {
                    "?"
                } else {
                    "↩"
                };
                self.line(format!("{mark} {}: {}{took}", entry.from, f.message));
            }
            (None, Some(f)) => {
                let first_line = f.message.lines().next().unwrap_or("");
                self.line(format!(
                    "✗ {} attempt {}: {}: {first_line}{took}",
                    entry.from, f.attempt, f.kind
                ));
                for e in f.errors.iter().take(5) {
                    self.line(format!("    {e}"));
                }
            }
            (None, None) => {}
        }
    }

    fn question_held(&self, run_id: &str, question: &claij_core::Question, until: SystemTime) {
        let left = until
            .duration_since(SystemTime::now())
            .map(|d| Duration::from_secs(d.as_secs()))
            .unwrap_or_default();
        self.line(format!(
            "? the MCP server `{}` waits for an answer, for {} at most: give it from another terminal with `claij runs resume {run_id} --input …` (same --store; the schema: `claij runs show {run_id}`)",
            question.server,
            humantime::format_duration(left)
        ));
    }

    fn run_finished(&self, run_id: &str, status: RunStatus) {
        if let Some(bar) = &self.spinner {
            bar.finish_and_clear();
        }
        self.line(format!("run {run_id} {}", status_word(status)));
    }
}

/// The status as a word.
pub(crate) fn status_word(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Running => "running",
        RunStatus::Suspended => "suspended",
        RunStatus::Completed => "completed",
        RunStatus::Failed => "failed",
        RunStatus::Interrupted => "interrupted",
    }
}

/// Appends each entry to a file as one JSON line, flushed at once, so the trail survives
/// whatever happens to the run.
pub(crate) struct TrailFile {
    out: Mutex<BufWriter<File>>,
}

impl TrailFile {
    /// Creates (truncates) `path`.
    pub(crate) fn create(path: &Path) -> std::io::Result<Self> {
        Ok(Self {
            out: Mutex::new(BufWriter::new(File::create(path)?)),
        })
    }
}

impl Observer for TrailFile {
    fn entry_appended(&self, _run_id: &str, entry: &TrailEntry) {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let written = serde_json::to_writer(&mut *out, entry)
            .map_err(std::io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush());
        if let Err(e) = written {
            note!("claij: cannot write the trail file: {e}");
        }
    }
}
