"""An MCP server written with the official SDK's low-level Server: the implementation of
tests/test_mcp_tools.py's contracts, which Luma did not write. Over stdio by default; with
``--http PORT``, over Streamable HTTP at http://127.0.0.1:PORT/mcp (it prints ``ready`` on
stderr once it accepts connections). With CLOCK_TOKEN set, an HTTP request without the header
``Authorization: Bearer $CLOCK_TOKEN`` is refused with 401."""

import asyncio
import json
import os
import sys

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOLS = [
    types.Tool(name="get_current_time", description="The time in a zone.",
               input_schema={"type": "object", "properties": {"timezone": {"type": "string"}},
                             "required": ["timezone"]},
               output_schema={"type": "object", "properties": {
                   "timezone": {"type": "string"}, "datetime": {"type": "string"}},
                   "required": ["timezone", "datetime"]}),
    types.Tool(name="add", description="Add two integers (answers in text).",
               input_schema={"type": "object", "properties": {"a": {"type": "integer"},
                                                              "b": {"type": "integer"}},
                             "required": ["a", "b"]}),
    types.Tool(name="wrong", description="Answers what its contract does not allow.",
               input_schema={"type": "object", "properties": {"x": {"type": "string"}}}),
    types.Tool(name="crash", description="The process dies the first time.",
               input_schema={"type": "object", "properties": {"mark": {"type": "string"}},
                             "required": ["mark"]}),
    types.Tool(name="nap", description="Sleeps.",
               input_schema={"type": "object", "properties": {"ms": {"type": "integer"}},
                             "required": ["ms"]}),
    types.Tool(name="linger", description="Sleeps; writes 'cancelled' to mark when cancelled.",
               input_schema={"type": "object", "properties": {"ms": {"type": "integer"},
                                                              "mark": {"type": "string"}},
                             "required": ["ms", "mark"]}),
    types.Tool(name="tick", description="Counts its calls: answers how many there were.",
               input_schema={"type": "object", "properties": {"n": {"type": "integer"},
                                                              "id": {"type": "string"}}}),
    types.Tool(name="slow_once", description="Sleeps 2 s on its first call only.",
               input_schema={"type": "object", "properties": {"n": {"type": "integer"}}}),
    types.Tool(name="doom", description="The process dies on every call.",
               input_schema={"type": "object", "properties": {"n": {"type": "integer"}}}),
]
CALLS = {"tick": 0, "slow_once": 0}


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=TOOLS)


def text(value):
    return [types.TextContent(text=value)]


async def call_tool(ctx, params):
    args = params.arguments or {}
    if params.name == "get_current_time":
        if args["timezone"] == "Mars/Olympus":
            return types.CallToolResult(content=text("Invalid timezone: Mars/Olympus"),
                                        is_error=True)
        value = {"timezone": args["timezone"], "datetime": "2026-12-01T12:00:00+00:00"}
        return types.CallToolResult(content=text(json.dumps(value)), structured_content=value)
    if params.name == "add":
        return types.CallToolResult(content=text(json.dumps({"sum": args["a"] + args["b"]})))
    if params.name == "wrong":
        return types.CallToolResult(content=text(json.dumps({"sum": "many"})))
    if params.name == "crash":
        if not os.path.exists(args["mark"]):
            with open(args["mark"], "w") as f:
                f.write("crashed once\n")
            os._exit(3)
        return types.CallToolResult(content=text(json.dumps({"sum": 1})))
    if params.name == "nap":
        await asyncio.sleep(args["ms"] / 1000)
        return types.CallToolResult(content=text(json.dumps({"sum": args["ms"]})))
    if params.name in CALLS:
        CALLS[params.name] += 1
        if params.name == "slow_once" and CALLS["slow_once"] == 1:
            await asyncio.sleep(2)
        return types.CallToolResult(content=text(json.dumps({"sum": CALLS[params.name]})))
    if params.name == "doom":
        os._exit(4)
    if params.name == "linger":
        try:
            await asyncio.sleep(args["ms"] / 1000)
        except asyncio.CancelledError:
            with open(args["mark"], "w") as f:
                f.write("cancelled\n")
            raise
        return types.CallToolResult(content=text(json.dumps({"sum": args["ms"]})))
    raise ValueError(params.name)


def guarded(app, token):
    """``app`` behind a bearer token (an ASGI wrapper)."""
    wanted = f"Bearer {token}".encode()

    async def guard(scope, receive, send):
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != wanted:
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await app(scope, receive, send)

    return guard


async def serve_http(server, port):
    import uvicorn

    app = server.streamable_http_app(host="127.0.0.1")
    token = os.environ.get("CLOCK_TOKEN")
    config = uvicorn.Config(guarded(app, token) if token else app, host="127.0.0.1", port=port,
                            log_level="warning", lifespan="on")
    web = uvicorn.Server(config)
    task = asyncio.ensure_future(web.serve())
    while not web.started and not task.done():
        await asyncio.sleep(0.02)
    print("ready", file=sys.stderr, flush=True)
    await task


async def main():
    server = Server("clock", on_list_tools=list_tools, on_call_tool=call_tool)
    if sys.argv[1:2] == ["--http"]:
        await serve_http(server, int(sys.argv[2]))
        return
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
