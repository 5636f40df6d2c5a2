"""``luma mcp serve``: a loaded program's contracts as an MCP server, built on the official SDK's
low-level ``Server``. Every ``tools/call`` is one call through the Python API
(:meth:`luma.Program.call_contract`), so the whole tool pipeline runs; a Luma error is a tool
result with ``isError`` and the words a model would get, a protocol mistake a JSON-RPC error."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable, Mapping
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from luma.api import Program, RunError
from luma.api.tools import RESULT_FIELD, Contract, model_facing_text
from luma.runtime.policy import _PROMPT_INPUT_LIMIT, approved_tools
from luma.version import __version__


def tool_annotations(contract: Contract) -> types.ToolAnnotations:
    """The contract's side-effect class as MCP hints: ``none`` reads nothing and may be
    repeated; ``read`` only reads; ``write`` may destroy, and may be repeated only when
    ``idempotent``."""
    if contract.side_effects == "none":
        return types.ToolAnnotations(read_only_hint=True, idempotent_hint=True)
    if contract.side_effects == "read":
        return types.ToolAnnotations(read_only_hint=True)
    return types.ToolAnnotations(read_only_hint=False, destructive_hint=True,
                                 idempotent_hint=contract.idempotent)


def build_server(program: Program, agent: str | None = None,
                 env: Mapping[str, str] | None = None) -> Server[Any]:
    """The MCP server of ``program`` (as ``agent`` sees it when given)."""
    contracts = {c.name: c for c in program.contracts(agent)}
    listed = [types.Tool(name=c.name, description=c.description or None,
                         input_schema=c.input_schema, output_schema=c.output_schema,
                         annotations=tool_annotations(c))
              for c in contracts.values()]
    approved = approved_tools(env if env is not None else _environ())

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        contract = contracts.get(params.name)
        if contract is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        arguments = params.arguments if params.arguments is not None else {}

        async def approve(tool: str, shown: Any) -> bool:
            if tool in approved:
                return True
            return await _elicit_approval(ctx, tool, shown)

        try:
            value = await program.call_contract(contract, arguments, agent=agent, env=env,
                                                approve=approve)
        except RunError as err:
            text = model_facing_text(err, contract.input_schema if contract.agent_method
                                     is None else None, arguments)
            return types.CallToolResult(content=[types.TextContent(text=program.secrets.redact(
                text))], is_error=True)
        # what leaves the process: secrets out, as from a tool result sent to a model
        structured = program.secrets.redact_value(
            {RESULT_FIELD: value} if contract.wrapped else value)
        text = json.dumps(structured, ensure_ascii=False)
        return types.CallToolResult(content=[types.TextContent(text=text)],
                                    structured_content=structured)

    return Server("luma", version=__version__, on_list_tools=list_tools,
                  on_call_tool=call_tool)


APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"approve": {"type": "boolean", "title": "Run it"}},
    "required": ["approve"]}


async def _elicit_approval(ctx: Any, tool: str, shown: Any) -> bool:
    """Ask the person at the client, where it supports elicitation, whether one
    ``approval``-policy call may run (``shown`` has its secrets replaced). Anything but an
    accepted ``approve: true`` is a refusal."""
    session = getattr(ctx, "session", None)
    capabilities = getattr(session, "client_capabilities", None)
    if session is None or capabilities is None or capabilities.elicitation is None:
        return False
    text = json.dumps(shown, ensure_ascii=False, default=str)
    if len(text) > _PROMPT_INPUT_LIMIT:
        text = text[:_PROMPT_INPUT_LIMIT] + "…"
    try:
        answer = await session.elicit_form(f"Allow the write tool '{tool}' to run with {text}?",
                                           APPROVAL_SCHEMA)
    except MCPError:
        return False
    return answer.action == "accept" and (answer.content or {}).get("approve") is True


async def serve_stdio(program: Program, agent: str | None = None) -> None:
    """Serve ``program`` on stdin and stdout until the client closes them."""
    from mcp.server.stdio import stdio_server

    server = build_server(program, agent)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def listen(host: str, port: int) -> socket.socket:
    """The listening socket of ``--http``; raises ``OSError`` (a port in use, a bad host)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


async def serve_http(program: Program, agent: str | None, sock: socket.socket,
                     ready: Callable[[], None] | None = None) -> None:
    """Serve ``program`` over Streamable HTTP at ``/mcp`` on the listening ``sock`` until
    interrupted; ``ready()`` is called once the server accepts connections."""
    import uvicorn

    host = sock.getsockname()[0]
    app = build_server(program, agent).streamable_http_app(host=host)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started and not task.done():
        await asyncio.sleep(0.02)
    if server.started and ready is not None:
        ready()
    await task


def _environ() -> Mapping[str, str]:
    import os

    return os.environ


__all__ = ["build_server", "listen", "serve_http", "serve_stdio", "tool_annotations"]
