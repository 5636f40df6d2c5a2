"""MCP servers as tool implementations: a ``{"mcp": {"command": [...]}}`` entry of
``tool_modules`` is a server Luma starts over stdio; its tools are the handlers of the program's
tools of the same name (or the name ``names`` maps them to). The contract stays Luma's: the
pipeline validates what goes in and what comes back, times the call out (cancelling the MCP
request), retries, caches, and applies the policies.

At start-up :func:`open_mcp_servers` connects to each server once, lists its tools and checks
them against the contracts (every problem at once). A call runs on a connection of the calling
event loop, opened on first use; a server that went away is started again once, then the call
fails. The ``mcp`` SDK is imported only here.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Mapping
from typing import Any

from luma.runtime.errors import StartError


class McpToolError(Exception):
    """A server answered a call with ``isError``: its text is the failure's message."""


class McpServerHost:
    """One configured server, connected once on an event loop of its own (in a thread), so
    that every run — whatever its loop — shares the one process; :meth:`close` ends it."""

    def __init__(self, where: str, command: list[str], env: dict[str, str], cwd: str) -> None:
        self.where = where
        self.command = command
        self.env = env
        self.cwd = cwd
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=f"luma-mcp {where}",
                                       daemon=True)
        self.thread.start()
        self.session: Any = None
        self._stop: asyncio.Event | None = None
        self._holder: asyncio.Future[None] | None = None
        self._lock: asyncio.Lock | None = None

    def parameters(self) -> Any:
        from mcp.client.stdio import StdioServerParameters

        return StdioServerParameters(command=self.command[0], args=self.command[1:],
                                     env=self.env or None, cwd=self.cwd)

    def start(self) -> list[Any]:
        """Connect and list the server's tools (blocking); raises what the connection did."""
        return asyncio.run_coroutine_threadsafe(self._start(), self.loop).result()

    async def _start(self) -> list[Any]:
        await self._connect()
        return list((await self.session.list_tools()).tools)

    async def _connect(self) -> None:
        from mcp import ClientSession
        from mcp.client.stdio import stdio_client

        loop = asyncio.get_running_loop()
        ready: asyncio.Future[Any] = loop.create_future()
        stop = self._stop = asyncio.Event()

        async def hold() -> None:
            try:
                with open(os.devnull, "w") as log:
                    async with stdio_client(self.parameters(), errlog=log) as (read, write):
                        async with ClientSession(read, write) as session:
                            await session.initialize()
                            ready.set_result(session)
                            await stop.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc if isinstance(exc, Exception)
                                        else ConnectionError("the server stopped"))
                if not isinstance(exc, Exception):
                    raise
            finally:
                stop.set()

        self._holder = asyncio.ensure_future(hold())
        self.session = await ready

    async def call(self, server_tool: str, arguments: dict[str, Any], resend: bool) -> Any:
        """One ``tools/call`` from any event loop; cancelling it cancels the MCP request.
        ``resend``: a call the server died under is sent again after the restart (not for a
        write tool: the server may have done it)."""
        future = asyncio.run_coroutine_threadsafe(self._call(server_tool, arguments, resend),
                                                  self.loop)
        return await asyncio.wrap_future(future)

    async def _call(self, server_tool: str, arguments: dict[str, Any], resend: bool) -> Any:
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        if self._lock is None:
            self._lock = asyncio.Lock()
        for attempt in (1, 2):
            try:
                if self._stop is None or self._stop.is_set():
                    async with self._lock:  # one restart, however many calls notice
                        if self._stop is None or self._stop.is_set():
                            await self._connect()
                result = await self.session.call_tool(server_tool, arguments)
            except MCPError as exc:
                if exc.code == CONNECTION_CLOSED:  # the server went away under the call
                    if self._stop is not None:
                        self._stop.set()
                    await self._ended()
                    if attempt == 1 and resend:
                        continue  # started again once
                    raise McpToolError(
                        f"the MCP server {' '.join(self.command)} stopped during the call"
                        + (" (it is started again for the next call)" if attempt == 1 else
                           " again after a restart")) from None
                raise McpToolError(exc.message) from None
            except (OSError, EOFError, ConnectionError) as exc:
                if attempt == 2:
                    raise McpToolError(f"the MCP server {' '.join(self.command)} stopped: "
                                       f"{exc}") from None
                if self._stop is not None:
                    self._stop.set()
                continue
            return _value_of(result)
        raise McpToolError(f"the MCP server {' '.join(self.command)} stopped")

    async def _ended(self) -> None:
        """Wait (briefly) until the old connection has let go of its process."""
        if self._holder is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._holder), 5)
            except (asyncio.TimeoutError, Exception):
                pass

    def close(self) -> None:
        """Stop the server and the host's thread (idempotent)."""
        if self.loop.is_closed():
            return

        async def stop() -> None:
            if self._stop is not None:
                self._stop.set()
            if self._holder is not None:
                try:
                    await asyncio.wait_for(self._holder, 5)
                except (asyncio.TimeoutError, Exception):
                    pass

        try:
            asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        except Exception:
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        if not self.thread.is_alive():
            self.loop.close()


def _value_of(result: Any) -> Any:
    text = "\n".join(getattr(c, "text", "") for c in result.content
                     if getattr(c, "type", None) == "text")
    if result.is_error:
        raise McpToolError(text or "the MCP server reported an error")
    if result.structured_content is not None:
        return result.structured_content
    try:
        return json.loads(text)
    except ValueError:
        raise McpToolError("the MCP server's result is neither structured content nor JSON "
                           f"text: {text[:200]!r}") from None


def open_mcp_servers(program: Any, config: Any, base_dir: str, handled: Mapping[str, Any]
                     ) -> tuple[dict[str, Any], list[str], list[McpServerHost]]:
    """The handlers the config's MCP servers give the program's tools without one, and every
    tool name the servers offer; raises :class:`StartError` with every problem (a server that
    does not start, a tool whose parameters disagree with the server's)."""
    servers = config.mcp_servers() if config is not None else []
    if not servers:
        return {}, [], []
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise StartError(["tool_modules: an MCP server entry needs the MCP extra: "
                          "pip install 'luma[mcp]'"]) from None
    from luma.runtime.settings import tool_settings
    from luma.schema.compile import SchemaCompiler, tool_input_name

    schemas = SchemaCompiler(program)
    declared = {t.name: t for t in program.tools if t.kind == "tool"}
    handlers: dict[str, Any] = {}
    problems: list[str] = []
    names: list[str] = []
    hosts: list[McpServerHost] = []
    for index, server in servers:
        host = McpServerHost(f"tool_modules[{index}]", list(server.command), dict(server.env),
                             base_dir)
        hosts.append(host)
        try:
            listed = host.start()
        except Exception as exc:  # a server that does not start or does not speak MCP
            problems.append(f"{host.where}: the MCP server {' '.join(server.command)} did not "
                            f"answer: {type(exc).__name__}: {exc}")
            continue
        offered = {t.name: t for t in listed}
        names.extend(offered)
        for name, tool in declared.items():
            if name in handled or name in handlers:
                continue
            server_name = server.names.get(name, name)
            spec = offered.get(server_name)
            if spec is None:
                continue
            problems.extend(_disagreements(name, schemas.standalone(tool_input_name(name)),
                                           spec.input_schema or {}))
            handlers[name] = _handler(host, server_name,
                                      tool_settings(tool).side_effects != "write")
    if problems:
        for host in hosts:
            host.close()
        raise StartError(problems)
    return handlers, names, hosts


def _handler(host: McpServerHost, server_tool: str, resend: bool) -> Any:
    async def handler(input: dict[str, Any]) -> Any:
        return await host.call(server_tool, input, resend)

    handler.__name__ = server_tool
    return handler


def _disagreements(tool: str, contract: dict[str, Any], server: dict[str, Any]) -> list[str]:
    ours: dict[str, Any] = contract.get("properties", {})
    theirs: dict[str, Any] = server.get("properties", {}) or {}
    problems = []
    for name, schema in ours.items():
        if name not in theirs:
            problems.append(f"Tool '{tool}': the MCP server does not accept the parameter "
                            f"'{name}' ({_type_of(schema)})")
            continue
        a, b = _type_of(schema), _type_of(theirs[name])
        if a != b and not (a == "integer" and b == "number"):
            problems.append(f"Tool '{tool}': parameter '{name}' is {a} in the contract and "
                            f"{b} on the MCP server")
    for name in server.get("required", []) or []:
        if name not in ours:
            problems.append(f"Tool '{tool}': the MCP server requires the parameter '{name}' "
                            f"({_type_of(theirs.get(name, {}))}), which the contract does not "
                            "declare")
    return problems


def _type_of(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "any"
    kind = schema.get("type")
    if isinstance(kind, str):
        return kind
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    if "enum" in schema:
        return "enum"
    return "any"
