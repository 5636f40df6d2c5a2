"""The SQL text of a query or command, read only as far as Luma needs (DATA.md §1, §3): where its
``:name`` placeholders are, and whether it holds more than one statement.

Text inside quotes (``'...'``, ``"..."``, PostgreSQL's ``$tag$...$tag$``), inside comments
(``-- ...``, ``/* ... */``) and a ``::`` cast are not placeholders. Nothing here imports a
driver: the checker uses it too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Style = Literal["qmark", "format", "pyformat", "numeric", "named"]
"""``?``, ``%s``, ``%(name)s``, ``$1`` or ``:name`` (unchanged)."""

STYLES: tuple[str, ...] = ("qmark", "format", "pyformat", "numeric", "named")

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DOLLAR_TAG = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")


@dataclass(frozen=True, slots=True)
class SqlPlaceholder:
    """One ``:name`` in the SQL text; ``start``/``end`` are offsets in that text (the colon
    included)."""

    name: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class SqlText:
    """What Luma reads in a SQL text: its placeholders in order, and the offsets of the ``;``
    that end a statement with another one after it."""

    placeholders: tuple[SqlPlaceholder, ...]
    extra_statements: tuple[int, ...]


def scan(sql: str) -> SqlText:
    """Read ``sql`` once, left to right."""
    found: list[SqlPlaceholder] = []
    separators: list[int] = []
    pending_separator: int | None = None
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"":
            close = _close_quote(sql, i, c)
            if pending_separator is not None:
                separators.append(pending_separator)
                pending_separator = None
            i = close
            continue
        if c == "-" and sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end
            continue
        if c == "/" and sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        if c == "$":
            tag = _DOLLAR_TAG.match(sql, i)
            if tag is not None and (i == 0 or not (sql[i - 1].isalnum() or sql[i - 1] == "_")):
                end = sql.find(tag.group(0), tag.end())
                if pending_separator is not None:
                    separators.append(pending_separator)
                    pending_separator = None
                i = n if end < 0 else end + len(tag.group(0))
                continue
        if c == ":":
            if sql.startswith("::", i):
                i += 2
                continue
            name = _NAME.match(sql, i + 1)
            if name is not None and (i == 0 or sql[i - 1] != ":"):
                if pending_separator is not None:
                    separators.append(pending_separator)
                    pending_separator = None
                found.append(SqlPlaceholder(name.group(0), i, name.end()))
                i = name.end()
                continue
        if c == ";":
            if pending_separator is None:
                pending_separator = i
            i += 1
            continue
        if not c.isspace() and pending_separator is not None:
            separators.append(pending_separator)
            pending_separator = None
        i += 1
    return SqlText(tuple(found), tuple(separators))


def _close_quote(sql: str, start: int, quote: str) -> int:
    """The offset after the quote that closes the one at ``start`` (a doubled quote is an
    escaped one); the end of the text when it never closes."""
    i = start + 1
    while True:
        end = sql.find(quote, i)
        if end < 0:
            return len(sql)
        if sql.startswith(quote * 2, end):
            i = end + 2
            continue
        return end + 1


def placeholders(sql: str, style: str, params: Mapping[str, Any] | None = None
                 ) -> tuple[str, list[Any] | dict[str, Any]]:
    """``sql`` with its ``:name`` placeholders written in ``style`` and the parameters in the
    matching shape, for a bridge whose driver wants another style than ``:name``.

    ``qmark`` (``?``), ``format`` (``%s``) and ``numeric`` (``$1``) give a list of values in the
    order of the placeholders (a name used twice appears twice, except in ``numeric``, which
    numbers each name once); ``pyformat`` (``%(name)s``) and ``named`` (``:name``) give a dict.
    In ``format`` and ``pyformat``, every other ``%`` of the SQL is doubled, as those drivers
    read it (in quotes too). A placeholder with no value in ``params`` raises ``KeyError``;
    without ``params`` the values are the names themselves."""
    if style not in STYLES:
        raise ValueError(f"unknown placeholder style {style!r}; expected one of "
                         f"{', '.join(STYLES)}")
    read = scan(sql)
    values: Mapping[str, Any] = params if params is not None else \
        {p.name: p.name for p in read.placeholders}
    edits: list[tuple[int, int, str]] = []
    ordered: list[Any] = []
    numbers: dict[str, int] = {}
    for p in read.placeholders:
        value = values[p.name]
        if style == "qmark":
            text = "?"
            ordered.append(value)
        elif style == "format":
            text = "%s"
            ordered.append(value)
        elif style == "numeric":
            if p.name not in numbers:
                numbers[p.name] = len(numbers) + 1
                ordered.append(value)
            text = f"${numbers[p.name]}"
        elif style == "pyformat":
            text = f"%({p.name})s"
        else:
            text = f":{p.name}"
        edits.append((p.start, p.end, text))
    def literal(text: str) -> str:
        return text.replace("%", "%%") if style in ("format", "pyformat") else text

    out: list[str] = []
    last = 0
    for start, end, text in edits:
        out.append(literal(sql[last:start]))
        out.append(text)
        last = end
    out.append(literal(sql[last:]))
    rewritten = "".join(out)
    if style in ("pyformat", "named"):
        return rewritten, {p.name: values[p.name] for p in read.placeholders}
    return rewritten, ordered


__all__ = ["SqlPlaceholder", "SqlText", "scan", "placeholders", "STYLES", "Style"]
