"""An MCP server over streamable HTTP that requires a bearer token (the official Python
SDK's MCPServer under uvicorn, behind a guard), logging who called.

    bearer_server.py PORT_FILE LOG_FILE TOKEN

Listens on a free loopback port, written to PORT_FILE once it serves. Every HTTP request
is logged to LOG_FILE as a JSON line {"path", "authorization"} (the header as sent, "" when
absent) before it is answered; requests to /mcp without `Authorization: Bearer TOKEN` are
answered 401, every other path 404 (so OAuth discovery finds nothing). The tool `whoami`
answers "token holder". Used by crates/claij/tests/security/deputy.rs.
"""

import json
import socket
import sys
import threading
from pathlib import Path

import uvicorn

from mcp.server.mcpserver import MCPServer

port_file, log_file, token = sys.argv[1], sys.argv[2], sys.argv[3]
lock = threading.Lock()

server = MCPServer("bearer")


@server.tool()
def whoami() -> str:
    """Says who may call it."""
    return "token holder"


async def answer(send, status: int, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


def guarded(app):
    async def guard(scope, receive, send):
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        authorization = headers.get(b"authorization", b"").decode()
        with lock, open(log_file, "a") as log:
            log.write(json.dumps({"path": scope["path"], "authorization": authorization}) + "\n")
        if not scope["path"].startswith("/mcp"):
            await answer(send, 404, [])
        elif authorization != f"Bearer {token}":
            await answer(send, 401, [(b"www-authenticate", b"Bearer")])
        else:
            await app(scope, receive, send)

    return guard


if __name__ == "__main__":
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(
        guarded(server.streamable_http_app()),
        host="127.0.0.1",
        port=port,
        log_level="warning",
    )
    served = uvicorn.Server(config)

    original = served.startup

    async def startup(*args, **kwargs):
        await original(*args, **kwargs)
        Path(port_file).write_text(str(port))

    served.startup = startup
    served.run()
