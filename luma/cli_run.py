"""The command line's run of a compiled program (CLI.md "Running a program"): ``luma.api``
starts it, this module chooses what runs, runs it in its own event loop, prints and exits.

Start-up is all-or-nothing: the config, the tool modules and every handler are checked before
any statement runs (exit 2). Then the chosen code runs; its result is printed to stdout as JSON
(exit 0), or a Luma error is printed to stderr with where it happened in the source (exit 1).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TextIO, cast

from luma.compile import CheckedFile
from luma.runtime.errors import LumaError, StartError
from luma.runtime.values import json_problem

if TYPE_CHECKING:
    from luma.api import Program
    from luma.runtime.secrets import SecretRedactor

EXIT_OK, EXIT_FAILED, EXIT_START = 0, 1, 2
RESULT_INVALID = "RESULT_INVALID"


@dataclass(slots=True)
class RunOptions:
    tool_modules: list[str] = field(default_factory=list)
    config_path: str | None = None
    agent: str | None = None
    fn: str = "run"
    input: str | None = None                      # JSON text or @FILE
    args: list[tuple[str, str]] = field(default_factory=list)
    model: str | None = None
    trace: str | None = None
    record: str | None = None
    replay: str | None = None
    verbose: bool = False
    trace_values: bool = True                     # --trace-no-values: False


def run_checked(checked: CheckedFile, options: RunOptions, *, stdout: IO[str] | None = None,
                stderr: IO[str] | None = None, whole_process: bool = False) -> int:
    """Run a program that compiled; returns the exit code.

    Every text the run writes, the result included, passes the run's one
    :class:`~luma.runtime.secrets.SecretRedactor`; when the run writes to the process's own
    streams (``stdout``/``stderr`` not given), they are wrapped for its duration, so what a
    handler prints is scrubbed too. While it runs, ``sys.stdout`` writes to stderr (a handler's
    ``print`` cannot mix into the result). Work still running when the program ends is
    cancelled and, if it does not stop within a second, abandoned and named on stderr; with
    ``whole_process`` (the ``luma`` command) the process then ends at once rather than wait
    for it at interpreter exit.
    """
    from luma.runtime.secrets import RedactingStream, SecretRedactor

    secrets = SecretRedactor()
    out = RedactingStream.wrap(stdout if stdout is not None else sys.stdout, secrets)
    err = RedactingStream.wrap(stderr if stderr is not None else sys.stderr, secrets)
    saved = sys.stdout, sys.stderr
    if stdout is None:
        sys.stdout = cast(TextIO, out)
    if stderr is None:
        sys.stderr = cast(TextIO, err)
    try:
        return _run_checked(checked, options, out, err, secrets, whole_process)
    finally:
        sys.stdout, sys.stderr = saved


def _run_checked(checked: CheckedFile, options: RunOptions, out: IO[str], err: IO[str],
                 secrets: SecretRedactor, whole_process: bool) -> int:
    from luma.runtime.loop import RunLoop, handler_stdout_to, report_abandoned

    assert checked.program is not None
    with handler_stdout_to(err):
        try:
            program, target = start_program(checked, options, err, secrets)
        except StartError as exc:
            _write_start_error(exc, err)
            return EXIT_START
        export = _export_spans(err, secrets)  # after the tool modules: one may set up OTel
        try:
            runtime = program.new_runtime()
            program.check_api_keys(runtime, target.agent, target.fn)
        except StartError as exc:
            program.close()
            if export is not None:
                export.close()
            _write_start_error(exc, err)
            return EXIT_START
        session = RunLoop(runtime, err)
        try:
            code = _run_and_print(session, program, runtime, target, checked, out, err,
                                  secrets)
        finally:
            try:
                abandoned = session.close()
            finally:
                runtime.telemetry.close()
                program.close()
                if export is not None:
                    export.close()  # the last spans, in bounded time
        report_abandoned(abandoned, err)
    if abandoned and whole_process:
        _exit_now(code, out, err)
    return code


def _run_and_print(session: Any, program: Program, runtime: Any, target: Target,
                   checked: CheckedFile, out: IO[str], err: IO[str],
                   secrets: SecretRedactor) -> int:
    from luma.api import ArgumentsRefused
    from luma.runtime.loop import EXIT_INTERRUPTED, Interrupted

    try:
        result = session.run(_execute(program, runtime, target))
    except LumaError as exc:
        err.write(describe_error(exc, checked))
        return EXIT_START if isinstance(exc, ArgumentsRefused) else EXIT_FAILED
    except Interrupted:
        err.write("luma: interrupted\n")
        return EXIT_INTERRUPTED
    problem = json_problem(result)
    if problem is not None:
        where = f" at {problem[0]}" if problem[0] else ""
        err.write(f"error[{RESULT_INVALID}]: the program's result is not a JSON value{where}: "
                  f"{problem[1]}\n")
        return EXIT_FAILED
    text = json.dumps(result, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if secrets:
        text = secrets.redact(text)  # the bytes below bypass the redacting stream
    try:
        buffer = getattr(out, "buffer", None)
        if buffer is None:
            out.write(text)
        else:  # JSON is UTF-8 whatever the locale's encoding
            out.flush()
            buffer.write(text.encode("utf-8"))
        out.flush()
    except BrokenPipeError:
        raise  # the reader went away: the command ends quietly
    except (OSError, ValueError) as exc:  # a full disk, or stdout closed under the run
        from luma.outputs import discard_stream

        discard_stream(out)
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        err.write(f"error: cannot write the result to stdout: {reason}\n")
        return EXIT_FAILED
    return EXIT_OK


def _export_spans(err: IO[str], secrets: SecretRedactor) -> Any:
    """OpenTelemetry spans sent by OTLP/HTTP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set
    (RUNTIME.md §7); None otherwise."""
    from luma.runtime.otel import export_from_environment

    def warn(text: str) -> None:
        try:
            err.write(text + "\n")
            err.flush()
        except (OSError, ValueError):
            pass

    return export_from_environment(os.environ, warn, secrets.add)


def _write_start_error(exc: StartError, err: IO[str]) -> None:
    prefix = f"error[{exc.code}]" if exc.code else "error"
    for line in exc.lines:
        err.write(f"{prefix}: {line}\n")


def _exit_now(code: int, out: IO[str], err: IO[str]) -> None:
    """End the process without waiting for abandoned threads (interpreter exit joins some)."""
    import os

    for stream in (out, err, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


@dataclass(slots=True)
class Target:
    """What runs: the top-level statements, or ``agent.fn(args)``."""

    agent: str | None
    fn: str | None
    args: dict[str, Any]


def start_program(checked: CheckedFile, options: RunOptions, stderr: IO[str],
                  secrets: SecretRedactor | None = None) -> tuple[Program, Target]:
    """:func:`luma.api.start` with the command line's options, and what it chose to run
    (chosen once the handlers are known, before the trace and the models are opened)."""
    from luma.api import start

    chosen: list[Target] = []
    program = start(checked, tool_modules=options.tool_modules, config=options.config_path,
                    model=options.model, trace=options.trace, record=options.record,
                    replay=options.replay, stderr=stderr, verbose=options.verbose,
                    secrets=secrets, trace_values=options.trace_values,
                    before_open=lambda: chosen.append(choose_target(checked, options)))
    return program, chosen[0]


def prepare(checked: CheckedFile, options: RunOptions, stderr: IO[str],
            secrets: SecretRedactor | None = None) -> tuple[Any, Target]:
    """Everything before the first statement: config, modules, handlers, what runs, and the
    runtime of the run. ``secrets`` is the run's redactor (a new one if None)."""
    program, target = start_program(checked, options, stderr, secrets)
    runtime = program.new_runtime()
    try:
        program.check_api_keys(runtime, target.agent, target.fn)
    except StartError:
        runtime.telemetry.close()
        program.close()
        raise
    return runtime, target


def codegen_inputs(checked: CheckedFile, options: RunOptions) -> dict[Path, str]:
    """:func:`program_inputs` for generating tool types, which does not need the config: one
    that cannot be read protects only itself and the command line's tool modules."""
    from luma.api import program_inputs
    from luma.runtime.config import ConfigError, find_config

    program_path = Path(checked.source.path)
    try:
        config = find_config(program_path, options.config_path)
    except ConfigError:
        config = None
    return program_inputs(program_path, options.tool_modules, options.config_path, config)


def choose_target(checked: CheckedFile, options: RunOptions) -> Target:
    """``--agent`` → that agent's method; else the top-level statements; else the single
    agent's ``run``."""
    program = checked.program
    assert program is not None
    args = _arguments(options)
    agents = {a.name: a for a in program.agents}
    if options.agent is not None:
        agent = agents.get(options.agent)
        if agent is None:
            from luma.syntax.diagnostics import did_you_mean

            hint = did_you_mean(options.agent, list(agents))
            raise StartError([f"unknown agent '{options.agent}'" + (f"; {hint}" if hint else "")])
        if agent.fn(options.fn) is None:
            names = ", ".join(f.name for f in agent.fns) or "none"
            raise StartError([f"agent '{agent.name}' has no method '{options.fn}' "
                              f"(its methods: {names})"])
        return Target(agent.name, options.fn, args)
    if program.statements:
        if args:
            raise StartError(["--input/--arg give arguments to an agent method, but this program "
                              "runs its top-level statements; add --agent NAME"])
        return Target(None, None, {})
    if len(agents) == 1:
        (agent,) = agents.values()
        if agent.fn(options.fn) is None:
            raise StartError([f"agent '{agent.name}' has no method '{options.fn}'"])
        return Target(agent.name, options.fn, args)
    if not agents:
        raise StartError(["nothing to run: the program has no top-level statements and no agent"])
    raise StartError([f"nothing to run: the program has {len(agents)} agents and no top-level "
                      "statements; choose one with --agent NAME"])


def _arguments(options: RunOptions) -> dict[str, Any]:
    from luma.runtime.json_text import DuplicateKeyError, NotUtf8Error, decode_utf8, loads

    args: dict[str, Any] = {}
    if options.input is not None:
        text = options.input
        if text.startswith("@"):
            try:
                text = decode_utf8(Path(text[1:]).read_bytes())
            except OSError as exc:
                raise StartError([f"--input: cannot read {text[1:]}: {exc.strerror or exc}"]) from None
            except NotUtf8Error as exc:
                raise StartError([f"--input: {text[1:]} {exc}"]) from None
        try:
            value = loads(text)
        except json.JSONDecodeError as exc:
            raise StartError([f"--input is not valid JSON: {exc.msg} at line {exc.lineno} "
                              f"column {exc.colno}"]) from None
        except DuplicateKeyError as exc:
            raise StartError([f"--input: duplicate key '{p}'" for p in exc.paths]) from None
        except ValueError as exc:
            raise StartError([f"--input is not valid JSON: {exc}"]) from None
        if not isinstance(value, dict):
            raise StartError(["--input must be a JSON object of argument names to values"])
        args.update(value)
    for key, raw in options.args:
        try:
            args[key] = loads(raw)
        except json.JSONDecodeError:
            args[key] = raw
        except DuplicateKeyError as exc:
            raise StartError([f"--arg {key}: duplicate key '{p}'" for p in exc.paths]) from None
        except ValueError as exc:
            raise StartError([f"--arg {key}: {exc}"]) from None
    return args


async def _execute(program: Program, runtime: Any, target: Target) -> Any:
    try:
        return await program.execute(target.agent, target.fn, target.args, runtime=runtime)
    finally:
        await program.aclose()  # in the run's loop: its HTTP client belongs to it


def describe_error(exc: LumaError, checked: CheckedFile) -> str:
    """``error[CODE]: message`` and where in the ``.luma`` source it happened."""
    message = exc.message
    if message.startswith(f"[{exc.code}] "):  # the pipeline's messages carry their code already
        message = message[len(exc.code) + 3:]
    lines = [f"error[{exc.code}]: {message}"]
    if exc.span is not None:
        source = checked.source
        line, col = source.line_col(exc.span.start)
        lines.append(f"  --> {source.path}:{line}:{col}")
        text = source.line_text(line)
        if text.strip():
            lines.append(f"   | {text.strip()}")
    return "\n".join(lines) + "\n"

