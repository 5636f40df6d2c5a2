"""``luma export``: the tool declarations exactly as a provider receives them.

One internal representation: each tool becomes a ``ToolSpec`` (its description and the neutral
input schema from ``SchemaCompiler``), then the provider's own serializer — the same function
its adapter uses on every request — turns it into that provider's declaration.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from luma.models.base import ToolSpec
from luma.runtime.errors import LumaError
from luma.schema.compile import SchemaCompiler, tool_input_name
from luma.syntax import ast

EXPORT_PROVIDERS = ("openai", "azure", "anthropic", "gemini")


def export_tool_declarations(program: ast.Program, provider: str, agent: str | None = None, *,
                             env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The declarations ``provider`` would receive: for ``agent``'s visible tools, or for every
    tool of the program when no agent is named; sorted by name. ``env`` decides which
    ``credential``s are set (default: the process environment), as it would in a run."""
    if provider not in EXPORT_PROVIDERS:
        raise LumaError("EXPORT_INVALID",
                        f"Unknown provider '{provider}'; choose one of openai, azure, anthropic, "
                        "gemini.")
    if agent is None:
        tools = list(program.tools)
    else:
        decl = next((a for a in program.agents if a.name == agent), None)
        if decl is None:
            names = ", ".join(sorted(a.name for a in program.agents)) or "none"
            raise LumaError("EXPORT_INVALID",
                            f"There is no agent named '{agent}'. Agents in this program: {names}.")
        tools = visible_tools(program, decl, os.environ if env is None else env)
    specs = tool_specs(program, tools)
    return [declaration(provider, spec) for spec in specs]


def declaration(provider: str, spec: ToolSpec) -> dict[str, Any]:
    """One tool in a provider's declaration format."""
    if provider in ("openai", "azure"):
        from luma.models.openai import tool_declaration as openai_declaration

        return openai_declaration(spec, None)
    if provider == "anthropic":
        from luma.models.anthropic import tool_declaration as anthropic_declaration

        return anthropic_declaration(spec)
    from luma.models.gemini import tool_declaration as gemini_declaration

    return gemini_declaration(spec)


def tool_specs(program: ast.Program, tools: Iterable[ast.ToolDecl],
               compiler: SchemaCompiler | None = None) -> list[ToolSpec]:
    """The tools as neutral ``ToolSpec``s, sorted by name (a byte-stable request prefix lets
    providers cache prompts). The input schema is self-contained; ``needs`` never enter it."""
    compiler = compiler or SchemaCompiler(program)
    specs = []
    for tool in sorted({t.name: t for t in tools}.values(), key=lambda t: t.name):
        schema = compiler.standalone(tool_input_name(tool.name))
        schema.pop("$schema", None)
        specs.append(ToolSpec(tool.name, _string_entry(tool, "description") or "", schema))
    return specs


def visible_tools(program: ast.Program, agent: ast.AgentDecl,
                  env: Mapping[str, str]) -> list[ast.ToolDecl]:
    """The agent's tools minus those a non-interactive run would not offer its model (a
    ``credential`` that is not set, a ``scope`` not in ``tool_scopes``, a write tool under
    ``deny_write``, or under ``approval`` without being named in ``LUMA_APPROVED_TOOLS``),
    sorted by name. A model never learns that a tool it may not use exists."""
    from luma.runtime.calls import agent_tools
    from luma.runtime.policy import offer_refusal

    declared = {t.name: t for t in reversed(program.tools)}   # the first declaration wins
    visible = [declared[name] for name in dict.fromkeys(agent_tools(agent)) if name in declared]
    return sorted((t for t in visible if offer_refusal(t, agent, env, interactive=False) is None),
                  key=lambda t: t.name)


def _string_entry(decl: ast.ToolDecl, key: str) -> str | None:
    entry = decl.entry(key)
    if entry is not None and isinstance(entry.value, ast.StringLit):
        return entry.value.value
    return None
