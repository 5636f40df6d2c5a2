"""Checks of code: fn bodies and top-level statements."""

from __future__ import annotations

from luma.check.symbols import Symbols
from luma.syntax import ast
from luma.syntax.diagnostics import DiagnosticBag


def check_bodies(program: ast.Program, symbols: Symbols, bag: DiagnosticBag) -> None:
    """Report every problem in function bodies and top-level statements into ``bag``."""
