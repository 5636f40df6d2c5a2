"""What the pipeline tests share: parse a program, build a Runtime, make calls, read events."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from luma.runtime.config import parse_config
from luma.runtime.engine import CallContext, Runtime
from luma.runtime.errors import LumaError
from luma.runtime.interpreter import MethodCall
from luma.runtime.modules import load_tool_module
from luma.runtime.telemetry import Telemetry
from luma.syntax import ast
from luma.syntax.parse import parse_text

HERE = Path(__file__).parent


def program(text: str, path: str = "test.luma") -> ast.Program:
    """Parse a program; it must parse without a diagnostic."""
    parsed, diagnostics = parse_text(text, path)
    assert parsed is not None and not diagnostics, [d.message for d in diagnostics]
    return parsed


def fixture_program(name: str = "pipeline.luma") -> ast.Program:
    path = HERE / name
    return program(path.read_text(encoding="utf-8"), str(path))


def fixture_handlers(name: str = "tools.py") -> dict[str, Any]:
    """The handlers of a tool module in this folder, loaded as ``--tool-module`` loads them."""
    return dict(load_tool_module(HERE / name).handlers)


def runtime(prog: ast.Program, handlers: Mapping[str, Callable[..., Any]] | None = None, *,
            env: Mapping[str, str] | None = None, config: dict[str, Any] | None = None,
            interactive: bool = False, trace: str | None = None,
            base_dir: str | None = None) -> Runtime:
    """A Runtime whose stderr is captured in ``runtime.stderr`` (a StringIO)."""
    stderr = io.StringIO()
    return Runtime(prog, handlers=dict(handlers or {}),
                   config=parse_config(config) if config is not None else None,
                   env=dict(env or {}), telemetry=Telemetry(trace, stderr=stderr),
                   stderr=stderr, interactive=interactive, base_dir=base_dir)


def agent(rt: Runtime, name: str) -> ast.AgentDecl:
    found = next((a for a in rt.program.agents if a.name == name), None)
    assert found is not None, name
    return found


def context(rt: Runtime, agent_name: str | None = None, *, method: MethodCall | None = None,
            mode: str = "direct", call_id: str | None = None) -> CallContext:
    decl = agent(rt, agent_name) if agent_name is not None else None
    if method is None:
        method = MethodCall(decl, "run")
    return CallContext(decl, method, mode, call_id)  # type: ignore[arg-type]


def call(rt: Runtime, tool: str, value: Any, ctx: CallContext | None = None) -> Any:
    return asyncio.run(rt.pipeline.call(tool, value, ctx or context(rt)))


def call_error(rt: Runtime, tool: str, value: Any, ctx: CallContext | None = None) -> LumaError:
    try:
        result = call(rt, tool, value, ctx)
    except LumaError as err:
        return err
    raise AssertionError(f"the call succeeded with {result!r}")


def tool_events(rt: Runtime, tool: str | None = None) -> list[dict[str, Any]]:
    return [e for e in rt.telemetry.events
            if e["event"] == "tool.call" and (tool is None or e["tool"] == tool)]


def last_event(rt: Runtime) -> dict[str, Any]:
    events = tool_events(rt)
    assert events, "no tool.call event"
    return events[-1]
