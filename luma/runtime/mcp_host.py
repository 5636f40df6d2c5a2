"""MCP servers as tool implementations: a ``{"mcp": {"command": [...]}}`` entry of
``tool_modules`` is a server Luma starts over stdio, a ``{"mcp": {"url": ...}}`` one a server
that runs on its own (Streamable HTTP); its tools are the handlers of the program's tools of the
same name (or the name ``names`` maps them to). The contract stays Luma's: the
pipeline validates what goes in and what comes back, times the call out (cancelling the MCP
request), retries, caches, and applies the policies.

At start-up :func:`open_mcp_servers` connects to each server once, lists its tools and checks
them against the contracts (every problem at once); ``luma check`` does the same with
:func:`connect_mcp_servers` (once per config) and :func:`match_mcp_tools` (per program), and
calls nothing. A call runs on a connection of the calling event loop, opened on first use; a
server that went away is started again once, then the call fails. The ``mcp`` SDK is imported
only here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from luma.runtime.errors import StartError


class McpToolError(Exception):
    """A server answered a call with ``isError``: its text is the failure's message."""


# How long a server has to start (or, for a URL, to be reached) and list its tools.
START_TIMEOUT_S = 30.0


class McpServerHost:
    """One configured server, connected once on an event loop of its own (in a thread), so
    that every run — whatever its loop — shares the one process (or HTTP session);
    :meth:`close` ends it. ``command``: a server Luma starts over stdio; else ``url`` with
    ``headers``: a server that runs on its own, over Streamable HTTP."""

    def __init__(self, where: str, label: str, cwd: str, *, command: list[str] | None = None,
                 env: dict[str, str] | None = None, url: str | None = None,
                 headers: dict[str, str] | None = None,
                 redact: Callable[[str], str]) -> None:
        self.label = label  # "the MCP server COMMAND" / "the MCP server at URL", for messages
        self.command = command
        self.env = env or {}
        self.url = url
        self.headers = headers or {}
        self.cwd = cwd
        self.redact = redact
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=f"luma-mcp {where}",
                                       daemon=True)
        self.thread.start()
        self.session: Any = None
        self._stop: asyncio.Event | None = None
        self._holder: asyncio.Future[None] | None = None
        self._lock: asyncio.Lock | None = None
        self._refused: str | None = None  # the last HTTP error status the server answered

    def parameters(self) -> Any:
        from mcp.client.stdio import StdioServerParameters

        assert self.command is not None
        return StdioServerParameters(command=self.command[0], args=self.command[1:],
                                     env=self.env or None, cwd=self.cwd)

    def start(self) -> list[Any]:
        """Connect and list the server's tools (blocking); raises :class:`McpToolError` with
        the reason, in one line, when the server does not answer."""
        return asyncio.run_coroutine_threadsafe(self._start(), self.loop).result()

    async def _start(self) -> list[Any]:
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                await self._connect()
                return list((await self.session.list_tools()).tools)
        except TimeoutError:
            raise McpToolError(f"no answer within {START_TIMEOUT_S:g} s") from None
        except Exception as exc:
            raise McpToolError(self._reason(exc)) from None

    def _reason(self, exc: BaseException) -> str:
        """Why a connection failed, in one line, without a secret."""
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]  # the first failure of a task group
        if self._refused is not None:
            text = self._refused
        else:
            text = getattr(exc, "message", None) or str(exc)
            text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
        return " ".join(self.redact(text).split())

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        if self.command is not None:
            from mcp.client.stdio import stdio_client

            with open(os.devnull, "w") as log:
                async with stdio_client(self.parameters(), errlog=log) as (read, write):
                    yield read, write
            return
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        _quiet_sdk_log()
        assert self.url is not None
        client = create_mcp_http_client(headers=self.headers or None)
        client.event_hooks["response"].append(self._note_status)
        async with client:
            async with streamable_http_client(self.url, http_client=client) as (read, write):
                yield read, write

    async def _note_status(self, response: Any) -> None:
        if response.status_code >= 400:
            self._refused = f"HTTP {response.status_code} {response.reason_phrase}".strip()

    async def _connect(self) -> None:
        from mcp import ClientSession

        loop = asyncio.get_running_loop()
        ready: asyncio.Future[Any] = loop.create_future()
        stop = self._stop = asyncio.Event()
        self._refused = None

        async def hold() -> None:
            try:
                async with self._transport() as (read, write):
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
        try:
            self.session = await ready
        except asyncio.CancelledError:
            stop.set()  # a start that timed out: the connection attempt ends too
            raise

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
                        f"{self.label} stopped during the call"
                        + (" (it is started again for the next call)" if attempt == 1 else
                           " again after a restart")) from None
                raise McpToolError(exc.message) from None  # the pipeline redacts it
            except Exception as exc:  # the connection could not be made again
                if self._stop is not None:
                    self._stop.set()
                if attempt == 2 or not resend:
                    raise McpToolError(f"{self.label} stopped: {self._reason(exc)}") from None
                continue
            return _value_of(result)
        raise McpToolError(f"{self.label} stopped")

    async def _ended(self) -> None:
        """Wait (briefly) until the old connection has let go of its process."""
        if self._holder is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._holder), 5)
            except (asyncio.TimeoutError, Exception):
                pass

    def close(self) -> None:
        """Stop the server (or end the HTTP session) and the host's thread (idempotent)."""
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


def _quiet_sdk_log() -> None:
    """The SDK logs a failed session end as a warning: with no handler of the application's,
    Python would print it on stderr. Its failures reach the user as Luma's messages."""
    import logging

    sdk = logging.getLogger("mcp")
    if not any(isinstance(h, logging.NullHandler) for h in sdk.handlers):
        sdk.addHandler(logging.NullHandler())


def _value_of(result: Any) -> Any:
    text = "\n".join(getattr(c, "text", "") for c in result.content
                     if getattr(c, "type", None) == "text")
    if result.is_error:
        raise McpToolError(text or "the MCP server reported an error")
    if result.structured_content is not None:
        return result.structured_content
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    # A JSON object in the text is the value; any other text is {"text": the text}: a
    # contract for a server that answers in prose declares a schema with a 'text' string.
    return value if isinstance(value, dict) else {"text": text}


@dataclass
class McpProblem:
    """One thing wrong at start-up: ``tool``, the program tool it is about (a disagreement
    with the server's schema), or None for the server itself (``server``: its index in
    ``tool_modules``)."""

    message: str
    server: int
    tool: str | None = None
    label: str = ""  # the server, as messages name it


@dataclass
class McpListing:
    """One configured server after :func:`connect_mcp_servers`: the tools it lists, by name,
    or the problems that kept it from answering (``host`` None: it was not started)."""

    index: int  # its index in tool_modules
    server: Any  # its entry in the config
    host: McpServerHost | None = None
    tools: dict[str, Any] = field(default_factory=dict)
    problems: list[McpProblem] = field(default_factory=list)


@dataclass
class McpServers:
    """What the config's MCP servers give a program."""

    handlers: dict[str, Any] = field(default_factory=dict)  # program tool → handler
    offered: list[str] = field(default_factory=list)  # every tool name the servers list
    hosts: list[McpServerHost] = field(default_factory=list)
    problems: list[McpProblem] = field(default_factory=list)

    def close(self) -> None:
        for host in self.hosts:
            host.close()


def missing_extra() -> str | None:
    """The one-line error when the MCP extra is not installed, else None."""
    try:
        import mcp  # noqa: F401
    except ImportError:
        return "tool_modules: an MCP server entry needs the MCP extra: pip install 'luma[mcp]'"
    return None


def connect_mcp_servers(config: Any, base_dir: str, environ: Mapping[str, str],
                        redact: Callable[[str], str]) -> list[McpListing]:
    """Connect to each of the config's MCP servers (the extra must be installed) and list its
    tools, or record why it gave none (a header variable that is not set, a server that does
    not answer). No tool is called; :func:`match_mcp_tools` matches the lists to a program."""
    from luma.runtime.secrets import mcp_header_values

    listings = []
    for index, server in config.mcp_servers():
        where = f"tool_modules[{index}]"
        listing = McpListing(index, server)
        listings.append(listing)
        if server.command is not None:
            host = McpServerHost(where, f"the MCP server {' '.join(server.command)}", base_dir,
                                 command=list(server.command), env=dict(server.env),
                                 redact=redact)
        else:
            headers = mcp_header_values(server, environ)
            unset = [(name, server.headers[name]) for name, v in headers.items() if v is None]
            for name, ref in unset:
                listing.problems.append(McpProblem(
                    f"{where}.mcp.headers.{name}: the environment variable {ref.env} is not "
                    "set", index, label=f"the MCP server at {shown_url(server.url)}"))
            if unset:
                continue
            host = McpServerHost(where, f"the MCP server at {shown_url(server.url)}", base_dir,
                                 url=server.url, redact=redact,
                                 headers={k: v for k, v in headers.items() if v is not None})
        listing.host = host
        try:
            listing.tools = {t.name: t for t in host.start()}
        except McpToolError as exc:  # a server that does not start or does not speak MCP
            listing.problems.append(McpProblem(f"{where}: {host.label} did not answer: {exc}",
                                               index, label=host.label))
    return listings


def match_mcp_tools(program: Any, listings: list[McpListing], handled: Iterable[str]
                    ) -> McpServers:
    """Match the servers' tools to the program's tools that ``handled`` does not name: a
    handler for each tool a server has (its own name, or its ``names`` entry; the first server
    that has it), and a problem for each server that did not answer and each parameter that
    disagrees, in the servers' order."""
    from luma.runtime.settings import tool_settings
    from luma.schema.compile import SchemaCompiler, tool_input_name

    schemas = SchemaCompiler(program)
    declared = {t.name: t for t in program.tools if t.kind == "tool"}
    taken = set(handled)
    found = McpServers()
    for listing in listings:
        found.problems.extend(listing.problems)
        host = listing.host
        if host is None:
            continue
        found.hosts.append(host)
        if listing.problems:
            continue  # it did not answer
        offered = listing.tools
        found.offered.extend(offered)
        for name, tool in declared.items():
            if name in taken or name in found.handlers:
                continue
            server_name = listing.server.names.get(name, name)
            spec = offered.get(server_name)
            if spec is None:
                continue
            found.problems.extend(
                McpProblem(message, listing.index, name, host.label)
                for message in _disagreements(
                    name, schemas.standalone(tool_input_name(name)), spec.input_schema or {}))
            found.handlers[name] = _handler(host, server_name,
                                            tool_settings(tool).side_effects != "write")
    return found


def open_mcp_servers(program: Any, config: Any, base_dir: str, handled: Mapping[str, Any],
                     environ: Mapping[str, str], redact: Callable[[str], str]
                     ) -> tuple[dict[str, Any], list[str], list[McpServerHost]]:
    """The handlers the config's MCP servers give the program's tools without one, and every
    tool name the servers offer; raises :class:`StartError` with every problem (a server that
    does not start, a tool whose parameters disagree with the server's)."""
    servers = config.mcp_servers() if config is not None else []
    if not servers:
        return {}, [], []
    missing = missing_extra()
    if missing is not None:
        raise StartError([missing])
    found = match_mcp_tools(program, connect_mcp_servers(config, base_dir, environ, redact),
                            handled)
    if found.problems:
        found.close()
        raise StartError([p.message for p in found.problems])
    return found.handlers, found.offered, found.hosts


def shown_url(url: str) -> str:
    """An MCP server's URL as messages show it: without its user information, query and
    fragment, which may hold a token."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _handler(host: McpServerHost, server_tool: str, resend: bool) -> Any:
    async def handler(input: dict[str, Any]) -> Any:
        return await host.call(server_tool, input, resend)

    handler.__name__ = server_tool
    return handler


def _disagreements(tool: str, contract: dict[str, Any], server: dict[str, Any]) -> list[str]:
    """Each top-level parameter whose JSON types disagree with the server's ``inputSchema``.
    ``null`` is not compared (nullability is the contract's to validate), a type either side
    leaves open (``any``, a schema without ``type``) agrees with everything, and an ``int``
    may go to a ``number``."""
    ours: dict[str, Any] = contract.get("properties", {})
    theirs: dict[str, Any] = server.get("properties", {}) or {}
    defs = {"contract": contract.get("$defs", {}), "server": server.get("$defs", {}) or {}}
    problems = []
    for name, schema in ours.items():
        a = _types(schema, defs["contract"])
        if name not in theirs:
            problems.append(f"Tool '{tool}': the MCP server does not accept the parameter "
                            f"'{name}' ({_shown(a)})")
            continue
        b = _types(theirs[name], defs["server"])
        if a is None or b is None:
            continue
        a, b = a - {"null"}, b - {"null"}
        if b and not all(t in b or (t == "integer" and "number" in b) for t in a):
            problems.append(f"Tool '{tool}': parameter '{name}' is {_shown(a)} in the "
                            f"contract and {_shown(b)} on the MCP server")
    for name in server.get("required", []) or []:
        if name not in ours:
            problems.append(f"Tool '{tool}': the MCP server requires the parameter '{name}' "
                            f"({_shown(_types(theirs.get(name, {}), defs['server']))}), which "
                            "the contract does not declare")
    return problems


_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
               dict: "object", type(None): "null"}


def _types(schema: Any, defs: dict[str, Any], depth: int = 0) -> frozenset[str] | None:
    """The JSON types a schema allows; None when it leaves the type open."""
    if not isinstance(schema, dict) or depth > 20:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = defs.get(ref.rpartition("/")[2]) if ref.startswith("#/$defs/") else None
        return _types(target, defs, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, str):
        return frozenset([kind])
    if isinstance(kind, list):
        return frozenset(str(k) for k in kind)
    for key in ("anyOf", "oneOf"):
        members = schema.get(key)
        if isinstance(members, list) and members:
            out: set[str] = set()
            for member in members:
                types = _types(member, defs, depth + 1)
                if types is None:
                    return None
                out |= types
            return frozenset(out)
    values = schema.get("enum", [schema["const"]] if "const" in schema else None)
    if isinstance(values, list) and values:
        return frozenset(_JSON_TYPES.get(type(v), "any") for v in values)
    return None


def _shown(types: frozenset[str] | None) -> str:
    if not types:
        return "any"
    kinds = sorted(types - {"null"}) + (["null"] if "null" in types else [])
    return " or ".join(kinds)
