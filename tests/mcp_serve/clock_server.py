"""An MCP server written with the official SDK's low-level Server, over stdio: the
implementation of tools/test_mcp_tools.py's contracts, which Luma did not write."""

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
]


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
    raise ValueError(params.name)


async def main():
    server = Server("clock", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
