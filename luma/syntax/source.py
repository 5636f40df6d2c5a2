"""Source files and spans. A span is offsets; lines and columns are computed only to render."""

from __future__ import annotations

import bisect

from luma.record import Record


class Span(Record):
    """A half-open range ``[start, end)`` of character offsets in one source file."""

    __slots__ = __match_args__ = ("file", "start", "end")

    def __init__(self, file: str, start: int, end: int) -> None:
        self.file = file
        self.start = start
        self.end = end

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            assert isinstance(other, Span)
            return (self.file, self.start, self.end) == (other.file, other.start, other.end)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.file, self.start, self.end))

    def to(self, other: Span) -> Span:
        """The span from the start of this one to the end of ``other``."""
        return Span(self.file, self.start, max(self.end, other.end))


class SourceFile(Record):
    """The text of one file and the offsets where its lines start."""

    __slots__ = ("path", "text", "_line_starts")
    __match_args__ = ("path", "text")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text
        self._line_starts: list[int] | None = None  # found when first asked: a clean check never

    @property
    def line_starts(self) -> list[int]:
        """The offset where each line starts."""
        starts = self._line_starts
        if starts is None:
            starts = [0]
            text = self.text
            i = text.find("\n")
            while i >= 0:
                starts.append(i + 1)
                i = text.find("\n", i + 1)
            self._line_starts = starts
        return starts

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based line and column of ``offset`` (clamped to the file)."""
        offset = max(0, min(offset, len(self.text)))
        starts = self.line_starts
        line = bisect.bisect_right(starts, offset) - 1
        return line + 1, offset - starts[line] + 1

    def line_offset(self, line: int) -> int:
        """Where 1-based ``line`` starts (clamped: 0 before the first, the end after the last)."""
        starts = self.line_starts
        if line < 1:
            return 0
        return starts[line - 1] if line <= len(starts) else len(self.text)

    def line_text(self, line: int) -> str:
        """The text of 1-based ``line`` without its newline."""
        starts = self.line_starts
        if line < 1 or line > len(starts):
            return ""
        start = starts[line - 1]
        end = self.text.find("\n", start)
        return (self.text[start:] if end < 0 else self.text[start:end]).rstrip("\r")

    @property
    def line_count(self) -> int:
        return len(self.line_starts)

    def span(self, start: int, end: int) -> Span:
        return Span(self.path, start, end)
