"""Schemas and tagged unions (LANGUAGE.md §3)."""

from __future__ import annotations

from luma.check.annotations import ValueCheck
from luma.check.fields import check_fields
from luma.check.names import check_declared_name, report_duplicates
from luma.check.symbols import Symbols
from luma.check.types import report_unknown_type
from luma.syntax import ast
from luma.syntax.diagnostics import DiagnosticBag, Related


def check_schema(decl: ast.SchemaDecl, symbols: Symbols, bag: DiagnosticBag,
                 values: ValueCheck | None) -> None:
    check_declared_name(decl.name, decl.name_span, bag, "schema")
    check_fields(decl.fields, "Field", f"schema '{decl.name}'", symbols, bag, values)


def check_union(decl: ast.UnionDecl, symbols: Symbols, bag: DiagnosticBag) -> None:
    """Each member is a declared object schema (E007, E017), listed once (E019), that does not
    declare the tag field itself (E018)."""
    check_declared_name(decl.name, decl.name_span, bag, "schema")
    owner = f"tagged union '{decl.name}'"
    members = report_duplicates(
        decl.members, lambda m: m.name, lambda m: m.span,
        lambda name: f"Member '{name}' is listed more than once in {owner}.", bag,
        code="E019", first_label="first listed here")
    for member in members.values():
        if member.name in symbols.unions:
            bag.error("E017", f"Member '{member.name}' of {owner} must be an object schema, "
                      "not a tagged union.", member.span,
                      hint="list the union's own members here instead",
                      related=(Related(symbols.unions[member.name].name_span,
                                       f"'{member.name}' is declared here"),))
            continue
        if member.name in ast.PRIMITIVE_TYPES:
            bag.error("E017", f"Member '{member.name}' of {owner} must be a declared object "
                      f"schema, not the built-in type '{member.name}'.", member.span)
            continue
        schema = symbols.schemas.get(member.name)
        if schema is None:
            report_unknown_type(member.name, member.span, symbols, bag)
            continue
        tag_field = next((f for f in schema.fields if f.name == decl.tag), None)
        if tag_field is not None:
            bag.error("E018", f"Member '{member.name}' of {owner} declares the tag field "
                      f"'{decl.tag}'.", member.span,
                      hint=f"the tag '{decl.tag}' is added to every member; remove the field "
                           f"or choose another tag",
                      related=(Related(tag_field.name_span, "the tag field is declared here"),))


def check_finite(symbols: Symbols, bag: DiagnosticBag) -> None:
    """A schema whose required fields lead back to itself has no finite value (E045): no
    handler or model could ever produce one. Lists and maps may be empty and optional or
    defaulted fields may be absent, so only required fields of a declared type count. Reported
    on the schemas of the cycle, not on every schema that merely needs one of them."""
    finite: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name in [*symbols.schemas, *symbols.unions]:
            if name not in finite and _is_finite(name, symbols, finite):
                finite.add(name)
                changed = True
    for schema in symbols.schemas.values():
        if schema.name in finite:
            continue
        blocking = next(f for f in schema.fields if _blocks(f, symbols, finite))
        if _reaches(blocking, schema.name, symbols, finite):
            bag.error("E045", f"Schema '{schema.name}' has no finite value: its required field "
                      f"'{blocking.name}' can never be filled.", schema.name_span,
                      hint=f"make '{blocking.name}' optional ({blocking.name}?: ...) or a list",
                      related=(Related(blocking.name_span, "this field leads back to "
                                                           f"'{schema.name}'"),))


def _blocks(f: ast.Field, symbols: Symbols, finite: set[str]) -> bool:
    """A required field whose declared type has no finite value (yet)."""
    if f.optional or f.annotation("default") is not None:
        return False
    t = f.type
    return (isinstance(t, ast.NamedType) and symbols.is_type(t.name) and t.name not in finite)


def _is_finite(name: str, symbols: Symbols, finite: set[str]) -> bool:
    schema = symbols.schemas.get(name)
    if schema is not None:
        return not any(_blocks(f, symbols, finite) for f in schema.fields)
    union = symbols.unions[name]
    # a member that is not a declared schema is reported elsewhere; it does not block here
    return any(m.name in finite or not symbols.is_type(m.name) for m in union.members)


def _reaches(start: ast.Field, target: str, symbols: Symbols, finite: set[str]) -> bool:
    """Whether the blocking field ``start`` leads back to schema ``target``."""
    pending = [start.type.name] if isinstance(start.type, ast.NamedType) else []
    seen: set[str] = set()
    while pending:
        name = pending.pop()
        if name == target:
            return True
        if name in seen:
            continue
        seen.add(name)
        schema = symbols.schemas.get(name)
        if schema is not None:
            pending.extend(f.type.name for f in schema.fields
                           if isinstance(f.type, ast.NamedType) and _blocks(f, symbols, finite))
        elif name in symbols.unions:
            pending.extend(m.name for m in symbols.unions[name].members
                           if symbols.is_type(m.name))
    return False
