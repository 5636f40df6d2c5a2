"""The runtime of one program run: it wires the interpreter, the tool pipeline, the ask engine,
validation, warnings and telemetry together. One ``Runtime`` per run."""

from __future__ import annotations

import asyncio
import os
import sys
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Literal

from luma.runtime.errors import LumaError
from luma.runtime.secrets import RedactingStream, SecretRedactor, register_startup_secrets
from luma.runtime.telemetry import HISTORY, Telemetry
from luma.schema.compile import SchemaCompiler
from luma.syntax import ast

if TYPE_CHECKING:
    from luma.runtime.interpreter import MethodCall
    from luma.schema.validate import Violation


@dataclass(slots=True)
class CallContext:
    """Who is calling a tool: the agent (None at top level), the agent method call whose circuit
    breaker counts failures, and whether the call is direct or native (with the model's call id)."""

    agent: ast.AgentDecl | None
    method: MethodCall | None
    mode: Literal["direct", "native"] = "direct"
    call_id: str | None = None


class Runtime:
    """Everything a run needs, built once: schemas, validators, the tool pipeline, telemetry."""

    def __init__(self, program: ast.Program, *, handlers: Mapping[str, Any] | None = None,
                 config: Any = None, env: Mapping[str, str] | None = None,
                 telemetry: Telemetry | None = None, stderr: IO[str] | None = None,
                 interactive: bool | None = None, ask_engine: Any = None,
                 base_dir: str | None = None) -> None:
        from luma.runtime.pipeline import ToolPipeline

        self.program = program
        self.schemas = SchemaCompiler(program)
        self.tools = {t.name: t for t in program.tools}
        self.handlers: dict[str, Any] = dict(handlers or {})
        self.config = config
        self.env: Mapping[str, str] = os.environ if env is None else env
        if telemetry is None:
            telemetry = Telemetry(stderr=stderr if stderr is not None else sys.stderr)
        self.telemetry = telemetry
        # one redactor for the run, knowing every secret the program can use from the start
        self.secrets: SecretRedactor = telemetry.redactor
        register_startup_secrets(self.secrets, program, config, self.env)
        self.stderr = RedactingStream.wrap(stderr if stderr is not None else sys.stderr,
                                           self.secrets)
        self.interactive = (sys.stdin.isatty() and self.stderr.isatty()) if interactive is None \
            else interactive
        self.base_dir = base_dir or os.getcwd()
        self._warnings: deque[dict[str, Any]] = deque(maxlen=HISTORY)
        self.ask_engine = ask_engine
        # tool name → the semaphore of its module (tool_module_policy.max_concurrency)
        self.concurrency_limits: dict[str, asyncio.Semaphore] = {}
        # the tool whose sync handler is running on the event loop's thread right now
        self.inline_handler: str | None = None
        self.pipeline = ToolPipeline(self)

    @property
    def warnings(self) -> list[dict[str, Any]]:
        """The run's latest warnings (at most ``telemetry.HISTORY``), oldest first."""
        return list(self._warnings)

    # validation ----------------------------------------------------------------------------
    def validate(self, schema: dict[str, Any], value: Any, *,
                 soft_rules: bool) -> tuple[Any, list[Violation]]:
        """Fill defaults, coerce whole floats to ints, validate: the one entry point."""
        from luma.schema.validate import validate_and_fill

        return validate_and_fill(schema, value, soft_rules=soft_rules)

    @staticmethod
    def format_violations(prefix: str, violations: list[Violation], code: str | None = None) -> str:
        from luma.schema.validate import format_violations

        text = format_violations(prefix, violations)
        return f"[{code}] {text}" if code else text

    def soft_warning(self, where: str, violation: Violation) -> None:
        path = f"{where}.{violation.path}" if violation.path else where
        self.warn("SOFT_RULE", f"{path}: {violation.message}")

    def warn(self, code: str, message: str) -> None:
        """A run-time warning: on stderr, in the trace, and in the run's list of flags."""
        self._warnings.append(self.secrets.redact_value({"code": code, "message": message}))
        self.telemetry.emit("warning", code=code, message=message)
        self.stderr.write(f"warning[{code}] {message}\n")

    def print(self, text: str) -> None:
        self.stderr.write(text + "\n")
        self.stderr.flush()

    # calls out of the interpreter --------------------------------------------------------------
    async def direct_tool_call(self, name: str, arg: Any, agent: ast.AgentDecl | None,
                               method: MethodCall | None) -> Any:
        if agent is not None and name not in agent_tools(agent):
            raise LumaError("TOOL_PERMISSION_DENIED",
                            f"Agent '{agent.name}' does not allow tool '{name}' to be called directly.",
                            tool=name)
        return await self.pipeline.call(name, arg, CallContext(agent, method, "direct"))

    async def ask(self, agent: ast.AgentDecl | None, method: MethodCall | None, prompt: str,
                  type_: ast.TypeExpr, using_tool: str | None) -> Any:
        if self.ask_engine is None:
            raise LumaError("ASK_UNAVAILABLE", "ask is not available in this build of Luma.")
        return await self.ask_engine.ask(agent, method, prompt, type_, using_tool)

    async def aclose(self) -> None:
        """Release what the run holds open: the ask engine's providers and HTTP client."""
        close = getattr(self.ask_engine, "aclose", None)
        if close is not None:
            await close()


def agent_tools(agent: ast.AgentDecl) -> list[str]:
    """The names in an agent's ``tools:`` list."""
    entry = agent.entry("tools")
    if entry is None or not isinstance(entry.value, ast.ListLit):
        return []
    return [i.id for i in entry.value.items if isinstance(i, ast.Name)]
