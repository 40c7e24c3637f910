"""LangGraph's side of the benchmark (langgraph==1.2.22, langgraph-checkpoint-sqlite).

The loop is a StateGraph of two nodes, `ping` and `pong`; each increments `n` and hands
the ball to the other, and a conditional edge ends the run after T node executions.
With --validate on, each node validates its output with a precompiled jsonschema
validator before returning it. Durable runs use SqliteSaver (WAL journal, as it sets
itself; Python's sqlite3 default synchronous=FULL, checked and reported) with
durability="sync": each step's checkpoint is committed before the next step starts.
"""

from __future__ import annotations

import asyncio
import operator
import os
import sqlite3
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, TypedDict

import common
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph


class Ball(TypedDict):
    n: int
    player: str


class BallWithHistory(TypedDict):
    n: int
    player: str
    history: Annotated[list[str], operator.add]


def extend(state, writes):
    """DeltaChannel's reducer: the history, then every batch of chunks written."""
    out = list(state or [])
    for w in writes:
        out.extend(w)
    return out


class BallWithDeltaHistory(TypedDict):
    n: int
    player: str
    history: Annotated[list[str], DeltaChannel(extend)]


def loop_graph(transitions: int, validate: bool, checkpointer=None):
    """The ping-pong loop: `transitions` node executions per run."""
    graph = StateGraph(Ball)

    def hit(me: str):
        you = common.other(me)

        def node(state: Ball) -> dict:
            out = {"n": state["n"] + 1, "player": you}
            if validate:
                common.VALIDATOR.validate(out)
            return out

        node.__name__ = me
        return node

    def route(state: Ball) -> str:
        return END if state["n"] >= transitions else state["player"]

    graph.add_node("ping", hit("ping"))
    graph.add_node("pong", hit("pong"))
    graph.add_edge(START, "ping")
    graph.add_conditional_edges("ping", route, ["pong", END])
    graph.add_conditional_edges("pong", route, ["ping", END])
    return graph.compile(checkpointer=checkpointer)


def history_graph(steps: int, checkpointer, variant: str):
    """The loop whose state carries a history: each step appends a 1 KiB chunk.
    `default` uses the documented reducer idiom, Annotated[list, operator.add];
    `delta` uses the beta DeltaChannel (stores writes, snapshots every 100 updates)."""
    graph = StateGraph(BallWithDeltaHistory if variant == "delta" else BallWithHistory)

    def hit(me: str):
        you = common.other(me)

        def node(state) -> dict:
            n = state["n"] + 1
            c = common.chunk(n)
            common.CHUNK_VALIDATOR.validate({"n": n, "player": you, "chunk": c})
            return {"n": n, "player": you, "history": [c]}

        node.__name__ = me
        return node

    def route(state) -> str:
        return END if state["n"] >= steps else state["player"]

    graph.add_node("ping", hit("ping"))
    graph.add_node("pong", hit("pong"))
    graph.add_edge(START, "ping")
    graph.add_conditional_edges("ping", route, ["pong", END])
    graph.add_conditional_edges("pong", route, ["ping", END])
    return graph.compile(checkpointer=checkpointer)


def config(transitions: int, thread: str | None = None) -> dict:
    c: dict = {"recursion_limit": transitions + 10}
    if thread is not None:
        c["configurable"] = {"thread_id": thread}
    return c


def check(out: dict, transitions: int) -> None:
    if out["n"] != transitions:
        raise SystemExit(f"the loop ended at n={out['n']}, not {transitions}")


def w1(args) -> dict:
    validate = args.validate == "on"
    app = loop_graph(args.transitions, validate)
    cfg = config(args.transitions)

    def once():
        check(app.invoke({"n": 0, "player": "ping"}, cfg), args.transitions)

    times = common.timed(once, args.reps)
    return {"engine": "langgraph", "workload": "w1", "validate": validate,
            "transitions": args.transitions, **common.summary(times, args.transitions)}


def w2(args) -> dict:
    path = os.path.join(args.dir, "langgraph-w2.sqlite")
    common.remove_db(path)
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    app = loop_graph(args.transitions, True, saver)

    def once():
        cfg = config(args.transitions, uuid.uuid4().hex)
        out = app.invoke({"n": 0, "player": "ping"}, cfg, durability="sync")
        check(out, args.transitions)

    times = common.timed(once, args.reps)
    checkpoints = conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0]
    runs = args.reps + 1
    result = {"engine": "langgraph", "workload": "w2", "validate": True,
              "transitions": args.transitions,
              "synchronous": common.connection_synchronous(conn),
              "checkpoints_per_run": checkpoints / runs,
              **common.sqlite_pragmas(path), **common.summary(times, args.transitions)}
    conn.close()
    return result


def w3(args) -> dict:
    points = []
    for steps in [int(s) for s in args.steps.split(",")]:
        path = os.path.join(args.dir, f"langgraph-{args.variant}-w3-{steps}.sqlite")
        common.remove_db(path)
        conn = sqlite3.connect(path, check_same_thread=False)
        saver = SqliteSaver(conn)
        saver.setup()
        conn.commit()
        empty = common.settled_file_bytes(path)
        app = history_graph(steps, saver, args.variant)
        out = app.invoke({"n": 0, "player": "ping", "history": []},
                         config(steps, "w3"), durability="sync")
        if out["n"] != steps or len(out["history"]) != steps:
            raise SystemExit(f"w3: ended at n={out['n']} with {len(out['history'])} chunks")
        rows = conn.execute(
            "SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) FROM checkpoints"
        ).fetchone()[0] + conn.execute(
            "SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes").fetchone()[0]
        conn.close()
        points.append({"steps": steps, "file_bytes": common.settled_file_bytes(path) - empty,
                       "row_bytes": rows, "event_bytes": steps * common.CHUNK_BYTES})
        os.remove(path)
    return {"engine": "langgraph", "variant": args.variant, "workload": "w3",
            "points": points}


def w4(args) -> dict:
    app = loop_graph(args.transitions, True)
    cfg = config(args.transitions)
    start = {"n": 0, "player": "ping"}

    if args.mode == "seq":
        def once():
            for _ in range(args.runs):
                check(app.invoke(start, cfg), args.transitions)
        concurrency = "none"
    elif args.variant == "asyncio":
        async def all_runs():
            outs = await asyncio.gather(*(app.ainvoke(start, cfg) for _ in range(args.runs)))
            for out in outs:
                check(out, args.transitions)

        def once():
            asyncio.run(all_runs())
        concurrency = "asyncio.gather of ainvoke"
    else:
        workers = os.cpu_count() or 2

        def one(_):
            check(app.invoke(start, cfg), args.transitions)

        def once():
            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(one, range(args.runs)))
        concurrency = f"thread pool of {workers}"

    times = common.timed(once, args.reps, warmup=0)
    s = common.summary(times, args.runs)
    return {"engine": "langgraph", "workload": "w4", "mode": args.mode, "concurrency": concurrency,
            "runs": args.runs, "transitions": args.transitions,
            "runs_per_s": 1e6 / s["median_us_per"], "peak_rss_kib": common.vm_hwm_kib(), **s}


def main() -> None:
    args = common.parser("langgraph_bench").parse_args()
    common.emit({"w1": w1, "w2": w2, "w3": w3, "w4": w4}[args.workload](args))


if __name__ == "__main__":
    main()
