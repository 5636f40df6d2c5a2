"""Arguments against the parameters they are given for: a direct tool call's object literal
(unknown keys, missing required parameters) and any value whose type is known at compile time.

A constant (a literal made only of literals, with no ``{placeholder}``) is validated like the
runtime validates it, through the one schema validator, so ``@range``, ``enum`` and the other
rules apply; anything else is checked by its static type's kind only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from luma.check.exprtypes import (
    BOOL, FLOAT, INT, NULL, OBJECT, STRING, UNKNOWN, Ty, describe, fits_kind, join,
    list_of, resolve, schema_difference)
from luma.check.symbols import Symbols
from luma.syntax import ast
from luma.syntax.constants import constant_value
from luma.syntax.diagnostics import DiagnosticBag, Related, did_you_mean

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from luma.schema.compile import SchemaCompiler


def statement_constant(expr: ast.Expr) -> tuple[bool, Any]:
    """``(True, value)`` when ``expr`` is a constant in a statement, else ``(False, None)``.

    Unlike in declarations, a string with a ``{placeholder}`` is not a constant here.
    """
    if _has_placeholders(expr):
        return False, None
    return constant_value(expr)


def _has_placeholders(expr: ast.Expr) -> bool:
    if isinstance(expr, ast.StringLit):
        return expr.has_placeholders
    if isinstance(expr, ast.ListLit):
        return any(_has_placeholders(i) for i in expr.items)
    if isinstance(expr, ast.ObjectLit):
        return any(_has_placeholders(e.value) for e in expr.entries)
    return False


def value_type(value: Any) -> Ty:
    """The static type of a constant JSON value."""
    if value is None:
        return NULL
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return INT
    if isinstance(value, float):
        return FLOAT
    if isinstance(value, str):
        return STRING
    if isinstance(value, list):
        item: Ty | None = None
        for v in value:
            item = value_type(v) if item is None else join(item, value_type(v))
        return list_of(item or UNKNOWN)
    return OBJECT


def value_kind(ty: Ty) -> str:
    """The kind of a value as the validator words it: ``string``, ``int``, ``list``, ``object``."""
    if ty.kind in ("map", "schema", "union"):
        return "object"
    return ty.kind


def _is_required(param: ast.Field) -> bool:
    return not param.optional and param.annotation("default") is None


class ArgumentChecker:
    """Checks arguments of the calls in one program."""

    def __init__(self, program: ast.Program, symbols: Symbols, bag: DiagnosticBag) -> None:
        self.program = program
        self.symbols = symbols
        self.bag = bag
        self._compiler: SchemaCompiler | None = None
        self._definitions: dict[str, Any] = {}

    def check_object(self, tool: ast.ToolDecl, obj: ast.ObjectLit,
                     entry_types: Sequence[Ty]) -> None:
        """A direct call's object literal against the tool's parameters: unknown keys (E032),
        missing required parameters (E033) and values that do not fit (E034)."""
        params = {p.name: p for p in tool.params}
        declared = Related(tool.name_span, f"tool '{tool.name}' is declared here")
        meant: set[str] = set()  # parameters an unknown key probably misspells
        given: set[str] = set()
        for entry, ty in zip(obj.entries, entry_types):
            given.add(entry.key)
            param = params.get(entry.key)
            if param is None:
                hint = did_you_mean(entry.key, list(params))
                close = [p for p in params if hint == f"did you mean '{p}'?"]
                meant.update(close)
                if not params:
                    hint = f"tool '{tool.name}' takes no parameters; pass {{}}"
                self.bag.error("E032", f"Tool '{tool.name}' has no parameter '{entry.key}'.",
                               entry.key_span, hint=hint, related=(declared,))
                continue
            self.check_param(f"parameter '{param.name}' of tool '{tool.name}'", param,
                             entry.value, ty)
        for param in tool.params:
            if _is_required(param) and param.name not in given and param.name not in meant:
                self.bag.error(
                    "E033", f"Missing required parameter '{param.name}' of tool '{tool.name}'.",
                    obj.span, related=(Related(param.name_span, "parameter declared here"),))

    def check_param(self, what: str, param: ast.Field, expr: ast.Expr, ty: Ty) -> None:
        """``expr`` (of static type ``ty``) given for ``param``, an input: soft rules are hard
        here. ``what`` names the parameter in messages (``parameter 'a' of tool 'calculate'``)."""
        self.check_value(expr, ty, param.type, param, is_input=True,
                         invalid=lambda problem: sentence(f"Invalid value for {what}: {problem}"))

    def check_value(self, expr: ast.Expr, ty: Ty, te: ast.TypeExpr, field: ast.Field | None,
                    is_input: bool, invalid: Callable[[str], str]) -> None:
        """E034 when ``expr`` (of static type ``ty``) is certainly not a valid ``te``.

        A constant goes through the schema validator (``field`` brings its annotations; on an
        input soft rules count as hard, elsewhere they only warn at run time and are skipped
        here); any other expression is judged by its static type's kind. ``invalid(problem)``
        words the message."""
        is_constant, value = statement_constant(expr)
        if is_constant:
            problem = self._validate(te, field, value, is_input)
            if problem is not None:
                self.bag.error("E034", invalid(problem), expr.span)
            return
        target = resolve(te, self.symbols)
        if not fits_kind(ty, target, self.symbols):
            of_schema = ty.kind == "schema" or (ty.kind == "list" and ty.item is not None
                                                and ty.item.kind == "schema")
            got = describe(ty) if of_schema else value_kind(ty)
            problem = f"expected {describe(target)}, got {got}"
            hint = None
            if ty.kind == target.kind == "schema":
                hint = schema_difference(ty, target, self.symbols)
            self.bag.error("E034", invalid(problem), expr.span, hint=hint)

    def _validate(self, te: ast.TypeExpr, field: ast.Field | None, value: Any,
                  is_input: bool) -> str | None:
        """The hard violations the schema validator finds in ``value``, as one line."""
        from luma.schema.compile import SchemaCompiler
        from luma.schema.validate import SchemaError, format_violations, validate_and_fill

        if any(not self.symbols.is_type(n.name) for n in _named_types(te)):
            return None  # an unknown type is reported on its own
        if self._compiler is None:
            self._compiler = SchemaCompiler(self.program)
            self._definitions = self._compiler.definitions()
        root = (self._compiler.field_schema(field) if field is not None
                else self._compiler.type_schema(te))
        schema = {**root, "$defs": self._definitions}
        try:
            _, violations = validate_and_fill(schema, value, soft_rules=not is_input,
                                              infer_tags=is_input)
        except SchemaError:
            return None  # a declaration the compiler could not express is reported there
        hard = [v for v in violations if not v.soft]
        return format_violations("", hard) if hard else None


def sentence(text: str) -> str:
    """``text`` ended as a sentence: a period unless it ends with one already, or with '?'."""
    return text if text.endswith((".", "?", "!")) else text + "."


def _named_types(te: ast.TypeExpr) -> list[ast.NamedType]:
    if isinstance(te, ast.NamedType):
        return [te]
    if isinstance(te, ast.ListType):
        return _named_types(te.item)
    if isinstance(te, ast.MapType):
        return _named_types(te.value)
    return []
