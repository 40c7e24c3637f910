"""An MCP server on stdio (the official Python SDK's MCPServer) whose tool asks a person.

`greet` first appends a line to the file named by $ASKER_LOG (so a test can count how
many times the tool ran), then asks the client for a name (`elicitation/create`, a form
with one required string) and greets whoever answered. Used by crates/claij/tests/mcp.rs
(tests/mcp-clients/asker.yaml) to tell a question answered while the server's request was
held open (the tool runs once) from one answered after the run stopped for it (the
attempt is made again: the tool runs twice).
"""

import os

from pydantic import BaseModel

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("asker")


class Name(BaseModel):
    name: str


@server.tool()
async def greet(ctx: Context) -> str:
    """Asks for a name, then greets it."""
    with open(os.environ["ASKER_LOG"], "a", encoding="utf-8") as log:
        log.write("greet\n")
    answer = await ctx.elicit("Who is there?", Name)
    if answer.action == "accept":
        return f"Hello, {answer.data.name}!"
    return f"No name given ({answer.action})."


if __name__ == "__main__":
    server.run()
