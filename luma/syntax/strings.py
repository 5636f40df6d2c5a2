"""String literals: escapes, ``\"\"\"`` blocks with dedent, and ``{path}`` placeholders.

Pure functions over a token's raw text; the parse module calls them while it builds the AST.
Positions are kept exact: every placeholder carries the span of its source text.
"""

from __future__ import annotations

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


def _body_chars(raw: str, start: int) -> list[tuple[str, int]]:
    """The characters between the quotes with their absolute offsets; ``\"\"\"`` blocks dedented."""
    if raw.startswith('"""'):
        inner_start = start + 3
        inner = raw[3:-3]
        lines = inner.split("\n")
        offsets = []
        pos = inner_start
        for line in lines:
            offsets.append(pos)
            pos += len(line) + 1
        # a newline right after the opening quotes and a blank last line are layout, not text
        first = 1 if len(lines) > 1 and lines[0].strip() == "" else 0
        last = len(lines) - 1 if len(lines) > 1 and lines[-1].strip() == "" else len(lines)
        kept = list(range(first, last))
        indents = [len(lines[i]) - len(lines[i].lstrip(" \t")) for i in kept if lines[i].strip()]
        cut = min(indents) if indents else 0
        chars: list[tuple[str, int]] = []
        for n, i in enumerate(kept):
            line = lines[i]
            drop = min(cut, len(line) - len(line.lstrip(" \t")))
            for j in range(drop, len(line)):
                chars.append((line[j], offsets[i] + j))
            if n < len(kept) - 1:
                chars.append(("\n", offsets[i] + len(line)))
        return chars
    return [(c, start + 1 + i) for i, c in enumerate(raw[1:-1])]


def value_offsets(raw: str, start: int) -> tuple[int, ...]:
    """The source offset of each character of the string's value (an escape counts at its
    backslash), for the raw text of a string token starting at offset ``start``. The token has
    been parsed already, so its escapes are known to be valid."""
    chars = _body_chars(raw, start)
    offsets: list[int] = []
    i = 0
    while i < len(chars):
        offsets.append(chars[i][1])
        i += 2 if chars[i][0] == "\\" else 1
    return tuple(offsets)


def parse_string(raw: str, start: int, file: str) -> StringLit:
    """Build a ``StringLit`` from a string token's raw text starting at offset ``start``."""
    chars = _body_chars(raw, start)
    value: list[str] = []
    parts: list[str | Placeholder | BadPlaceholder] = []
    text: list[str] = []
    i = 0
    n = len(chars)
    while i < n:
        c, off = chars[i]
        if c == "\\":
            if i + 1 >= n:
                raise StringProblem("a string cannot end with a lone backslash", off, off + 1)
            e = chars[i + 1][0]
            if e not in _ESCAPES:
                raise StringProblem(
                    f"unknown escape '\\{e}' in a string (use \\\\ for a backslash)", off, off + 2)
            value.append(_ESCAPES[e])
            text.append(_ESCAPES[e])
            i += 2
            continue
        if c == "{":
            close = i + 1
            while close < n and chars[close][0] not in "{}\n":
                close += 1
            if close < n and chars[close][0] == "}":
                inner = "".join(ch for ch, _ in chars[i + 1:close])
                span = Span(file, off, chars[close][1] + 1)
                ph = _placeholder(inner, off + 1, span, file)
                value.append("{" + inner + "}")
                if text:
                    parts.append("".join(text))
                    text = []
                parts.append(ph)
                i = close + 1
                continue
            # an unclosed brace: literal text, reported where the string is a statement string
            value.append(c)
            if text:
                parts.append("".join(text))
                text = []
            parts.append(BadPlaceholder("{", Span(file, off, off + 1)))
            i += 1
            continue
        value.append(c)
        text.append(c)
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
