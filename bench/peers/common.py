"""What the peer benchmarks share: the workloads' state shape, the step schema, the
history chunk, timing and memory readings, and the command line.

Each peer script takes a workload name and options and prints one JSON object on
stdout (see docs/PERFORMANCE.md). The workloads are the ones claij's `claij-bench` runs:

- w1: a two-state ping-pong loop of T transitions, state {"n": int, "player": str};
  each step increments n and hands the ball to the other player, optionally validating
  its output with a precompiled `jsonschema` validator (the same schema claij checks).
- w2: the same loop with a SQLite checkpoint committed at every step.
- w3: the loop where each step appends a 1 KiB chunk to a history carried in the state;
  bytes stored after N steps.
- w4: many short runs (T transitions each), sequentially or concurrently.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import time

from jsonschema import Draft202012Validator

# The schema of a step's output: claij's `ball` (crates' ping-pong loop, and
# bench/claij-bench): n a non-negative integer, player one of ping/pong.
BALL = {
    "type": "object",
    "required": ["n", "player"],
    "properties": {
        "n": {"type": "integer", "minimum": 0},
        "player": {"type": "string", "enum": ["ping", "pong"]},
    },
}
# W3's steps also carry their chunk.
BALL_WITH_CHUNK = {
    "type": "object",
    "required": ["n", "player", "chunk"],
    "properties": {
        "n": {"type": "integer", "minimum": 0},
        "player": {"type": "string", "enum": ["ping", "pong"]},
        "chunk": {"type": "string"},
    },
}
# The final step (to `done`): claij checks {n: integer} there.
DONE = {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}

VALIDATOR = Draft202012Validator(BALL)
CHUNK_VALIDATOR = Draft202012Validator(BALL_WITH_CHUNK)
DONE_VALIDATOR = Draft202012Validator(DONE)

CHUNK_BYTES = 1024


def chunk(n: int) -> str:
    """The deterministic 1 KiB (1,024 ASCII characters) chunk of step n; the same bytes
    as claij-bench's `chunk`."""
    seed = f"step {n:06} "
    return (seed * (CHUNK_BYTES // len(seed) + 1))[:CHUNK_BYTES]


def other(player: str) -> str:
    return "pong" if player == "ping" else "ping"


def vm_hwm_kib() -> int:
    """Peak resident memory of this process (VmHWM), in KiB."""
    return _status_kib("VmHWM")


def vm_rss_kib() -> int:
    return _status_kib("VmRSS")


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def timed(fn, reps: int, warmup: int = 1) -> list[float]:
    """Seconds per call of fn(), `reps` times after `warmup` unmeasured calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return times


def summary(seconds: list[float], per: int) -> dict:
    """Median, min and max over repetitions of seconds per unit (per = units per rep)."""
    per_unit = [s / per for s in seconds]
    return {
        "reps": len(seconds),
        "median_s": statistics.median(seconds),
        "median_us_per": statistics.median(per_unit) * 1e6,
        "min_us_per": min(per_unit) * 1e6,
        "max_us_per": max(per_unit) * 1e6,
    }


def sqlite_pragmas(path: str) -> dict:
    """The journal mode of a database file, as a fresh connection sees it."""
    conn = sqlite3.connect(path)
    try:
        return {"journal_mode": conn.execute("PRAGMA journal_mode").fetchone()[0]}
    finally:
        conn.close()


def connection_synchronous(conn: sqlite3.Connection) -> str:
    names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    value = conn.execute("PRAGMA synchronous").fetchone()[0]
    return names.get(value, str(value))


def remove_db(path: str) -> None:
    """Removes a database file and its companions, so a workload starts from nothing."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)


def settled_file_bytes(path: str) -> int:
    """The database file's size once its WAL (if any) is checkpointed into it and
    truncated: what the data takes at rest."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    size = os.path.getsize(path)
    for suffix in ("-wal", "-journal"):
        if os.path.exists(path + suffix):
            size += os.path.getsize(path + suffix)
    return size


def parser(name: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=name)
    p.add_argument("workload", choices=["w1", "w2", "w3", "w4"])
    p.add_argument("--transitions", type=int, default=1000)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--validate", choices=["on", "off"], default="on")
    p.add_argument("--dir", default=".")
    p.add_argument("--steps", default="100,200,400,800")
    p.add_argument("--runs", type=int, default=10000)
    p.add_argument("--mode", choices=["seq", "concurrent"], default="seq")
    p.add_argument("--variant", default="default")
    return p


def emit(result: dict) -> None:
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    sys.stdout.flush()
