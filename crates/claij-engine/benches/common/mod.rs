//! The workload both benchmarks share: a two-state ping-pong loop of a deterministic
//! native action, with schema validation on every transition.

use std::sync::Arc;

use claij_core::{Fsm, load_str};
use claij_engine::{
    Action, ActionError, ActionInput, ActionOutput, ActionRegistry, BoxFuture, Engine, Outcome,
};
use serde_json::{Value, json};

/// The ping-pong document, shared with `bench/claij-bench`.
const LOOP: &str = include_str!("../../../../bench/workloads/ping-pong.yaml");

/// Returns the ball to the other player until the run's trail holds `transitions`
/// entries (the entry and the end included).
struct Hit {
    transitions: u64,
}

impl Action for Hit {
    fn touches(&self) -> &'static [claij_engine::Field] {
        &[]
    }

    fn run<'a>(&'a self, input: ActionInput<'a>) -> BoxFuture<'a, Result<Outcome, ActionError>> {
        let n = input.event.get("n").and_then(Value::as_u64).unwrap_or(0) + 1;
        let me = &*input.state.id;
        let other = if me == "ping" { "pong" } else { "ping" };
        let event = if n + 1 >= self.transitions {
            json!({"id": [me, "done"], "n": n})
        } else {
            json!({"id": [me, other], "n": n, "player": other})
        };
        Box::pin(std::future::ready(Ok(ActionOutput::event(event).into())))
    }
}

/// An engine with the `hit` action, and the ping-pong FSM whose runs take `transitions`
/// transitions.
pub(crate) fn ping_pong(transitions: u64) -> (Engine, Arc<Fsm>) {
    let mut registry = ActionRegistry::with_builtins();
    if let Err(e) = registry.register("hit", Arc::new(Hit { transitions })) {
        panic!("{e}");
    }
    let engine = Engine::new(Arc::new(registry));
    match load_str("ping-pong.yaml", LOOP, engine.registry()) {
        Ok(fsm) => (engine, Arc::new(fsm)),
        Err(e) => panic!("{e}"),
    }
}

/// Runs the loop once on `runtime` and returns the length of its trail; panics when the
/// run does not complete.
#[allow(dead_code)] // each bench includes this module; not every one runs the loop this way
pub(crate) fn run_loop(
    runtime: &tokio::runtime::Runtime,
    engine: &Engine,
    fsm: &Arc<Fsm>,
) -> usize {
    let out = runtime.block_on(engine.run(
        fsm.clone(),
        json!({"n": 0, "player": "ping"}),
        claij_engine::RunOptions::default(),
    ));
    match out {
        Ok(o) if o.status == claij_engine::RunStatus::Completed => o.trail.len(),
        other => panic!("the loop did not complete: {other:?}"),
    }
}
