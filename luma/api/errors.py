"""The errors of the Python API: what :func:`luma.load` raises (:class:`CompileError`,
:class:`LoadError`) and what a run raises (:class:`RunError`, located in the source)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from luma.runtime.errors import LumaError

if TYPE_CHECKING:
    from luma.compile import CheckedFile
    from luma.syntax.source import SourceFile, Span


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
