"""What the interpreter and the tool pipeline need from the runtime of a run, said once: who
is calling a tool (:class:`CallContext`, :class:`MethodCall`) and the two interfaces that
:class:`~luma.runtime.engine.Runtime` implements (:class:`InterpreterHost`, :class:`ToolHost`).
The interpreter and the pipeline depend on these, never on the engine that wires them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Literal, Protocol

from luma.runtime.errors import LumaError
from luma.syntax import ast

if TYPE_CHECKING:
    from luma.runtime.call_limit import ConcurrencyLimit
    from luma.runtime.secrets import SecretRedactor
    from luma.runtime.shared import SharedState
    from luma.runtime.telemetry import Telemetry
    from luma.schema.compile import SchemaCompiler
    from luma.schema.validate import Violation

Approve = Callable[[str, Any], "bool | Awaitable[bool]"]
"""Decides an ``approval``-policy call: ``approve(tool_name, input)`` → approved (or an
awaitable of it). The input has its secrets replaced."""


@dataclass(slots=True)
class MethodCall:
    """One agent method call (or the top-level program): the scope of the circuit breaker."""

    agent: ast.AgentDecl | None
    fn: str | None
    failures: int = 0
    open_error: LumaError | None = None


@dataclass(slots=True)
class CallContext:
    """Who is calling a tool: the agent (None at top level), the agent method call whose circuit
    breaker counts failures, and whether the call is direct or native (with the model's call id)."""

    agent: ast.AgentDecl | None
    method: MethodCall | None
    mode: Literal["direct", "native"] = "direct"
    call_id: str | None = None


def agent_tools(agent: ast.AgentDecl) -> list[str]:
    """The names in an agent's ``tools:`` list."""
    entry = agent.entry("tools")
    if entry is None or not isinstance(entry.value, ast.ListLit):
        return []
    return [i.id for i in entry.value.items if isinstance(i, ast.Name)]


class ToolHost(Protocol):
    """What the tool pipeline uses of its run."""

    program: ast.Program
    config: Any
    env: Mapping[str, str]
    handlers: dict[str, Any]
    tools: dict[str, ast.ToolDecl]
    schemas: SchemaCompiler
    secrets: SecretRedactor
    shared: SharedState
    telemetry: Telemetry
    stderr: IO[str]
    interactive: bool
    approve: Approve | None
    base_dir: str
    concurrency_limits: dict[str, ConcurrencyLimit]
    inline_handler: str | None
    tracer: Any  # an OpenTelemetry tracer, or None (luma.runtime.otel)
    capture_content: bool  # values on spans (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT)
    call_observer: Callable[[str, Any, Any, LumaError | None, str], None] | None

    def warn(self, code: str, message: str) -> None: ...

    def soft_warning(self, where: str, violation: Violation) -> None: ...


class InterpreterHost(Protocol):
    """What the interpreter uses of its run: everything with a side effect leaves through it."""

    program: ast.Program
    schemas: SchemaCompiler
    shared: SharedState
    telemetry: Telemetry
    secrets: SecretRedactor
    tracer: Any  # an OpenTelemetry tracer, or None (luma.runtime.otel)

    def validate(self, schema: dict[str, Any], value: Any, *,
                 soft_rules: bool) -> tuple[Any, list[Violation]]: ...

    def format_violations(self, prefix: str, violations: list[Violation],
                          code: str | None = None) -> str: ...

    def soft_warning(self, where: str, violation: Violation) -> None: ...

    def print(self, text: str) -> None: ...

    async def direct_tool_call(self, name: str, arg: Any, agent: ast.AgentDecl | None,
                               method: MethodCall | None) -> Any: ...

    async def ask(self, agent: ast.AgentDecl | None, method: MethodCall | None, prompt: str,
                  type_: ast.TypeExpr, using_tool: str | None) -> Any: ...
