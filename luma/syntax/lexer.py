"""The newline post-lexer: decides which newlines separate entries and which are layout.

Lark hands us every ``_NL`` token; we drop those that cannot be separators (LANGUAGE.md §1,
"Lines") and remember, for each open bracket, what it belongs to, so that syntax errors can
say "in the fields of schema 'Order'" instead of naming a parser state.

The parsers apply the same rules inline: the tables (``parse.run_tables``) with the same
``CONTINUES_AFTER``, the descent (``descent.tokens``) as it splits the text; this class runs
when Lark parses a program again to describe its syntax error. A change to the rules goes in
all three places (the parser tests compare them).
"""

from __future__ import annotations

from collections.abc import Iterator

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

# A line that ends with one of these continues on the next.
CONTINUES_AFTER = frozenset({
    "PLUS", "MINUS", "MUL_OP", "COMP_OP", "AND", "OR", "NOT", "EQUAL", "ARROW", "COLON",
    "COMMA", "VBAR", "DOT", "AT", "LBRACE", "LPAR", "LSQB", "ASK", "TOOL", "_USING", "_NL",
})
_OPENERS = {"LPAR": "(", "LSQB": "[", "LBRACE": "{"}
_CLOSERS = {"RPAR": "(", "RSQB": "[", "RBRACE": "{"}
_BLOCK_OWNERS = frozenset({"SCHEMA", "TOOL", "MODEL", "AGENT", "FN", "IF", "_ELSE", "FOR", "TRY",
                           "CATCH", "TEST"})
_VALUE_PREFIX = frozenset({"EQUAL", "COLON", "COMMA", "LPAR", "LSQB", "LBRACE", "COMP_OP", "PLUS",
                           "MINUS", "MUL_OP", "AND", "OR", "NOT", "RETURN", "THROW", "ASK", "IN",
                           "AT", "ASSERT", "CHECK", "MOCK_RETURNS", "MOCK_THROWS"})


class Frame:
    """An open bracket: which one, what it belongs to (``schema``, ``fn``, ``object`` …) and the
    name of its owner when there is one. (A plain class: a dataclass costs its compilation at
    every start, and frames are only made to describe a syntax error.)"""

    __slots__ = ("bracket", "owner", "owner_name", "start")

    def __init__(self, bracket: str, owner: str, owner_name: str | None, start: int) -> None:
        self.bracket = bracket
        self.owner = owner
        self.owner_name = owner_name
        self.start = start

    def __repr__(self) -> str:
        return (f"Frame(bracket={self.bracket!r}, owner={self.owner!r}, "
                f"owner_name={self.owner_name!r}, start={self.start!r})")


class NewlinePostLexer:
    """A Lark post-lexer. It also records the bracket stack and the last tokens for error
    messages; the parse module reads them when the parser fails."""

    always_accept = ("_NL",)

    def __init__(self) -> None:
        self.stack: list[Frame] = []
        self.last: list[Any] = []  # the last significant tokens, newest last

    def process(self, stream: Iterator[Any]) -> Iterator[Any]:
        # No look-ahead here: the contextual lexer lexes each token in the parser state left by
        # the previous one, so a newline is decided on what came before it. What may follow a
        # newline (`}`, `else`, `catch`) the grammar and the lexer handle themselves.
        self.stack = []
        self.last = []
        entry: list[Any] = []  # significant tokens of the current entry (for block owners)
        for tok in stream:
            kind = tok.type
            if kind == "_NL":
                if not self._newline_allowed():
                    continue
                entry = []
            elif kind in _OPENERS:
                self.stack.append(self._frame(_OPENERS[kind], entry, tok))
                entry = [] if kind == "LBRACE" else entry + [tok]
            elif kind in _CLOSERS:
                if self.stack and self.stack[-1].bracket == _CLOSERS[kind]:
                    self.stack.pop()
                entry = entry + [tok]
            elif kind == "COMMA" and (not self.stack or self.stack[-1].bracket == "{"):
                entry = []
            elif len(entry) < 64:
                entry = entry + [tok]
            self._push_last(tok)
            yield tok

    def _push_last(self, tok: Any) -> None:
        self.last.append(tok)
        if len(self.last) > 8:
            del self.last[0]

    def _newline_allowed(self) -> bool:
        if self.stack and self.stack[-1].bracket in "([":
            return False
        if not self.last:
            return False  # the start of the file separates nothing
        return self.last[-1].type not in CONTINUES_AFTER

    @staticmethod
    def _frame(bracket: str, entry: list[Any], tok: Any) -> Frame:
        start = tok.start_pos or 0
        prev = entry[-1].type if entry else None
        first = entry[0] if entry else None
        owner_name = next((t.value for t in entry if t.type == "NAME"), None)
        if bracket == "{":
            if prev is None or prev in _VALUE_PREFIX:
                return Frame("{", "object", None, start)
            for t in entry:
                if t.type in _BLOCK_OWNERS:
                    owner = {"_ELSE": "else", "CATCH": "catch"}.get(t.type, t.type.lower())
                    if owner in ("if", "else", "for", "try", "catch"):
                        return Frame("{", "block", owner, start)
                    if owner == "tool" and first is not None and first.type != "TOOL":
                        return Frame("{", "object", None, start)
                    return Frame("{", owner, owner_name, start)
            return Frame("{", "object", None, start)
        if bracket == "(" and first is not None and first.type in ("TOOL", "FN") \
                and prev == "NAME" and len(entry) == 2:
            return Frame("(", f"{first.type.lower()}_params", owner_name, start)
        if bracket == "(" and prev in ("NAME", "RPAR", "RSQB"):
            return Frame("(", "call", None, start)
        if bracket == "[" and prev in ("ENUM", "MAP"):
            return Frame("[", prev.lower(), None, start)
        return Frame(bracket, "group" if bracket == "(" else "list", None, start)
