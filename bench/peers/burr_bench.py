"""Burr's side of the benchmark (apache-burr==0.43.0).

The loop is a Graph (built once) of two actions, `ping` and `pong`; each increments `n`
and hands the ball to the other while n < T - 1, then the third action, `done`, takes n
to T and the application halts after it: T action executions per run. Each run is
a new Application over the shared graph (Burr keeps a run's state in its Application).
With --validate on, each action validates its output with a precompiled jsonschema
validator before updating the state. Durable runs use Burr's SQLitePersister as it
ships (Python's sqlite3 defaults: rollback journal, synchronous=FULL; both checked and
reported), saving the state after every step.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import uuid
from concurrent.futures import ThreadPoolExecutor

import common
from burr.core import ApplicationBuilder, State, action
from burr.core.action import Condition
from burr.core.graph import GraphBuilder
from burr.core.persistence import SQLitePersister

logging.getLogger("burr").setLevel(logging.WARNING)


def loop_graph(transitions: int, validate: bool, history: bool = False):
    def hit(me: str):
        you = common.other(me)
        writes = ["n", "player", "history"] if history else ["n", "player"]

        @action(reads=["n"], writes=writes)
        def step(state: State) -> State:
            n = state["n"] + 1
            if history:
                c = common.chunk(n)
                common.CHUNK_VALIDATOR.validate({"n": n, "player": you, "chunk": c})
                return state.update(n=n, player=you).append(history=c)
            out = {"n": n, "player": you}
            if validate:
                common.VALIDATOR.validate(out)
            return state.update(**out)

        return step

    @action(reads=["n"], writes=["n", "history"] if history else ["n"])
    def done(state: State) -> State:
        n = state["n"] + 1
        if history:
            c = common.chunk(n)
            common.CHUNK_VALIDATOR.validate({"n": n, "player": "ping", "chunk": c})
            return state.update(n=n).append(history=c)
        if validate:
            common.DONE_VALIDATOR.validate({"n": n})
        return state.update(n=n)

    last = transitions - 1
    go_on = Condition(["n"], lambda s: s["n"] < last, name=f"n < {last}")
    return (
        GraphBuilder()
        .with_actions(ping=hit("ping"), pong=hit("pong"), done=done)
        .with_transitions(
            ("ping", "pong", go_on),
            ("pong", "ping", go_on),
            (["ping", "pong"], "done"),
        )
        .build()
    )


def application(graph, persister=None, app_id=None, history=False):
    state = {"n": 0, "player": "ping"}
    if history:
        state["history"] = []
    builder = ApplicationBuilder().with_graph(graph).with_state(**state).with_entrypoint("ping")
    if persister is not None:
        builder = builder.with_state_persister(persister).with_identifiers(app_id=app_id)
    return builder.build()


def check(state, transitions: int) -> None:
    if state["n"] != transitions:
        raise SystemExit(f"the loop ended at n={state['n']}, not {transitions}")


def run(app):
    _, _, state = app.run(halt_after=["done"])
    return state


def w1(args) -> dict:
    validate = args.validate == "on"
    graph = loop_graph(args.transitions, validate)

    def once():
        check(run(application(graph)), args.transitions)

    times = common.timed(once, args.reps)
    return {"engine": "burr", "workload": "w1", "validate": validate,
            "transitions": args.transitions, **common.summary(times, args.transitions)}


def w2(args) -> dict:
    path = os.path.join(args.dir, "burr-w2.sqlite")
    common.remove_db(path)
    persister = SQLitePersister(db_path=path, connect_kwargs={"check_same_thread": False})
    persister.initialize()
    graph = loop_graph(args.transitions, True)

    def once():
        check(run(application(graph, persister, uuid.uuid4().hex)), args.transitions)

    times = common.timed(once, args.reps)
    rows = persister.connection.execute("SELECT COUNT(*) FROM burr_state").fetchone()[0]
    result = {"engine": "burr", "workload": "w2", "validate": True,
              "transitions": args.transitions,
              "synchronous": common.connection_synchronous(persister.connection),
              "checkpoints_per_run": rows / (args.reps + 1),
              **common.sqlite_pragmas(path), **common.summary(times, args.transitions)}
    persister.cleanup()
    return result


def w3(args) -> dict:
    points = []
    for steps in [int(s) for s in args.steps.split(",")]:
        path = os.path.join(args.dir, f"burr-w3-{steps}.sqlite")
        common.remove_db(path)
        persister = SQLitePersister(db_path=path)
        persister.initialize()
        empty = common.settled_file_bytes(path)
        graph = loop_graph(steps, True, history=True)
        state = run(application(graph, persister, "w3", history=True))
        if state["n"] != steps or len(state["history"]) != steps:
            raise SystemExit(f"w3: ended at n={state['n']}")
        rows = persister.connection.execute(
            "SELECT COALESCE(SUM(LENGTH(state)), 0) FROM burr_state").fetchone()[0]
        persister.cleanup()
        points.append({"steps": steps, "file_bytes": common.settled_file_bytes(path) - empty,
                       "row_bytes": rows, "event_bytes": steps * common.CHUNK_BYTES})
        os.remove(path)
    return {"engine": "burr", "variant": "default", "workload": "w3", "points": points}


def w4(args) -> dict:
    graph = loop_graph(args.transitions, True)

    def one(_=None):
        check(run(application(graph)), args.transitions)

    if args.mode == "seq":
        def once():
            for _ in range(args.runs):
                one()
        concurrency = "none"
    elif args.variant == "asyncio":
        async def one_async():
            _, _, state = await application(graph).arun(halt_after=["done"])
            check(state, args.transitions)

        async def all_runs():
            await asyncio.gather(*(one_async() for _ in range(args.runs)))

        def once():
            asyncio.run(all_runs())
        concurrency = "asyncio.gather of arun"
    else:
        workers = os.cpu_count() or 2

        def once():
            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(one, range(args.runs)))
        concurrency = f"thread pool of {workers}"

    times = common.timed(once, args.reps, warmup=0)
    s = common.summary(times, args.runs)
    return {"engine": "burr", "workload": "w4", "mode": args.mode, "concurrency": concurrency,
            "runs": args.runs, "transitions": args.transitions,
            "runs_per_s": 1e6 / s["median_us_per"], "peak_rss_kib": common.vm_hwm_kib(), **s}


def main() -> None:
    args = common.parser("burr_bench").parse_args()
    common.emit({"w1": w1, "w2": w2, "w3": w3, "w4": w4}[args.workload](args))


if __name__ == "__main__":
    main()
