//! W5: claij's MCP client against `@modelcontextprotocol/server-everything` over stdio,
//! as bench/peers/mcp_bench.py measures the official Python SDK: the time from spawning
//! the server until it is ready, and the round trip of `tools/call get-sum`.

use std::time::{Duration, Instant};

use claij_mcp::{ClientHooks, Connection, Reply, ServerSpec};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::{Args, Fail, described, multi_thread};

/// `claij-bench w5 --server …/server-everything/dist/index.js [--reps 5] [--calls 200]`.
pub(crate) fn w5(args: &Args) -> Result<Value, Fail> {
    let server = args.str("server", "");
    if server.is_empty() {
        return Err("--server PATH (server-everything's dist/index.js) is needed".into());
    }
    let reps = args.u64("reps", 5)?;
    let calls = args.u64("calls", 200)?;
    let rt = multi_thread()?;
    // Warm-up: node's caches, as the Python side does.
    rt.block_on(once(server, 5))?;
    let mut readies = Vec::new();
    let mut medians = Vec::new();
    for _ in 0..reps {
        let (ready, mut times) = rt.block_on(once(server, calls))?;
        readies.push(ready);
        times.sort();
        medians.push(median(&times));
    }
    readies.sort();
    medians.sort();
    Ok(json!({
        "engine": "claij", "workload": "w5", "reps": reps, "calls_per_rep": calls,
        "runtime": described(&rt),
        "ready_includes": "initialize, then tools/list, resources/list and prompts/list \
                           (claij lists a server's catalog before it counts as connected)",
        "spawn_to_ready_ms": median(&readies).as_secs_f64() * 1e3,
        "call_us": median(&medians).as_secs_f64() * 1e6,
    }))
}

/// Spawns the server, waits until it is connected, then calls `get-sum` `calls` times
/// (checking every answer) and shuts it down.
async fn once(server: &str, calls: u64) -> Result<(Duration, Vec<Duration>), Fail> {
    let spec = ServerSpec::from_value(
        "everything",
        &json!({"command": "node", "args": [server, "stdio"]}),
    )
    .map_err(|e| e.to_string())?;
    let started = Instant::now();
    let connection = Connection::connect("everything", &spec, ClientHooks::default())
        .await
        .map_err(|e| e.to_string())?;
    let ready = started.elapsed();
    let cancel = CancellationToken::new();
    let mut times = Vec::with_capacity(calls as usize);
    let mut outcome = Ok(());
    for i in 0..calls {
        let params = json!({"name": "get-sum", "arguments": {"a": i, "b": 2}});
        let t = Instant::now();
        let exchange = connection.request("tools/call", params, &cancel).await;
        times.push(t.elapsed());
        let text = match exchange.map(|e| e.reply) {
            Ok(Reply::Result(result)) => result["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            Ok(other) => format!("{other:?}"),
            Err(e) => e.to_string(),
        };
        if !text.contains(&(i + 2).to_string()) {
            outcome = Err(format!("get-sum({i}, 2) answered {text:?}"));
            break;
        }
    }
    connection.shutdown().await;
    outcome.map(|()| (ready, times))
}

/// The middle of sorted `times` (the mean of the two middle ones for an even count).
fn median(sorted: &[Duration]) -> Duration {
    match sorted.len() {
        0 => Duration::ZERO,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2,
    }
}
