"""Checks of declarations: schemas, unions, annotations, tools, models, agents' configuration."""

from __future__ import annotations

from luma.check.symbols import Symbols
from luma.syntax import ast
from luma.syntax.diagnostics import DiagnosticBag


def check_declarations(program: ast.Program, symbols: Symbols, bag: DiagnosticBag) -> None:
    """Report every declaration-level problem of ``program`` into ``bag``."""
