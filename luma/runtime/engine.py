"""The runtime of one program run: it wires the interpreter, the tool pipeline, the ask engine,
validation, warnings and telemetry together. One ``Runtime`` per run; the runs of one loaded
program share one :class:`~luma.runtime.shared.SharedState` (schemas, tool plans, the result
cache, the idempotency store, the HTTP clients).

The interpreter and the pipeline see the runtime only through the interfaces of
:mod:`luma.runtime.calls`, which this module implements: the package reads top-down."""

from __future__ import annotations

import os
import sys
from collections import deque
from collections.abc import Callable, Mapping
from typing import IO, TYPE_CHECKING, Any

from luma.runtime.call_limit import ConcurrencyLimit
from luma.runtime.calls import Approve, CallContext, MethodCall, agent_tools
from luma.runtime.errors import LumaError
from luma.runtime.secrets import RedactingStream, SecretRedactor, register_startup_secrets
from luma.runtime.shared import SharedState
from luma.runtime.telemetry import HISTORY, Telemetry
from luma.syntax import ast

if TYPE_CHECKING:
    from luma.schema.validate import Violation

__all__ = ["Approve", "CallContext", "MethodCall", "Runtime", "SharedState", "agent_tools"]

class Runtime:
    """Everything a run needs, built once: schemas, validators, the tool pipeline, telemetry."""

    def __init__(self, program: ast.Program, *, handlers: Mapping[str, Any] | None = None,
                 config: Any = None, env: Mapping[str, str] | None = None,
                 telemetry: Telemetry | None = None, stderr: IO[str] | None = None,
                 interactive: bool | None = None, ask_engine: Any = None,
                 base_dir: str | None = None, shared: SharedState | None = None,
                 approve: Approve | None = None) -> None:
        from luma.runtime.pipeline import ToolPipeline

        self.program = program
        self.shared = shared if shared is not None else SharedState(program)
        self.schemas = self.shared.schemas
        self.tools = {t.name: t for t in program.tools}
        self.handlers: dict[str, Any] = dict(handlers or {})
        self.config = config
        self.env: Mapping[str, str] = os.environ if env is None else env
        if telemetry is None:
            telemetry = Telemetry(stderr=stderr if stderr is not None else sys.stderr)
        self.telemetry = telemetry
        # one redactor for the run, knowing every secret the program can use from the start
        self.secrets: SecretRedactor = telemetry.redactor
        shared = self.shared
        # once per environment and redactor: the runs of a program share both
        if shared.secrets_registered_from is not self.env or shared.secrets_redactor is not \
                self.secrets:
            register_startup_secrets(self.secrets, program, config, self.env)
            shared.secrets_registered_from, shared.secrets_redactor = self.env, self.secrets
        self.stderr = RedactingStream.wrap(stderr if stderr is not None else sys.stderr,
                                           self.secrets)
        # an approval callback can approve a call, as a person at the terminal can
        self.approve = approve
        self.interactive = True if approve is not None else (
            (sys.stdin.isatty() and self.stderr.isatty()) if interactive is None else interactive)
        self.base_dir = base_dir or os.getcwd()
        self._warnings: deque[dict[str, Any]] = deque(maxlen=HISTORY)
        self.ask_engine = ask_engine
        # tool name → the semaphore of its module (tool_module_policy.max_concurrency)
        self.concurrency_limits: dict[str, ConcurrencyLimit] = {}
        # the tool whose sync handler is running on the event loop's thread right now
        self.inline_handler: str | None = None
        from luma.runtime.otel import active_tracer, captures_content

        self.tracer: Any = active_tracer()  # before the pipeline, which reads it
        # prompts, answers, tool arguments and results on spans: the explicit opt-in only
        self.capture_content = self.tracer is not None and captures_content(os.environ)
        # told of every tool call as it ends (luma test's calls()): name, the input as given,
        # the validated result (None when it failed), the error, "direct" or "native"
        self.call_observer: Callable[[str, Any, Any, LumaError | None, str], None] | None = None
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
        self._write(f"warning[{code}] {message}\n")

    def print(self, text: str) -> None:
        self._write(text + "\n")
        self.stderr.flush()

    def _write(self, text: str) -> None:
        view = self.telemetry.view
        if view is not None and view.live:  # above the live display, not through it
            self.telemetry.write(text)  # the display redacts what it prints
        else:
            self.stderr.write(text)

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
