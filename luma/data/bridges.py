"""Each datasource's bridge, and each query's and command's handler on top of it (DATA.md §4).

A datasource gets its bridge from a tool module's ``datasources`` export, else from the
``datasources`` key of the config (the built-in ``sqlite`` and ``postgres`` bridges). The
handler of a query or command is the pipeline's step 10: it binds the parameters (never pasted
into the SQL), calls the bridge, turns the database values into JSON values, and shapes the
rows as the declaration says (every row, exactly one, or ``{"rows_affected": n}``). Step 11
then validates every row against the row schema.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from luma.data.sql import scan
from luma.data.statements import (DataStartError, StatementCancelled, StatementTimedOut,
                                  cancel_on)
from luma.data.values import NoJsonForm, to_json
from luma.runtime.errors import LumaError
from luma.syntax import ast

TOOL_OUTPUT_INVALID = "TOOL_OUTPUT_INVALID"
TOOL_TIMEOUT = "TOOL_TIMEOUT"
TOOL_FAILED = "TOOL_FAILED"


class BuiltinBridge(Protocol):
    """A built-in bridge (sqlite, postgres): runs one statement in a transaction of its own on a
    pooled connection, in the calling thread."""

    driver: str

    def execute(self, sql: str, params: Mapping[str, Any], signal: Any,
                timeout_ms: int | None) -> tuple[list[dict[str, Any]], int]:
        """The rows (none for a statement without a result) and the rows affected. Raises
        :class:`StatementTimedOut`, :class:`StatementCancelled` or the driver's error."""

    def close(self) -> None:
        """Close every pooled connection."""

    def transient(self, exc: BaseException) -> bool:
        """Whether the driver's error may pass on a retry (a lost connection, a locked file)."""


@dataclass(slots=True)
class Datasources:
    """The bridges of one run and the handlers of its queries and commands."""

    handlers: dict[str, Callable[..., Any]] = field(default_factory=dict)
    builtin: dict[str, BuiltinBridge] = field(default_factory=dict)

    def close(self) -> None:
        for bridge in self.builtin.values():
            bridge.close()
        self.builtin.clear()


def data_tools(program: ast.Program) -> list[ast.ToolDecl]:
    return [t for t in program.tools if t.kind != "tool"]


def datasource_of(tool: ast.ToolDecl) -> str | None:
    entry = tool.entry("datasource")
    return entry.value.id if entry is not None and isinstance(entry.value, ast.Name) else None


def datasource_timeout_ms(tool: ast.ToolDecl, program: ast.Program) -> int | None:
    """The default timeout of a query or command: its datasource's ``timeout``."""
    name = datasource_of(tool)
    for decl in program.datasources:
        if decl.name == name:
            entry = decl.entry("timeout")
            if entry is not None and isinstance(entry.value, ast.Literal) \
                    and type(entry.value.value) is int and entry.value.value > 0:
                return entry.value.value
    return None


def open_datasources(program: ast.Program, config: Any, exported: Mapping[str, Any],
                     base_dir: str | Path, env: Mapping[str, str],
                     keep_secret: Callable[[str], None] | None = None,
                     redact: Callable[[str], str] = lambda text: text) -> Datasources:
    """Bind every declared datasource to its bridge and build the handlers of the queries and
    commands. Raises :class:`DataStartError` when a datasource has no bridge, a config entry
    names no declared datasource, or a configured database cannot be reached."""
    declared = [d.name for d in program.datasources]
    configured: Mapping[str, Any] = getattr(config, "datasources", None) or {}
    problems: list[str] = []
    source = getattr(config, "source", "luma.config.json")
    for name in configured:
        if name not in declared:
            from luma.syntax.diagnostics import did_you_mean

            hint = did_you_mean(name, declared)
            problems.append(f"datasources.{name} in {source} names no datasource of the "
                            "program" + (f"; {hint}" if hint else "."))
    for name in exported:
        if name not in declared:
            from luma.syntax.diagnostics import did_you_mean

            hint = did_you_mean(name, declared)
            problems.append(f"a tool module's datasources export names '{name}', which is not a "
                            "datasource of the program" + (f"; {hint}" if hint else "."))
    for name in declared:
        if name not in exported and name not in configured:
            problems.append(f"datasource '{name}' has no registered bridge.")
    if problems:
        raise DataStartError(problems)
    result = Datasources()
    size = pool_size(program)
    try:
        for name in declared:
            if name in exported:
                continue
            spec = configured[name]
            result.builtin[name] = _open_builtin(name, spec, base_dir, env, size, keep_secret,
                                                 redact)
    except DataStartError:
        result.close()
        raise
    for tool in data_tools(program):
        ds = datasource_of(tool)
        if ds is None or (ds not in exported and ds not in result.builtin):
            continue  # the checker reports it; the pipeline refuses the call
        result.handlers[tool.name] = _handler(tool, ds, exported.get(ds), result.builtin.get(ds),
                                              datasource_timeout_ms(tool, program))
    return result


def pool_size(program: ast.Program) -> int:
    """The most calls the program's agents run side by side (``tool_concurrency``, 1 when not
    given): the connections a built-in bridge keeps."""
    size = 1
    for agent in program.agents:
        entry = agent.entry("tool_concurrency")
        if entry is not None and isinstance(entry.value, ast.Literal) \
                and type(entry.value.value) is int:
            size = max(size, entry.value.value)
    return size


def _open_builtin(name: str, spec: Any, base_dir: str | Path, env: Mapping[str, str], size: int,
                  keep_secret: Callable[[str], None] | None,
                  redact: Callable[[str], str]) -> BuiltinBridge:
    if spec.driver == "sqlite":
        from luma.data.sqlite import SqliteBridge

        return SqliteBridge.open(name, spec.path, getattr(spec, "init", None), Path(base_dir),
                                 size)
    variable = spec.url.env
    url = env.get(variable)
    if not url:
        raise DataStartError([f"datasource '{name}': the environment variable {variable} (its "
                              "url) is not set."])
    if keep_secret is not None:
        from luma.runtime.secrets import url_secrets

        for secret in url_secrets(url):
            keep_secret(secret)
    from luma.data.postgres import PostgresBridge

    return PostgresBridge.open(name, url, size, redact)


# ----------------------------------------------------------------------------- the handler


def _handler(tool: ast.ToolDecl, datasource: str, exported: Any, builtin: BuiltinBridge | None,
             default_timeout_ms: int | None) -> Callable[..., Any]:
    sql_entry = tool.entry("sql")
    sql = sql_entry.value.value if sql_entry is not None and \
        isinstance(sql_entry.value, ast.StringLit) else ""
    names = tuple(p.name for p in tool.params)
    own = tool.entry("timeout")
    timeout_ms = default_timeout_ms
    if own is not None and isinstance(own.value, ast.Literal) and type(own.value.value) is int:
        timeout_ms = own.value.value
    shaper = _Shaper(tool, datasource)
    several = bool(scan(sql).extra_statements)

    def params_of(value: Any) -> dict[str, Any]:
        given = value if isinstance(value, dict) else {}
        return {n: given.get(n) for n in names}

    if builtin is not None:
        bridge = builtin

        def run_builtin(params: dict[str, Any], signal: Any) -> Any:
            if several:
                raise LumaError(TOOL_FAILED, f"{tool.kind.capitalize()} '{tool.name}' holds "
                                f"more than one SQL statement; a {tool.kind} runs exactly one.",
                                tool=tool.name)
            try:
                rows, affected = bridge.execute(sql, params, signal, timeout_ms)
            except StatementTimedOut:
                raise LumaError(TOOL_TIMEOUT, f"Tool '{tool.name}' timed out after "
                                f"{timeout_ms} ms.", retryable=True, tool=tool.name) from None
            except StatementCancelled:
                raise LumaError(TOOL_FAILED, f"{tool.kind.capitalize()} '{tool.name}' was "
                                "cancelled.", tool=tool.name) from None
            except Exception as exc:
                if isinstance(exc, LumaError) or not bridge.transient(exc):
                    raise
                text = " ".join(str(exc).split()) or type(exc).__name__
                raise LumaError(TOOL_FAILED, f"Tool '{tool.name}' failed: {text}",
                                retryable=True, tool=tool.name,
                                details={"exception": type(exc).__name__}) from None
            return shaper.shape(rows, affected, from_builtin=True)

        async def builtin_handler(input: Any, signal: Any) -> Any:
            return await asyncio.to_thread(run_builtin, params_of(input), signal)

        return builtin_handler

    call = _bridge_caller(exported)
    if _is_async(exported):
        async def async_handler(input: Any, signal: Any) -> Any:
            raw = await call(sql, params_of(input), signal)
            return shaper.shape(raw, None, from_builtin=False)

        return async_handler

    def sync_handler(input: Any, signal: Any) -> Any:
        raw = call(sql, params_of(input), signal)
        if inspect.isawaitable(raw):
            raise LumaError(TOOL_FAILED, f"The bridge of datasource '{datasource}' returned an "
                            "awaitable from a plain function; declare it async def.",
                            tool=tool.name)
        return shaper.shape(raw, None, from_builtin=False)

    return sync_handler


class _Shaper:
    """Rows as the declaration wants them, every value as JSON."""

    def __init__(self, tool: ast.ToolDecl, datasource: str) -> None:
        self.tool = tool
        self.name = tool.name
        self.word = tool.kind.capitalize()
        self.datasource = datasource
        self.many = isinstance(tool.returns, ast.ListType)
        self.affected_only = tool.returns is None

    def fail(self, message: str) -> LumaError:
        return LumaError(TOOL_OUTPUT_INVALID, message, tool=self.name)

    def shape(self, raw: Any, affected: int | None, *, from_builtin: bool) -> Any:
        if self.affected_only:
            if type(raw) is int and not from_builtin:
                return {"rows_affected": raw}
            if isinstance(raw, list) and not from_builtin:
                return {"rows_affected": len(raw)}
            if from_builtin:
                return {"rows_affected": affected if affected is not None and affected >= 0
                        else len(raw)}
            raise self.fail(f"The bridge of datasource '{self.datasource}' returned "
                            f"{_a(raw)} for {self.tool.kind} '{self.name}'; expected a list of "
                            "rows (dicts) or the number of rows affected.")
        if not isinstance(raw, list):
            raise self.fail(f"The bridge of datasource '{self.datasource}' returned {_a(raw)} "
                            f"for {self.tool.kind} '{self.name}'; expected a list of rows "
                            "(dicts).")
        if self.many:
            return [self.row(r, f"{self.name}.output[{i}]") for i, r in enumerate(raw)]
        if not raw:
            raise self.fail(f"{self.word} '{self.name}' returned no row; exactly one was "
                            "expected.")
        if len(raw) > 1:
            raise self.fail(f"{self.word} '{self.name}' returned {len(raw)} rows; exactly one "
                            "was expected.")
        return self.row(raw[0], f"{self.name}.output")

    def row(self, row: Any, where: str) -> dict[str, Any]:
        if not isinstance(row, Mapping):
            raise self.fail(f"{where}: the bridge of datasource '{self.datasource}' returned "
                            f"{_a(row)} as a row; expected a dict of column names to values.")
        out: dict[str, Any] = {}
        for column, value in row.items():
            if not isinstance(column, str):
                raise self.fail(f"{where}: a column name that is not text: {column!r}.")
            try:
                out[column] = to_json(value)
            except NoJsonForm as exc:
                raise self.fail(f"{where}.{column}{exc.path}: {exc.kind} has no JSON form; "
                                "convert it in the SQL (e.g. to text).") from None
        return out


def _a(value: Any) -> str:
    name = "null" if value is None else type(value).__name__
    return f"an {name}" if name[:1] in "aeiou" else f"a {name}"


def _is_async(bridge: Any) -> bool:
    if inspect.iscoroutinefunction(bridge):
        return True
    call = getattr(bridge, "__call__", None)  # noqa: B004 - a callable object's method
    return call is not None and inspect.iscoroutinefunction(call)


def _bridge_caller(bridge: Any) -> Callable[[str, dict[str, Any], Any], Any]:
    """``bridge(sql, params, signal)``, or ``bridge(sql, params)`` when it takes no signal."""
    try:
        params = list(inspect.signature(bridge).parameters.values())
    except (TypeError, ValueError):
        return lambda sql, values, signal: bridge(sql, values)
    positional = [p for p in params if p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                  inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params) or len(positional) >= 3:
        return lambda sql, values, signal: bridge(sql, values, signal)
    if any(p.name == "signal" and p.kind is inspect.Parameter.KEYWORD_ONLY for p in params) \
            or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return lambda sql, values, signal: bridge(sql, values, signal=signal)
    return lambda sql, values, signal: bridge(sql, values)


__all__ = ["Datasources", "DataStartError", "BuiltinBridge", "StatementTimedOut",
           "StatementCancelled", "open_datasources", "datasource_timeout_ms", "data_tools",
           "pool_size", "cancel_on"]
