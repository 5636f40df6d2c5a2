"""Field lists: schema fields, tool parameters and fn parameters share one set of checks."""

from __future__ import annotations

from collections.abc import Sequence

from luma.check.annotations import ValueCheck, check_annotations
from luma.check.names import report_duplicates
from luma.check.symbols import Symbols
from luma.check.types import check_type
from luma.syntax import ast
from luma.syntax.diagnostics import DiagnosticBag


def check_fields(fields: Sequence[ast.Field], word: str, owner: str, symbols: Symbols,
                 bag: DiagnosticBag, values: ValueCheck | None, report_types: bool = True) -> None:
    """Duplicate names (E005), unknown types (E007, unless ``report_types`` is false) and
    annotations of ``fields``. ``word`` is ``Field`` or ``Parameter``; ``owner`` names the
    declaration, e.g. ``schema 'Order'``."""
    report_duplicates(fields, lambda f: f.name, lambda f: f.name_span,
                      lambda name: f"{word} '{name}' is declared more than once in {owner}.", bag)
    for f in fields:
        type_ok = check_type(f.type, symbols, bag if report_types else DiagnosticBag())
        check_annotations(f, type_ok, symbols, bag, values)
