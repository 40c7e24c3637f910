"""W5, the Python SDK's side (the official `mcp` package): spawn-to-ready of the MCP
reference server (@modelcontextprotocol/server-everything, from npm, run by node over
stdio: spawn, `initialize` answered) and the round trip of `tools/call get-sum`.
claij's side is `claij-bench w5` (bench/claij-bench/src/mcp.rs), the same calls.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import time

import common
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def once(server: str, calls: int) -> tuple[float, list[float]]:
    params = StdioServerParameters(command=shutil.which("node") or "node", args=[server, "stdio"])
    started = time.perf_counter()
    with open(os.devnull, "w") as quiet:
        async with stdio_client(params, errlog=quiet) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                ready = time.perf_counter() - started
                times = []
                for i in range(calls):
                    t = time.perf_counter()
                    result = await session.call_tool("get-sum", {"a": i, "b": 2})
                    times.append(time.perf_counter() - t)
                    text = result.content[0].text
                    if str(i + 2) not in text:
                        raise SystemExit(f"get-sum answered {text!r}")
    return ready, times


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True, help="server-everything's dist/index.js")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--calls", type=int, default=200)
    args = p.parse_args()
    asyncio.run(once(args.server, 5))  # warm-up: node's and Python's caches
    readies, calls = [], []
    for _ in range(args.reps):
        ready, times = asyncio.run(once(args.server, args.calls))
        readies.append(ready)
        calls.append(statistics.median(times))
    common.emit({"engine": "python-mcp-sdk", "workload": "w5", "reps": args.reps,
                 "calls_per_rep": args.calls,
                 "spawn_to_ready_ms": statistics.median(readies) * 1e3,
                 "call_us": statistics.median(calls) * 1e6})


if __name__ == "__main__":
    main()
