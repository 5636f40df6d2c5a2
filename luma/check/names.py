"""Names: reserved keywords in declaration names, and duplicate names inside one declaration."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from luma.syntax import ast
from luma.syntax.diagnostics import DiagnosticBag, Related
from luma.syntax.source import Span

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import TypeVar

    T = TypeVar("T")

KEYWORDS = frozenset((
    "schema tool model agent fn if else for in return try catch throw ask using tagged by needs "
    "enum map true false null and or not datasource query command"
).split())
"""The reserved words of LANGUAGE.md §1."""


def check_declared_name(name: str, span: Span, bag: DiagnosticBag, kind: str) -> None:
    """A schema, tool, model, agent or fn name must not be a keyword (E003). A schema may not
    take a built-in type's name either: a reference to it would always mean the built-in."""
    if name in KEYWORDS:
        bag.error("E003", f"'{name}' is a reserved keyword and cannot be used as a name.", span,
                  hint=f"choose another name for this {kind}")
    elif kind == "schema" and name in ast.PRIMITIVE_TYPES:
        bag.error("E003", f"'{name}' is a built-in type and cannot be used as a schema name.",
                  span, hint="choose another name for this schema")


def report_duplicates(items: Iterable[T], name: Callable[[T], str], span: Callable[[T], Span],
                      message: Callable[[str], str], bag: DiagnosticBag, code: str = "E005",
                      first_label: str = "first declared here") -> dict[str, T]:
    """Report every repeated name among ``items`` (pointing back at the first one) and return
    the first item of each name."""
    first: dict[str, T] = {}
    for item in items:
        key = name(item)
        earlier = first.get(key)
        if earlier is None:
            first[key] = item
            continue
        bag.error(code, message(key), span(item), related=(Related(span(earlier), first_label),))
    return first
