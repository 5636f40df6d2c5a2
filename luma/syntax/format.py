"""``luma fmt``: one canonical layout for a ``.luma`` file.

The formatter works on the file's tokens, comments included, and keeps the line breaks the author
chose where they carry meaning or taste (like ``gofmt``); it decides everything else: indentation
(2 spaces), the spaces between tokens, at most one blank line anywhere and exactly one between
declarations, annotations on their field's line, one entry per line in a bracket that spans lines,
trailing commas in multi-line lists (and none where a newline separates), ``} else {``. Strings
and comments are copied as written. What a token means (a call's ``(`` or a grouping one, a unary
or a binary ``-``) is read from the parsed program, never guessed from the text.

Safety: the result is parsed again, and unless its syntax tree equals the input's (spans aside)
the formatter refuses (``FormatError``) and the caller leaves the file as it was.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections.abc import Iterator
from typing import Any

from luma.syntax import ast
from luma.syntax.diagnostics import Diagnostic
from luma.syntax.lexer import CONTINUES_AFTER
from luma.syntax.parse import parse_text
from luma.syntax.source import Span

INDENT = "  "

_TOKEN = re.compile(r"""
    (?P<LONG_STRING>\"\"\"(?:\\.|[^\\])*?\"\"\")
  | (?P<STRING>"(?:\\.|[^"\\\n])*")
  | (?P<LINE_COMMENT>//[^\n]*)
  | (?P<BLOCK_COMMENT>/\*[\s\S]*?\*/)
  | (?P<NEWLINE>\r?\n)
  | (?P<WS>[\t \f\r]+)
  | (?P<FLOAT>[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)
  | (?P<INT>[0-9]+)
  | (?P<NAME>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<OP>->|==|!=|<=|>=|[-+*/%<>=:,.@|?()\[\]{}])
""", re.VERBOSE)

_OPENERS = {"(": ")", "[": "]", "{": "}"}
_CLOSERS = {")": "(", "]": "[", "}": "{"}
# Token kinds (as the post-lexer names them) after which a newline is layout, not a separator.
_OP_KINDS = {"+": "PLUS", "-": "MINUS", "*": "MUL_OP", "/": "MUL_OP", "%": "MUL_OP",
             "==": "COMP_OP", "!=": "COMP_OP", "<": "COMP_OP", "<=": "COMP_OP", ">": "COMP_OP",
             ">=": "COMP_OP", "=": "EQUAL", "->": "ARROW", ":": "COLON", ",": "COMMA",
             "|": "VBAR", ".": "DOT", "@": "AT", "{": "LBRACE", "(": "LPAR", "[": "LSQB"}
_WORD_KINDS = {"and": "AND", "or": "OR", "not": "NOT", "ask": "ASK", "tool": "TOOL",
               "using": "_USING"}
_COMMENTS = ("LINE_COMMENT", "BLOCK_COMMENT")


class FormatError(Exception):
    """The text cannot be formatted: it does not parse (``diagnostics``), or (a bug) the layout
    would have changed what it means."""

    def __init__(self, message: str, diagnostics: list[Diagnostic] | None = None) -> None:
        super().__init__(message)
        self.diagnostics = diagnostics or []


@dataclasses.dataclass(slots=True)
class LayoutToken:
    kind: str  # OP, NAME, INT, FLOAT, STRING, LONG_STRING, LINE_COMMENT, BLOCK_COMMENT
    text: str
    start: int
    nl: int = 0  # line breaks before this item: 0, 1, or 2 (a blank line)

    @property
    def is_comment(self) -> bool:
        return self.kind in _COMMENTS


def format_text(text: str, path: str = "<input>") -> str:
    """The canonical layout of ``text``. Raises ``FormatError`` when it does not parse."""
    if text.startswith("\ufeff"):
        text = text[1:]
    program, diagnostics = parse_text(text, path)
    if program is None:
        raise FormatError("the file has a syntax error", diagnostics)
    out = _Formatter(text, program).run()
    again, diagnostics = parse_text(out, path)
    if again is None or ast_shape(again) != ast_shape(program):
        raise FormatError(f"luma fmt could not lay out {path} without changing its meaning; "
                          "the file is left as it was")
    return out


def ast_shape(node: Any) -> Any:
    """A node as nested tuples without its spans: equal for two programs that mean the same.
    ``sql_offsets`` (where each character of a query's SQL is in the source) are positions too."""
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return (type(node).__name__, tuple(
            (f.name, ast_shape(getattr(node, f.name))) for f in dataclasses.fields(node)
            if not isinstance(getattr(node, f.name), Span)
            and f.name not in ("span", "declarations", "statements", "sql_offsets")))
    if isinstance(node, tuple):
        return tuple(ast_shape(n) for n in node)
    return node


def _nodes(node: Any) -> Iterator[Any]:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, tuple):
            stack.extend(n)
        elif dataclasses.is_dataclass(n) and not isinstance(n, (type, Span)):
            yield n
            stack.extend(getattr(n, f.name) for f in dataclasses.fields(n)
                         if f.name not in ("declarations", "statements"))


def tokenize(text: str) -> list[LayoutToken]:
    """The tokens and comments of ``text`` in order, each with the line breaks before it."""
    items: list[LayoutToken] = []
    pos = 0
    breaks = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:  # cannot happen for text that parsed; keep the character as it is
            items.append(LayoutToken("OP", text[pos], pos, min(breaks, 2)))
            breaks = 0
            pos += 1
            continue
        kind = m.lastgroup or ""
        if kind == "NEWLINE":
            breaks += 1
        elif kind != "WS":
            value = m.group().rstrip() if kind == "LINE_COMMENT" else m.group()
            items.append(LayoutToken(kind, value, pos, min(breaks, 2)))
            breaks = 0
        pos = m.end()
    return items


class _Formatter:
    def __init__(self, text: str, program: ast.Program) -> None:
        self.text = text
        self.program = program
        self.items = tokenize(text)
        self.attached: set[int] = set()  # offsets of ( and [ written against what precedes
        self.comma_lists: set[int] = set()  # offsets of ( and [ whose list takes a last ','
        self.unary: set[int] = set()  # offsets of unary minus signs
        self.kept_commas: set[int] = set()  # offsets of the ',' before an assert's message
        self.clauses: set[int] = set()  # offsets of the `else` and `catch` keywords
        self._read_program()

    # ---------------------------------------------------------------- what the tokens mean

    def _read_program(self) -> None:
        opens: dict[str, list[int]] = {"(": [], "[": []}
        for it in self.items:
            if it.kind == "OP" and it.text in opens:
                opens[it.text].append(it.start)

        def after(char: str, offset: int) -> int:
            found = opens[char]
            i = bisect.bisect_left(found, offset)
            return found[i] if i < len(found) else -1

        commas = [it.start for it in self.items if it.kind == "OP" and it.text == ","]
        words: dict[str, list[int]] = {"else": [], "catch": []}
        for it in self.items:
            if it.kind == "NAME" and it.text in words:
                words[it.text].append(it.start)

        def last_before(word: str, offset: int) -> int:
            found = words[word]
            i = bisect.bisect_left(found, offset)
            return found[i - 1] if i else -1

        for n in _nodes(self.program):
            # an `else` or `catch` keyword joins the `}` before it; the same word elsewhere
            # (a name after a declaration's `}`) keeps its line
            if isinstance(n, ast.If) and n.orelse is not None:
                self.clauses.add(last_before(
                    "else", n.orelse[0].span.start if n.orelse else n.span.end))
            elif isinstance(n, ast.Try):
                self.clauses.add(last_before("catch", n.err_span.start))
            if isinstance(n, ast.Assert) and n.message is not None:
                # the ',' between the condition and the message is not a separator
                i = bisect.bisect_left(commas, n.cond.span.end)
                if i < len(commas) and commas[i] < n.message.span.start:
                    self.kept_commas.add(commas[i])
            if isinstance(n, ast.Call):
                self._mark(after("(", n.callee.span.end), attached=True, commas=True)
            elif isinstance(n, ast.ToolCall):
                self._mark(after("(", n.tool_span.end), attached=True, commas=False)
            elif isinstance(n, ast.Index):
                self._mark(after("[", n.obj.span.end), attached=True, commas=False)
            elif isinstance(n, ast.ListType):
                self._mark(after("[", n.item.span.end), attached=True, commas=False)
            elif isinstance(n, ast.EnumType):
                self._mark(after("[", n.span.start), attached=True, commas=True)
            elif isinstance(n, ast.MapType):
                self._mark(after("[", n.span.start), attached=True, commas=False)
            elif isinstance(n, ast.ListLit):
                self._mark(n.span.start, attached=False, commas=True)
            elif isinstance(n, ast.Annotation):
                o = after("(", n.name_span.end)
                if 0 <= o < n.span.end:
                    self._mark(o, attached=True, commas=True)
            elif isinstance(n, (ast.ToolDecl, ast.FnDecl)):
                self._mark(after("(", n.name_span.end), attached=True, commas=True)
            elif isinstance(n, (ast.Unary, ast.Literal)):
                self.unary.add(n.span.start)

    def _mark(self, offset: int, attached: bool, commas: bool) -> None:
        if attached:
            self.attached.add(offset)
        if commas:
            self.comma_lists.add(offset)

    def _declaration_gaps(self) -> list[tuple[int, int]]:
        """(end of one entry, start of the next) wherever a declaration meets its neighbour: a
        blank line goes between them."""
        gaps: list[tuple[int, int]] = []

        def add(entries: list[Any], is_decl: Any) -> None:
            for a, b in zip(entries, entries[1:]):
                if is_decl(a) or is_decl(b):
                    gaps.append((a.span.end, b.span.start))

        add(list(self.program.items), lambda n: isinstance(n, ast.DECL_TYPES))
        for agent in self.program.agents:
            entries: list[ast.ConfigEntry | ast.FnDecl] = sorted(
                [*agent.config, *agent.fns], key=lambda e: e.span.start)
            add(entries, lambda n: isinstance(n, ast.FnDecl))
        return gaps

    # ------------------------------------------------------------------------- the layout

    def run(self) -> str:
        self._join_lines()
        self._open_brackets()
        self._commas()
        self._blank_lines()
        return self._emit()

    def _join_lines(self) -> None:
        """``} else``, ``} catch``, an annotation and a list's ``,`` join the line before."""
        items = self.items
        stack: list[str] = []
        for i, it in enumerate(items):
            prev = items[i - 1] if i else None
            if it.nl and prev is not None and not prev.is_comment:
                if it.kind == "NAME" and it.start in self.clauses and prev.text == "}":
                    it.nl = 0
                elif it.text == "@" and it.kind == "OP":
                    it.nl = 0
                elif it.text == "," and it.kind == "OP" and stack and stack[-1] in "([":
                    nxt = items[i + 1] if i + 1 < len(items) else None
                    if nxt is not None:
                        nxt.nl = max(nxt.nl, it.nl)
                    it.nl = 0
            if it.kind == "OP" and it.text in _OPENERS:
                stack.append(it.text)
            elif it.kind == "OP" and it.text in _CLOSERS and stack:
                stack.pop()

    def _pairs(self) -> dict[int, int]:
        """Opener index -> closer index."""
        pairs: dict[int, int] = {}
        stack: list[int] = []
        for i, it in enumerate(self.items):
            if it.kind != "OP":
                continue
            if it.text in _OPENERS:
                stack.append(i)
            elif it.text in _CLOSERS and stack:
                pairs[stack.pop()] = i
        return pairs

    def _direct_children(self, o: int, c: int, pairs: dict[int, int]) -> Iterator[int]:
        i = o + 1
        while i <= c:
            yield i
            i = pairs[i] + 1 if i in pairs else i + 1

    def _open_brackets(self) -> None:
        """A bracket with a line break directly inside it puts every entry on its own line: a
        break after the opener and before the closer."""
        items = self.items
        pairs = self._pairs()
        self.multiline: set[int] = set()  # offsets of the openers laid out over lines
        for o, c in pairs.items():
            children = list(self._direct_children(o, c, pairs))
            if children == [c]:  # nothing inside: `{}`, `()`, `[]`
                items[c].nl = 0
                continue
            if not any(items[i].nl or items[i].kind == "LINE_COMMENT" for i in children):
                continue
            self.multiline.add(items[o].start)
            for i in children:
                if items[i].is_comment and items[i].nl == 0 and i != c:
                    continue  # a comment on the opener's line stays there
                items[i].nl = max(items[i].nl, 1)
                break
            items[c].nl = max(items[c].nl, 1)

    def _commas(self) -> None:
        """Newlines separate entries in ``{ }`` and at the top level, so no ',' ends a line
        there; a list over lines ends with ',' (where its grammar allows), one on one line not."""
        items = self.items
        pairs = self._pairs()
        closer_of = {c: o for o, c in pairs.items()}
        drop: set[int] = set()
        add_after: set[int] = set()
        frames: list[int] = []
        for i, it in enumerate(items):
            frame = items[frames[-1]] if frames else None
            if it.kind == "OP" and it.text == "," and (frame is None or frame.text == "{") \
                    and it.start not in self.kept_commas:
                nxt = items[i + 1] if i + 1 < len(items) else None
                if nxt is None or nxt.nl or nxt.kind == "LINE_COMMENT" or (
                        nxt.kind == "OP" and nxt.text == "}"):
                    drop.add(i)
            if it.kind == "OP" and it.text in _OPENERS and i in pairs:
                frames.append(i)
            elif i in closer_of and frames:
                o = frames.pop()
                opener = items[o]
                if opener.text == "{" or opener.start not in self.comma_lists:
                    continue
                last = i - 1
                while last > o and items[last].is_comment:
                    last -= 1
                if last == o:
                    continue
                is_comma = items[last].kind == "OP" and items[last].text == ","
                if opener.start in self.multiline and not is_comma:
                    add_after.add(last)
                elif opener.start not in self.multiline and is_comma:
                    drop.add(last)
        rebuilt: list[LayoutToken] = []
        carry = 0
        for i, it in enumerate(items):
            if i in drop:
                carry = max(carry, it.nl)
                continue
            if carry:
                it.nl = max(it.nl, carry)
                carry = 0
            rebuilt.append(it)
            if i in add_after:
                rebuilt.append(LayoutToken("OP", ",", it.start + len(it.text), 0))
        self.items = rebuilt

    def _blank_lines(self) -> None:
        items = self.items
        if items:
            items[0].nl = 0
        for i, it in enumerate(items):
            prev = items[i - 1] if i else None
            if prev is not None and prev.kind == "OP" and prev.text in _OPENERS:
                it.nl = min(it.nl, 1)
            if it.kind == "OP" and it.text in _CLOSERS:
                it.nl = min(it.nl, 1)
        starts = [it.start for it in items]
        for end, start in self._declaration_gaps():
            lo = bisect.bisect_left(starts, end)
            hi = bisect.bisect_left(starts, start)
            gap = [it for it in items[lo:hi + 1] if it.nl]
            if gap and not any(it.nl > 1 for it in gap):
                gap[0].nl = 2

    # ---------------------------------------------------------------------------- output

    def _emit(self) -> str:
        items = self.items
        lines: list[list[str]] = []  # [indent + code, trailing comment]
        stack: list[tuple[LayoutToken, int]] = []  # open brackets and the indent of their line
        line_indent = 0
        prev: LayoutToken | None = None  # the previous item
        prev_code: LayoutToken | None = None  # the previous item that is not a comment
        for it in items:
            is_closer = it.kind == "OP" and it.text in _CLOSERS
            if it.nl or prev is None:
                for _ in range(it.nl - 1):
                    lines.append(["", ""])
                if is_closer and stack:
                    line_indent = stack[-1][1]
                else:
                    line_indent = self._indent(stack, prev_code)
                lines.append([INDENT * line_indent + it.text, ""])
            elif it.kind == "LINE_COMMENT":
                lines[-1][1] = it.text
            else:
                lines[-1][0] += self._space(prev, it) + it.text
            if it.kind == "OP" and it.text in _OPENERS:
                stack.append((it, line_indent))
            elif is_closer and stack:
                stack.pop()
            prev = it
            if not it.is_comment:
                prev_code = it
        return _join(lines)

    def _indent(self, stack: list[tuple[LayoutToken, int]], prev_code: LayoutToken | None) -> int:
        if not stack:
            base, frame = 0, None
        else:
            base, frame = stack[-1][1] + 1, stack[-1][0]
        if prev_code is None or prev_code is frame:
            return base
        if frame is not None and frame.text in "([":
            return base if prev_code.text == "," else base + 1
        if prev_code.start in self.kept_commas:
            return base + 1  # an assert's message on the next line
        return base + 1 if _continues(prev_code) else base

    def _space(self, prev: LayoutToken | None, it: LayoutToken) -> str:
        if prev is None:
            return ""
        p, t = prev.text, it.text
        if prev.is_comment or it.is_comment:
            return " "
        if it.kind == "OP":
            if t in (",", ":", "?", ".", ")", "]"):
                return ""
            if t == "}":
                return "" if p == "{" and prev.kind == "OP" else " "
            if t in "([" and it.start in self.attached:
                return ""
        if prev.kind == "OP":
            if p in ("(", "[", ".", "@", "?"):
                return ""
            if p == "{":
                return " "
            if p == "-" and prev.start in self.unary:
                return ""
        return " "


def _continues(item: LayoutToken) -> bool:
    if item.kind == "OP":
        kind = _OP_KINDS.get(item.text)
        return kind is not None and kind in CONTINUES_AFTER and kind not in ("COMMA",)
    if item.kind == "NAME":
        kind = _WORD_KINDS.get(item.text)
        return kind is not None and kind in CONTINUES_AFTER
    return False


def _join(lines: list[list[str]]) -> str:
    """The lines as text; trailing comments of neighbouring lines aligned, two spaces after the
    longest code among them."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        if not lines[i][1] or "\n" in lines[i][0]:
            code, comment = lines[i]
            if comment:
                out.append(f"{code}  {comment}" if code.strip() else code + comment)
            else:
                out.append(code)
            i += 1
            continue
        j = i
        while j < len(lines) and lines[j][1] and lines[j][0].strip() and "\n" not in lines[j][0]:
            j += 1
        if j == i:  # a comment alone on its line
            out.append(lines[i][0] + lines[i][1])
            i += 1
            continue
        width = max(len(code) for code, _ in lines[i:j])
        out.extend(f"{code.ljust(width)}  {comment}" for code, comment in lines[i:j])
        i = j
    text = "\n".join(line.rstrip(" \t") if "\n" not in line else line for line in out)
    return text.strip("\n") + "\n" if text.strip() else ""
