"""Parse Luma source into the AST.

The grammar is ``grammar/luma.lark``. A program is parsed first by the recursive descent of
``luma/syntax/descent.py``. Where it declines — a program that does not parse, one past a limit,
one of the rare texts the contextual lexer splits its own way — the program is parsed by the
LALR(1) tables Lark made of the grammar ahead of time (``luma.syntax.tablegen`` writes them to
``luma/syntax/tables.py``), which this module runs with the same meaning as Lark's parser with
its contextual lexer: the newline rules of ``luma/syntax/lexer.py``, the same tokens, the same
children for each rule. Both build the same AST (every token is kept, so spans cover keywords
and brackets too); the tests compare them with each other and with Lark.

A program the tables reject is parsed once more by Lark itself, from a parser cached on disk,
only to describe the error: what the parser expected, and where (``syntax_errors.py``).
"""

from __future__ import annotations

import gc
import re

from luma.limits import MAX_NESTING, MAX_SAFE_INTEGER
from luma.syntax import ast, descent, tables
from luma.syntax.diagnostics import Diagnostic
from luma.syntax.lexer import CONTINUES_AFTER, NewlinePostLexer
from luma.syntax.source import SourceFile, Span
from luma.syntax.strings import StringProblem, parse_string, value_offsets

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from lark import Lark

_PUNCT = frozenset({
    "LPAR", "RPAR", "LSQB", "RSQB", "LBRACE", "RBRACE", "COMMA", "COLON", "EQUAL", "ARROW",
    "DOT", "AT", "VBAR", "_NL", "SCHEMA", "TOOL", "MODEL", "AGENT", "FN", "IF", "_ELSE", "FOR",
    "IN", "RETURN", "TRY", "CATCH", "THROW", "ASK", "_USING", "TAGGED", "BY", "NEEDS", "ENUM",
    "MAP", "NOT", "AND", "OR", "DATASOURCE", "QUERY", "COMMAND",
    "TEST", "MOCK",
})


class ParseFailure(Exception):
    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


def parse_source(source: SourceFile) -> tuple[ast.Program | None, list[Diagnostic]]:
    """Parse one file. Returns the program, or None and the syntax error as a diagnostic.

    The cyclic garbage collector is paused while the parser runs: the tree it builds holds no
    cycles, and a collection during a parse only walks the nodes made so far again (on 80,000
    declarations that was a quarter of the parse, and more than linear in the file)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        try:
            return descent.parse(source.text, source.path), []
        except descent.Declined:
            pass
        program = run_tables(source.text, source.path)
    except NoParse:
        return None, [_syntax_diagnostic(source)]
    except _StringError as exc:
        p = exc.problem
        return None, [Diagnostic("error", "E001", p.message, Span(source.path, p.offset, p.end))]
    except _Refused as exc:
        return None, [exc.diagnostic]
    finally:
        if collecting:
            gc.enable()
    return program, []


def parse_text(text: str, path: str = "<input>") -> tuple[ast.Program | None, list[Diagnostic]]:
    return parse_source(SourceFile(path, text))


def parse_file(path: str | Path) -> tuple[SourceFile, ast.Program | None, list[Diagnostic]]:
    """Read and parse a file; undecodable bytes are a located diagnostic, not an exception."""
    p = str(path)
    with open(p, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        source = SourceFile(p, data.decode("utf-8", errors="replace"))
        return source, None, [Diagnostic(
            "error", "E001", "the file is not valid UTF-8 text",
            Span(p, exc.start, exc.start + 1))]
    if text.startswith("\ufeff"):
        text = text[1:]
    source = SourceFile(p, text)
    program, diags = parse_source(source)
    return source, program, diags


# ------------------------------------------------------------------------------ the LALR tables


class Token:
    """A terminal as the transformer sees it: its kind, its text and its offsets."""

    __slots__ = ("type", "value", "start_pos", "end_pos")

    def __init__(self, type: str, value: str, start_pos: int, end_pos: int) -> None:
        self.type = type
        self.value = value
        self.start_pos = start_pos
        self.end_pos = end_pos

    def __repr__(self) -> str:
        return f"Token({self.type!r}, {self.value!r}, {self.start_pos}, {self.end_pos})"


class NoParse(Exception):
    """The text is not a program; Lark is asked what went wrong (``_syntax_diagnostic``)."""


def _alternation(names: tuple[str, ...]) -> str:
    return "|".join(f"(?P<{n}>{tables.TERMINALS[n]})" for n in names)


# What the newline post-lexer (lexer.py) does with a kind of token.
_SKIP, _NEWLINE, _OPEN, _CLOSE = 0, 1, 2, 3
_LAYOUT: dict[str, tuple[int, str]] = {
    **{kind: (_SKIP, "") for kind in tables.IGNORE},
    "_NL": (_NEWLINE, ""),
    "LPAR": (_OPEN, "("), "LSQB": (_OPEN, "["), "LBRACE": (_OPEN, "{"),
    "RPAR": (_CLOSE, "("), "RSQB": (_CLOSE, "["), "RBRACE": (_CLOSE, "{"),
}


# The rules whose node is one level of nesting (``MAX_NESTING``), and what the level is called
# in the message. Wrappers (a parenthesised expression, a block, an object's entry) add none.
_NESTS: dict[str, str] = {
    **dict.fromkeys(("or_op", "and_op", "not_op", "binary", "neg", "member", "index", "call",
                     "list_lit", "object_lit", "tool_call", "ask_expr"), "expression"),
    **dict.fromkeys(("if_stmt", "for_stmt", "try_stmt"), "statement"),
    **dict.fromkeys(("list_type", "map_type"), "type"),
}

_NESTING_HINTS = {
    "expression": "assign an inner part to a variable first",
    "statement": "move an inner part into a function of its own",
    "type": "declare a schema for an inner part of the type",
}


def _rule_steps() -> list[tuple[str, int, Any, Any, int, bool, bool, bool, bool]]:
    """Per rule: (nonterminal, length, transformer function or None, how to shape the children or
    None, Nones to append, replace by a single child, is a unit rule, the node is a level of
    nesting, the first child is a list the rule grows). A rule without a method is a `_rule`
    (spliced into its parent) or a `?rule` that always has one child; tests check that.
    A unit rule (``?sum: product``) leaves the value as it is and only changes the state.
    A repetition (``(_sep field)*``) splices its own list first: it grows that list in place
    rather than copying it, once per item, into a new one."""
    steps = []
    for origin, length, name, include, append_none, expand1 in tables.RULES:
        function = None if name is None else getattr(_ToAst, name, None)
        unit = expand1 and length == 1 and include is None
        grows = bool(include) and include[0][0] == 0 and bool(include[0][1]) \
            and not include[0][2]
        if grows:
            include = include[1:]
        steps.append((origin, length, function, include, append_none, expand1, unit,
                      name in _NESTS, grows))
    return steps


class _Runner:
    """What running the tables needs beyond them, made on the first program the descent
    declines (one it parses needs none of it, nor the large tables)."""

    def __init__(self) -> None:
        # One regular expression tries every terminal in Lark's order. A state's own lexer
        # (only the terminals that state accepts, keywords it does not accept lexed as NAME)
        # finds the same token whenever the tables say so (``tablegen._fast_kinds``); otherwise
        # that lexer's own expression, compiled on first use, decides.
        # A run of a skippable ignored terminal (spaces) before a token is taken with it: every
        # state's lexer would find that run, and ignore it, first (``tablegen._skippable_run``).
        skipped = (f"(?:{tables.TERMINALS[tables.SKIP_BEFORE_TOKEN]})?"
                   if tables.SKIP_BEFORE_TOKEN else "")
        self.master = re.compile(f"{skipped}(?:{_alternation(tables.MASTER)})").match
        self.state_fast: list[dict[str, str]] = [tables.LEXERS[i][2] for i in tables.STATE_LEXER]
        self.state_keywords: list[frozenset[str]] = [
            frozenset(tables.LEXERS[i][1]) for i in tables.STATE_LEXER]
        self.state_regex: dict[int, Any] = {}
        self.rules = _rule_steps()
        # (state below, state on top, lookahead) -> the state on top after every unit
        # reduction the lookahead causes there; a chain like postfix -> unary -> ... -> expr
        # becomes one step.
        self.unit_chains: dict[tuple[int, int, str], int] = {}

    def state_lex(self, state: int, text: str, pos: int) -> tuple[str, int]:
        """The kind and end of the token at ``pos``, lexed as the state's own lexer does."""
        lexer = tables.STATE_LEXER[state]
        match = self.state_regex.get(lexer)
        if match is None:
            match = self.state_regex[lexer] = re.compile(
                _alternation(tables.LEXERS[lexer][0])).match
        m = match(text, pos)
        if m is None:
            raise NoParse
        kind: str = m.lastgroup or ""
        if kind == "NAME":
            keyword = tables.KEYWORDS.get(m.group())
            if keyword is not None and keyword in self.state_keywords[state]:
                kind = keyword
        return kind, m.end()

    def unit_chain(self, below: int, top: int, kind: str) -> int:
        state = top
        while True:
            action = tables.ACTIONS[state].get(kind)
            if action is None or action >= 0 or not self.rules[-1 - action][6]:
                self.unit_chains[below, top, kind] = state
                return state
            state = tables.ACTIONS[below][self.rules[-1 - action][0]]


_RUNNER: _Runner | None = None


def _runner() -> _Runner:
    global _RUNNER
    if _RUNNER is None:
        _RUNNER = _Runner()
    return _RUNNER


def run_tables(text: str, file: str) -> ast.Program:
    """Parse ``text`` with the generated tables; raise ``NoParse`` where Lark raises a syntax
    error."""
    builder = _ToAst(file, text)
    runner = _runner()
    rules = runner.rules
    actions = tables.ACTIONS
    end_state = tables.END
    master = runner.master
    state_lex = runner.state_lex
    state_fast = runner.state_fast
    state_keywords = runner.state_keywords
    keywords = tables.KEYWORDS
    layout = _LAYOUT
    continues = CONTINUES_AFTER
    unit_chains = runner.unit_chains

    states: list[int] = [tables.START]
    values: list[Any] = []
    heights: list[int] = []  # per value, how many levels of nesting it holds (MAX_NESTING)
    brackets: list[str] = []  # the open brackets, for the newline rules
    last: str | None = None  # the kind of the last token given to the parser
    kind: str
    pos, size = 0, len(text)
    while True:
        if pos < size:
            state = states[-1]
            word = None  # a name's text, once sliced to look it up among the keywords
            m = master(text, pos)
            if m is None:
                kind, end = state_lex(state, text, pos)
            else:
                kind = m.lastgroup  # type: ignore[assignment]
                pos = m.start(kind)
                hidden = state_fast[state].get(kind)
                if hidden is None or hidden and text[pos] in hidden:
                    kind, end = state_lex(state, text, pos)
                else:
                    end = m.end()
                    if kind == "NAME":
                        word = text[pos:end]
                        keyword = keywords.get(word)
                        if keyword is not None and keyword in state_keywords[state]:
                            kind = keyword
            role = layout.get(kind)
            if role is not None:
                what, bracket = role
                if what == _SKIP:
                    pos = end
                    continue
                if what == _NEWLINE:
                    # a newline separates entries only after a complete one, and not in ( or [
                    if last is None or last in continues or brackets and brackets[-1] != "{":
                        pos = end
                        continue
                elif what == _OPEN:
                    brackets.append(bracket)
                elif brackets and brackets[-1] == bracket:
                    brackets.pop()
            last = kind
            token: Any = Token(kind, text[pos:end] if word is None else word, pos, end)
            pos = end
        else:
            kind = "$END"
            token = None
        while True:
            action = actions[states[-1]].get(kind)
            if action is None:
                raise NoParse
            if action >= 0:
                if token is None:
                    raise NoParse  # the end of the input is never shifted
                states.append(action)
                values.append(token)
                heights.append(0)
                break
            (origin, length, function, include, append_none, expand1, unit, nests,
             grows) = rules[-1 - action]
            if unit:
                below, top = states[-2], states[-1]
                chain = unit_chains.get((below, top, kind))
                states[-1] = runner.unit_chain(below, top, kind) if chain is None else chain
                continue
            if length == 1:
                children = [values.pop()]
                height = heights.pop()
                states.pop()
            elif length:
                children = values[-length:]
                height = max(heights[-length:])
                del values[-length:]
                del states[-length:]
                del heights[-length:]
            else:
                children = []
                height = 0
            if include is not None:
                shaped: list[Any] = children[0] if grows else []
                for i, splice, nones in include:
                    if nones:
                        shaped += [None] * nones
                    if splice:
                        shaped += children[i]
                    else:
                        shaped.append(children[i])
                if append_none:
                    shaped += [None] * append_none
                children = shaped
            if expand1 and len(children) == 1:
                value = children[0]
            elif function is None:
                value = children  # a `_rule`: its parent splices the list in
            else:
                value = function(builder, children)
                if nests:
                    height += 1
                    if height > MAX_NESTING:
                        raise _Refused(_too_deep(value, function.__name__))
            goto = actions[states[-1]][origin]
            if token is None and goto == end_state:
                assert isinstance(value, ast.Program)
                return value
            states.append(goto)
            values.append(value)
            heights.append(height)


def _too_deep(node: Any, rule: str) -> Diagnostic:
    kind = _NESTS[rule]
    return Diagnostic("error", "E047", f"This {kind} is nested more than {MAX_NESTING} levels "
                      "deep.", node.span, _NESTING_HINTS[kind])


# ------------------------------------------------------------------- syntax errors, from Lark

_LARK: tuple[Lark, NewlinePostLexer] | None = None


def _cache_path(text: str) -> str:
    import hashlib
    import os
    import tempfile

    import lark

    digest = hashlib.sha256((lark.__version__ + "\0" + text).encode()).hexdigest()[:16]
    base = os.environ.get("LUMA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "luma")
    try:
        os.makedirs(base, exist_ok=True)
        if not os.access(base, os.W_OK):
            raise OSError
    except OSError:
        base = tempfile.gettempdir()
    return os.path.join(base, f"luma-grammar-{digest}.lark-cache")


def lark_parser() -> tuple[Lark, NewlinePostLexer]:
    """Lark's parser for the grammar (built once, cached on disk) and its post-lexer, whose
    bracket stack the error messages read. Only syntax errors need it."""
    global _LARK
    if _LARK is None:
        from lark import Lark

        from luma.syntax.grammar import LARK_OPTIONS, grammar_text

        text = grammar_text()
        postlex = NewlinePostLexer()
        _LARK = Lark(text, postlex=postlex, cache=_cache_path(text), **LARK_OPTIONS), postlex
    return _LARK


def _syntax_diagnostic(source: SourceFile) -> Diagnostic:
    from lark.exceptions import UnexpectedInput

    from luma.syntax.syntax_errors import describe_unexpected

    parser, postlex = lark_parser()
    try:
        parser.parse(source.text)
    except UnexpectedInput as exc:
        message, start, end, hint = describe_unexpected(exc, source.text, postlex)
        return Diagnostic("error", "E001", message, Span(source.path, start, end), hint)
    raise AssertionError("Lark parses a program the parse tables reject: the tables are out of "
                         "date (python -m luma.syntax.tablegen) or the table runner is wrong")


class _Refused(Exception):
    """A program past one of Luma's limits (``luma/limits.py``): the parse stops there."""

    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


class _StringError(Exception):
    def __init__(self, problem: StringProblem) -> None:
        super().__init__(problem.message)
        self.problem = problem


# ----------------------------------------------------------------------------- the transformer


class _Block:
    """A braced statement list while parsing; callers unwrap it into a tuple."""

    __slots__ = ("stmts", "span")

    def __init__(self, stmts: tuple[Any, ...], span: Span) -> None:
        self.stmts = stmts
        self.span = span


def _abridged(digits: str) -> str:
    """A number's text for a message: a long one as its first digits and its length."""
    return digits if len(digits) <= 30 else f"{digits[:12]}... ({len(digits)} characters)"


def _start(x: Any) -> int:
    return x.start_pos if type(x) is Token else x.span.start


def _end(x: Any) -> int:
    return x.end_pos if type(x) is Token else x.span.end


class _ToAst:
    """One method per grammar rule, called with the rule's children (tokens, nodes, ``None`` for
    an absent optional). Raises nothing semantic: the checker judges meaning."""

    def __init__(self, file: str, text: str = "") -> None:
        self.file = file
        self.text = text

    # helpers ------------------------------------------------------------------------------
    def _span(self, children: list[Any]) -> Span:
        first = last = None
        for first in children:
            if first is not None:
                break
        if first is None:
            return Span(self.file, 0, 0)
        for last in reversed(children):
            if last is not None:
                break
        return Span(self.file, _start(first), _end(last))

    def _tok(self, t: Token) -> Span:
        return Span(self.file, t.start_pos, t.end_pos)

    @staticmethod
    def _sig(children: list[Any]) -> list[Any]:
        """Children without punctuation, keywords and empty optionals."""
        return [c for c in children
                if c is not None and not (isinstance(c, Token) and c.type in _PUNCT)]

    # program ------------------------------------------------------------------------------
    def start(self, children: list[Any]) -> ast.Program:
        items = tuple(self._sig(children))
        return ast.Program.of(items, self._span(children) if items else Span(self.file, 0, 0))

    # declarations -------------------------------------------------------------------------
    def schema_decl(self, c: list[Any]) -> ast.SchemaDecl:
        sig = self._sig(c)
        name = sig[0]
        return ast.SchemaDecl(name.value, tuple(sig[1:]), self._span(c), self._tok(name))

    def union_decl(self, c: list[Any]) -> ast.UnionDecl:
        sig = self._sig(c)
        name, tag = sig[0], sig[-1]
        return ast.UnionDecl(name.value, tuple(sig[1:-1]), tag.value, self._span(c),
                             self._tok(name), self._tok(tag))

    def union_member(self, c: list[Any]) -> ast.UnionMember:
        return ast.UnionMember(c[0].value, self._tok(c[0]))

    def field(self, c: list[Any]) -> ast.Field:
        # NAME "?"? ":" type annotation*
        name = c[0]
        optional = type(c[1]) is Token and c[1].type == "OPTIONAL"
        rest = c[3:] if optional else c[2:]
        return ast.Field(name.value, optional, rest[0], tuple(rest[1:]),
                         Span(self.file, name.start_pos, _end(c[-1])), self._tok(name))

    def annotation(self, c: list[Any]) -> ast.Annotation:
        sig = self._sig(c)
        name = sig[0]
        return ast.Annotation(name.value, tuple(sig[1:]), self._span(c),
                              Span(self.file, c[0].start_pos, name.end_pos))

    def tool_decl(self, c: list[Any]) -> ast.ToolDecl:
        name = c[1]
        close = next(i for i, x in enumerate(c) if isinstance(x, Token) and x.type == "RPAR")
        params = tuple(x for x in self._sig(c[2:close]))
        rest = self._sig(c[close + 1:])
        returns = rest[0]
        config = tuple(x for x in rest[1:] if isinstance(x, ast.ConfigEntry))
        needs = tuple(x for x in rest[1:] if isinstance(x, ast.NeedsDecl))
        return ast.ToolDecl(name.value, params, returns, config, needs, self._span(c),
                            self._tok(name))

    def query_decl(self, c: list[Any]) -> ast.ToolDecl:
        return self._data_tool(c, "query")

    def command_decl(self, c: list[Any]) -> ast.ToolDecl:
        return self._data_tool(c, "command")

    def _data_tool(self, c: list[Any], kind: str) -> ast.ToolDecl:
        name = c[1]
        close = next(i for i, x in enumerate(c) if isinstance(x, Token) and x.type == "RPAR")
        params = tuple(x for x in self._sig(c[2:close]))
        rest = self._sig(c[close + 1:])
        returns = None
        if rest and not isinstance(rest[0], (ast.ConfigEntry, ast.NeedsDecl)):
            returns = rest.pop(0)
        config = tuple(x for x in rest if isinstance(x, ast.ConfigEntry))
        needs = tuple(x for x in rest if isinstance(x, ast.NeedsDecl))
        offsets: tuple[int, ...] = ()
        sql = next((e.value for e in config if e.key == "sql"), None)
        if isinstance(sql, ast.StringLit) and self.text:
            offsets = value_offsets(self.text[sql.span.start:sql.span.end], sql.span.start)
        return ast.ToolDecl(name.value, params, returns, config, needs, self._span(c),
                            self._tok(name), kind, offsets)

    def datasource_decl(self, c: list[Any]) -> ast.DatasourceDecl:
        sig = self._sig(c)
        return ast.DatasourceDecl(sig[0].value, tuple(sig[1:]), self._span(c),
                                  self._tok(sig[0]))

    def test_decl(self, c: list[Any]) -> ast.TestDecl:
        name = c[1]
        entries = self._sig(c[2:])
        models = [e for e in entries if isinstance(e, ast.TestModel)]
        body = tuple(e for e in entries if not isinstance(e, ast.TestModel))
        return ast.TestDecl(self._const_string(name), tuple(models), body, self._span(c),
                            self._tok(name))

    def test_model(self, c: list[Any]) -> ast.TestModel:
        sig = self._sig(c)
        return ast.TestModel(sig[0].value, self._span(c), self._tok(sig[0]))

    def mock_stmt(self, c: list[Any]) -> ast.Mock:
        sig = self._sig(c)
        name, how, value = sig
        return ast.Mock(name.value, how.type == "MOCK_THROWS", value, self._span(c),
                        self._tok(name))

    def assert_stmt(self, c: list[Any]) -> ast.Assert:
        sig = self._sig(c)
        message = sig[2] if len(sig) > 2 else None
        return ast.Assert(sig[0].type == "CHECK", sig[1], message, self._span(c))

    def needs_decl(self, c: list[Any]) -> ast.NeedsDecl:
        sig = self._sig(c)
        return ast.NeedsDecl(sig[0].value, sig[1], self._span(c), self._tok(sig[0]))

    def model_decl(self, c: list[Any]) -> ast.ModelDecl:
        sig = self._sig(c)
        return ast.ModelDecl(sig[0].value, tuple(sig[1:]), self._span(c), self._tok(sig[0]))

    def agent_decl(self, c: list[Any]) -> ast.AgentDecl:
        sig = self._sig(c)
        config = tuple(x for x in sig[1:] if isinstance(x, ast.ConfigEntry))
        fns = tuple(x for x in sig[1:] if isinstance(x, ast.FnDecl))
        return ast.AgentDecl(sig[0].value, config, fns, self._span(c), self._tok(sig[0]))

    def config_entry(self, c: list[Any]) -> ast.ConfigEntry:
        sig = self._sig(c)
        return ast.ConfigEntry(sig[0].value, sig[1], self._span(c), self._tok(sig[0]))

    def fn_decl(self, c: list[Any]) -> ast.FnDecl:
        name = c[1]
        close = next(i for i, x in enumerate(c) if isinstance(x, Token) and x.type == "RPAR")
        params = tuple(self._sig(c[2:close]))
        rest = self._sig(c[close + 1:])
        body: tuple[ast.Stmt, ...] = rest[-1].stmts
        returns = rest[0] if len(rest) == 2 else None
        return ast.FnDecl(name.value, params, returns, body, self._span(c), self._tok(name))

    # types --------------------------------------------------------------------------------
    def named_type(self, c: list[Any]) -> ast.PrimitiveType | ast.NamedType:
        t = c[0]
        if t.value in ast.PRIMITIVE_TYPES:
            return ast.PrimitiveType(t.value, self._tok(t))
        return ast.NamedType(t.value, self._tok(t))

    def list_type(self, c: list[Any]) -> ast.ListType:
        return ast.ListType(c[0], self._span(c))

    def map_type(self, c: list[Any]) -> ast.MapType:
        return ast.MapType(self._sig(c)[0], self._span(c))

    def enum_type(self, c: list[Any]) -> ast.EnumType:
        values = tuple(self._const_string(t) for t in self._sig(c))
        return ast.EnumType(values, self._span(c))

    def _const_string(self, t: Token) -> str:
        return self._string(t).value

    def _string(self, t: Token) -> ast.StringLit:
        try:
            return parse_string(t.value, t.start_pos or 0, self.file)
        except StringProblem as exc:
            raise _StringError(exc) from None

    # statements ---------------------------------------------------------------------------
    def block(self, c: list[Any]) -> _Block:
        return _Block(tuple(self._sig(c)), self._span(c))

    def assign(self, c: list[Any]) -> ast.Assign:
        return ast.Assign(c[0].value, None, c[2], self._span(c), self._tok(c[0]))

    def typed_assign(self, c: list[Any]) -> ast.Assign:
        return ast.Assign(c[0].value, c[2], c[4], self._span(c), self._tok(c[0]))

    def if_stmt(self, c: list[Any]) -> ast.If:
        sig = self._sig(c)
        cond, then = sig[0], sig[1].stmts
        orelse: tuple[ast.Stmt, ...] | None = None
        if len(sig) > 2:
            other = sig[2]
            orelse = other.stmts if isinstance(other, _Block) else (other,)
        return ast.If(cond, then, orelse, self._span(c))

    def for_stmt(self, c: list[Any]) -> ast.For:
        sig = self._sig(c)
        return ast.For(sig[0].value, sig[1], sig[2].stmts, self._span(c), self._tok(sig[0]))

    def return_stmt(self, c: list[Any]) -> ast.Return:
        sig = self._sig(c)
        return ast.Return(sig[0] if sig else None, self._span(c))

    def try_stmt(self, c: list[Any]) -> ast.Try:
        sig = self._sig(c)
        return ast.Try(sig[0].stmts, sig[1].value, sig[2].stmts, self._span(c), self._tok(sig[1]))

    def throw_stmt(self, c: list[Any]) -> ast.Throw:
        return ast.Throw(self._sig(c)[0], self._span(c))

    def expr_stmt(self, c: list[Any]) -> ast.ExprStmt:
        return ast.ExprStmt(c[0], self._span(c))

    # expressions --------------------------------------------------------------------------
    def ask_expr(self, c: list[Any]) -> ast.Ask:
        sig = self._sig(c)
        using = sig[2] if len(sig) > 2 else None
        return ast.Ask(sig[0], sig[1], using.value if using else None, self._span(c),
                       self._tok(using) if using else None)

    def or_op(self, c: list[Any]) -> ast.Binary:
        return ast.Binary("or", c[0], c[2], self._span(c))

    def and_op(self, c: list[Any]) -> ast.Binary:
        return ast.Binary("and", c[0], c[2], self._span(c))

    def not_op(self, c: list[Any]) -> ast.Unary:
        return ast.Unary("not", c[1], self._span(c))

    def binary(self, c: list[Any]) -> ast.Binary:
        return ast.Binary(c[1].value, c[0], c[2], self._span(c))

    def neg(self, c: list[Any]) -> ast.Unary | ast.Literal:
        operand = c[1]
        span = self._span(c)
        # -7 and -0.25 are literals (LANGUAGE.md §1); fold them so constants stay constants
        if isinstance(operand, ast.Literal) and type(operand.value) in (int, float):
            return ast.Literal(-operand.value, span)  # type: ignore[operator]
        return ast.Unary("-", operand, span)

    def member(self, c: list[Any]) -> ast.Member:
        return ast.Member(c[0], c[2].value, self._span(c), self._tok(c[2]))

    def index(self, c: list[Any]) -> ast.Index:
        return ast.Index(c[0], c[2], self._span(c))

    def call(self, c: list[Any]) -> ast.Call:
        return ast.Call(c[0], tuple(self._sig(c[1:])), self._span(c))

    def atom(self, c: list[Any]) -> Any:
        return self._sig(c)[0]  # "(" expr ")"

    def name(self, c: list[Any]) -> ast.Name:
        return ast.Name(c[0].value, self._tok(c[0]))

    def int_lit(self, c: list[Any]) -> ast.Literal:
        text = c[0].value
        # the length first: int() refuses to read more than 4300 digits
        if len(text) > len(str(MAX_SAFE_INTEGER)) or int(text) > MAX_SAFE_INTEGER:
            raise _Refused(Diagnostic(
                "error", "E048", f"The integer {_abridged(text)} is too large: integers are at "
                f"most {MAX_SAFE_INTEGER} (2^53 - 1).", self._tok(c[0]),
                "a larger number can be written as a float (e.g. 1e20) or as a string"))
        return ast.Literal(int(text), self._tok(c[0]))

    def float_lit(self, c: list[Any]) -> ast.Literal:
        text = c[0].value
        value = float(text)
        if value == float("inf"):
            raise _Refused(Diagnostic(
                "error", "E048", f"The number {_abridged(text)} is too large for a float: the "
                "largest is about 1.8e308.", self._tok(c[0])))
        return ast.Literal(value, self._tok(c[0]))

    def string_lit(self, c: list[Any]) -> ast.StringLit:
        return self._string(c[0])

    def true_lit(self, c: list[Any]) -> ast.Literal:
        return ast.Literal(True, self._tok(c[0]))

    def false_lit(self, c: list[Any]) -> ast.Literal:
        return ast.Literal(False, self._tok(c[0]))

    def null_lit(self, c: list[Any]) -> ast.Literal:
        return ast.Literal(None, self._tok(c[0]))

    def list_lit(self, c: list[Any]) -> ast.ListLit:
        return ast.ListLit(tuple(self._sig(c)), self._span(c))

    def object_lit(self, c: list[Any]) -> ast.ObjectLit:
        return ast.ObjectLit(tuple(self._sig(c)), self._span(c))

    def object_entry(self, c: list[Any]) -> ast.ObjectEntry:
        key = c[0]
        text = self._const_string(key) if key.type in ("STRING", "LONG_STRING") else key.value
        return ast.ObjectEntry(text, c[2], self._span(c), self._tok(key))

    def tool_call(self, c: list[Any]) -> ast.ToolCall:
        sig = self._sig(c)
        return ast.ToolCall(sig[0].value, sig[1], self._span(c), self._tok(sig[0]))


def __getattr__(name: str) -> Any:
    # Lark's error classes, once re-exported here; loading Lark only when asked for them.
    if name in ("UnexpectedCharacters", "UnexpectedEOF", "UnexpectedToken"):
        import lark.exceptions

        return getattr(lark.exceptions, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")



__all__ = ["parse_source", "parse_text", "parse_file", "ParseFailure",
           "Token", "NoParse", "run_tables", "lark_parser"]
