"""The public Python API: load a ``.luma`` program once, then run its agents from any Python
application. This is the seam between the front end (``luma.compile``) and the runtime
(``luma.runtime``, ``luma.models``); the command line is a thin shell over it.

    program = luma.load("triage.luma", tool_modules=["tools.py"])
    answer = await program.run("Triage", text="…")

:func:`load` is start-up, all-or-nothing: it compiles (:class:`CompileError`), reads the
config, loads the tool modules under their manifests and sandbox, checks that every tool has a
handler, opens the stores and the trace (:class:`LoadError`). A :class:`Program` is then safe
to share between concurrent tasks and threads: each run has its own frames, circuit breakers,
concurrency limits and warnings; the schemas, validators, tool plans, result cache,
idempotency store and HTTP connection pool are shared. Every Luma error a run raises is a
:class:`RunError`.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, TypeVar, overload

from luma.runtime.errors import LumaError, StartError

if TYPE_CHECKING:
    from luma.compile import CheckedFile
    from luma.runtime.call_limit import CallLimit
    from luma.models.ask import AskSetup
    from luma.runtime.engine import Runtime
    from luma.runtime.shared import SharedState
    from luma.runtime.secrets import SecretRedactor
    from luma.runtime.telemetry import SharedTrace
    from luma.syntax.diagnostics import Diagnostic
    from luma.syntax.source import SourceFile, Span

__all__ = ["CompileError", "DiagnosticInfo", "LoadError", "Location", "Program", "RunError",
           "load", "loads"]

T = TypeVar("T")
EventCallback = Callable[[dict[str, Any]], "None | Awaitable[None]"]
"""``on_event(event)``: each telemetry event of a run as it happens (sync or async)."""
ApproveCallback = Callable[[str, Any], "bool | Awaitable[bool]"]
"""``approve(tool_name, input)`` → whether one ``approval``-policy call may run."""


# ------------------------------------------------------------------------------------ errors

@dataclass(frozen=True, slots=True)
class DiagnosticInfo:
    """One compile diagnostic: ``code``, ``severity`` (``error``/``warning``), ``message``,
    where (``file``, 1-based ``line`` and ``column``) and ``rendered``, the text ``luma check``
    shows for it."""

    code: str
    severity: str
    message: str
    file: str
    line: int
    column: int
    rendered: str
    hint: str | None = None


class LoadError(Exception):
    """The program cannot start: a bad config, a tool module that fails, a tool without a
    handler, a store or trace that cannot open. ``problems`` holds one line per problem;
    ``code`` is the Luma error code when the problem has one (``MODEL_AUTH``)."""

    def __init__(self, problems: list[str], code: str | None = None) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems
        self.code = code


class CompileError(LoadError):
    """The source did not compile. ``diagnostics`` holds every diagnostic (warnings too);
    ``rendered`` is all of them as ``luma check`` prints them."""

    def __init__(self, path: str, diagnostics: list[DiagnosticInfo], rendered: str) -> None:
        errors = [d for d in diagnostics if d.severity == "error"]
        super().__init__([f"{d.file}:{d.line}:{d.column}: error[{d.code}]: {d.message}"
                          for d in errors])
        self.path = path
        self.diagnostics = diagnostics
        self.rendered = rendered

    def __str__(self) -> str:
        count = sum(1 for d in self.diagnostics if d.severity == "error")
        first = "\n".join(self.problems)
        return f"{self.path} did not compile ({count} error{'' if count == 1 else 's'}):\n{first}"


@dataclass(frozen=True, slots=True)
class Location:
    """Where in the ``.luma`` source a run-time error surfaced: the file, the 1-based line and
    column of the statement, and the statement's text."""

    file: str
    line: int
    column: int
    text: str


class RunError(LumaError):
    """A Luma error at run time: ``code``, ``message``, ``retryable``, ``tool``, ``details``,
    ``location`` (None when the error is not tied to a statement, e.g. ``ARGUMENT_INVALID``)
    and ``extra`` (the other fields of a typed tool error)."""

    def __init__(self, code: str, message: str, *, retryable: bool = False,
                 tool: str | None = None, details: Any = None,
                 extra: dict[str, Any] | None = None, span: Span | None = None,
                 location: Location | None = None) -> None:
        super().__init__(code, message, retryable=retryable, tool=tool, details=details,
                         extra=extra, span=span)
        self.location = location

    def __str__(self) -> str:
        where = f" (at {self.location.file}:{self.location.line}:{self.location.column})" \
            if self.location is not None else ""
        return f"[{self.code}] {self.message}{where}"

    def __repr__(self) -> str:
        return f"RunError({self.code!r}, {self.message!r})"


class ArgumentsRefused(RunError):
    """``ARGUMENT_INVALID``: the arguments of the method called do not fit its parameters
    (found before any statement runs)."""


def _message_of(err: LumaError) -> str:
    message = err.message
    if message.startswith(f"[{err.code}] "):  # the pipeline's messages carry their code
        message = message[len(err.code) + 3:]
    return message


def _run_error(err: LumaError, source: SourceFile) -> RunError:
    if isinstance(err, RunError):
        return err
    location = None
    if err.span is not None:
        line, column = source.line_col(err.span.start)
        location = Location(source.path, line, column, source.line_text(line).strip())
    return RunError(err.code, _message_of(err), retryable=err.retryable, tool=err.tool,
                    details=err.details, extra=err.extra, span=err.span, location=location)


# ----------------------------------------------------------------------------------- loading

def load(path: str | os.PathLike[str], *, tool_modules: Iterable[str | os.PathLike[str]] = (),
         tools: Mapping[str, Callable[..., Any]] | None = None,
         config: str | os.PathLike[str] | Mapping[str, Any] | None = None,
         model: str | None = None, trace: str | os.PathLike[str] | None = None,
         record: str | os.PathLike[str] | None = None,
         replay: str | os.PathLike[str] | None = None,
         env: Mapping[str, str] | None = None, approve: ApproveCallback | None = None,
         stderr: IO[str] | None = None, verbose: bool = False) -> Program:
    """Compile the program at ``path`` and start it (see the module's documentation).

    - ``tool_modules``: Python tool modules, added to the config's ``tool_modules``.
    - ``tools``: handlers as Python callables by tool name (no module file needed).
    - ``config``: the config file (default: ``luma.config.json`` beside the program), or the
      config itself as a mapping.
    - ``model``: the default model; ``trace``: a JSON Lines trace file that every run appends
      to; ``record``/``replay``: provider traffic saved to / served from a file.
    - ``env``: used instead of ``os.environ`` for credentials, ``needs`` contexts, API keys and
      ``LUMA_APPROVED_TOOLS`` (a run may pass its own).
    - ``approve``: decides ``approval``-policy calls instead of ``LUMA_APPROVED_TOOLS`` and
      the terminal prompt.
    - ``stderr``: where warnings, ``print`` and ``verbose`` output go (default: sys.stderr).

    Raises :class:`CompileError` or :class:`LoadError`; nothing is left open when it does.
    """
    from luma.compile import check_file

    try:
        checked = check_file(os.fspath(path))
    except OSError as exc:
        raise LoadError([f"cannot read {os.fspath(path)}: {exc.strerror or exc}"]) from None
    return _load_checked(checked, tool_modules=tool_modules, tools=tools, config=config,
                         model=model, trace=trace, record=record, replay=replay, env=env,
                         approve=approve, stderr=stderr, verbose=verbose)


def loads(source: str, *, path: str | os.PathLike[str] = "<string>.luma",
          tool_modules: Iterable[str | os.PathLike[str]] = (),
          tools: Mapping[str, Callable[..., Any]] | None = None,
          config: str | os.PathLike[str] | Mapping[str, Any] | None = None,
          model: str | None = None, trace: str | os.PathLike[str] | None = None,
          record: str | os.PathLike[str] | None = None,
          replay: str | os.PathLike[str] | None = None,
          env: Mapping[str, str] | None = None, approve: ApproveCallback | None = None,
          stderr: IO[str] | None = None, verbose: bool = False) -> Program:
    """:func:`load` of source text. ``path`` names it in messages; relative paths of the
    config and its tool modules are read from the folder ``path`` is in."""
    from luma.compile import check_text

    checked = check_text(source, os.fspath(path))
    return _load_checked(checked, tool_modules=tool_modules, tools=tools, config=config,
                         model=model, trace=trace, record=record, replay=replay, env=env,
                         approve=approve, stderr=stderr, verbose=verbose)


def _load_checked(checked: CheckedFile, **options: Any) -> Program:
    if checked.has_errors or checked.program is None:
        raise compile_error(checked)
    try:
        return start(checked, **options)
    except StartError as exc:
        raise LoadError(exc.lines, exc.code) from None


def compile_error(checked: CheckedFile) -> CompileError:
    from luma.syntax.render import render_text, source_lookup

    source = checked.source
    infos = []
    for d in checked.diagnostics:
        line, column = source.line_col(d.span.start)
        rendered = render_text([d], source_lookup([source]), color=False)
        infos.append(DiagnosticInfo(d.code, d.severity, d.message, source.path, line, column,
                                    rendered, d.hint))
    rendered = render_text(checked.diagnostics, source_lookup([source]), color=False)
    return CompileError(source.path, infos, rendered)


def start(checked: CheckedFile, *, tool_modules: Iterable[str | os.PathLike[str]] = (),
          tools: Mapping[str, Callable[..., Any]] | None = None,
          config: str | os.PathLike[str] | Mapping[str, Any] | None = None,
          model: str | None = None, trace: str | os.PathLike[str] | None = None,
          record: str | os.PathLike[str] | None = None,
          replay: str | os.PathLike[str] | None = None,
          env: Mapping[str, str] | None = None, approve: ApproveCallback | None = None,
          stderr: IO[str] | None = None, verbose: bool = False,
          secrets: SecretRedactor | None = None,
          before_open: Callable[[], None] | None = None,
          interactive: bool | None = None, script: list[Any] | None = None) -> Program:
    """Start a program that compiled; raises :class:`StartError`. ``secrets`` is the
    redactor of every run (the command line's, which also guards its streams);
    ``before_open`` runs after the handlers are known and before the trace, the stores and
    the models are opened (the command line chooses what to run there)."""
    from luma.runtime.config import ConfigError, find_config, parse_config
    from luma.runtime.shared import SharedState
    from luma.runtime.secrets import SecretRedactor, register_startup_secrets

    program = checked.program
    assert program is not None
    _checked_env(env, "env")
    program_path = Path(checked.source.path)
    environ: Mapping[str, str] = os.environ if env is None else env
    modules = [os.fspath(m) for m in tool_modules]
    explicit = None if config is None or isinstance(config, Mapping) else os.fspath(config)
    trace_path = None if trace is None else os.fspath(trace)
    record_path = None if record is None else os.fspath(record)
    replay_path = None if replay is None else os.fspath(replay)
    try:
        if isinstance(config, Mapping):
            loaded_config: Any = parse_config(dict(config), "<config>")
        else:
            loaded_config = find_config(program_path, explicit)
    except ConfigError as exc:
        raise StartError([f"{exc.path}: {m}" for m in exc.messages]) from None
    guard_outputs(trace_path, record_path,
                  program_inputs(program_path, modules, explicit, loaded_config))

    secrets = secrets if secrets is not None else SecretRedactor()
    register_startup_secrets(secrets, program, loaded_config, environ)  # before a module runs
    handlers, limits = _handlers(program, program_path, modules, loaded_config, tools)
    missing = [t.name for t in program.tools if t.name not in handlers]
    if missing:
        raise StartError([f"'{name}' is not registered in the tool registry." for name in missing])
    if before_open is not None:
        before_open()

    shared_trace = None
    if trace_path is not None:
        from luma.runtime.telemetry import SharedTrace

        try:
            shared_trace = SharedTrace(trace_path)
        except OSError as exc:
            raise StartError([f"cannot write the trace file {trace_path}: "
                              f"{exc.strerror or exc}"]) from None
    try:
        base_dir = str(program_path.resolve().parent)
        shared = SharedState(program)
        ask_setup = _ask_setup(program, loaded_config, base_dir, secrets, environ, model,
                               record_path, replay_path, script)
        result = Program(checked, config=loaded_config, handlers=handlers, limits=limits,
                         shared=shared, ask_setup=ask_setup, secrets=secrets, env=env,
                         approve=approve, trace=shared_trace, stderr=stderr, verbose=verbose,
                         base_dir=base_dir, interactive=interactive,
                         replaying=replay_path is not None)
        result.open_stores()
    except LumaError as exc:
        if shared_trace is not None:
            shared_trace.close()
        raise StartError([exc.message]) from None
    except StartError:
        if shared_trace is not None:
            shared_trace.close()
        raise
    return result


def program_inputs(program_path: Path, tool_modules: list[str], config_path: str | None,
                   config: Any) -> dict[Path, str]:
    """The files of the program that nothing Luma writes may replace: its source, its config
    and its tool modules (resolved)."""
    from luma.outputs import protected_inputs
    from luma.runtime.config import config_location

    project = program_path.resolve().parent
    manifests = config.module_manifests() if config is not None else []
    modules = [project / m.path for m in manifests] + [Path(m) for m in tool_modules]
    return protected_inputs(program_path, config_location(program_path, config_path), modules)


def guard_outputs(trace: str | None, record: str | None, inputs: dict[Path, str]) -> None:
    """The trace and the recording write only over their own earlier files."""
    from luma.models.recording import is_recording
    from luma.outputs import OutputRefused, guard_output
    from luma.runtime.telemetry import is_trace

    problems = []
    for path, is_luma_file in ((trace, is_trace), (record, is_recording)):
        if path is None:
            continue
        try:
            guard_output(path, is_luma_file, protected=inputs)
        except OutputRefused as exc:
            problems.append(str(exc))
    if problems:
        raise StartError(problems)


def _checked_env(env: Mapping[str, str] | None, where: str) -> None:
    """``env=`` maps strings to strings, as ``os.environ`` does: the caller's mistake otherwise
    (a ``TypeError`` that names the entry, before anything runs)."""
    if env is None or env is os.environ:
        return
    if not isinstance(env, Mapping):
        raise TypeError(f"{where} must be a mapping of names to strings, not "
                        f"{type(env).__name__}")
    for key, value in env.items():
        if not isinstance(key, str):
            raise TypeError(f"{where} must map names to strings; the name {key!r} is "
                            f"{_a(type(key).__name__)}")
        if not isinstance(value, str):
            raise TypeError(f"{where} must map names to strings; {key!r} is "
                            f"{_a(type(value).__name__)}")


def _a(word: str) -> str:
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"


def _handlers(program: Any, program_path: Path, modules: list[str], config: Any,
              tools: Mapping[str, Callable[..., Any]] | None
              ) -> tuple[dict[str, Any], dict[str, CallLimit]]:
    """The handlers of the config's and the given tool modules, checked against their
    manifests and ``tool_module_policy``, then the Python callables of ``tools``; and each
    tool's concurrency limit."""
    from luma.runtime.manifests import load_program_modules

    loaded = load_program_modules(program_path.resolve().parent, config, modules)
    problems = [f"{exc.path}:{exc.line}: {exc.message}" if exc.line else exc.message
                for exc in loaded.errors]
    handlers = dict(loaded.registry.handlers)
    declared = [t.name for t in program.tools]
    for name, handler in (tools or {}).items():
        if name not in declared:
            from luma.syntax.diagnostics import did_you_mean

            hint = did_you_mean(name, declared)
            problems.append(f"tools['{name}']: the program declares no tool '{name}'"
                            + (f"; {hint}" if hint else ""))
        elif not callable(handler):
            problems.append(f"tools['{name}'] is not callable (it is a "
                            f"{type(handler).__name__})")
        elif name in handlers:
            problems.append(f"Tool registry conflict: {name} (a handler in "
                            f"{loaded.registry.origins.get(name, 'a tool module')} and in tools=)")
        else:
            handlers[name] = handler
    if problems:
        raise StartError(problems)
    return handlers, loaded.limits


def _ask_setup(program: Any, config: Any, base_dir: str, secrets: SecretRedactor,
               env: Mapping[str, str], model: str | None, record: str | None,
               replay: str | None, script: list[Any] | None) -> AskSetup | None:
    try:
        from luma.models.ask import AskSetup
    except ImportError:
        return None
    return AskSetup.build(program, config, base_dir=base_dir, secrets=secrets, env=env,
                          default_model=model, record=record, replay=replay, script=script)


# ----------------------------------------------------------------------------------- running

class Program:
    """A loaded program. Made by :func:`load`/:func:`loads`; run it as often as needed, from
    concurrent tasks and threads; :meth:`close` (or ``async with``/``with``) releases it."""

    def __init__(self, checked: CheckedFile, *, config: Any, handlers: dict[str, Any],
                 limits: dict[str, CallLimit], shared: SharedState,
                 ask_setup: AskSetup | None, secrets: SecretRedactor,
                 env: Mapping[str, str] | None, approve: ApproveCallback | None,
                 trace: SharedTrace | None, stderr: IO[str] | None, verbose: bool,
                 base_dir: str, interactive: bool | None, replaying: bool) -> None:
        assert checked.program is not None
        self._checked = checked
        self._program = checked.program
        self.path = checked.source.path
        self.config = config
        self._handlers = handlers
        self._limits = limits
        self._shared = shared
        self._ask_setup = ask_setup
        self._secrets = secrets
        self._env = env
        self._approve = approve
        self._trace = trace
        self._stderr = stderr
        self._verbose = verbose
        self._base_dir = base_dir
        self._interactive = interactive
        self._replaying = replaying
        self._closed = False
        self._adapters: dict[Any, Any] = {}
        self._adapters_lock = threading.Lock()
        self._reachable: dict[tuple[str | None, str | None], list[Any]] = {}
        self.agents: dict[str, list[str]] = {a.name: [f.name for f in a.fns]
                                             for a in self._program.agents}
        """The program's agents and the names of their methods."""

    @property
    def warnings(self) -> list[DiagnosticInfo]:
        """The program's compile warnings."""
        return [d for d in compile_error(self._checked).diagnostics if d.severity == "warning"]

    @property
    def secrets(self) -> SecretRedactor:
        """The redactor every run's output passes through (the secrets it knows so far)."""
        return self._secrets

    def _wrap_handlers(self, wrap: Callable[[str, Callable[..., Any]], Callable[..., Any]]
                       ) -> None:
        """Put ``wrap(name, handler)`` in place of every handler (``luma.testing``)."""
        self._handlers = {name: wrap(name, h) for name, h in self._handlers.items()}
        self._shared.tool_plans.clear()

    def open_stores(self) -> None:
        """Open the idempotency store now, so that one that cannot open stops the start."""
        runtime = self.new_runtime()
        runtime.telemetry.close()

    # ------------------------------------------------------------------------ the public ways
    @overload
    async def run(self, agent: str, /, *, output_type: None = None,
                  on_event: EventCallback | None = None, env: Mapping[str, str] | None = None,
                  args: Mapping[str, Any] | None = None, **arguments: Any) -> Any: ...

    @overload
    async def run(self, agent: str, /, *, output_type: type[T],
                  on_event: EventCallback | None = None, env: Mapping[str, str] | None = None,
                  args: Mapping[str, Any] | None = None, **arguments: Any) -> T: ...

    async def run(self, agent: str, /, *, output_type: Any = None,
                  on_event: EventCallback | None = None, env: Mapping[str, str] | None = None,
                  args: Mapping[str, Any] | None = None, **arguments: Any) -> Any:
        """Run ``agent.run`` with keyword ``arguments`` (or ``args``, for a parameter named
        like an option); return its validated result, converted to ``output_type`` (a pydantic
        model, a TypedDict, a dataclass, any type pydantic can validate) when given."""
        return await self.call(agent, "run", output_type=output_type, on_event=on_event,
                               env=env, args=args, **arguments)

    @overload
    async def call(self, agent: str, fn: str, /, *, output_type: None = None,
                   on_event: EventCallback | None = None, env: Mapping[str, str] | None = None,
                   args: Mapping[str, Any] | None = None, **arguments: Any) -> Any: ...

    @overload
    async def call(self, agent: str, fn: str, /, *, output_type: type[T],
                   on_event: EventCallback | None = None, env: Mapping[str, str] | None = None,
                   args: Mapping[str, Any] | None = None, **arguments: Any) -> T: ...

    async def call(self, agent: str, fn: str, /, *, output_type: Any = None,
                   on_event: EventCallback | None = None, env: Mapping[str, str] | None = None,
                   args: Mapping[str, Any] | None = None, **arguments: Any) -> Any:
        """Run ``agent.fn`` (see :meth:`run`)."""
        given = {**(args or {}), **arguments}
        self._known_method(agent, fn)
        return await self.execute(agent, fn, given, output_type=output_type,
                                  on_event=on_event, env=env)

    async def run_top_level(self, *, output_type: Any = None,
                            on_event: EventCallback | None = None,
                            env: Mapping[str, str] | None = None) -> Any:
        """Run the program's top-level statements; the result is the last one's value."""
        return await self.execute(None, None, {}, output_type=output_type, on_event=on_event,
                                  env=env)

    def run_sync(self, agent: str, /, **options: Any) -> Any:
        """:meth:`run` for code without an event loop (a thread of a pool, a script)."""
        return self._sync(self.run(agent, **options))

    def call_sync(self, agent: str, fn: str, /, **options: Any) -> Any:
        """:meth:`call` for code without an event loop."""
        return self._sync(self.call(agent, fn, **options))

    def run_top_level_sync(self, **options: Any) -> Any:
        """:meth:`run_top_level` for code without an event loop."""
        return self._sync(self.run_top_level(**options))

    # -------------------------------------------------------------------------- the lifetime
    async def aclose(self) -> None:
        """Release the HTTP clients and the trace file. The program cannot run afterwards."""
        if self._closed:
            return
        self._closed = True
        await self._shared.close_http_client()
        self._shared.drop_http_clients()  # of loops that are gone: their sockets went with them
        if self._trace is not None:
            self._trace.close()

    def close(self) -> None:
        """:meth:`aclose` for code without a running event loop."""
        if self._closed:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            clients = self._shared.drop_http_clients()
            if clients:
                async def close_all() -> None:
                    for client in clients:
                        try:
                            await client.aclose()
                        except (RuntimeError, OSError):
                            pass  # its loop is gone, and its connections with it
                asyncio.run(close_all())
            self._closed = True
            if self._trace is not None:
                self._trace.close()
            return
        raise RuntimeError("Program.close() was called inside a running event loop; "
                           "use 'await program.aclose()' there")

    async def __aenter__(self) -> Program:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, value: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    def __enter__(self) -> Program:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<luma.Program {self.path!r} agents={list(self.agents)}>"

    # ------------------------------------------------------------------------------ internal
    def _known_method(self, agent: str, fn: str) -> None:
        methods = self.agents.get(agent)
        if methods is None:
            from luma.syntax.diagnostics import did_you_mean

            hint = did_you_mean(agent, list(self.agents))
            raise RunError("AGENT_NOT_FOUND", f"Unknown agent '{agent}'"
                           + (f"; {hint}" if hint else "") + ".")
        if fn not in methods:
            raise RunError("FN_NOT_FOUND", f"Agent '{agent}' has no method '{fn}' "
                           f"(its methods: {', '.join(methods) or 'none'}).")

    def _sync(self, coroutine: Awaitable[Any]) -> Any:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            close = getattr(coroutine, "close", None)
            if close is not None:
                close()
            raise RuntimeError("run_sync() was called inside a running event loop; "
                               "use 'await program.run(...)' there")

        async def own_loop() -> Any:
            try:
                return await coroutine
            finally:  # this loop ends here, and its HTTP client with it
                await self._shared.close_http_client()

        return asyncio.run(own_loop())

    def new_runtime(self, env: Mapping[str, str] | None = None,
                    listener: Callable[[dict[str, Any]], None] | None = None,
                    stderr: IO[str] | None = None) -> Runtime:
        """A runtime for one run: its own telemetry, warnings, frames, circuit breakers and
        concurrency limits, over the program's shared state."""
        from luma.runtime.engine import Runtime
        from luma.runtime.telemetry import Telemetry

        if self._closed:
            raise RuntimeError(f"the program {self.path} is closed")
        stream = stderr if stderr is not None else (
            self._stderr if self._stderr is not None else sys.stderr)
        environ = env if env is not None else self._env
        telemetry = Telemetry(verbose=self._verbose, stderr=stream, redactor=self._secrets,
                              shared=self._trace, listener=listener)
        runtime = Runtime(self._program, handlers=self._handlers, config=self.config,
                          env=environ, telemetry=telemetry, stderr=stream,
                          interactive=self._interactive, base_dir=self._base_dir,
                          shared=self._shared, approve=self._approve)
        runtime.concurrency_limits = dict(self._limits)  # a module's limit covers every run
        if self._ask_setup is not None:
            from luma.models.ask import AskEngine

            runtime.ask_engine = AskEngine(runtime, setup=self._ask_setup, shared_http=True)
        return runtime

    def check_api_keys(self, runtime: Runtime, agent: str | None, fn: str | None) -> None:
        """Every model an ``ask`` of this run can reach has its API key, before anything runs
        (a replay needs none); raises :class:`StartError` ``MODEL_AUTH``."""
        engine = runtime.ask_engine
        if engine is None or self._replaying:
            return
        from luma.models.resolve import reachable_models, require_api_key

        reachable = self._reachable.get((agent, fn))
        if reachable is None:  # the models are known at load: worked out once per method
            reachable = self._reachable[(agent, fn)] = reachable_models(
                self._program, engine.models, agent, fn)
        problems = []
        for settings in reachable:
            try:
                require_api_key(settings, runtime.env)
            except LumaError as exc:
                problems.append(exc.message)
        if problems:
            raise StartError(problems, code="MODEL_AUTH")

    async def execute(self, agent: str | None, fn: str | None, arguments: dict[str, Any], *,
                      output_type: Any = None, on_event: EventCallback | None = None,
                      env: Mapping[str, str] | None = None,
                      runtime: Runtime | None = None) -> Any:
        """One run of ``agent.fn(arguments)`` (the top-level statements when ``agent`` is
        None). Luma errors are raised as :class:`RunError`; cancelling the awaiting task
        cancels the run."""
        _checked_env(env, "env")
        adapter = self._adapter(output_type) if output_type is not None else None
        events = _EventRelay(on_event) if on_event is not None else None
        if runtime is None:
            runtime = self.new_runtime(env, events.deliver if events is not None else None)
            try:
                self.check_api_keys(runtime, agent, fn)
            except StartError as exc:
                runtime.telemetry.close()
                raise RunError("MODEL_AUTH", exc.lines[0],
                               details={"problems": exc.lines} if len(exc.lines) > 1
                               else None) from None
        if events is not None:
            events.runtime = runtime
        try:
            result = await self._interpret(runtime, agent, fn, arguments)
        except LumaError as err:
            raise _run_error(err, self._checked.source) from None
        finally:
            try:
                if events is not None:
                    await events.drain()
            finally:
                await runtime.aclose()
                runtime.telemetry.close()
        if adapter is not None:
            return self._convert(result, adapter, output_type, agent, fn)
        return result

    async def _interpret(self, runtime: Runtime, agent: str | None, fn: str | None,
                         arguments: dict[str, Any]) -> Any:
        from luma.runtime.interpreter import Interpreter

        interpreter = Interpreter(runtime)
        if agent is None:
            if arguments:
                raise ArgumentsRefused("ARGUMENT_INVALID", "the top-level statements take no "
                                       "arguments")
            return await interpreter.run_top_level()
        assert fn is not None
        try:
            interpreter.check_arguments(agent, fn, arguments)
        except LumaError as err:
            raise ArgumentsRefused(err.code, _message_of(err), details=err.details) from None
        return await interpreter.call_method(agent, fn, arguments)

    def _convert(self, value: Any, adapter: Any, output_type: Any, agent: str | None,
                 fn: str | None) -> Any:
        try:
            return adapter.validate_python(value)
        except Exception as exc:
            from pydantic import ValidationError

            if not isinstance(exc, ValidationError):
                raise
            where = f"{agent}.{fn}" if agent is not None else "the top-level statements"
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}"
                for e in exc.errors(include_url=False)[:5])
            name = getattr(output_type, "__name__", repr(output_type))
            raise RunError("OUTPUT_TYPE_INVALID", f"The result of {where} does not fit "
                           f"{name}: {self._secrets.redact(problems)}",
                           details={"type": name}) from None

    def _adapter(self, output_type: Any) -> Any:
        with self._adapters_lock:
            adapter = self._adapters.get(output_type)
            if adapter is None:
                from pydantic import PydanticUserError, TypeAdapter

                try:
                    adapter = TypeAdapter(output_type)
                except (PydanticUserError, TypeError) as exc:  # before anything runs
                    raise TypeError(f"output_type {output_type!r} is not a type pydantic can "
                                    f"validate: {str(exc).splitlines()[0]}") from None
                self._adapters[output_type] = adapter
            return adapter


class _EventRelay:
    """Hands a run's events to the caller's ``on_event``: a sync callback is called in place,
    an async one is scheduled on the run's loop and awaited before the run returns. A callback
    that raises is reported once as a warning and not called again in that run."""

    def __init__(self, callback: EventCallback) -> None:
        self.callback = callback
        self.runtime: Runtime | None = None
        self.failed = False
        self.pending: set[asyncio.Future[Any]] = set()
        self.loop = asyncio.get_running_loop()
        self.thread = threading.get_ident()

    def deliver(self, event: dict[str, Any]) -> None:
        if self.failed:
            return
        if threading.get_ident() != self.thread:  # a handler's worker thread
            self.loop.call_soon_threadsafe(self.deliver, event)
            return
        try:
            answer = self.callback(event)
        except Exception as exc:
            self._failed(exc)
            return
        if inspect.isawaitable(answer):
            future = asyncio.ensure_future(answer)
            self.pending.add(future)
            future.add_done_callback(self._landed)

    def _landed(self, future: asyncio.Future[Any]) -> None:
        self.pending.discard(future)
        if not future.cancelled() and future.exception() is not None and not self.failed:
            exc = future.exception()
            assert exc is not None
            self._failed(exc)

    def _failed(self, exc: BaseException) -> None:
        self.failed = True
        if self.runtime is not None:
            self.runtime.warn("EVENT_CALLBACK", f"the on_event callback raised "
                              f"{type(exc).__name__}: {exc}; it gets no more events of this run")

    async def drain(self) -> None:
        while self.pending:
            await asyncio.gather(*list(self.pending), return_exceptions=True)
