"""Agents (LANGUAGE.md §6): configuration values and fn signatures. Fn bodies are checked in
bodies.py."""

from __future__ import annotations

from luma.check.annotations import ValueCheck
from luma.check.config import ValueReader, check_keys
from luma.check.fields import check_fields
from luma.check.names import check_declared_name, report_duplicates
from luma.check.references import report_unknown_model, report_unknown_tool
from luma.check.symbols import Symbols
from luma.syntax import ast
from luma.syntax.diagnostics import DiagnosticBag, did_you_mean

AGENT_KEYS = (
    "model", "system", "tools", "tool_policy", "tool_scopes", "tool_contexts", "tool_rate_limit",
    "tool_concurrency", "tool_failure_limit", "tool_timeout", "tool_timeout_max",
    "tool_result_max_chars", "retries",
)
TOOL_POLICIES = ("allow", "deny_write", "approval")
_AT_LEAST = {"tool_rate_limit": 1, "tool_concurrency": 1, "tool_failure_limit": 1,
             "tool_result_max_chars": 1, "retries": 0}
_MILLIS = ("tool_timeout", "tool_timeout_max")


def check_agent(agent: ast.AgentDecl, symbols: Symbols, bag: DiagnosticBag,
                values: ValueCheck | None) -> None:
    check_declared_name(agent.name, agent.name_span, bag, "agent")
    _check_config(agent, symbols, bag)
    report_duplicates(agent.fns, lambda f: f.name, lambda f: f.name_span,
                      lambda name: f"Function '{name}' is declared more than once in agent "
                                   f"'{agent.name}'.", bag)
    for fn in agent.fns:
        check_fn_signature(agent, fn, symbols, bag, values)


def check_fn_signature(agent: ast.AgentDecl, fn: ast.FnDecl, symbols: Symbols,
                       bag: DiagnosticBag, values: ValueCheck | None) -> None:
    """The fn's name, its parameters (names, types, annotations) and its return type. A
    parameter is a variable of the body, so it may not be a keyword either."""
    check_declared_name(fn.name, fn.name_span, bag, "fn")
    for param in fn.params:
        check_declared_name(param.name, param.name_span, bag, "parameter")
    # unknown type names in a fn's signature are reported with its body (bodies.py)
    check_fields(fn.params, "Parameter", f"fn '{fn.name}' of agent '{agent.name}'", symbols, bag,
                 values, report_types=False)


def declared_contexts(symbols: Symbols) -> set[str]:
    """Every context name some tool declares with ``needs``."""
    return {need.name for tool in symbols.tools.values() for need in tool.needs}


def _check_config(agent: ast.AgentDecl, symbols: Symbols, bag: DiagnosticBag) -> None:
    owner = f"agent '{agent.name}'"
    entries = check_keys(agent.config, AGENT_KEYS, owner, bag)
    read = ValueReader(owner, bag)
    for key, entry in entries.items():
        if key == "model":
            name = read.name(entry, "model")
            if name is not None and name.id not in symbols.models:
                report_unknown_model(name.id, name.span, symbols, bag)
        elif key == "system":
            read.string(entry)
        elif key == "tools":
            _check_tools(entry, read, symbols, bag)
        elif key == "tool_policy":
            read.choice(entry, TOOL_POLICIES)
        elif key == "tool_scopes":
            read.string_list(entry)
        elif key == "tool_contexts":
            _check_contexts(entry, read, symbols, bag)
        elif key in _MILLIS:
            read.integer(entry, 1, millis=True)
        else:
            read.integer(entry, _AT_LEAST[key])


def _check_tools(entry: ast.ConfigEntry, read: ValueReader, symbols: Symbols,
                 bag: DiagnosticBag) -> None:
    names = read.name_list(entry, "tool") or []
    first = report_duplicates(
        names, lambda n: n.id, lambda n: n.span,
        lambda name: f"Tool '{name}' is listed more than once in 'tools' of {read.owner}.", bag,
        code="E009", first_label="first listed here")
    for name in first.values():
        if name.id not in symbols.tools:
            report_unknown_tool(name.id, name.span, symbols, bag)


def _check_contexts(entry: ast.ConfigEntry, read: ValueReader, symbols: Symbols,
                    bag: DiagnosticBag) -> None:
    items = read.string_list(entry) or []
    known = declared_contexts(symbols)
    first = report_duplicates(
        items, lambda s: s.value, lambda s: s.span,
        lambda name: f"Context '{name}' is listed more than once in 'tool_contexts' of "
                     f"{read.owner}.", bag, code="E009", first_label="first listed here")
    for item in first.values():
        if item.value not in known:
            bag.error("E029", f"Unknown context '{item.value}': no tool declares "
                      f"'needs {item.value}'.", item.span,
                      hint=did_you_mean(item.value, sorted(known)))
