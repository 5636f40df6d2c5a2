"""Diagnostics are data: phases append them to a list and never print; the CLI renders them."""

from __future__ import annotations

from luma.record import Record
from luma.syntax.source import Span

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Literal

    Severity = Literal["error", "warning"]
else:
    Severity = str


class Related(Record):
    """A secondary span with its own short label, e.g. "first declared here"."""

    __slots__ = __match_args__ = ("span", "message")

    def __init__(self, span: Span, message: str) -> None:
        self.span = span
        self.message = message


class Diagnostic(Record):
    __slots__ = __match_args__ = ("severity", "code", "message", "span", "hint", "related")

    def __init__(self, severity: Severity, code: str, message: str, span: Span,
                 hint: str | None = None, related: tuple[Related, ...] = ()) -> None:
        self.severity = severity
        self.code = code
        self.message = message
        self.span = span
        self.hint = hint
        self.related = related

    @property
    def is_error(self) -> bool:
        return self.severity == "error"


class DiagnosticBag(Record):
    """Collects the diagnostics of one phase run."""

    __slots__ = __match_args__ = ("items",)
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, items: list[Diagnostic] | None = None) -> None:
        self.items = [] if items is None else items

    def error(self, code: str, message: str, span: Span, hint: str | None = None,
              related: tuple[Related, ...] = ()) -> None:
        self.items.append(Diagnostic("error", code, message, span, hint, related))

    def warning(self, code: str, message: str, span: Span, hint: str | None = None,
                related: tuple[Related, ...] = ()) -> None:
        self.items.append(Diagnostic("warning", code, message, span, hint, related))

    @property
    def has_errors(self) -> bool:
        return any(d.is_error for d in self.items)


def did_you_mean(name: str, candidates: "list[str] | tuple[str, ...] | set[str]") -> str | None:
    """A ``did you mean 'x'?`` hint for the closest candidate, or None."""
    import difflib

    matches = difflib.get_close_matches(name, sorted(candidates), n=1, cutoff=0.6)
    if not matches:
        lowered = {c.lower(): c for c in candidates}
        if name.lower() in lowered:
            matches = [lowered[name.lower()]]
    return f"did you mean '{matches[0]}'?" if matches else None
