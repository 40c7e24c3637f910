"""An MCP server on stdio (the official Python SDK's MCPServer) that tells what trace
context a request carried: its tool `trace_context` answers the `traceparent` of the
request's `_meta` (empty when there was none). Used by crates/claij/tests/telemetry.rs to
check that a traced run's MCP requests carry the id of the span claij makes of them.
"""

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("traced")


@server.tool()
async def trace_context(ctx: Context) -> str:
    """The traceparent this request carried in its _meta."""
    meta = ctx.request_context.meta
    if meta is None:
        return ""
    if isinstance(meta, dict):
        return str(meta.get("traceparent", ""))
    return str(getattr(meta, "traceparent", "") or (getattr(meta, "model_extra", None) or {}).get("traceparent", ""))


if __name__ == "__main__":
    server.run()
