//! `command`: runs a program (no shell) with the input event as JSON on stdin.

use std::path::Path;
use std::process::Stdio;

use claij_core::Owner;

use claij_core::JsonPath;
use claij_core::known_actions::ConfigRoute;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::action::{Action, ActionError, ActionInput, ActionOutput, BoxFuture, Outcome};
use crate::capability::{Field, Touch};
use crate::cassette::Kind;

/// How much of a program's stdout is kept (beyond it the attempt fails).
const MAX_STDOUT: usize = 16 << 20;
/// How much of the end of stderr is kept for messages and events.
const STDERR_TAIL: usize = 4 << 10;

/// Runs `config.argv` (program and arguments; no shell) with optional `env` and `cwd`.
///
/// The input event goes to stdin as JSON. With `output: json` (the default) stdout must
/// hold one JSON object, the output event; a non-zero exit or bad JSON is a failure
/// carrying the tail of stderr. With `output: capture` the event is built by the engine:
/// `{id: [state, routes[exit code] or routes["*"]], exit_code, stdout, stderr}`.
///
/// The program gets `CLAIJ_RUN_ID`, `CLAIJ_FSM`, `CLAIJ_STATE`, `CLAIJ_ATTEMPT` and
/// `CLAIJ_IDEMPOTENCY_KEY` (run id + sequence number; the same when the attempt is made
/// again after a crash, which a durable run notes in its store before the program starts)
/// in its environment. It runs in a
/// process group of its own, killed (SIGKILL) when the attempt times out or the run is
/// interrupted, and swept when the program exits, so nothing it started lingers.
#[derive(Debug, Clone, Copy, Default)]
pub struct Command;

impl Action for Command {
    fn config_schema(&self) -> Value {
        json!({
            "type": "object",
            "required": ["argv"],
            "properties": {
                "argv": {"type": "array", "minItems": 1, "items": {"type": "string"}, "prefixItems": [{"type": "string", "minLength": 1}], "description": "Program and arguments; no shell."},
                "env": {"type": "object", "additionalProperties": {"type": "string"}},
                "cwd": {"type": "string", "minLength": 1},
                "output": {"enum": ["json", "capture"], "default": "json"},
                "routes": {"type": "object", "propertyNames": {"pattern": "^(\\*|-?[0-9]+)$"}, "additionalProperties": {"type": "string"}, "description": "output: capture — exit code (or \"*\") to target state."}
            },
            "additionalProperties": false,
            "if": {"properties": {"output": {"const": "capture"}}, "required": ["output"]},
            "then": {"required": ["routes"]}
        })
    }

    /// The program (`argv[0]`; its arguments are the program's business), the variables
    /// `env` sets and the folder `cwd` names.
    fn touches(&self) -> &'static [Field] {
        const FIELDS: &[Field] = &[
            Field::new("/argv/0", Touch::Program),
            Field::inert("/argv"),
            Field::new("/env", Touch::Environment),
            Field::new("/cwd", Touch::File),
            Field::inert("/output"),
            Field::inert("/routes"),
        ];
        FIELDS
    }

    /// With `output: capture`, each target of `routes`.
    fn routes(&self, config: &Value) -> Vec<ConfigRoute> {
        if config.get("output").and_then(Value::as_str) != Some("capture") {
            return Vec::new();
        }
        let routes = config.get("routes").and_then(Value::as_object);
        routes
            .into_iter()
            .flatten()
            .filter_map(|(key, target)| {
                Some(ConfigRoute {
                    pointer: JsonPath::root()
                        .join("routes")
                        .join(key)
                        .pointer()
                        .to_owned(),
                    target: target.as_str()?.to_owned(),
                })
            })
            .collect()
    }

    fn run<'a>(&'a self, input: ActionInput<'a>) -> BoxFuture<'a, Result<Outcome, ActionError>> {
        Box::pin(async move { run_command(input).await.map(Outcome::from) })
    }
}

/// The variables of this process an API client's program is given (when set): what a
/// program needs to run, and no secret.
const PASSED_TO_CLIENTS: [&str; 6] = ["PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"];

/// Makes the program die (SIGKILL) when the process that started it does, so that a
/// server killed mid-step and restarted never runs the step beside its orphan.
///
/// Linux's parent-death signal belongs to the thread that forks: programs are started
/// on the runtime's worker threads, which live as long as the runtime. The program's
/// own children are swept with its process group when the attempt ends (see
/// [`GroupGuard`]); those a killed process leaves are not.
fn dies_with_this_process(cmd: &mut tokio::process::Command) {
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before `exec`, where only
    // async-signal-safe calls are allowed: `prctl` and `getppid` are system calls that
    // allocate nothing and take no lock.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)?;
            // The parent died before the signal was set: nothing would send it.
            if nix::unistd::getppid() != parent {
                return Err(std::io::Error::other("claij exited while starting it"));
            }
            Ok(())
        });
    }
}

/// Kills the program's process group when dropped (attempt done, timed out or
/// interrupted), so no descendant outlives the attempt.
struct GroupGuard(Option<Pid>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            // ESRCH (already gone) is the common, fine case.
            let _ = killpg(pid, Signal::SIGKILL);
        }
    }
}

async fn run_command(input: ActionInput<'_>) -> Result<ActionOutput, ActionError> {
    let config = &input.state.config;
    let argv: Vec<&str> = config
        .get("argv")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some((program, args)) = argv.split_first() else {
        return Err(ActionError::fatal("`config.argv` is missing or empty"));
    };
    let owner = input.fsm.owner;
    let policy = input.scope.engine.policy();
    let refused = |r: crate::capability::Refused| {
        ActionError::fatal(format!("state `{}`: {r}", input.state.id))
    };
    // The operator's programs by name, as written; a client's by the absolute path the
    // policy found on this process's PATH (never the document's own `env.PATH`).
    let executable = policy.program(owner, program).map_err(refused)?;
    let env: Vec<(&String, &str)> = match config.get("env").and_then(Value::as_object) {
        Some(env) => env
            .iter()
            .map(|(k, v)| {
                policy.environment(owner, k).map_err(refused)?;
                Ok(v.as_str().map(|v| (k, v)))
            })
            .filter_map(Result::transpose)
            .collect::<Result<_, ActionError>>()?,
        None => Vec::new(),
    };
    let cwd = config.get("cwd").and_then(Value::as_str);
    // What a cassette knows the run by: what the program is given, without what changes
    // from one run to the next (its run id, attempt and idempotency key).
    let mut asked = json!({
        "argv": argv,
        "stdin": input.event,
        "env": env.iter().map(|(k, v)| ((*k).clone(), json!(v))).collect::<Map<String, Value>>(),
    });
    if let Some(cwd) = cwd {
        asked["cwd"] = json!(cwd);
    }
    let cassette = input.scope.engine.cassette();
    let ran = match cassette.filter(|c| c.replaying()) {
        Some(c) => {
            let reply = c
                .replay(Kind::Program, &input.state.id, &asked)
                .map_err(|m| ActionError::fatal(format!("state `{}`: {m}", input.state.id)))?;
            if let Some(message) = reply["failed"].as_str() {
                // Failed as recorded (another attempt is made as it was then).
                return Err(ActionError::failed(message));
            }
            Ran::replayed(&reply).map_err(|m| {
                ActionError::fatal(format!(
                    "state `{}`: the cassette's reply to `{program}` {m}",
                    input.state.id
                ))
            })?
        }
        None => {
            let started = Started {
                input: &input,
                program,
                args,
                executable: &executable,
                env: &env,
                cwd: cwd
                    .map(|cwd| policy.file(owner, Path::new(cwd)).map_err(refused))
                    .transpose()?,
            };
            // The intent is noted (durable runs) before the program can do anything:
            // after a crash the run records that it may have run, and runs it again under
            // the same key.
            input
                .meter
                .before_side_effect(claij_core::Intent {
                    kind: claij_core::IntentKind::Program,
                    name: (*program).to_owned(),
                    server: None,
                    key: input.idempotency_key(),
                })
                .await
                .map_err(|e| {
                    ActionError::failed(format!(
                        "state `{}`: the program `{program}` could not be noted as in flight: {e}",
                        input.state.id
                    ))
                })?;
            let ran = started.run().await;
            if let Some(c) = cassette {
                c.record(Kind::Program, &input.state.id, &asked, &Ran::reply(&ran))
                    .map_err(|m| ActionError::fatal(format!("state `{}`: {m}", input.state.id)))?;
            }
            ran?
        }
    };
    let Ran {
        code,
        stdout: text,
        truncated,
        stderr: stderr_tail,
    } = ran;
    let with_stderr = |message: String| {
        if stderr_tail.trim().is_empty() {
            message
        } else {
            format!("{message}; stderr ends with:\n{}", stderr_tail.trim_end())
        }
    };

    if config.get("output").and_then(Value::as_str) == Some("capture") {
        let routes = config.get("routes").and_then(Value::as_object);
        let target = routes.and_then(|r| route_for(r, code));
        let Some(target) = target else {
            return Err(ActionError::failed(with_stderr(format!(
                "`{program}` {}, and `routes` has no entry for it (nor \"*\")",
                describe_status(code)
            ))));
        };
        return Ok(ActionOutput::event(json!({
            "id": [&*input.state.id, target],
            "exit_code": code,
            "stdout": text,
            "stderr": stderr_tail,
        })));
    }

    if code != Some(0) {
        return Err(ActionError::failed(with_stderr(format!(
            "`{program}` {}",
            describe_status(code)
        ))));
    }
    if truncated {
        return Err(ActionError::failed(format!(
            "`{program}` wrote more than {} MiB to stdout; an event must be one JSON object",
            MAX_STDOUT >> 20
        )));
    }
    match serde_json::from_str::<Value>(text.trim()) {
        Ok(event @ Value::Object(_)) => Ok(ActionOutput::event(event)),
        Ok(other) => Err(ActionError::parse(
            with_stderr(format!("`{program}` printed JSON that is not an object")),
            other,
        )),
        Err(e) => Err(ActionError::parse(
            with_stderr(format!(
                "`{program}` did not print one JSON object on stdout ({e})"
            )),
            Value::String(tail_chars(&text, 2000)),
        )),
    }
}

/// What a program did, as the action consumes it: its exit code (`None`: killed by a
/// signal), its stdout as text (up to [`MAX_STDOUT`]; `truncated` when it wrote more),
/// the tail of its stderr.
struct Ran {
    code: Option<i32>,
    stdout: String,
    truncated: bool,
    stderr: String,
}

impl Ran {
    /// The reply a cassette keeps for `ran` (a program that could not be started or
    /// read: `{"failed": message}`).
    fn reply(ran: &Result<Ran, ActionError>) -> Value {
        match ran {
            Ok(ran) => json!({
                "exit_code": ran.code,
                "stdout": ran.stdout,
                "truncated": ran.truncated,
                "stderr": ran.stderr,
            }),
            Err(e) => json!({"failed": e.message}),
        }
    }

    /// What a program did, from a cassette's reply (`Err`: how the reply is wrong).
    fn replayed(reply: &Value) -> Result<Ran, String> {
        let text = |key: &str| {
            reply[key]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("holds no `{key}` text"))
        };
        let code = match &reply["exit_code"] {
            Value::Null => None,
            code => Some(
                code.as_i64()
                    .and_then(|c| i32::try_from(c).ok())
                    .ok_or_else(|| format!("has a bad `exit_code` ({code})"))?,
            ),
        };
        Ok(Ran {
            code,
            stdout: text("stdout")?,
            truncated: reply["truncated"] == true,
            stderr: text("stderr")?,
        })
    }
}

/// A program about to be started, as its state configures it.
struct Started<'i, 'a> {
    input: &'i ActionInput<'a>,
    program: &'i str,
    args: &'i [&'i str],
    executable: &'i Path,
    env: &'i [(&'i String, &'i str)],
    cwd: Option<std::path::PathBuf>,
}

impl Started<'_, '_> {
    /// Starts the program, feeds it the input event and waits for it.
    async fn run(self) -> Result<Ran, ActionError> {
        let Started {
            input,
            program,
            args,
            executable,
            env,
            cwd,
        } = self;
        let mut cmd = tokio::process::Command::new(executable);
        cmd.arg0(program);
        if input.fsm.owner == Owner::Client {
            // A client's program gets none of the server's secrets: only the variables a
            // program needs to run, the run's own and those its document may set.
            cmd.env_clear();
            for name in PASSED_TO_CLIENTS {
                if let Some(value) = std::env::var_os(name) {
                    cmd.env(name, value);
                }
            }
        }
        dies_with_this_process(&mut cmd);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0)
            .env("CLAIJ_RUN_ID", input.run_id)
            .env("CLAIJ_FSM", &*input.fsm.id)
            .env("CLAIJ_STATE", &*input.state.id)
            .env("CLAIJ_ATTEMPT", input.attempt.to_string())
            .env("CLAIJ_IDEMPOTENCY_KEY", input.idempotency_key());
        for (k, v) in env {
            cmd.env(k, v);
        }
        if let Some(cwd) = cwd {
            cmd.current_dir(cwd);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| ActionError::failed(format!("cannot start `{program}`: {e}")))?;
        let _guard = GroupGuard(
            child
                .id()
                .and_then(|id| i32::try_from(id).ok())
                .map(Pid::from_raw),
        );

        let stdin_bytes = serde_json::to_vec(input.event).unwrap_or_default();
        let mut stdin = child.stdin.take();
        let mut stdout = child.stdout.take();
        let mut stderr = child.stderr.take();
        let feed = async move {
            if let Some(mut s) = stdin.take() {
                // A program that does not read its stdin is fine: ignore broken pipes.
                let _ = s.write_all(&stdin_bytes).await;
                let _ = s.shutdown().await;
            }
        };
        let (_, out, err, status) = tokio::join!(
            feed,
            read_capped(stdout.as_mut(), MAX_STDOUT),
            read_tail(stderr.as_mut(), STDERR_TAIL),
            child.wait()
        );
        let status =
            status.map_err(|e| ActionError::failed(format!("waiting for `{program}`: {e}")))?;
        let (out, truncated) =
            out.map_err(|e| ActionError::failed(format!("reading stdout of `{program}`: {e}")))?;
        let err = err.unwrap_or_default();
        Ok(Ran {
            code: status.code(),
            stdout: String::from_utf8_lossy(&out).into_owned(),
            truncated,
            stderr: String::from_utf8_lossy(&err).into_owned(),
        })
    }
}

fn route_for(routes: &Map<String, Value>, code: Option<i32>) -> Option<&str> {
    code.and_then(|c| routes.get(&c.to_string()))
        .or_else(|| routes.get("*"))
        .and_then(Value::as_str)
}

fn describe_status(code: Option<i32>) -> String {
    match code {
        Some(c) => format!("exited with status {c}"),
        None => "was killed by a signal".into(),
    }
}

fn tail_chars(text: &str, max: usize) -> String {
    let count = text.chars().count();
    text.chars().skip(count.saturating_sub(max)).collect()
}

/// Reads all of `r` up to `cap` bytes; reports whether more was there.
async fn read_capped<R: AsyncRead + Unpin>(
    r: Option<&mut R>,
    cap: usize,
) -> std::io::Result<(Vec<u8>, bool)> {
    let Some(r) = r else {
        return Ok((Vec::new(), false));
    };
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let mut truncated = false;
    loop {
        let n = r.read(&mut chunk).await?;
        if n == 0 {
            return Ok((buf, truncated));
        }
        if buf.len() + n > cap {
            truncated = true;
        } else {
            buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// Reads all of `r`, keeping only the last `keep` bytes.
async fn read_tail<R: AsyncRead + Unpin>(
    r: Option<&mut R>,
    keep: usize,
) -> std::io::Result<Vec<u8>> {
    let Some(r) = r else { return Ok(Vec::new()) };
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = r.read(&mut chunk).await?;
        if n == 0 {
            if buf.len() > keep {
                buf.drain(..buf.len() - keep);
            }
            return Ok(buf);
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > 2 * keep {
            buf.drain(..buf.len() - keep);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_routes_are_declared_with_where_they_are_written() {
        let config = json!({"argv": ["x"], "output": "capture", "routes": {"0": "done", "*": "fix", "1": 5}});
        let routes: Vec<(String, String)> = Command
            .routes(&config)
            .into_iter()
            .map(|r| (r.pointer, r.target))
            .collect();
        assert_eq!(
            routes,
            vec![
                ("/routes/0".to_owned(), "done".to_owned()),
                ("/routes/*".to_owned(), "fix".to_owned())
            ]
        );
        let json_output = json!({"argv": ["x"], "routes": {"0": "done"}});
        assert!(Command.routes(&json_output).is_empty());
    }
}
