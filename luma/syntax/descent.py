"""The parser every program goes through first: recursive descent over the grammar.

``grammar/luma.lark`` is the definition of the language, and ``parse.run_tables`` runs its
LALR(1) tables with Lark's meaning. This module parses the same language by hand — a function
per rule, binary operators by precedence — because a loop over tables costs a Python step per
token and per reduction, about five times what a descent costs. It builds exactly the AST the
tables build (the same nodes, the same spans; tests compare the two on every program in the
repository and on mutated and random ones).

It never has to be right about a program that is wrong. Where anything is not as it expects —
a syntax error, a string with a bad escape, a number past its limit, nesting past
``MAX_NESTING``, one of the rare texts the contextual lexer splits differently (``a android``
is ``a and roid`` there) — it gives up (``Declined``), and the program is parsed again by the
tables, whose answer (the AST, or the diagnostic) is the one given.

Tokens. One regular expression, made of the grammar's own terminals, splits the text into
tokens; spaces and comments before a token go with it. A token is its text: a word (a name, or
a keyword where the grammar takes that keyword there), a number, a string, punctuation,
``"\\n"`` for a newline that separates entries. ``else`` and ``catch`` after newlines that
would separate are one token, ``"\\nelse"`` and ``"\\ncatch"``, which only ``if`` and ``try``
take (the grammar's ``_ELSE`` and ``CATCH``, whose terminals hold the newlines). The newline
rules of ``lexer.py`` are applied while splitting: a newline after an operator, ``=``, ``:``,
``,``, an opening bracket or another newline, inside ``( )`` and ``[ ]``, and at the start of
the file is dropped. After ``and``, ``or``, ``not``, ``ask``, ``tool`` and ``using`` it is kept
but marked: those words continue the line only where they are keywords, which the parser knows
when it takes them.
"""

from __future__ import annotations

import re

from luma.limits import MAX_NESTING, MAX_SAFE_INTEGER
from luma.syntax import ast, tables
from luma.syntax.source import Span
from luma.syntax.strings import StringProblem, parse_string, value_offsets

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

_END = "$end"  # after the last token (no token is four characters starting with "$")


class Declined(Exception):
    """Not parsed here: the tables parse it, or describe why it does not parse."""


def _plain(pattern: str) -> str:
    """A terminal's expression with its groups made non-capturing (``findall`` returns the
    two groups of ``_SPLIT`` and no others)."""
    return re.sub(r"(?<!\\)\((?!\?)", "(?:", pattern)


# The grammar's terminals, most frequent first. Lark's lexer tries them in its order (and the
# tables' one expression too, ``tables.MASTER``); the order here finds the same token wherever
# two could match at one place: `==` before `=` (COMP_OP before EQUAL), `->` before `-`,
# `"""` before `"`, a float before an int. `else` and `catch` are words (the tables' _ELSE and
# CATCH, which the parser takes by their text) or, after newlines, one token with them, which
# the newline terminal is extended to take.
_ORDER = ("NAME", "_NL", "COMP_OP", "ARROW", "MUL_OP", "AT", "COLON", "COMMA", "DOT", "EQUAL",
          "LBRACE", "LPAR", "LSQB", "MINUS", "OPTIONAL", "PLUS", "RBRACE", "RPAR", "RSQB", "VBAR",
          "LONG_STRING", "STRING", "FLOAT", "INT")
_KEYWORD_AFTER_NEWLINES = "(?:(?:catch|else)(?![A-Za-z0-9_]))?"
_TERMINALS = "|".join(_plain(tables.TERMINALS[k]) + (_KEYWORD_AFTER_NEWLINES if k == "_NL" else "")
                      for k in _ORDER)
_COMMENT = f"{tables.TERMINALS['BLOCK_COMMENT']}|{tables.TERMINALS['LINE_COMMENT']}"
# (what is skipped, the token): the skipped part is possessive (never gives back the end of a
# comment to make a token of it; as an atomic group it is much slower in Python's re); a
# character no terminal matches is a token of one character, which nothing accepts; what is
# skipped at the end of the text comes with an empty token. So every character is in exactly one
# pair: ``findall`` never passes over text it could not match (it would, after a comment that
# ends the file, and find tokens inside it).
_IGNORED = f"[\\t \\f]*+(?:(?:{_COMMENT})[\\t \\f]*+)*+"
_SPLIT = re.compile(f"({_IGNORED})({_TERMINALS}|[^\\t \\f]|\\Z)").findall
_NEWLINES = re.compile(tables.TERMINALS["_NL"]).match

_SOFT = 2  # a word that continues the line only as a keyword
_CONTINUES = {
    **dict.fromkeys(("+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "=", "->", ":",
                     ",", "|", ".", "@", "{", "(", "["), True),
    **dict.fromkeys(("and", "or", "not", "ask", "tool", "using"), _SOFT),
}
_OPEN, _CLOSE = 3, 4
# What splitting does after a token: none for names, numbers, strings and newlines.
_ROLES: dict[str, object] = {**_CONTINUES, **dict.fromkeys("([{", _OPEN),
                             **dict.fromkeys(")]}", _CLOSE)}
_OPENED_BY = {")": "(", "]": "[", "}": "{"}
_WORD_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_DIGITS = frozenset("0123456789")

# The binary operators by precedence (LANGUAGE.md §3); `not` binds between `and` and the
# comparisons.
_NOT_LEVEL = 3
_BINARY = {"or": 1, "and": 2, "==": 4, "!=": 4, "<": 4, "<=": 4, ">": 4, ">=": 4,
           "+": 5, "-": 5, "*": 6, "/": 6, "%": 6}
# Words that begin an expression as keywords: they are never the target of an assignment.
_EXPRESSION_WORDS = frozenset(("not", "ask", "true", "false", "null", "tool"))
_LITERALS = {"true": True, "false": False, "null": None}
_STATEMENT_ENDS = frozenset(("\n", ",", "}", _END))
_ELSE = frozenset(("else", "\nelse"))
_CATCH = frozenset(("catch", "\ncatch"))


def tokens(text: str) -> tuple[list[str], list[int], set[int]]:
    """The tokens of ``text``, their start offsets and the indices of the marked newlines."""
    toks: list[str] = []
    starts: list[int] = []
    soft: set[int] = set()
    brackets: list[str] = []
    continues: object = True  # the start of the file separates nothing
    pos = 0
    for skipped, tok in _SPLIT(text):
        pos += len(skipped)
        role = _ROLES.get(tok)
        if role is None:
            if not tok:
                break  # the end of the text
            first = tok[0]
            if first == "\n" or first == "\r" and tok != "\r":  # a lone \r is no newline
                last = tok[-1]
                dropped = continues is True or brackets and brackets[-1] != "{"
                if last == "e" or last == "h":  # newlines and `else` / `catch`: one token
                    word = "else" if last == "e" else "catch"
                    starts.append(pos + len(tok) - len(word))
                    # where the newlines would separate, only `if` and `try` take the word
                    # with them (elsewhere they are a newline and a name: the tables decide)
                    toks.append(word if dropped else "\n" + word)
                    continues = False
                elif dropped:
                    pass
                else:
                    if continues:
                        soft.add(len(toks))
                    toks.append("\n")
                    starts.append(pos)
                    continues = True
                pos += len(tok)
                continue
            continues = False
        elif role == _OPEN:
            brackets.append(tok)
            continues = True
        elif role == _CLOSE:
            if brackets and brackets[-1] == _OPENED_BY[tok]:
                brackets.pop()
            continues = False
        else:
            continues = role
        toks.append(tok)
        starts.append(pos)
        pos += len(tok)
    toks += (_END, _END, _END, _END, _END)
    starts += (len(text),) * 5
    return toks, starts, soft


def parse(text: str, file: str) -> ast.Program:
    """The program ``text`` is, or ``Declined``."""
    try:
        return _Descent(text, file).program()
    except (IndexError, RecursionError):
        raise Declined from None


class _Descent:
    """One parse. ``i`` is the index of the next token; every method that makes an
    expression, a type or a statement leaves its nesting height in ``h`` (``MAX_NESTING``
    counts what the tables count: each operator, call, member, index, literal list or object,
    ``ask``, ``tool`` call, ``if``/``for``/``try`` and list or map type is a level)."""

    def __init__(self, text: str, file: str) -> None:
        self.text = text
        self.file = file
        self.toks, self.starts, self.soft = tokens(text)
        self.i = 0
        self.h = 0

    # tokens -------------------------------------------------------------------------------
    def _end(self, i: int) -> int:
        return self.starts[i] + len(self.toks[i])

    def _span(self, first: int, last: int) -> Span:
        """From the start of token ``first`` to the end of token ``last``."""
        return Span(self.file, self.starts[first], self.starts[last] + len(self.toks[last]))

    def _tok(self, i: int) -> Span:
        return Span(self.file, self.starts[i], self.starts[i] + len(self.toks[i]))

    def _expect(self, tok: str) -> None:
        if self.toks[self.i] != tok:
            raise Declined
        self.i += 1

    def _keyword(self, word: str) -> None:
        """Take ``word`` as a keyword that continues the line (a marked newline after it is
        dropped)."""
        if self.toks[self.i] != word:
            raise Declined
        self.i += 1
        if self.i in self.soft:
            self.i += 1

    def _name(self) -> int:
        """Take a name; its index."""
        i = self.i
        if self.toks[i][0] not in _WORD_START:
            raise Declined
        self.i = i + 1
        return i

    def _nest(self, height: int) -> None:
        if height > MAX_NESTING:
            raise Declined  # the tables say which limit, and where
        self.h = height

    # program ------------------------------------------------------------------------------
    def program(self) -> ast.Program:
        toks = self.toks
        items: list[Any] = []
        separated = False
        while toks[self.i] != _END:
            items.append(self._item())
            tok = toks[self.i]
            if tok == "\n" or tok == ",":
                self.i += 1
                separated = True
            elif tok != _END:
                raise Declined
            else:
                separated = False
        if not items:
            return ast.Program.of((), Span(self.file, 0, 0))
        end = items[-1].span.end
        if separated:
            last = self.i - 1
            start = self.starts[last]
            end = start + 1 if toks[last] == "," else _NEWLINES(self.text, start).end()  # type: ignore[union-attr]
        return ast.Program.of(tuple(items), Span(self.file, items[0].span.start, end))

    def _item(self) -> ast.Decl | ast.TestStmt:
        tok = self.toks[self.i]
        if tok == "schema":
            return self._schema()
        if tok == "tool" and self._tool_declared():
            return self._tool("tool")
        if tok == "model":
            return self._configured(ast.ModelDecl)  # type: ignore[no-any-return]
        if tok == "agent":
            return self._agent()
        if tok == "datasource":
            return self._configured(ast.DatasourceDecl)  # type: ignore[no-any-return]
        if tok == "query" or tok == "command":
            return self._tool(tok)
        if tok == "test":
            return self._test()
        return self._statement(False)

    def _tool_declared(self) -> bool:
        """``tool NAME (`` begins a declaration when a field or ``)`` follows, else a call."""
        i = self.i + 1
        if i in self.soft:
            raise Declined
        toks = self.toks
        if toks[i + 1] != "(":
            return True  # neither: the declaration's rule says what is wrong
        after = toks[i + 2]
        if after in _EXPRESSION_WORDS:
            raise Declined  # a keyword where a call's argument may begin: no parameter's name
        return after == ")" or after[0] in _WORD_START and toks[i + 3] in (":", "?")

    # declarations -------------------------------------------------------------------------
    def _schema(self) -> ast.SchemaDecl | ast.UnionDecl:
        first = self.i
        self.i += 1
        name = self._name()
        toks = self.toks
        if toks[self.i] == "=":
            self.i += 1
            members = [self._member()]
            while toks[self.i] == "|":
                self.i += 1
                members.append(self._member())
            self._expect("tagged")
            self._expect("by")
            tag = self._name()
            return ast.UnionDecl(toks[name], tuple(members), toks[tag], self._span(first, tag),
                                 self._tok(name), self._tok(tag))
        fields = self._separated(self._field)
        return ast.SchemaDecl(toks[name], tuple(fields), self._span(first, self.i - 1),
                              self._tok(name))

    def _member(self) -> ast.UnionMember:
        i = self._name()
        return ast.UnionMember(self.toks[i], self._tok(i))

    def _field(self) -> ast.Field:
        # the most frequent declaration of all, written out (no helper per token)
        toks = self.toks
        i = first = self.i
        name = toks[i]
        if name[0] not in _WORD_START:
            raise Declined
        optional = toks[i + 1] == "?"
        if optional:
            i += 1
        if toks[i + 1] != ":":
            raise Declined
        self.i = i + 2
        type_ = self._type()
        end = type_.span.end
        annotations: tuple[ast.Annotation, ...] = ()
        if toks[self.i] == "@":
            annotations = self._annotations()
            end = annotations[-1].span.end
        start = self.starts[first]
        return ast.Field(name, optional, type_, annotations, Span(self.file, start, end),
                         Span(self.file, start, start + len(name)))

    def _annotations(self) -> tuple[ast.Annotation, ...]:
        annotations = []
        while self.toks[self.i] == "@":
            annotations.append(self._annotation())
        return tuple(annotations)

    def _annotation(self) -> ast.Annotation:
        at = self.i
        self.i += 1
        name = self._name()
        args: list[ast.Expr] = []
        last = name
        if self.toks[self.i] == "(":
            self.i += 1
            args = self._exprs(")")
            last = self.i - 1
        return ast.Annotation(self.toks[name], tuple(args), self._span(at, last),
                              self._span(at, name))

    def _params(self) -> tuple[ast.Field, ...]:
        """``( field, ... )``, a trailing comma allowed."""
        self._expect("(")
        toks = self.toks
        params = []
        while toks[self.i] != ")":
            params.append(self._field())
            if toks[self.i] == ",":
                self.i += 1
            elif toks[self.i] != ")":
                raise Declined
        self.i += 1
        return tuple(params)

    def _tool(self, kind: str) -> ast.ToolDecl:
        first = self.i
        if kind == "tool":
            self._keyword("tool")
        else:
            self._expect(kind)
        name = self._name()
        params = self._params()
        returns = None
        if kind == "tool" or self.toks[self.i] == "->":
            self._expect("->")
            returns = self._type()
        config, needs = self._entries("needs", self._needs)
        span = self._span(first, self.i - 1)
        if kind == "tool":
            return ast.ToolDecl(self.toks[name], params, returns, tuple(config), tuple(needs),
                                span, self._tok(name))
        offsets: tuple[int, ...] = ()
        sql = next((e.value for e in config if e.key == "sql"), None)
        if isinstance(sql, ast.StringLit) and self.text:
            offsets = value_offsets(self.text[sql.span.start:sql.span.end], sql.span.start)
        return ast.ToolDecl(self.toks[name], params, returns, tuple(config), tuple(needs),
                            span, self._tok(name), kind, offsets)

    def _needs(self) -> ast.NeedsDecl:
        first = self.i
        self.i += 1
        name = self._name()
        self._expect(":")
        type_ = self._type()
        return ast.NeedsDecl(self.toks[name], type_,
                             Span(self.file, self.starts[first], type_.span.end),
                             self._tok(name))

    def _entries(self, keyword: str = "", entry: Any = None) -> tuple[list[ast.ConfigEntry],
                                                                     list[Any]]:
        """``{ entry sep entry ... }``: the config entries, and what ``entry`` makes of each
        entry ``keyword`` begins."""
        def one() -> Any:
            return entry() if self.toks[self.i] == keyword else self._config()

        items = self._separated(one)
        config = [x for x in items if type(x) is ast.ConfigEntry]
        return config, [x for x in items if type(x) is not ast.ConfigEntry]

    def _separated(self, item: Any, commas: bool = True) -> list[Any]:
        """``{ item sep item ... }``, the braces taken: a newline (or, with ``commas``, a comma)
        between items, one after the last allowed. The items' largest height is left in
        ``h``."""
        self._expect("{")
        toks = self.toks
        items = []
        height = 0
        while toks[self.i] != "}":
            items.append(item())
            if self.h > height:
                height = self.h
            tok = toks[self.i]
            if tok == "\n" or tok == "," and commas:
                self.i += 1
            elif tok != "}":
                raise Declined
        self.i += 1
        self.h = height
        return items

    def _config(self) -> ast.ConfigEntry:
        key = self._name()
        self._expect(":")
        value = self._expr()
        return ast.ConfigEntry(self.toks[key], value,
                               Span(self.file, self.starts[key], value.span.end),
                               self._tok(key))

    def _configured(self, kind: Any) -> Any:
        """``model NAME { config }`` or ``datasource NAME { config }``: a ``kind`` node."""
        first = self.i
        self.i += 1
        name = self._name()
        config, _ = self._entries()
        return kind(self.toks[name], tuple(config), self._span(first, self.i - 1),
                    self._tok(name))

    def _agent(self) -> ast.AgentDecl:
        first = self.i
        self.i += 1
        name = self._name()
        config, fns = self._entries("fn", self._fn)
        return ast.AgentDecl(self.toks[name], tuple(config), tuple(fns),
                             self._span(first, self.i - 1), self._tok(name))

    def _fn(self) -> ast.FnDecl:
        first = self.i
        self.i += 1
        name = self._name()
        params = self._params()
        returns = None
        if self.toks[self.i] == "->":
            self.i += 1
            returns = self._type()
        body = self._block(False)
        return ast.FnDecl(self.toks[name], params, returns, body, self._span(first, self.i - 1),
                          self._tok(name))

    def _test(self) -> ast.TestDecl:
        first = self.i
        self.i += 1
        name = self.i
        name_text = self._string_token(name)
        self.i += 1
        entries = self._separated(self._test_entry, commas=False)
        models = tuple(e for e in entries if type(e) is ast.TestModel)
        body = tuple(e for e in entries if type(e) is not ast.TestModel)
        return ast.TestDecl(self._const_string(name_text, name), models, body,
                            self._span(first, self.i - 1), self._tok(name))

    def _test_entry(self) -> ast.TestModel | ast.TestStmt:
        if self.toks[self.i] != "model":
            return self._statement(True)
        first = self.i
        self.i += 1
        self._expect(":")
        model = self._name()
        self.h = 0
        return ast.TestModel(self.toks[model], self._span(first, model), self._tok(model))

    # types --------------------------------------------------------------------------------
    def _type(self) -> ast.TypeExpr:
        toks = self.toks
        i = self.i
        tok = toks[i]
        if tok == "enum" or tok == "map":
            node: ast.TypeExpr = self._enum_type() if tok == "enum" else self._map_type()
            height = self.h
        elif tok[0] in _WORD_START:
            self.i = i + 1
            span = Span(self.file, self.starts[i], self.starts[i] + len(tok))
            node = (ast.PrimitiveType(tok, span) if tok in ast.PRIMITIVE_TYPES
                    else ast.NamedType(tok, span))
            height = 0
        else:
            raise Declined
        while toks[self.i] == "[":
            self.i += 1
            self._expect("]")
            height += 1
            if height > MAX_NESTING:
                raise Declined
            node = ast.ListType(node, Span(self.file, node.span.start, self._end(self.i - 1)))
        self.h = height
        return node

    def _enum_type(self) -> ast.EnumType:
        first = self.i
        self.i += 1
        self._expect("[")
        toks = self.toks
        values = []
        while toks[self.i] != "]":
            i = self.i
            tok = self._string_token(i)
            values.append(self._const_string(tok, i))
            self.i += 1
            if toks[self.i] == ",":
                self.i += 1
            elif toks[self.i] != "]":
                raise Declined
        self.i += 1
        self.h = 0
        return ast.EnumType(tuple(values), self._span(first, self.i - 1))

    def _map_type(self) -> ast.MapType:
        first = self.i
        self.i += 1
        self._expect("[")
        value = self._type()
        self._expect("]")
        self._nest(self.h + 1)
        return ast.MapType(value, self._span(first, self.i - 1))

    # strings ------------------------------------------------------------------------------
    def _string_token(self, i: int) -> str:
        """The text of a short string token at ``i`` (``STRING``, not ``LONG_STRING``)."""
        tok = self.toks[i]
        if tok[0] != '"' or len(tok) < 2 or tok.startswith('"""'):
            raise Declined
        return tok

    def _string(self, tok: str, i: int) -> ast.StringLit:
        try:
            return parse_string(tok, self.starts[i], self.file)
        except StringProblem:
            raise Declined from None

    def _const_string(self, tok: str, i: int) -> str:
        return self._string(tok, i).value

    # statements ---------------------------------------------------------------------------
    def _block(self, test: bool) -> tuple[ast.Stmt, ...]:
        """``{ statement sep statement ... }``, its height left in ``h``; in a test's blocks only
        a newline separates (a test's own statements may be mocks and assertions)."""
        return tuple(self._separated(lambda: self._statement(test), commas=not test))

    def _statement(self, test: bool) -> ast.TestStmt:
        toks = self.toks
        first = self.i
        tok = toks[first]
        if tok == "if":
            return self._if(test)
        if tok == "for":
            self.i += 1
            var = self._name()
            self._expect("in")
            iterable = self._expr()
            height = self.h
            body = self._block(test)
            self._nest(max(height, self.h) + 1)
            return ast.For(toks[var], iterable, body, self._span(first, self.i - 1),
                           self._tok(var))
        if tok == "try":
            self.i += 1
            body = self._block(test)
            height = self.h
            if toks[self.i] not in _CATCH:
                raise Declined
            self.i += 1
            err = self._name()
            handler = self._block(test)
            self._nest(max(height, self.h) + 1)
            return ast.Try(body, toks[err], handler, self._span(first, self.i - 1),
                           self._tok(err))
        if tok == "return":
            self.i += 1
            if toks[self.i] in _STATEMENT_ENDS:
                self.h = 0
                return ast.Return(None, self._tok(first))
            value = self._expr()
            return ast.Return(value, Span(self.file, self.starts[first], value.span.end))
        if tok == "throw":
            self.i += 1
            value = self._expr()
            return ast.Throw(value, Span(self.file, self.starts[first], value.span.end))
        if test and (tok == "assert" or tok == "check"):
            self.i += 1
            cond = self._expr()
            height = self.h
            message = None
            if toks[self.i] == ",":
                self.i += 1
                message = self._expr()
                height = max(height, self.h)
            self.h = height
            end = (message or cond).span.end
            return ast.Assert(tok == "check", cond, message,
                              Span(self.file, self.starts[first], end))
        if test and tok == "mock":
            self.i += 1
            self._keyword("tool")
            name = self._name()
            how = toks[self.i]
            if how != "returns" and how != "throws":
                raise Declined
            self.i += 1
            value = self._expr()
            return ast.Mock(toks[name], how == "throws", value,
                            Span(self.file, self.starts[first], value.span.end),
                            self._tok(name))
        if tok[0] in _WORD_START and tok not in _EXPRESSION_WORDS:
            after = toks[first + 1]
            if after == "=":
                self.i += 2
                value = self._expr()
                return ast.Assign(tok, None, value,
                                  Span(self.file, self.starts[first], value.span.end),
                                  self._tok(first))
            if after == ":":
                self.i += 2
                type_ = self._type()
                height = self.h
                self._expect("=")
                value = self._expr()
                self.h = max(height, self.h)
                return ast.Assign(tok, type_, value,
                                  Span(self.file, self.starts[first], value.span.end),
                                  self._tok(first))
        expr = self._expr()
        return ast.ExprStmt(expr, Span(self.file, expr.span.start, expr.span.end))

    def _if(self, test: bool) -> ast.If:
        first = self.i
        self.i += 1
        cond = self._expr()
        height = self.h
        then = self._block(test)
        height = max(height, self.h)
        orelse: tuple[ast.Stmt, ...] | None = None
        if self.toks[self.i] in _ELSE:
            self.i += 1
            tok = self.toks[self.i]
            if tok == "{":
                orelse = self._block(test)
            elif tok == "if":
                orelse = (self._if(test),)
            else:
                raise Declined
            height = max(height, self.h)
        self._nest(height + 1)
        return ast.If(cond, then, orelse, self._span(first, self.i - 1))

    # expressions --------------------------------------------------------------------------
    def _expr(self) -> ast.Expr:
        if self.toks[self.i] == "ask":
            return self._ask()
        return self._binary(0)

    def _exprs(self, close: str) -> list[ast.Expr]:
        """``expr, expr, ... close`` (a trailing comma allowed), the closing token taken; the
        largest height in ``h``."""
        toks = self.toks
        items = []
        height = 0
        while toks[self.i] != close:
            items.append(self._expr())
            if self.h > height:
                height = self.h
            if toks[self.i] == ",":
                self.i += 1
            elif toks[self.i] != close:
                raise Declined
        self.i += 1
        self.h = height
        return items

    def _ask(self) -> ast.Ask:
        first = self.i
        self._keyword("ask")
        prompt = self._binary(0)
        height = self.h
        self._expect("->")
        type_ = self._type()
        height = max(height, self.h)
        using = using_span = None
        end = type_.span.end
        if self.toks[self.i] == "using":
            self._keyword("using")
            self._keyword("tool")
            name = self._name()
            using, using_span = self.toks[name], self._tok(name)
            end = using_span.end
        self._nest(height + 1)
        return ast.Ask(prompt, type_, using, Span(self.file, self.starts[first], end),
                       using_span)

    def _binary(self, level: int) -> ast.Expr:
        """An expression of operators at ``level`` and above (``_BINARY``; ``not`` where
        ``level`` allows it), left-associative."""
        toks = self.toks
        first = self.i
        if toks[first] == "not" and level <= _NOT_LEVEL:
            self._keyword("not")
            operand = self._binary(_NOT_LEVEL)
            self._nest(self.h + 1)
            left: ast.Expr = ast.Unary("not", operand,
                                       Span(self.file, self.starts[first], operand.span.end))
        elif toks[first] == "-":
            left = self._negation()
        else:
            left = self._postfix()
        height = self.h
        while True:
            op = toks[self.i]
            op_level = _BINARY.get(op)
            if op_level is None or op_level < level:
                self.h = height
                return left
            if op_level <= 2:
                self._keyword(op)
            else:
                self.i += 1
            right = self._binary(op_level + 1)
            height = max(height, self.h) + 1
            if height > MAX_NESTING:
                raise Declined
            left = ast.Binary(op, left, right,
                              Span(self.file, left.span.start, right.span.end))

    def _negation(self) -> ast.Expr:
        first = self.i
        self.i += 1
        operand = self._negation() if self.toks[self.i] == "-" else self._postfix()
        self._nest(self.h + 1)
        span = Span(self.file, self.starts[first], operand.span.end)
        # -7 and -0.25 are literals (LANGUAGE.md §1), as the tables fold them
        if isinstance(operand, ast.Literal) and type(operand.value) in (int, float):
            return ast.Literal(-operand.value, span)  # type: ignore[operator]
        return ast.Unary("-", operand, span)

    def _postfix(self) -> ast.Expr:
        node = self._atom()
        toks = self.toks
        height = self.h
        while True:
            tok = toks[self.i]
            if tok == ".":
                self.i += 1
                name = self._name()
                node = ast.Member(node, toks[name],
                                  Span(self.file, node.span.start, self._end(name)),
                                  self._tok(name))
            elif tok == "[":
                self.i += 1
                index = self._expr()
                height = max(height, self.h)
                self._expect("]")
                node = ast.Index(node, index,
                                 Span(self.file, node.span.start, self._end(self.i - 1)))
            elif tok == "(":
                self.i += 1
                args = self._exprs(")")
                height = max(height, self.h)
                node = ast.Call(node, tuple(args),
                                Span(self.file, node.span.start, self._end(self.i - 1)))
            else:
                self.h = height
                return node
            height += 1
            if height > MAX_NESTING:
                raise Declined

    def _atom(self) -> ast.Expr:
        toks = self.toks
        i = self.i
        tok = toks[i]
        first = tok[0]
        if first in _WORD_START:
            if tok in _LITERALS:
                self.i = i + 1
                self.h = 0
                return ast.Literal(_LITERALS[tok], self._tok(i))
            if tok == "tool":
                return self._tool_call()
            self.i = i + 1
            self.h = 0
            return ast.Name(tok, Span(self.file, self.starts[i], self.starts[i] + len(tok)))
        if first in _DIGITS:
            self.i = i + 1
            self.h = 0
            if "." in tok or "e" in tok or "E" in tok:
                value = float(tok)
                if value == float("inf"):
                    raise Declined
                return ast.Literal(value, self._tok(i))
            if len(tok) > len(str(MAX_SAFE_INTEGER)) or int(tok) > MAX_SAFE_INTEGER:
                raise Declined
            return ast.Literal(int(tok), self._tok(i))
        if first == '"' and len(tok) > 1:
            self.i = i + 1
            self.h = 0
            return self._string(tok, i)
        if tok == "[":
            self.i = i + 1
            items = self._exprs("]")
            self._nest(self.h + 1)
            return ast.ListLit(tuple(items), self._span(i, self.i - 1))
        if tok == "{":
            return self._object()
        if tok == "(":
            self.i = i + 1
            inner = self._expr()
            self._expect(")")
            return inner
        raise Declined

    def _tool_call(self) -> ast.ToolCall:
        first = self.i
        self._keyword("tool")
        name = self._name()
        self._expect("(")
        arg = self._expr()
        self._expect(")")
        self._nest(self.h + 1)
        return ast.ToolCall(self.toks[name], arg, self._span(first, self.i - 1),
                            self._tok(name))

    def _object(self) -> ast.ObjectLit:
        first = self.i
        entries = self._separated(self._object_entry)
        self._nest(self.h + 1)
        return ast.ObjectLit(tuple(entries), self._span(first, self.i - 1))

    def _object_entry(self) -> ast.ObjectEntry:
        key = self.i
        tok = self.toks[key]
        if tok[0] in _WORD_START:
            text = tok
        else:
            text = self._const_string(self._string_token(key), key)
        self.i += 1
        self._expect(":")
        value = self._expr()
        return ast.ObjectEntry(text, value, Span(self.file, self.starts[key], value.span.end),
                               self._tok(key))
