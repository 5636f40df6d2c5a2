"""Type expressions: resolving names (E007), well-formed enums, and how a type is written.

``check_type`` is the one entry point for every place a type appears, in declarations and in
statements alike (``x: T = …``, ``ask … -> T``).
"""

from __future__ import annotations

from luma.check.references import what_is
from luma.check.symbols import Symbols
from luma.syntax import ast
from luma.syntax.diagnostics import DiagnosticBag, did_you_mean
from luma.syntax.source import Span

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Literal

    TypeKind = Literal["string", "int", "float", "bool", "any", "enum", "list", "map", "object",
                       "union", "unknown"]
else:
    TypeKind = str


def check_type(t: ast.TypeExpr, symbols: Symbols, bag: DiagnosticBag) -> bool:
    """Report every unknown type name in ``t`` (E007, with did-you-mean) and every malformed
    ``enum`` (E043). True when every name in ``t`` resolves."""
    if isinstance(t, ast.NamedType):
        if symbols.is_type(t.name):
            return True
        report_unknown_type(t.name, t.span, symbols, bag)
        return False
    if isinstance(t, ast.ListType):
        return check_type(t.item, symbols, bag)
    if isinstance(t, ast.MapType):
        return check_type(t.value, symbols, bag)
    if isinstance(t, ast.EnumType):
        _check_enum(t, bag)
    return True


def report_unknown_type(name: str, span: Span, symbols: Symbols, bag: DiagnosticBag) -> None:
    """E007 for a name that is not a type, saying what the name is when it is something else."""
    other = what_is(name, symbols)
    hint = (f"'{name}' is {other}, not a type" if other
            else did_you_mean(name, symbols.type_names()))
    bag.error("E007", f"Unknown type '{name}'.", span, hint=hint)


def _check_enum(t: ast.EnumType, bag: DiagnosticBag) -> None:
    if not t.values:
        bag.error("E043", "An enum must list at least one value.", t.span,
                  hint='write the allowed strings, e.g. enum["a", "b"]')
        return
    seen: set[str] = set()
    for value in t.values:
        if value in seen:
            bag.error("E043", f"Enum value {_quote(value)} is listed more than once.", t.span)
        seen.add(value)


def type_kind(t: ast.TypeExpr, symbols: Symbols) -> TypeKind:
    """What ``t`` is at its top level; a declared name becomes ``object`` or ``union``."""
    if isinstance(t, ast.PrimitiveType):
        return t.name  # type: ignore[return-value]
    if isinstance(t, ast.EnumType):
        return "enum"
    if isinstance(t, ast.ListType):
        return "list"
    if isinstance(t, ast.MapType):
        return "map"
    if t.name in symbols.schemas:
        return "object"
    if t.name in symbols.unions:
        return "union"
    return "unknown"


def type_text(t: ast.TypeExpr) -> str:
    """``t`` as it is written in Luma source: ``float[]``, ``map[Order]``, ``enum["a", "b"]``."""
    if isinstance(t, (ast.PrimitiveType, ast.NamedType)):
        return t.name
    if isinstance(t, ast.ListType):
        return type_text(t.item) + "[]"
    if isinstance(t, ast.MapType):
        return f"map[{type_text(t.value)}]"
    return "enum[" + ", ".join(_quote(v) for v in t.values) + "]"


def named_types(t: ast.TypeExpr) -> list[ast.NamedType]:
    """Every declared-name reference inside ``t`` (through lists and maps)."""
    if isinstance(t, ast.NamedType):
        return [t]
    if isinstance(t, ast.ListType):
        return named_types(t.item)
    if isinstance(t, ast.MapType):
        return named_types(t.value)
    return []


def _quote(text: str) -> str:
    import json

    return json.dumps(text, ensure_ascii=False)


__all__ = ["check_type", "report_unknown_type", "type_kind", "type_text", "named_types",
           "TypeKind"]
