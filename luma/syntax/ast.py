"""The Luma abstract syntax tree.

Every node is a frozen, slotted dataclass with a ``span``. Nothing here knows about Lark: the
parse module is the only place that turns parser output into these nodes.

``@node`` is ``@dataclass(frozen=True, slots=True)`` with the methods generated ahead of time
(``luma/syntax/node.py``): after changing a class, run ``python -m luma.syntax.nodegen``.
"""

from __future__ import annotations

from luma.syntax.node import node
from luma.syntax.source import Span

# --------------------------------------------------------------------------------------- types


@node
class PrimitiveType:
    """``string``, ``int``, ``float``, ``bool`` or ``any``."""

    name: str
    span: Span


@node
class EnumType:
    values: tuple[str, ...]
    span: Span


@node
class ListType:
    item: TypeExpr
    span: Span


@node
class MapType:
    value: TypeExpr
    span: Span


@node
class NamedType:
    """A reference to a declared schema (or tagged union) by name."""

    name: str
    span: Span


TypeExpr = PrimitiveType | EnumType | ListType | MapType | NamedType

PRIMITIVE_TYPES = ("string", "int", "float", "bool", "any")

# --------------------------------------------------------------------------------- expressions


@node
class Literal:
    """``null``, ``true``/``false``, an int or a float."""

    value: None | bool | int | float
    span: Span


@node
class PathStep:
    """One ``.field`` (``name``) or ``[index]`` (``index``) step of an interpolation path."""

    name: str | None
    index: int | str | None
    span: Span


@node
class Placeholder:
    """``{name.field[0]}`` inside a string literal that appears in a statement."""

    root: str
    steps: tuple[PathStep, ...]
    span: Span
    root_span: Span


@node
class BadPlaceholder:
    """A ``{...}`` in a string that is not a valid path (reported only in statements)."""

    text: str
    span: Span


@node
class StringLit:
    """A string literal.

    ``value`` is the constant text (braces literal), used where the string is a declaration
    constant. ``parts`` is the same string split into text and placeholders, used where the
    string appears in a statement.
    """

    value: str
    parts: tuple[str | Placeholder | BadPlaceholder, ...]
    span: Span

    @property
    def has_placeholders(self) -> bool:
        return any(not isinstance(p, str) for p in self.parts)


@node
class ListLit:
    items: tuple[Expr, ...]
    span: Span


@node
class ObjectEntry:
    key: str
    value: Expr
    span: Span
    key_span: Span


@node
class ObjectLit:
    entries: tuple[ObjectEntry, ...]
    span: Span


@node
class Name:
    id: str
    span: Span


@node
class Member:
    obj: Expr
    name: str
    span: Span
    name_span: Span


@node
class Index:
    obj: Expr
    index: Expr
    span: Span


@node
class Call:
    """``f(args)`` (a method of this agent or a built-in) or ``Agent.fn(args)``."""

    callee: Expr
    args: tuple[Expr, ...]
    span: Span


@node
class Unary:
    op: str  # "-" or "not"
    operand: Expr
    span: Span


@node
class Binary:
    op: str  # or and == != < <= > >= + - * / %
    left: Expr
    right: Expr
    span: Span


@node
class ToolCall:
    """``tool name(expr)``: a direct tool call."""

    tool: str
    arg: Expr
    span: Span
    tool_span: Span


@node
class Ask:
    """``ask PROMPT -> Type [using tool name]``."""

    prompt: Expr
    type: TypeExpr
    using_tool: str | None
    span: Span
    using_span: Span | None = None


Expr = (Literal | StringLit | ListLit | ObjectLit | Name | Member | Index | Call | Unary | Binary
        | ToolCall | Ask)

# ---------------------------------------------------------------------------------- statements


@node
class Assign:
    """``x = expr`` or, with ``type``, ``x: Type = expr``."""

    target: str
    type: TypeExpr | None
    value: Expr
    span: Span
    target_span: Span


@node
class ExprStmt:
    expr: Expr
    span: Span


@node
class If:
    """``if cond { then } else { orelse }``; ``else if`` is an ``If`` alone in ``orelse``."""

    cond: Expr
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] | None
    span: Span


@node
class For:
    var: str
    iterable: Expr
    body: tuple[Stmt, ...]
    span: Span
    var_span: Span


@node
class Return:
    value: Expr | None
    span: Span


@node
class Try:
    body: tuple[Stmt, ...]
    err_name: str
    handler: tuple[Stmt, ...]
    span: Span
    err_span: Span


@node
class Throw:
    value: Expr
    span: Span


Stmt = Assign | ExprStmt | If | For | Return | Try | Throw

# -------------------------------------------------------------------------------- declarations


@node
class Annotation:
    name: str
    args: tuple[Expr, ...]
    span: Span
    name_span: Span


@node
class Field:
    """A schema field, tool parameter or function parameter."""

    name: str
    optional: bool
    type: TypeExpr
    annotations: tuple[Annotation, ...]
    span: Span
    name_span: Span

    def annotation(self, name: str) -> Annotation | None:
        for a in self.annotations:
            if a.name == name:
                return a
        return None


@node
class SchemaDecl:
    name: str
    fields: tuple[Field, ...]
    span: Span
    name_span: Span


@node
class UnionMember:
    name: str
    span: Span


@node
class UnionDecl:
    """``schema Document = Invoice | Receipt tagged by kind``."""

    name: str
    members: tuple[UnionMember, ...]
    tag: str
    span: Span
    name_span: Span
    tag_span: Span


@node
class ConfigEntry:
    key: str
    value: Expr
    span: Span
    key_span: Span


@node
class NeedsDecl:
    name: str
    type: TypeExpr
    span: Span
    name_span: Span


@node
class ToolDecl:
    """A ``tool``, or a ``query`` / ``command`` (DATA.md §1): a tool whose handler is the bridge
    of its datasource. ``returns`` is None only for a command with no return type."""

    name: str
    params: tuple[Field, ...]
    returns: TypeExpr | None
    config: tuple[ConfigEntry, ...]
    needs: tuple[NeedsDecl, ...]
    span: Span
    name_span: Span
    kind: str = "tool"  # "tool", "query" or "command"
    # the source offset of each character of the `sql:` string, for spans on its `:name`s
    sql_offsets: tuple[int, ...] = ()

    def entry(self, key: str) -> ConfigEntry | None:
        return _entry(self.config, key)


@node
class ModelDecl:
    name: str
    config: tuple[ConfigEntry, ...]
    span: Span
    name_span: Span

    def entry(self, key: str) -> ConfigEntry | None:
        return _entry(self.config, key)


@node
class DatasourceDecl:
    """``datasource Warehouse { description: ..., timeout: ... }`` (DATA.md §1)."""

    name: str
    config: tuple[ConfigEntry, ...]
    span: Span
    name_span: Span

    def entry(self, key: str) -> ConfigEntry | None:
        return _entry(self.config, key)


@node
class FnDecl:
    name: str
    params: tuple[Field, ...]
    returns: TypeExpr | None
    body: tuple[Stmt, ...]
    span: Span
    name_span: Span


@node
class AgentDecl:
    name: str
    config: tuple[ConfigEntry, ...]
    fns: tuple[FnDecl, ...]
    span: Span
    name_span: Span

    def entry(self, key: str) -> ConfigEntry | None:
        return _entry(self.config, key)

    def fn(self, name: str) -> FnDecl | None:
        for f in self.fns:
            if f.name == name:
                return f
        return None


@node
class TestModel:
    """``model: Name`` in a test: the declared model that answers in it."""

    name: str
    span: Span
    name_span: Span


@node
class Mock:
    """``mock tool NAME returns EXPR`` (or ``throws EXPR``) in a test."""

    tool: str
    throws: bool
    value: Expr
    span: Span
    tool_span: Span


@node
class Assert:
    """``assert EXPR[, message]`` (hard) or, with ``soft``, ``check EXPR[, message]``."""

    soft: bool
    cond: Expr
    message: Expr | None
    span: Span


TestStmt = Stmt | Mock | Assert


@node
class TestDecl:
    """``test "name" { ... }``: statements, mocks and assertions, run by ``luma test`` only.
    ``models`` holds every ``model:`` entry written (the checker allows one)."""

    name: str
    models: tuple[TestModel, ...]
    body: tuple[TestStmt, ...]
    span: Span
    name_span: Span

    @property
    def model(self) -> str | None:
        return self.models[0].name if self.models else None


Decl = SchemaDecl | UnionDecl | ToolDecl | ModelDecl | AgentDecl | DatasourceDecl | TestDecl


def _entry(config: tuple[ConfigEntry, ...], key: str) -> ConfigEntry | None:
    for e in config:
        if e.key == key:
            return e
    return None


@node
class Program:
    """A parsed ``.luma`` file: declarations and top-level statements in source order."""

    items: tuple[Decl | Stmt, ...]
    span: Span
    declarations: tuple[Decl, ...] = ()
    statements: tuple[Stmt, ...] = ()

    @staticmethod
    def of(items: tuple[Decl | Stmt, ...], span: Span) -> Program:
        decls = tuple(i for i in items if isinstance(i, DECL_TYPES))
        stmts = tuple(i for i in items if not isinstance(i, DECL_TYPES))
        return Program(items, span, decls, stmts)

    def _of_kind(self, kind: type) -> list:  # type: ignore[type-arg]
        return [d for d in self.declarations if isinstance(d, kind)]

    @property
    def schemas(self) -> list[SchemaDecl | UnionDecl]:
        return [d for d in self.declarations if isinstance(d, (SchemaDecl, UnionDecl))]

    @property
    def tools(self) -> list[ToolDecl]:
        return self._of_kind(ToolDecl)

    @property
    def models(self) -> list[ModelDecl]:
        return self._of_kind(ModelDecl)

    @property
    def agents(self) -> list[AgentDecl]:
        return self._of_kind(AgentDecl)

    @property
    def datasources(self) -> list[DatasourceDecl]:
        return self._of_kind(DatasourceDecl)

    @property
    def tests(self) -> list[TestDecl]:
        return self._of_kind(TestDecl)


DECL_TYPES = (SchemaDecl, UnionDecl, ToolDecl, ModelDecl, AgentDecl, DatasourceDecl, TestDecl)
