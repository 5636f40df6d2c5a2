"""Tool and agent configuration values as the runtime reads them from the AST.

The checker has already reported bad values; here a value of the wrong shape falls back to the
key's default, so the runtime never fails on something the checker would have flagged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from luma.syntax import ast

DEFAULT_RETRY_DELAY_MS = 100
DEFAULT_IDEMPOTENCY_TTL_MS = 300_000


@dataclass(frozen=True, slots=True)
class ToolSettings:
    """The configuration of one ``tool`` declaration (LANGUAGE.md §4), defaults filled in."""

    name: str
    side_effects: str = "none"
    cache: bool = False
    scope: str | None = None
    credential: str | None = None
    error_schema: str | None = None
    retries: int = 0
    retry_backoff: str = "none"
    retry_delay_ms: int = DEFAULT_RETRY_DELAY_MS
    timeout_ms: int | None = None
    idempotent: bool = False
    idempotency_key: tuple[str, ...] | None = None
    idempotency_ttl_ms: int = DEFAULT_IDEMPOTENCY_TTL_MS
    needs: tuple[ast.NeedsDecl, ...] = ()

    @property
    def is_write(self) -> bool:
        return self.side_effects == "write"


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """The tool-related configuration of one agent (LANGUAGE.md §6); ``None`` means not given."""

    name: str
    tool_policy: str = "allow"
    tool_scopes: tuple[str, ...] | None = None
    tool_contexts: tuple[str, ...] | None = None
    tool_failure_limit: int | None = None
    tool_timeout_ms: int | None = None
    tool_timeout_max_ms: int | None = None


def tool_settings(tool: ast.ToolDecl, default_timeout_ms: int | None = None) -> ToolSettings:
    """Read a tool's configuration entries. A query reads and a command writes (DATA.md §1);
    ``default_timeout_ms`` is their datasource's ``timeout``, used when they set none."""
    key_path = _dotted(tool.entry("idempotency_key"))
    if key_path and len(key_path) > 1 and key_path[0] == "input" \
            and all(p.name != "input" for p in tool.params):
        key_path = key_path[1:]  # `input.request_id` names the field `request_id`
    return ToolSettings(
        name=tool.name,
        side_effects=_DATA_SIDE_EFFECTS.get(tool.kind) or
        _choice(tool.entry("side_effects"), ("none", "read", "write"), "none"),
        cache=_bool(tool.entry("cache"), False),
        scope=_string(tool.entry("scope")),
        credential=_string(tool.entry("credential")),
        error_schema=_name(tool.entry("error")),
        retries=_int(tool.entry("retries"), 0, minimum=0) or 0,
        retry_backoff=_choice(tool.entry("retry_backoff"), ("none", "fixed", "exponential"),
                              "none"),
        retry_delay_ms=_int(tool.entry("retry_delay"), DEFAULT_RETRY_DELAY_MS, minimum=0)
        or 0,
        timeout_ms=_int(tool.entry("timeout"), None, minimum=1) or default_timeout_ms,
        idempotent=_bool(tool.entry("idempotent"), False),
        idempotency_key=tuple(key_path) if key_path else None,
        idempotency_ttl_ms=_int(tool.entry("idempotency_ttl_ms"), DEFAULT_IDEMPOTENCY_TTL_MS,
                                minimum=1) or DEFAULT_IDEMPOTENCY_TTL_MS,
        needs=tool.needs,
    )


_DATA_SIDE_EFFECTS = {"query": "read", "command": "write"}


def any_idempotent(tools: Iterable[ast.ToolDecl]) -> bool:
    """Whether one of ``tools`` is idempotent (and so needs an idempotency store)."""
    return any(tool_settings(tool).idempotent for tool in tools)


def agent_settings(agent: ast.AgentDecl) -> AgentSettings:
    """Read an agent's tool-related configuration entries."""
    return AgentSettings(
        name=agent.name,
        tool_policy=_choice(agent.entry("tool_policy"), ("allow", "deny_write", "approval"),
                            "allow"),
        tool_scopes=_strings(agent.entry("tool_scopes")),
        tool_contexts=_strings(agent.entry("tool_contexts")),
        tool_failure_limit=_int(agent.entry("tool_failure_limit"), None, minimum=1),
        tool_timeout_ms=_int(agent.entry("tool_timeout"), None, minimum=1),
        tool_timeout_max_ms=_int(agent.entry("tool_timeout_max"), None, minimum=1),
    )


def effective_timeout_ms(tool: ToolSettings, agent: AgentSettings | None) -> int | None:
    """``min(tool.timeout ?? agent.tool_timeout, agent.tool_timeout_max)``; a missing term drops
    out, and ``None`` means no timeout at all."""
    timeout = tool.timeout_ms
    if timeout is None and agent is not None:
        timeout = agent.tool_timeout_ms
    cap = agent.tool_timeout_max_ms if agent is not None else None
    if cap is not None:
        timeout = cap if timeout is None else min(timeout, cap)
    return timeout


# ----------------------------------------------------------------------------------- readers


def _value(entry: ast.ConfigEntry | None) -> Any:
    if entry is None:
        return None
    v = entry.value
    if isinstance(v, ast.Literal):
        return v.value
    if isinstance(v, ast.StringLit):
        return v.value
    return v


def _string(entry: ast.ConfigEntry | None) -> str | None:
    v = _value(entry)
    return v if isinstance(v, str) else None


def _choice(entry: ast.ConfigEntry | None, choices: tuple[str, ...], default: str) -> str:
    v = _value(entry)
    return v if isinstance(v, str) and v in choices else default


def _bool(entry: ast.ConfigEntry | None, default: bool) -> bool:
    v = _value(entry)
    return v if isinstance(v, bool) else default


def _int(entry: ast.ConfigEntry | None, default: int | None, *, minimum: int) -> int | None:
    v = _value(entry)
    if type(v) is int and v >= minimum:
        return v
    return default


def _name(entry: ast.ConfigEntry | None) -> str | None:
    if entry is not None and isinstance(entry.value, ast.Name):
        return entry.value.id
    return None


def _strings(entry: ast.ConfigEntry | None) -> tuple[str, ...] | None:
    if entry is None or not isinstance(entry.value, ast.ListLit):
        return None
    out = []
    for item in entry.value.items:
        if isinstance(item, ast.StringLit):
            out.append(item.value)
        elif isinstance(item, ast.Name):
            out.append(item.id)
    return tuple(out)


def _dotted(entry: ast.ConfigEntry | None) -> list[str] | None:
    if entry is None:
        return None
    parts: list[str] = []
    expr: ast.Expr = entry.value
    while isinstance(expr, ast.Member):
        parts.append(expr.name)
        expr = expr.obj
    if isinstance(expr, ast.Name):
        parts.append(expr.id)
        return parts[::-1]
    if isinstance(expr, ast.StringLit) and not parts:
        return expr.value.split(".") if expr.value else None
    return None
