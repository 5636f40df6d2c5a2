"""Checks of declarations: schemas, unions, annotations, tools, models, agents' configuration,
and the program-wide warnings about them. One module per construct does the work."""

from __future__ import annotations

from luma.check.agents import check_agent
from luma.check.annotations import ValueCheck
from luma.check.models import check_model
from luma.check.schemas import check_finite, check_schema, check_union
from luma.check.symbols import Symbols
from luma.check.tools import check_tool
from luma.check.unused import check_unused
from luma.syntax import ast
from luma.syntax.diagnostics import DiagnosticBag


def check_declarations(program: ast.Program, symbols: Symbols, bag: DiagnosticBag) -> None:
    """Report every declaration-level problem of ``program`` into ``bag``. A declaration whose
    name is a duplicate (E004) is checked too: its own mistakes are independent errors."""
    values = ValueCheck(program)
    for decl in program.declarations:
        if isinstance(decl, ast.SchemaDecl):
            check_schema(decl, symbols, bag, values)
        elif isinstance(decl, ast.UnionDecl):
            check_union(decl, symbols, bag)
        elif isinstance(decl, ast.ToolDecl):
            check_tool(decl, symbols, bag, values)
        elif isinstance(decl, ast.ModelDecl):
            check_model(decl, symbols, bag)
        elif isinstance(decl, ast.DatasourceDecl):
            from luma.check.data import check_datasource  # only for a program that has one

            check_datasource(decl, bag)
        elif isinstance(decl, ast.AgentDecl):
            check_agent(decl, symbols, bag, values)
    check_finite(symbols, bag)
    check_unused(program, symbols, bag)
