"""Source files and spans. A span is offsets; lines and columns are computed only to render."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Span:
    """A half-open range ``[start, end)`` of character offsets in one source file."""

    file: str
    start: int
    end: int

    def to(self, other: Span) -> Span:
        """The span from the start of this one to the end of ``other``."""
        return Span(self.file, self.start, max(self.end, other.end))


@dataclass(slots=True)
class SourceFile:
    """The text of one file and the offsets where its lines start."""

    path: str
    text: str
    _line_starts: list[int] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        starts = [0]
        text = self.text
        i = text.find("\n")
        while i >= 0:
            starts.append(i + 1)
            i = text.find("\n", i + 1)
        self._line_starts = starts

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based line and column of ``offset`` (clamped to the file)."""
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self._line_starts, offset) - 1
        return line + 1, offset - self._line_starts[line] + 1

    def line_text(self, line: int) -> str:
        """The text of 1-based ``line`` without its newline."""
        if line < 1 or line > len(self._line_starts):
            return ""
        start = self._line_starts[line - 1]
        end = self.text.find("\n", start)
        return (self.text[start:] if end < 0 else self.text[start:end]).rstrip("\r")

    @property
    def line_count(self) -> int:
        return len(self._line_starts)

    def span(self, start: int, end: int) -> Span:
        return Span(self.path, start, end)
