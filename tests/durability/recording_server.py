"""An MCP server on stdio (the official Python SDK's MCPServer) that records every
`tools/call` it receives and holds the first one open: its tool `charge` appends
`{"name", "arguments", "meta", "pid"}` (the request's `_meta` as sent) as one JSON line to
the file named by its first argument, and, when that line is the file's first, waits for
the file named by its second argument to appear before it answers. Used by
crates/claij/tests/intents.rs to kill claij while a tool call is in flight and check that
the call made again carries the same idempotency key.
"""

import asyncio
import json
import os
import sys

from mcp.server.mcpserver import Context, MCPServer

LOG = sys.argv[1]
GATE = sys.argv[2]

server = MCPServer("recording")


def meta_of(ctx: Context) -> dict:
    """The request's `_meta`, as a plain dict."""
    meta = ctx.request_context.meta
    if meta is None:
        return {}
    if isinstance(meta, dict):
        return dict(meta)
    if hasattr(meta, "model_dump"):
        return meta.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dict(meta)


@server.tool()
async def charge(amount: int, ctx: Context) -> str:
    """Charges `amount` (records the call; the first call waits for the gate file)."""
    first = not os.path.exists(LOG) or os.path.getsize(LOG) == 0
    line = {"name": "charge", "arguments": {"amount": amount}, "meta": meta_of(ctx), "pid": os.getpid()}
    with open(LOG, "a", encoding="utf-8") as log:
        log.write(json.dumps(line) + "\n")
    if first:
        while not os.path.exists(GATE):
            await asyncio.sleep(0.02)
    return f"charged {amount}"


if __name__ == "__main__":
    server.run()
