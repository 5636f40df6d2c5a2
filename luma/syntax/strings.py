"""String literals: escapes, ``\"\"\"`` blocks with dedent, and ``{path}`` placeholders.

Pure functions over a token's raw text; the parse module calls them while it builds the AST.
Positions are kept exact: every placeholder carries the span of its source text.
"""

from __future__ import annotations

import bisect
import re

from luma.syntax.ast import BadPlaceholder, PathStep, Placeholder, StringLit
from luma.syntax.source import Span

_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "{": "{", "}": "}"}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(-?[0-9]+|\"[^\"\\]*\")\]")


class StringProblem(Exception):
    """An invalid escape; carries the absolute offset of the backslash."""

    def __init__(self, message: str, offset: int, end: int) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset
        self.end = end


def _body(raw: str, start: int) -> tuple[str, list[int], list[int]]:
    """The text between the quotes (``\"\"\"`` blocks dedented) and where it came from: the body is
    made of runs of the source, run ``k`` starting at index ``starts[k]`` of the body and at
    offset ``offsets[k]`` of the file (one run per kept line of a block, the newline after it
    included)."""
    if not raw.startswith('"""'):
        return raw[1:-1], [0], [start + 1]
    lines = raw[3:-3].split("\n")
    line_offsets = []
    pos = start + 3
    for line in lines:
        line_offsets.append(pos)
        pos += len(line) + 1
    # a newline right after the opening quotes and a blank last line are layout, not text
    first = 1 if len(lines) > 1 and lines[0].strip() == "" else 0
    last = len(lines) - 1 if len(lines) > 1 and lines[-1].strip() == "" else len(lines)
    kept = range(first, last)
    indents = [len(lines[i]) - len(lines[i].lstrip(" \t")) for i in kept if lines[i].strip()]
    cut = min(indents) if indents else 0
    pieces: list[str] = []
    starts: list[int] = []
    offsets: list[int] = []
    size = 0
    for n, i in enumerate(kept):
        line = lines[i]
        drop = min(cut, len(line) - len(line.lstrip(" \t")))
        piece = line[drop:] + "\n" if n < len(kept) - 1 else line[drop:]
        starts.append(size)
        offsets.append(line_offsets[i] + drop)
        pieces.append(piece)
        size += len(piece)
    return "".join(pieces), starts or [0], offsets or [start + 3]


_SPECIAL = re.compile(r"[\\{]")
_BRACE_END = re.compile(r"[{}\n]")


def value_offsets(raw: str, start: int) -> tuple[int, ...]:
    """The source offset of each character of the string's value (an escape counts at its
    backslash), for the raw text of a string token starting at offset ``start``. The token has
    been parsed already, so its escapes are known to be valid."""
    body, run_starts, run_offsets = _body(raw, start)
    offsets: list[int] = []
    k = 0
    i = 0
    while i < len(body):
        while k + 1 < len(run_starts) and run_starts[k + 1] <= i:
            k += 1
        offsets.append(run_offsets[k] + i - run_starts[k])
        i += 2 if body[i] == "\\" else 1
    return tuple(offsets)


def parse_string(raw: str, start: int, file: str) -> StringLit:
    """Build a ``StringLit`` from a string token's raw text starting at offset ``start``.

    The body is read in runs between the characters that mean something (a backslash, a
    brace): each run is one slice, so a long string costs a few copies of itself."""
    body, run_starts, run_offsets = _body(raw, start)

    def offset(i: int) -> int:  # the file offset of body index i
        k = bisect.bisect_right(run_starts, i) - 1
        return run_offsets[k] + i - run_starts[k]

    value: list[str] = []
    parts: list[str | Placeholder | BadPlaceholder] = []
    text: list[str] = []  # the text since the last placeholder
    i, n = 0, len(body)
    while i < n:
        m = _SPECIAL.search(body, i)
        stop = n if m is None else m.start()
        if stop > i:
            value.append(body[i:stop])
            text.append(body[i:stop])
        if m is None:
            break
        i = stop
        if body[i] == "\\":
            if i + 1 >= n:
                off = offset(i)
                raise StringProblem("a string cannot end with a lone backslash", off, off + 1)
            e = body[i + 1]
            if e not in _ESCAPES:
                off = offset(i)
                raise StringProblem(
                    f"unknown escape '\\{e}' in a string (use \\\\ for a backslash)", off, off + 2)
            value.append(_ESCAPES[e])
            text.append(_ESCAPES[e])
            i += 2
            continue
        off = offset(i)
        close = _BRACE_END.search(body, i + 1)
        if close is not None and body[close.start()] == "}":
            inner = body[i + 1:close.start()]
            span = Span(file, off, offset(close.start()) + 1)
            value.append("{" + inner + "}")
            if text:
                parts.append("".join(text))
                text = []
            parts.append(_placeholder(inner, off + 1, span, file))
            i = close.start() + 1
            continue
        # an unclosed brace: literal text, reported where the string is a statement string
        value.append("{")
        if text:
            parts.append("".join(text))
            text = []
        parts.append(BadPlaceholder("{", Span(file, off, off + 1)))
        i += 1
    if text:
        parts.append("".join(text))
    end = start + len(raw)
    return StringLit("".join(value), tuple(parts), Span(file, start, end))


def _placeholder(inner: str, inner_start: int, span: Span,
                 file: str) -> Placeholder | BadPlaceholder:
    m = _NAME.match(inner)
    if not m or inner != inner.strip():
        return BadPlaceholder("{" + inner + "}", span)
    pos = m.end()
    steps: list[PathStep] = []
    while pos < len(inner):
        s = _STEP.match(inner, pos)
        if not s:
            return BadPlaceholder("{" + inner + "}", span)
        sspan = Span(file, inner_start + s.start(), inner_start + s.end())
        if s.group(1) is not None:
            steps.append(PathStep(s.group(1), None, sspan))
        else:
            idx = s.group(2)
            if idx.startswith('"'):
                steps.append(PathStep(None, idx[1:-1], sspan))
            else:
                steps.append(PathStep(None, int(idx), sspan))
        pos = s.end()
    root_span = Span(file, inner_start, inner_start + m.end())
    return Placeholder(m.group(0), tuple(steps), span, root_span)
