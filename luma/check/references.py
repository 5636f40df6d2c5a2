"""References to declared tools and models by name, reported with did-you-mean (E026, E027)."""

from __future__ import annotations

from luma.check.symbols import Symbols
from luma.syntax.diagnostics import DiagnosticBag, did_you_mean
from luma.syntax.source import Span


def what_is(name: str, symbols: Symbols) -> str | None:
    """``a schema``, ``a tool``, ``a model`` or ``an agent`` when ``name`` is declared."""
    if symbols.is_type(name):
        return "a schema"
    if name in symbols.tools:
        return "a tool"
    if name in symbols.models:
        return "a model"
    if name in symbols.agents:
        return "an agent"
    if name in symbols.datasources:
        return "a datasource"
    return None


def report_unknown_tool(name: str, span: Span, symbols: Symbols, bag: DiagnosticBag) -> None:
    other = what_is(name, symbols)
    hint = f"'{name}' is {other}, not a tool" if other else did_you_mean(name, list(symbols.tools))
    bag.error("E026", f"Unknown tool '{name}'.", span, hint=hint)


def report_unknown_model(name: str, span: Span, symbols: Symbols, bag: DiagnosticBag) -> None:
    other = what_is(name, symbols)
    hint = (f"'{name}' is {other}, not a model" if other
            else did_you_mean(name, list(symbols.models)))
    bag.error("E027", f"Unknown model '{name}'.", span, hint=hint)
