"""Diagnostics are data: phases append them to a list and never print; the CLI renders them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from luma.syntax.source import Span

Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class Related:
    """A secondary span with its own short label, e.g. "first declared here"."""

    span: Span
    message: str


@dataclass(frozen=True, slots=True)
class Diagnostic:
    severity: Severity
    code: str
    message: str
    span: Span
    hint: str | None = None
    related: tuple[Related, ...] = ()

    @property
    def is_error(self) -> bool:
        return self.severity == "error"


@dataclass(slots=True)
class DiagnosticBag:
    """Collects the diagnostics of one phase run."""

    items: list[Diagnostic] = field(default_factory=list)

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
