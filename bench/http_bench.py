"""claij serve against LangGraph's dev server, over HTTP, in one run (bench/http).

Each server runs the ping-pong loop (bench/workloads/ping-pong-http.yaml; LangGraph:
bench/peers/langgraph_server/graph.py, each node validating its output with a compiled
JSON Schema as claij checks each transition). RUNS runs are started by CLIENTS concurrent
clients, each request answering when its run has ended (claij: POST /runs?wait=60;
LangGraph: POST /runs/wait); every answer is checked (status completed, n == rounds).
Reported: runs per second over the whole batch, p50 and p99 latency per request, the
server's peak memory (VmHWM of its processes). Then, claij only: SUBSCRIBERS clients
follow one long run's events (SSE) from its start; each must get every entry exactly
once, and the time from the run's start until the last subscriber has its `end` is
reported.

claij keeps every run in a SQLite file and commits every transition before the next
(its durability); LangGraph's dev server keeps runs in memory. The table says so.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from httpx_sse import aconnect_sse

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def peak_rss_mib(pid: int) -> float:
    """VmHWM of the process and its children, in MiB."""
    total = 0
    pids = [pid]
    try:
        children = subprocess.run(
            ["pgrep", "-P", str(pid)], capture_output=True, text=True
        ).stdout.split()
        pids += [int(c) for c in children]
    except OSError:
        pass
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


async def wait_healthy(url: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    async with httpx.AsyncClient() as client:
        while time.monotonic() < deadline:
            try:
                if (await client.get(url)).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)
    raise SystemExit(f"bench/http: {url} did not come up")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, int(round(p / 100 * len(ordered) + 0.5)) - 1))
    return ordered[rank]


async def batch(start_one, runs: int, clients: int) -> dict:
    """`runs` calls of `start_one(client)` by `clients` workers; latencies and rate."""
    latencies: list[float] = []
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(runs):
        queue.put_nowait(i)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async def worker(client: httpx.AsyncClient) -> None:
        while True:
            try:
                queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            began = time.perf_counter()
            await start_one(client)
            latencies.append(time.perf_counter() - began)

    async with httpx.AsyncClient(limits=limits, timeout=120) as client:
        began = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(clients)))
        wall = time.perf_counter() - began
    return {
        "runs": runs,
        "clients": clients,
        "wall_s": wall,
        "runs_per_s": runs / wall,
        "p50_ms": percentile(latencies, 50) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
    }


async def claij_side(args, claij: str, store_dir: str) -> dict:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    workload = ROOT / "bench/workloads/ping-pong-http.yaml"
    proc = subprocess.Popen(
        [claij, "serve", str(workload), "--bind", f"127.0.0.1:{port}", "--store",
         os.path.join(store_dir, "claij.db")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        await wait_healthy(base + "/health")
        body = {"fsm": "ping-pong-http", "input": {"n": 0, "rounds": args.rounds, "player": "ping"}}

        async def one(client: httpx.AsyncClient) -> None:
            r = await client.post(base + "/runs?wait=60", json=body)
            data = r.json()
            if r.status_code != 201 or data.get("status") != "completed" or data["result"]["n"] != args.rounds:
                raise SystemExit(f"bench/http: claij answered {r.status_code}: {r.text[:300]}")

        await batch(one, args.warmup, args.clients)
        result = await batch(one, args.runs, args.clients)
        result["sse"] = await subscribers(base, args)
        result["peak_rss_mib"] = peak_rss_mib(proc.pid)
        return result
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


async def subscribers(base: str, args) -> dict:
    """`args.subscribers` clients follow one run of `args.long_rounds` hits from its start."""
    async with httpx.AsyncClient(timeout=120) as client:
        body = {"fsm": "ping-pong-http", "input": {"n": 0, "rounds": args.long_rounds, "player": "ping"}}
        began = time.perf_counter()
        r = await client.post(base + "/runs", json=body)
        if r.status_code not in (201, 202):
            raise SystemExit(f"bench/http: claij answered {r.status_code}: {r.text[:300]}")
        run = r.json()["id"]
    counts: list[list[int]] = []
    limits = httpx.Limits(max_connections=args.subscribers + 5)

    async def follow(client: httpx.AsyncClient) -> None:
        seqs: list[int] = []
        async with aconnect_sse(client, "GET", f"{base}/runs/{run}/events") as source:
            async for event in source.aiter_sse():
                if event.event == "entry":
                    seqs.append(int(event.id))
                elif event.event == "end":
                    break
        counts.append(seqs)

    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(10, read=300)) as client:
        await asyncio.gather(*(follow(client) for _ in range(args.subscribers)))
        last = time.perf_counter() - began
        trail_len = (await client.get(f"{base}/runs/{run}")).json()["trail_len"]
    exact = all(seqs == list(range(trail_len)) for seqs in counts)
    return {
        "subscribers": args.subscribers,
        "entries": trail_len,
        "every_entry_once": exact,
        "last_end_s": last,
    }


async def langgraph_side(args, venv: Path) -> dict:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    langgraph = venv / "bin/langgraph"
    # A copy of the graph's folder: the dev server writes its state (.langgraph_api/) there.
    workdir = Path(tempfile.mkdtemp(prefix="claij-bench-langgraph-"))
    shutil.copytree(ROOT / "bench/peers/langgraph_server", workdir, dirs_exist_ok=True)
    proc = subprocess.Popen(
        [str(langgraph), "dev", "--no-browser", "--no-reload", "--port", str(port),
         "--config", "langgraph.json"],
        cwd=workdir,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        await wait_healthy(base + "/ok")
        body = {"assistant_id": "ping_pong", "input": {"n": 0, "rounds": args.rounds, "player": "ping"}}

        async def one(client: httpx.AsyncClient) -> None:
            r = await client.post(base + "/runs/wait", json=body)
            if r.status_code != 200 or r.json().get("n") != args.rounds:
                raise SystemExit(f"bench/http: LangGraph answered {r.status_code}: {r.text[:300]}")

        await batch(one, args.warmup, args.clients)
        result = await batch(one, args.runs, args.clients)
        result["peak_rss_mib"] = peak_rss_mib(proc.pid)
        return result
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--claij", required=True)
    parser.add_argument("--venv", required=True)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--subscribers", type=int, default=100)
    parser.add_argument("--long-rounds", type=int, default=500)
    parser.add_argument("--no-langgraph", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "bench/results/http.json"))
    args = parser.parse_args()

    results: dict = {"config": vars(args)}
    with tempfile.TemporaryDirectory() as store_dir:
        print("bench/http: claij serve …", file=sys.stderr)
        results["claij"] = asyncio.run(claij_side(args, args.claij, store_dir))
    langgraph = Path(args.venv) / "bin/langgraph"
    if not args.no_langgraph and langgraph.exists():
        print("bench/http: langgraph dev …", file=sys.stderr)
        results["langgraph"] = asyncio.run(langgraph_side(args, Path(args.venv)))
    c = results["claij"]
    lines = [
        f"{args.runs} runs of the {args.rounds}-hit ping-pong loop over HTTP, {args.clients} concurrent clients, each request answered when its run ended:",
        "",
        f"{'server':<50} {'runs/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'peak MiB':>9}",
        f"{'claij serve (SQLite, every transition committed)':<50} {c['runs_per_s']:>8.1f} {c['p50_ms']:>8.1f} {c['p99_ms']:>8.1f} {c['peak_rss_mib']:>9.0f}",
    ]
    if "langgraph" in results:
        g = results["langgraph"]
        lines.append(
            f"{'langgraph dev (runs in memory)':<50} {g['runs_per_s']:>8.1f} {g['p50_ms']:>8.1f} {g['p99_ms']:>8.1f} {g['peak_rss_mib']:>9.0f}"
        )
        lines.append(
            f"claij/LangGraph: {c['runs_per_s'] / g['runs_per_s']:.1f}× the runs per second, p50 {g['p50_ms'] / c['p50_ms']:.1f}× lower, p99 {g['p99_ms'] / c['p99_ms']:.1f}× lower"
        )
    else:
        lines.append("langgraph dev: not run (its venv is missing or --no-langgraph)")
    s = c["sse"]
    lines += [
        "",
        f"{s['subscribers']} SSE subscribers on one {args.long_rounds}-hit run ({s['entries']} entries): "
        f"every entry once to each: {'yes' if s['every_entry_once'] else 'NO'}; last `end` {s['last_end_s']:.2f} s after the start",
    ]
    print("\n".join(lines))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"bench/http: wrote {args.out}", file=sys.stderr)
    if not s["every_entry_once"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
