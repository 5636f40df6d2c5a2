"""A loaded program (:class:`Program`) and its runs: each run a runtime of its own over the
program's shared state, its events handed to the caller as they happen."""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, TypeVar, overload

from luma.api.errors import ArgumentsRefused, DiagnosticInfo, RunError, _message_of, \
    _run_error, compile_error
from luma.runtime.errors import LumaError, StartError

if TYPE_CHECKING:
    from luma.api.tools import Contract
    from luma.compile import CheckedFile
    from luma.models.ask_setup import AskSetup
    from luma.runtime.call_limit import CallLimit
    from luma.runtime.engine import Runtime
    from luma.runtime.secrets import SecretRedactor
    from luma.runtime.shared import SharedState
    from luma.runtime.telemetry import SharedTrace

T = TypeVar("T")
EventCallback = Callable[[dict[str, Any]], "None | Awaitable[None]"]
"""``on_event(event)``: each telemetry event of a run as it happens (sync or async)."""
ApproveCallback = Callable[[str, Any], "bool | Awaitable[bool]"]
"""``approve(tool_name, input)`` → whether one ``approval``-policy call may run."""


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


class Program:
    """A loaded program. Made by :func:`load`/:func:`loads`; run it as often as needed, from
    concurrent tasks and threads; :meth:`close` (or ``async with``/``with``) releases it."""

    def __init__(self, checked: CheckedFile, *, config: Any, handlers: dict[str, Any],
                 limits: dict[str, CallLimit], shared: SharedState,
                 ask_setup: AskSetup | None, secrets: SecretRedactor,
                 env: Mapping[str, str] | None, approve: ApproveCallback | None,
                 trace: SharedTrace | None, stderr: IO[str] | None, verbose: bool,
                 base_dir: str, interactive: bool | None, replaying: bool,
                 datasources: Any = None, mcp_hosts: list[Any] | None = None) -> None:
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
        self._datasources = datasources  # luma.data.bridges.Datasources: their pools
        self._mcp_hosts = mcp_hosts or []  # luma.runtime.mcp_host.McpServerHost: servers
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

    def contracts(self, agent: str | None = None) -> list[Contract]:
        """The tools a client may call, sorted by name (see :mod:`luma.api.tools`): every tool,
        or, for ``agent``, its ``tools`` its policies do not hide and its methods. Raises
        :class:`RunError` ``AGENT_NOT_FOUND``."""
        from luma.api.tools import contracts

        try:
            return contracts(self._program, self._shared.schemas, agent)
        except LumaError as err:
            raise RunError(err.code, err.message) from None

    async def call_contract(self, contract: Contract, arguments: Any, *,
                            agent: str | None = None, env: Mapping[str, str] | None = None,
                            approve: ApproveCallback | None = None) -> Any:
        """One call of ``contract`` as ``agent`` calls it (None: the top level): a tool runs
        through the whole tool pipeline, a method is one run. ``approve`` decides this call's
        ``approval``-policy calls (instead of the program's). Raises :class:`RunError`."""
        if contract.agent_method is not None:
            owner, fn = contract.agent_method
            if not isinstance(arguments, dict):
                raise RunError("ARGUMENT_INVALID", f"The arguments of {contract.name} must be "
                               "an object.")
            return await self.execute(owner, fn, arguments, env=env)
        from luma.runtime.calls import CallContext, MethodCall

        runtime = self.new_runtime(env)
        if approve is not None:
            runtime.approve = approve
            runtime.interactive = True
        decl = next((a for a in self._program.agents if a.name == agent), None)
        try:
            return await runtime.pipeline.call(contract.name, arguments,
                                               CallContext(decl, MethodCall(decl, None)))
        except LumaError as err:
            raise RunError(err.code, err.message, retryable=err.retryable, tool=err.tool,
                           details=err.details) from None
        finally:
            await runtime.aclose()
            runtime.telemetry.close()

    # -------------------------------------------------------------------------- the lifetime
    async def aclose(self) -> None:
        """Release the HTTP clients and the trace file. The program cannot run afterwards."""
        if self._closed:
            return
        self._closed = True
        self._close_datasources()
        await self._shared.close_http_client()
        self._shared.drop_http_clients()  # of loops that are gone: their sockets went with them
        if self._trace is not None:
            self._trace.close()

    def _close_datasources(self) -> None:
        if self._datasources is not None:
            self._datasources.close()  # cancels what still runs on the database, then closes
        for host in self._mcp_hosts:
            host.close()  # the MCP servers Luma started

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
            self._close_datasources()
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
