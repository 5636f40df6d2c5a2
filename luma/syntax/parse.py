"""Parse Luma source into the AST. The only module that touches Lark.

The parser is LALR with the contextual lexer, built once per grammar version and cached on
disk, so a run does not re-analyse the grammar. The AST is built while parsing (an inline
transformer that keeps every token, so spans cover keywords and brackets too).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from luma.syntax import ast
from luma.syntax.diagnostics import Diagnostic
from luma.syntax.lexer import NewlinePostLexer
from luma.syntax.source import SourceFile, Span
from luma.syntax.strings import StringProblem, parse_string
from luma.syntax.syntax_errors import describe_unexpected

_PUNCT = frozenset({
    "LPAR", "RPAR", "LSQB", "RSQB", "LBRACE", "RBRACE", "COMMA", "COLON", "EQUAL", "ARROW",
    "DOT", "AT", "VBAR", "_NL", "SCHEMA", "TOOL", "MODEL", "AGENT", "FN", "IF", "_ELSE", "FOR",
    "IN", "RETURN", "TRY", "CATCH", "THROW", "ASK", "_USING", "TAGGED", "BY", "NEEDS", "ENUM",
    "MAP", "NOT", "AND", "OR",
})


def grammar_text() -> str:
    """The text of ``luma.lark``: from the installed package, or from a source checkout."""
    try:
        return resources.files("luma.grammar").joinpath("luma.lark").read_text(encoding="utf-8")
    except ModuleNotFoundError:
        checkout = Path(__file__).resolve().parents[2] / "grammar" / "luma.lark"
        return checkout.read_text(encoding="utf-8")


def _cache_path(text: str) -> str:
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


_POSTLEX = NewlinePostLexer()
_PARSER: Lark | None = None


def _parser() -> Lark:
    global _PARSER
    if _PARSER is None:
        text = grammar_text()
        _PARSER = Lark(
            text, parser="lalr", lexer="contextual", strict=True, propagate_positions=False,
            maybe_placeholders=True, keep_all_tokens=True, postlex=_POSTLEX,
            transformer=_ToAst(), cache=_cache_path(text),
        )
    return _PARSER


class ParseFailure(Exception):
    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


def parse_source(source: SourceFile) -> tuple[ast.Program | None, list[Diagnostic]]:
    """Parse one file. Returns the program, or None and the syntax error as a diagnostic."""
    _ToAst.file = source.path
    try:
        program = _parser().parse(source.text)
    except UnexpectedInput as exc:
        return None, [_syntax_diagnostic(exc, source)]
    except _StringError as exc:
        p = exc.problem
        return None, [Diagnostic("error", "E001", p.message, Span(source.path, p.offset, p.end))]
    except RecursionError:
        return None, [Diagnostic("error", "E001", "the program is nested too deeply to parse",
                                 Span(source.path, 0, 0))]
    assert isinstance(program, ast.Program)
    return program, []


def parse_text(text: str, path: str = "<input>") -> tuple[ast.Program | None, list[Diagnostic]]:
    return parse_source(SourceFile(path, text))


def parse_file(path: str | Path) -> tuple[SourceFile, ast.Program | None, list[Diagnostic]]:
    """Read and parse a file; undecodable bytes are a located diagnostic, not an exception."""
    p = str(path)
    data = Path(p).read_bytes()
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


def _syntax_diagnostic(exc: UnexpectedInput, source: SourceFile) -> Diagnostic:
    message, start, end, hint = describe_unexpected(exc, source.text, _POSTLEX)
    return Diagnostic("error", "E001", message, Span(source.path, start, end), hint)


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


def _start(x: Any) -> int:
    return (x.start_pos or 0) if isinstance(x, Token) else int(x.span.start)


def _end(x: Any) -> int:
    return (x.end_pos or 0) if isinstance(x, Token) else int(x.span.end)


class _ToAst(Transformer):  # type: ignore[type-arg]
    """One method per grammar rule. Raises nothing semantic: the checker judges meaning."""

    file = "<input>"

    # helpers ------------------------------------------------------------------------------
    def _span(self, children: list[Any]) -> Span:
        items = [c for c in children if c is not None]
        if not items:
            return Span(self.file, 0, 0)
        return Span(self.file, _start(items[0]), _end(items[-1]))

    def _tok(self, t: Token) -> Span:
        return Span(self.file, t.start_pos or 0, t.end_pos or 0)

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
        name = c[0]
        optional = any(isinstance(x, Token) and x.type == "OPTIONAL" for x in c)
        sig = [x for x in self._sig(c[1:]) if not (isinstance(x, Token) and x.type == "OPTIONAL")]
        return ast.Field(name.value, optional, sig[0], tuple(sig[1:]), self._span(c),
                         self._tok(name))

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
        return ast.Literal(int(c[0].value), self._tok(c[0]))

    def float_lit(self, c: list[Any]) -> ast.Literal:
        return ast.Literal(float(c[0].value), self._tok(c[0]))

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


__all__ = ["parse_source", "parse_text", "parse_file", "grammar_text", "ParseFailure",
           "UnexpectedCharacters", "UnexpectedEOF", "UnexpectedToken"]
