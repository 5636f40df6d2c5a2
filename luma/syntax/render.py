"""Four renderers of one list of diagnostics: ``text`` for people, ``json``, ``github`` (Actions
workflow commands) and ``sarif`` (SARIF 2.1.0) for machines.

Each takes the diagnostics and a lookup from a file path to its :class:`SourceFile` (for lines,
columns and snippets) and returns the whole report as a string. Lines and columns are 1-based and
count characters (code points); an end column is exclusive, as in SARIF: it is the column just
past the last character of the span.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from luma.record import Record
from luma.syntax.diagnostics import Diagnostic
from luma.syntax.source import SourceFile, Span

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:  # imported by the renderers that write paths: the text report needs none
    from pathlib import Path

SourceLookup = Callable[[str], "SourceFile | None"]

FORMATS = ("text", "json", "github", "sarif")

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


def source_lookup(known: Mapping[str, SourceFile] | Iterable[SourceFile] = ()) -> SourceLookup:
    """A lookup that answers from ``known`` and reads any other file from disk once (undecodable
    bytes replaced); a file that cannot be read has no source."""
    cache: dict[str, SourceFile | None] = (
        dict(known) if isinstance(known, Mapping) else {s.path: s for s in known})

    def lookup(path: str) -> SourceFile | None:
        if path not in cache:
            try:
                with open(path, "rb") as f:
                    text = f.read().decode("utf-8", errors="replace")
            except OSError:
                cache[path] = None
            else:
                cache[path] = SourceFile(path, text.removeprefix("\ufeff"))
        return cache[path]

    return lookup


class Location(Record):
    """A span as lines and columns: 1-based, the end column exclusive."""

    __slots__ = __match_args__ = ("file", "line", "column", "end_line", "end_column")

    def __init__(self, file: str, line: int, column: int, end_line: int, end_column: int) -> None:
        self.file = file
        self.line = line
        self.column = column
        self.end_line = end_line
        self.end_column = end_column


def locate(span: Span, sources: SourceLookup) -> Location:
    source = sources(span.file)
    if source is None:
        return Location(span.file, 1, 1, 1, 1)
    line, column = source.line_col(span.start)
    end_line, end_column = source.line_col(max(span.start, span.end))
    return Location(span.file, line, column, end_line, end_column)


def render(fmt: str, diagnostics: Sequence[Diagnostic], sources: SourceLookup, *,
           color: bool = False) -> str:
    """The report in format ``fmt`` (one of :data:`FORMATS`)."""
    if fmt == "text":
        return render_text(diagnostics, sources, color=color)
    if fmt == "json":
        return render_json(diagnostics, sources)
    if fmt == "github":
        return render_github(diagnostics, sources)
    if fmt == "sarif":
        return render_sarif(diagnostics, sources)
    raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")


# ---------------------------------------------------------------------------------------- text

_RESET = "\x1b[0m"
_STYLE = {
    "error": "\x1b[1;31m", "warning": "\x1b[1;33m", "bold": "\x1b[1m", "gutter": "\x1b[1;34m",
    "note": "\x1b[1;36m", "related": "\x1b[1;34m",
}
_TAB = "    "


class _Paint:
    def __init__(self, on: bool) -> None:
        self.on = on

    def __call__(self, style: str, text: str) -> str:
        return f"{_STYLE[style]}{text}{_RESET}" if self.on and text else text


def render_text(diagnostics: Sequence[Diagnostic], sources: SourceLookup, *,
                color: bool = False) -> str:
    """rustc/ruff style: a ``file:line:col: error[CODE]: message`` headline, the source line with
    a caret underline, the hint and each related span as a note with its own snippet. Control
    characters in the source are shown as visible symbols, so a binary file cannot garble a
    terminal."""
    paint = _Paint(color)
    blocks = [_text_block(d, sources, paint) for d in diagnostics]
    return "".join(block + "\n\n" for block in blocks)


def _text_block(d: Diagnostic, sources: SourceLookup, paint: _Paint) -> str:
    loc = locate(d.span, sources)
    related = [(r, locate(r.span, sources)) for r in d.related]
    numbers = [loc.line] + [rl.line for _, rl in related]
    width = len(str(max(numbers)))
    pad = " " * width
    lines = [
        f"{paint('bold', f'{loc.file}:{loc.line}:{loc.column}:')} "
        f"{paint(d.severity, f'{d.severity}[{d.code}]')}: {paint('bold', _visible(d.message))}"
    ]
    lines += _snippet(d.span, loc, sources, width, "^", paint, d.severity)
    if d.hint:
        lines.append(f"{pad} {paint('gutter', '=')} {paint('note', 'hint')}: {_visible(d.hint)}")
    for r, rl in related:
        lines.append(f"{pad} {paint('gutter', '=')} {paint('note', 'note')}: "
                     f"{_visible(r.message)} at {rl.file}:{rl.line}:{rl.column}")
        if (rl.file, rl.line) != (loc.file, loc.line):
            lines += _snippet(r.span, rl, sources, width, "-", paint, "related")
    return "\n".join(lines)


def _snippet(span: Span, loc: Location, sources: SourceLookup, width: int, mark: str,
             paint: _Paint, style: str) -> list[str]:
    source = sources(span.file)
    if source is None:
        return []
    text = source.line_text(loc.line)
    # Underline to the span's end on this line, or to the end of the line when the span goes on.
    first = loc.column - 1
    last = loc.end_column - 1 if loc.end_line == loc.line else len(text)
    text, first, last = _window(text, first, last)
    before = _display(text[:first])
    underline = max(1, _width(_display(text[first:last])))
    bar = paint("gutter", "|")
    return [
        f"{' ' * width} {bar}",
        f"{paint('gutter', str(loc.line).rjust(width))} {bar} {_display(text)}".rstrip(),
        f"{' ' * width} {bar} {' ' * _width(before)}{paint(style, mark * underline)}",
    ]


_MAX_LINE = 120
_CONTEXT = 40


def _window(text: str, first: int, last: int) -> tuple[str, int, int]:
    """A long line cut around the span, the cuts marked with ``...``; the span's offsets moved
    to match. The underline of a very long span is cut too."""
    if len(text) <= _MAX_LINE:
        return text, first, last
    start = max(0, first - _CONTEXT)
    end = min(len(text), max(first + _CONTEXT, min(last, first + _MAX_LINE - _CONTEXT)) + 1)
    head = "..." if start > 0 else ""
    tail = "..." if end < len(text) else ""
    shift = len(head) - start
    return head + text[start:end] + tail, first + shift, min(last, end) + shift


def _display(text: str) -> str:
    """The text as shown in a snippet: tabs as four spaces, control characters as symbols."""
    return _visible(text.replace("\t", _TAB))


def _visible(text: str) -> str:
    out = []
    for ch in text:
        code = ord(ch)
        if code < 0x20:
            out.append(chr(0x2400 + code))  # the Unicode "control pictures" block
        elif code == 0x7F:
            out.append("\u2421")
        elif 0x80 <= code < 0xA0 or ch in "\u2028\u2029\u200e\u200f\u202a\u202b\u202c\u202d\u202e":
            out.append("\ufffd")
        else:
            out.append(ch)
    return "".join(out)


def _width(text: str) -> int:
    """Terminal columns of ``text``: wide characters take two, combining marks none."""
    import unicodedata  # here: a clean check shows no snippet

    total = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        total += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return total


# ---------------------------------------------------------------------------------------- json

def render_json(diagnostics: Sequence[Diagnostic], sources: SourceLookup) -> str:
    """A JSON list with one object per diagnostic: ``file, line, column, end_line, end_column,
    severity, code, message, hint, related`` (related: ``file, line, column, end_line,
    end_column, message``)."""
    import json

    items = []
    for d in diagnostics:
        loc = locate(d.span, sources)
        items.append({
            **_loc_fields(loc), "severity": d.severity, "code": d.code, "message": d.message,
            "hint": d.hint,
            "related": [{**_loc_fields(locate(r.span, sources)), "message": r.message}
                        for r in d.related],
        })
    return json.dumps(items, indent=2, ensure_ascii=False) + "\n"


def _loc_fields(loc: Location) -> dict[str, object]:
    return {"file": loc.file, "line": loc.line, "column": loc.column,
            "end_line": loc.end_line, "end_column": loc.end_column}


# -------------------------------------------------------------------------------------- github

def render_github(diagnostics: Sequence[Diagnostic], sources: SourceLookup, *,
                  root: str | Path | None = None) -> str:
    """One GitHub Actions workflow command per diagnostic::

        ::error file=x.luma,line=2,col=6,endLine=2,endColumn=10,title=E001::message

    The hint and related notes follow the message on lines of their own (encoded as ``%0A``).
    GitHub places an annotation by a path relative to the workspace, so an absolute path inside
    ``root`` (default: the current folder) is written relative to it."""
    from pathlib import Path

    base = (Path(root) if root is not None else Path.cwd()).resolve()
    out = []
    for d in diagnostics:
        loc = locate(d.span, sources)
        file = Path(loc.file)
        if file.is_absolute() and file.is_relative_to(base):
            file = file.relative_to(base)
        props = [("file", file.as_posix()), ("line", loc.line), ("col", loc.column),
                 ("endLine", loc.end_line), ("endColumn", loc.end_column), ("title", d.code)]
        text = [d.message]
        if d.hint:
            text.append(f"hint: {d.hint}")
        for r in d.related:
            rl = locate(r.span, sources)
            text.append(f"note: {r.message} at {rl.file}:{rl.line}:{rl.column}")
        command = "error" if d.is_error else "warning"
        rendered = ",".join(f"{k}={_gh_property(str(v))}" for k, v in props)
        out.append(f"::{command} {rendered}::{_gh_data(chr(10).join(text))}\n")
    return "".join(out)


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_property(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


# --------------------------------------------------------------------------------------- sarif

def render_sarif(diagnostics: Sequence[Diagnostic], sources: SourceLookup, *,
                 root: str | Path | None = None) -> str:
    """A SARIF 2.1.0 log with one run of the ``luma`` driver: every diagnostic code as a rule,
    one result per diagnostic. File URIs are relative to ``root`` (default: the current folder)
    with ``uriBaseId`` ``%SRCROOT%``; a file outside it gets an absolute ``file:`` URI."""
    import json
    from pathlib import Path

    from luma.version import __version__
    from luma.check.codes import CODES

    base = Path(root) if root is not None else Path.cwd()
    rule_ids = list(CODES)
    rule_ids += sorted({d.code for d in diagnostics} - set(CODES))
    index = {code: i for i, code in enumerate(rule_ids)}
    rules = [{
        "id": code,
        "shortDescription": {"text": CODES.get(code, code)},
        "defaultConfiguration": {"level": "warning" if code.startswith("W") else "error"},
    } for code in rule_ids]
    results = []
    for d in diagnostics:
        text = d.message if not d.hint else f"{d.message}\nhint: {d.hint}"
        result: dict[str, object] = {
            "ruleId": d.code, "ruleIndex": index[d.code], "level": d.severity,
            "message": {"text": text},
            "locations": [{"physicalLocation": _sarif_physical(d.span, sources, base)}],
        }
        if d.related:
            result["relatedLocations"] = [{
                "id": i, "physicalLocation": _sarif_physical(r.span, sources, base),
                "message": {"text": r.message},
            } for i, r in enumerate(d.related)]
        results.append(result)
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "luma", "version": __version__, "rules": rules}},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def _sarif_physical(span: Span, sources: SourceLookup, base: Path) -> dict[str, object]:
    loc = locate(span, sources)
    return {
        "artifactLocation": _sarif_artifact(loc.file, base),
        "region": {"startLine": loc.line, "startColumn": loc.column,
                   "endLine": loc.end_line, "endColumn": loc.end_column},
    }


def _sarif_artifact(file: str, base: Path) -> dict[str, str]:
    from pathlib import Path
    from urllib.parse import quote

    path = Path(file)
    if path.is_absolute():
        try:
            path = path.relative_to(base.resolve())
        except ValueError:
            return {"uri": path.as_uri()}
    return {"uri": quote(path.as_posix()), "uriBaseId": "%SRCROOT%"}
