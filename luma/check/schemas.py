"""Schemas and tagged unions (LANGUAGE.md §3)."""

from __future__ import annotations

from luma.check.annotations import ValueCheck
from luma.check.fields import check_fields
from luma.check.names import check_declared_name, report_duplicates
from luma.check.symbols import Symbols
from luma.check.types import report_unknown_type
from luma.syntax import ast
from luma.graphs import strongly_connected
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
    finite = _finite_types(symbols)
    if len(finite) == len(symbols.schemas.keys() | symbols.unions.keys()):
        return
    cycle = _cycle_of(symbols, finite)
    for schema in symbols.schemas.values():
        if schema.name in finite:
            continue
        blocking = next(f for f in schema.fields if _blocks(f, symbols, finite))
        assert isinstance(blocking.type, ast.NamedType)
        if cycle[blocking.type.name] == cycle[schema.name]:  # it leads back to the schema
            bag.error("E045", f"Schema '{schema.name}' has no finite value: its required field "
                      f"'{blocking.name}' can never be filled.", schema.name_span,
                      hint=f"make '{blocking.name}' optional ({blocking.name}?: ...) or a list",
                      related=(Related(blocking.name_span, "this field leads back to "
                                                           f"'{schema.name}'"),))


def _required_type(f: ast.Field, symbols: Symbols) -> str | None:
    """The declared type a field needs a value of, unless it is optional or defaulted."""
    if f.optional or f.annotation("default") is not None:
        return None
    t = f.type
    return t.name if isinstance(t, ast.NamedType) and symbols.is_type(t.name) else None


def _blocks(f: ast.Field, symbols: Symbols, finite: set[str]) -> bool:
    """A required field whose declared type has no finite value."""
    name = _required_type(f, symbols)
    return name is not None and name not in finite


def _finite_types(symbols: Symbols) -> set[str]:
    """The schemas and unions that have a finite value: a schema when every type its required
    fields need has one, a union when one of its members has (or is no declared schema: that is
    reported elsewhere). Worked from the ones that need nothing, each type once, so the cost is
    the size of the program (a fixpoint over every type at each step was quadratic on a chain
    of schemas)."""
    waiting: dict[str, int] = {}  # how many more finite types a schema or union waits for
    needed_by: dict[str, list[str]] = {}
    ready: list[str] = []
    for name, schema in symbols.schemas.items():
        count = 0
        for f in schema.fields:
            needed = _required_type(f, symbols)
            if needed is not None:
                count += 1
                needed_by.setdefault(needed, []).append(name)
        waiting[name] = count
        if count == 0:
            ready.append(name)
    for name, union in symbols.unions.items():
        if name in symbols.schemas:
            continue  # the schema of that name decides
        if any(not symbols.is_type(m.name) for m in union.members):
            ready.append(name)
            continue
        waiting[name] = 1  # one finite member is enough
        for m in union.members:
            needed_by.setdefault(m.name, []).append(name)
    finite: set[str] = set()
    while ready:
        name = ready.pop()
        finite.add(name)
        for other in needed_by.get(name, ()):
            if other not in finite:
                waiting[other] -= 1
                if waiting[other] == 0:
                    ready.append(other)
    return finite


def _cycle_of(symbols: Symbols, finite: set[str]) -> dict[str, int]:
    """For each type without a finite value, which strongly connected part of the graph of what
    blocks it (a schema's blocking fields, a union's members) it belongs to: two types in one
    part lead to each other."""
    def edges(name: str) -> list[str]:
        schema = symbols.schemas.get(name)
        if schema is not None:
            return [f.type.name for f in schema.fields  # type: ignore[union-attr]
                    if _blocks(f, symbols, finite)]
        return [m.name for m in symbols.unions[name].members]

    unfinished = [n for n in [*symbols.schemas, *symbols.unions] if n not in finite]
    return {name: number for number, part in enumerate(strongly_connected(unfinished, edges))
            for name in part}
