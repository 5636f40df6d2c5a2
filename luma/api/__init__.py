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

import os
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from luma.api.errors import (
    ArgumentsRefused,
    CompileError,
    DiagnosticInfo,
    LoadError,
    Location,
    RunError,
    compile_error,
)
from luma.api.program import ApproveCallback, EventCallback, Program, _checked_env
from luma.runtime.errors import LumaError, StartError

if TYPE_CHECKING:
    from luma.compile import CheckedFile
    from luma.models.ask_setup import AskSetup
    from luma.runtime.call_limit import CallLimit
    from luma.runtime.secrets import SecretRedactor

__all__ = ["ApproveCallback", "ArgumentsRefused", "CompileError", "DiagnosticInfo",
           "EventCallback", "LoadError", "Location", "Program", "RunError", "compile_error",
           "guard_outputs", "load", "loads", "program_inputs", "start"]


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


def start(checked: CheckedFile, *, tool_modules: Iterable[str | os.PathLike[str]] = (),
          tools: Mapping[str, Callable[..., Any]] | None = None,
          config: str | os.PathLike[str] | Mapping[str, Any] | None = None,
          model: str | None = None, trace: str | os.PathLike[str] | None = None,
          record: str | os.PathLike[str] | None = None,
          replay: str | os.PathLike[str] | None = None,
          env: Mapping[str, str] | None = None, approve: ApproveCallback | None = None,
          stderr: IO[str] | None = None, verbose: bool = False,
          secrets: SecretRedactor | None = None, trace_values: bool = True,
          before_open: Callable[[], None] | None = None,
          interactive: bool | None = None, script: list[Any] | None = None,
          stand_in: Callable[[str], Callable[..., Any]] | None = None) -> Program:
    """Start a program that compiled; raises :class:`StartError`. ``secrets`` is the
    redactor of every run (the command line's, which also guards its streams);
    ``before_open`` runs after the handlers are known and before the trace, the stores and
    the models are opened (the command line chooses what to run there); ``stand_in(name)``
    is the handler of a tool that has none (``luma test``, where a test may mock it)."""
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
    handlers, limits, bridges = _handlers(program, program_path, modules, loaded_config, tools)
    served, offered, mcp_hosts = _mcp_handlers(program, loaded_config, program_path, handlers,
                                               environ, secrets)
    try:
        return _start_with_handlers(checked, program, program_path, loaded_config, handlers,
                                    served, offered, mcp_hosts, limits, bridges, environ,
                                    secrets, trace_path, record_path, replay_path,
                                    before_open=before_open, model=model, env=env,
                                    approve=approve, stderr=stderr, verbose=verbose,
                                    trace_values=trace_values,
                                    interactive=interactive, script=script,
                                    stand_in=stand_in)
    except BaseException:
        for host in mcp_hosts:
            host.close()
        raise


def _start_with_handlers(checked: CheckedFile, program: Any, program_path: Path,
                         loaded_config: Any, handlers: dict[str, Any], served: dict[str, Any],
                         offered: list[str], mcp_hosts: list[Any], limits: Any, bridges: Any,
                         environ: Mapping[str, str], secrets: SecretRedactor,
                         trace_path: str | None, record_path: str | None,
                         replay_path: str | None, *, before_open: Callable[[], None] | None,
                         model: str | None, env: Mapping[str, str] | None,
                         approve: ApproveCallback | None, stderr: IO[str] | None,
                         verbose: bool, interactive: bool | None,
                         script: list[Any] | None, trace_values: bool,
                         stand_in: Callable[[str], Callable[..., Any]] | None) -> Program:
    from luma.runtime.shared import SharedState

    handlers.update(served)
    missing = [t.name for t in program.tools if t.kind == "tool" and t.name not in handlers]
    if stand_in is not None:
        handlers.update((name, stand_in(name)) for name in missing)
        missing = []
    if missing:
        from luma.syntax.diagnostics import did_you_mean

        hints = {name: did_you_mean(name, offered) if offered else None for name in missing}
        raise StartError([f"'{name}' is not registered in the tool registry."
                          + (f" ({hints[name]})" if hints[name] else "") for name in missing])
    bridged = [t for t in program.tools if t.kind != "tool" and t.name in handlers]
    if bridged:
        raise StartError([f"'{t.name}' is a {t.kind}: its handler is the bridge of its "
                          "datasource; it takes no other handler." for t in bridged])
    if before_open is not None:
        before_open()

    shared_trace = None
    if trace_path is not None:
        from luma.runtime.telemetry import SharedTrace

        try:
            shared_trace = SharedTrace(trace_path, values=trace_values)
        except OSError as exc:
            raise StartError([f"cannot write the trace file {trace_path}: "
                              f"{exc.strerror or exc}"]) from None
    data = None
    try:
        base_dir = str(program_path.resolve().parent)
        data = _open_datasources(program, loaded_config, bridges, base_dir, environ, secrets)
        handlers.update(data.handlers)
        shared = SharedState(program)
        ask_setup = _ask_setup(program, loaded_config, base_dir, secrets, environ, model,
                               record_path, replay_path, script)
        result = Program(checked, config=loaded_config, handlers=handlers, limits=limits,
                         shared=shared, ask_setup=ask_setup, secrets=secrets, env=env,
                         approve=approve, trace=shared_trace, stderr=stderr, verbose=verbose,
                         base_dir=base_dir, interactive=interactive,
                         replaying=replay_path is not None, datasources=data,
                         mcp_hosts=mcp_hosts)
        result.open_stores()
    except LumaError as exc:
        if shared_trace is not None:
            shared_trace.close()
        if data is not None:
            data.close()
        raise StartError([exc.message]) from None
    except StartError:
        if shared_trace is not None:
            shared_trace.close()
        if data is not None:
            data.close()
        raise
    return result


def _open_datasources(program: Any, config: Any, bridges: dict[str, Any], base_dir: str,
                      env: Mapping[str, str], secrets: SecretRedactor) -> Any:
    """The bridges of the program's datasources and the handlers of its queries and commands
    (DATA.md §4), shared by every run; a datasource without a bridge, or a database that
    cannot be reached, stops the start here."""
    from luma.data.bridges import DataStartError, Datasources, open_datasources

    if not program.datasources and not getattr(config, "datasources", None) and not bridges:
        return Datasources()
    try:
        return open_datasources(program, config, bridges, base_dir, env,
                                keep_secret=secrets.add, redact=secrets.redact)
    except DataStartError as exc:
        raise StartError(exc.lines) from None


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


def _handlers(program: Any, program_path: Path, modules: list[str], config: Any,
              tools: Mapping[str, Callable[..., Any]] | None
              ) -> tuple[dict[str, Any], dict[str, CallLimit], dict[str, Any]]:
    """The handlers of the config's and the given tool modules, checked against their
    manifests and ``tool_module_policy``, then the Python callables of ``tools``; each
    tool's concurrency limit; and the modules' datasource bridges."""
    from luma.runtime.manifests import load_program_modules

    loaded = load_program_modules(program_path.resolve().parent, config, modules)
    for warning in loaded.warnings:
        sys.stderr.write(f"warning: {warning}\n")
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
    return handlers, loaded.limits, dict(loaded.registry.datasources)


def _mcp_handlers(program: Any, config: Any, program_path: Path, handled: dict[str, Any],
                  environ: Mapping[str, str], secrets: SecretRedactor
                  ) -> tuple[dict[str, Any], list[str], list[Any]]:
    """The handlers of the config's MCP servers (``{"mcp": …}`` entries of ``tool_modules``)
    and the tool names they offer."""
    if config is None or not config.mcp_servers():
        return {}, [], []
    from luma.runtime.mcp_host import open_mcp_servers

    return open_mcp_servers(program, config, str(program_path.resolve().parent), handled,
                            environ, secrets.redact)


def _ask_setup(program: Any, config: Any, base_dir: str, secrets: SecretRedactor,
               env: Mapping[str, str], model: str | None, record: str | None,
               replay: str | None, script: list[Any] | None) -> AskSetup | None:
    try:
        from luma.models.ask_setup import AskSetup
    except ImportError:
        return None
    return AskSetup.build(program, config, base_dir=base_dir, secrets=secrets, env=env,
                          default_model=model, record=record, replay=replay, script=script)


# ----------------------------------------------------------------------------------- running
