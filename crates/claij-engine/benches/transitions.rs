//! Engine overhead per transition: a two-state loop of 1,000 transitions with a
//! deterministic action and schema validation on (routing, validation, trail append).
//!
//! `cargo bench -p claij-engine --bench transitions`; criterion reports time per
//! transition (throughput in elements = transitions).

use std::sync::Arc;

use claij_core::load_str;
use claij_engine::{
    Action, ActionError, ActionInput, ActionOutput, ActionRegistry, BoxFuture, Engine, Outcome,
    RunOptions, RunStatus,
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};

const TRANSITIONS: u64 = 1_000;

const LOOP: &str = r##"
id: ping-pong
schemas:
  ball:
    type: object
    required: [n, player]
    properties:
      n: {type: integer, minimum: 0}
      player: {type: string, enum: [ping, pong]}
states:
  - {id: ping, action: hit}
  - {id: pong, action: hit}
  - {id: done, action: end}
xitions:
  - id: [start, ping]
    schema: {$ref: "#/$defs/ball"}
  - id: [ping, pong]
    schema: {$ref: "#/$defs/ball"}
  - id: [pong, ping]
    schema: {$ref: "#/$defs/ball"}
  - id: [ping, done]
    schema: {type: object, required: [n], properties: {n: {type: integer}}}
  - id: [pong, done]
    schema: {type: object, required: [n], properties: {n: {type: integer}}}
"##;

/// Returns the ball to the other player until `n` reaches the limit.
struct Hit;

impl Action for Hit {
    fn run<'a>(&'a self, input: ActionInput<'a>) -> BoxFuture<'a, Result<Outcome, ActionError>> {
        let n = input.event.get("n").and_then(Value::as_u64).unwrap_or(0) + 1;
        let me = &*input.state.id;
        let other = if me == "ping" { "pong" } else { "ping" };
        let event = if n >= TRANSITIONS {
            json!({"id": [me, "done"], "n": n})
        } else {
            json!({"id": [me, other], "n": n, "player": other})
        };
        Box::pin(std::future::ready(Ok(ActionOutput::event(event).into())))
    }
}

fn bench(c: &mut Criterion) {
    let mut registry = ActionRegistry::with_builtins();
    if let Err(e) = registry.register("hit", Arc::new(Hit)) {
        panic!("{e}");
    }
    let engine = Engine::new(Arc::new(registry));
    let fsm = match load_str("ping-pong.yaml", LOOP, engine.registry()) {
        Ok(f) => Arc::new(f),
        Err(e) => panic!("{e}"),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("{e}"),
    };
    let mut group = c.benchmark_group("engine");
    group.throughput(Throughput::Elements(TRANSITIONS));
    group.bench_function("1000-transition loop, validation on", |b| {
        b.iter(|| {
            let out = runtime.block_on(engine.run(
                fsm.clone(),
                json!({"n": 0, "player": "ping"}),
                RunOptions::default(),
            ));
            match out {
                Ok(o) if o.status == RunStatus::Completed => o.trail.len(),
                other => panic!("the loop did not complete: {other:?}"),
            }
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
