"""Runs every check over one parsed program and returns all diagnostics, sorted by position."""

from __future__ import annotations

from luma.check.bodies import check_bodies
from luma.check.declarations import check_declarations
from luma.check.symbols import collect_symbols
from luma.syntax import ast
from luma.syntax.diagnostics import Diagnostic, DiagnosticBag


def check_program(program: ast.Program) -> list[Diagnostic]:
    """Every independent error and warning of the program, in source order."""
    bag = DiagnosticBag()
    symbols = collect_symbols(program, bag)
    check_declarations(program, symbols, bag)
    check_bodies(program, symbols, bag)
    return sorted(bag.items, key=lambda d: (d.span.file, d.span.start, d.code))
