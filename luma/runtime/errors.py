"""Luma errors at run time: one error type with codes, and the one host code may raise."""

from __future__ import annotations

from typing import Any

from luma.runtime.sealed import sealed
from luma.syntax.source import Span


class LumaError(Exception):
    """A Luma run-time error: ``{code, message, retryable, tool?, details?}``.

    ``extra`` holds the other fields of a typed tool error (validated against the tool's
    ``error:`` schema), so a ``catch`` sees the error object as the handler built it. ``span``
    is the statement where the error surfaced, filled in by the interpreter.
    """

    def __init__(self, code: str, message: str, *, retryable: bool = False,
                 tool: str | None = None, details: Any = None,
                 extra: dict[str, Any] | None = None, span: Span | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable
        self.tool = tool
        self.details = details
        self.extra = dict(extra or {})
        self.span = span

    def to_value(self) -> dict[str, Any]:
        """The error as the JSON object a ``catch`` binds."""
        value: dict[str, Any] = dict(self.extra)
        value.update(code=self.code, message=self.message, retryable=self.retryable)
        if self.tool is not None:
            value["tool"] = self.tool
        if self.details is not None:
            value["details"] = self.details
        return value

    def __repr__(self) -> str:
        return f"LumaError({self.code!r}, {self.message!r})"


class StartError(Exception):
    """The program cannot start; ``lines`` are shown on stderr, one per problem, as
    ``error: line`` (``error[CODE]: line`` when the problem has a Luma error code)."""

    def __init__(self, lines: list[str], code: str | None = None) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines
        self.code = code


@sealed()
class LumaToolError(Exception):
    """Raised by a tool handler to report a typed error.

    ``retryable=True`` lets the runtime retry the call as the tool's ``retries`` allows;
    ``retryable=False`` stops both the tool retries and the ``ask`` retry loop. Extra keyword
    arguments become fields of the error object (validated against the tool's ``error:`` schema).

    The class is sealed (``luma.runtime.sealed``): a tool module that imports it reaches nothing
    of Luma through it.
    """

    def __init__(self, code: str = "TOOL_ERROR", message: str = "", retryable: bool = False,
                 details: Any = None, **extra: Any) -> None:
        super().__init__(message or code)
        self.code = code
        self.message = message or code
        self.retryable = retryable
        self.details = details
        self.extra = extra

    def fields(self) -> dict[str, Any]:
        """The error object the handler built: ``code``, ``message``, ``retryable``, ``details``
        when given, and the extra fields."""
        value: dict[str, Any] = dict(self.extra)
        value.update(code=self.code, message=self.message, retryable=self.retryable)
        if self.details is not None:
            value["details"] = self.details
        return value
