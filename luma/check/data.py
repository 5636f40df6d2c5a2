"""Datasources, queries and commands (DATA.md §1, §5): what a query or command adds to a tool —
its datasource, its SQL and its row type — and what it may not set."""

from __future__ import annotations

from luma.check.config import ValueReader, check_keys
from luma.check.names import check_declared_name
from luma.check.symbols import Symbols
from luma.check.types import check_type, type_text
from luma.data.sql import scan
from luma.syntax import ast
from luma.syntax.diagnostics import DiagnosticBag, did_you_mean
from luma.syntax.source import Span

DATASOURCE_KEYS = ("description", "timeout")


def check_datasource(decl: ast.DatasourceDecl, bag: DiagnosticBag) -> None:
    from luma.check.config import check_timeout

    check_declared_name(decl.name, decl.name_span, bag, "datasource")
    owner = f"datasource '{decl.name}'"
    entries = check_keys(decl.config, DATASOURCE_KEYS, owner, bag)
    read = ValueReader(owner, bag)
    for key, entry in entries.items():
        if key == "description":
            read.string(entry)
        else:
            check_timeout(f"Datasource '{decl.name}'", entry, read, bag)


def check_data_tool(tool: ast.ToolDecl, symbols: Symbols, bag: DiagnosticBag) -> None:
    """What a query or command adds to a tool's rules; the shared keys are checked with the
    tool's (check/tools.py)."""
    word = tool.kind.capitalize()
    _check_rows(tool, word, symbols, bag)
    side_effects = tool.entry("side_effects")
    if side_effects is not None:
        bag.error("E053", f"{word} '{tool.name}' cannot set side_effects: a query reads and a "
                  "command writes.", side_effects.key_span,
                  hint="remove side_effects; declare a command to change data")
    for need in tool.needs:
        bag.error("E053", f"{word} '{tool.name}' cannot use needs: its datasource's bridge is "
                  "the dependency.", need.span, hint=f"remove needs {need.name}")
    _check_datasource_ref(tool, word, symbols, bag)
    _check_sql(tool, word, bag)


def _check_rows(tool: ast.ToolDecl, word: str, symbols: Symbols, bag: DiagnosticBag) -> None:
    t = tool.returns
    if t is None:
        if tool.kind == "query":
            bag.error("E054", f"Query '{tool.name}' must declare its rows: -> Schema for "
                      "exactly one, -> Schema[] for any number.", tool.name_span,
                      hint="add a return type after the parameters, e.g. -> Customer[]")
        return
    if not check_type(t, symbols, bag):
        return
    row = t.item if isinstance(t, ast.ListType) else t
    if isinstance(row, ast.NamedType):
        return
    bag.error("E054", f"{word} '{tool.name}' must return a schema or a list of one, not "
              f"'{type_text(t)}'.", t.span,
              hint="declare a schema for the row, e.g. schema Row { value: "
                   f"{type_text(row)} }}")


def _check_datasource_ref(tool: ast.ToolDecl, word: str, symbols: Symbols,
                          bag: DiagnosticBag) -> None:
    entry = tool.entry("datasource")
    if entry is None:
        bag.error("E051", f"{word} '{tool.name}' has no datasource.", tool.name_span,
                  hint="add datasource: <a declared datasource>")
        return
    name = ValueReader(f"{tool.kind} '{tool.name}'", bag).name(entry, "datasource")
    if name is None or name.id in symbols.datasources:
        return
    from luma.check.references import what_is

    other = what_is(name.id, symbols)
    hint = (f"'{name.id}' is {other}, not a datasource" if other
            else did_you_mean(name.id, list(symbols.datasources)))
    if hint is None and not symbols.datasources:
        hint = f"declare it: datasource {name.id} {{ description: \"...\" }}"
    bag.error("E050", f"Unknown datasource '{name.id}'.", name.span, hint=hint)


def _check_sql(tool: ast.ToolDecl, word: str, bag: DiagnosticBag) -> None:
    entry = tool.entry("sql")
    if entry is None:
        bag.error("E051", f"{word} '{tool.name}' has no sql.", tool.name_span,
                  hint='add sql: "SELECT ..." with :name for each parameter')
        return
    sql = ValueReader(f"{tool.kind} '{tool.name}'", bag).string(entry)
    if sql is None:
        return
    offsets = tool.sql_offsets

    def span(start: int, end: int) -> Span:
        if len(offsets) == len(sql) and start < len(offsets):
            return Span(entry.value.span.file, offsets[start], offsets[end - 1] + 1)
        return entry.value.span

    read = scan(sql)
    params = [p.name for p in tool.params]
    used: set[str] = set()
    for p in read.placeholders:
        used.add(p.name)
        if p.name not in params:
            bag.error("E052", f"{word} '{tool.name}' uses :{p.name}, which is not one of its "
                      "parameters.", span(p.start, p.end), hint=did_you_mean(p.name, params))
    for at in read.extra_statements:
        bag.error("E055", f"{word} '{tool.name}' holds more than one SQL statement; a "
                  f"{tool.kind} runs exactly one.", span(at, at + 1),
                  hint="make it one statement (a CTE, INSERT ... ON CONFLICT, a procedure), "
                       "or declare one command per statement")
        break
    for param in tool.params:
        if param.name not in used:
            bag.warning("W007", f"Parameter '{param.name}' of {tool.kind} '{tool.name}' is not "
                        "used in its SQL.", param.name_span,
                        hint=f"use it as :{param.name} in the sql, or remove it")


__all__ = ["check_datasource", "check_data_tool", "DATASOURCE_KEYS"]
