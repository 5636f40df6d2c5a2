"""Runs every check over one parsed program and returns all diagnostics, sorted by position."""

from __future__ import annotations

from luma.check.symbols import collect_symbols
from luma.syntax import ast
from luma.syntax.diagnostics import Diagnostic, DiagnosticBag


def check_program(program: ast.Program) -> list[Diagnostic]:
    bag = DiagnosticBag()
    symbols = collect_symbols(program, bag)
    del symbols  # the construct checks are registered below as they are written
    return sorted(bag.items, key=lambda d: (d.span.file, d.span.start, d.code))
