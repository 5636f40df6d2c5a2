"""A program's tools and agent methods as callable contracts, for hosts that offer them to a
client of their own (``luma mcp serve``): what each one is (:class:`Contract`), which an agent
may use, one call through the whole tool pipeline, and the words a failed call says to a model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from luma.runtime.errors import LumaError
from luma.syntax import ast

RESULT_FIELD = "result"
"""The field that holds a method's result when its type is not an object."""


@dataclass(frozen=True, slots=True)
class Contract:
    """One callable contract: a tool (``agent_method`` None) or an agent's ``fn`` (named
    ``Agent.fn``). ``wrapped``: the result is not an object and is handed out as
    ``{"result": value}`` (``output_schema`` says so)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    side_effects: str
    idempotent: bool
    agent_method: tuple[str, str] | None = None
    wrapped: bool = False


def contracts(program: ast.Program, schemas: Any, agent: str | None) -> list[Contract]:
    """The tools a client may call, sorted by name: every tool (``agent`` None), or the agent's
    ``tools`` less those its scope or ``deny_write`` refuses, then the agent's methods."""
    from luma.runtime import policy
    from luma.runtime.calls import agent_tools
    from luma.runtime.settings import agent_settings, tool_settings
    from luma.schema.compile import tool_input_name, tool_result

    decl = _agent(program, agent)
    tools = {t.name: t for t in program.tools}
    names = list(tools) if decl is None else [n for n in agent_tools(decl) if n in tools]
    found: list[Contract] = []
    settings_of_agent = agent_settings(decl) if decl is not None else None
    for name in names:
        tool = tools[name]
        settings = tool_settings(tool)
        if policy.scope_refusal(settings, settings_of_agent) is not None or \
                policy.deny_write_refusal(settings, settings_of_agent) is not None:
            continue
        output, wrapped = _object_schema(schemas.standalone(tool_result(tool)))
        found.append(Contract(name, _description(tool.config),
                              schemas.standalone(tool_input_name(name)), output,
                              settings.side_effects, settings.idempotent, wrapped=wrapped))
    agents = [decl] if decl is not None else []
    for a in agents:
        for fn in a.fns:
            returns = schemas.standalone(fn.returns) if fn.returns is not None else {}
            output, wrapped = _object_schema(returns)
            found.append(Contract(f"{a.name}.{fn.name}", f"Agent {a.name}'s method {fn.name}.",
                                  schemas.standalone_fields(fn.params), output, "write",
                                  False, agent_method=(a.name, fn.name), wrapped=wrapped))
    return sorted(found, key=lambda c: c.name)


def model_facing_text(err: LumaError, input_schema: dict[str, Any] | None,
                      arguments: Any) -> str:
    """What a failed call says to its caller: the words the native tool loop sends a model (a
    permission refusal names nothing)."""
    from luma.models.ask import NOT_PERMITTED_TEXT

    if err.code == "TOOL_PERMISSION_DENIED":
        return NOT_PERMITTED_TEXT
    if err.code == "TOOL_INPUT_INVALID" and input_schema is not None and err.tool:
        from luma.schema.validate import validator_for

        _, violations = validator_for(input_schema).validate_and_fill(
            arguments, soft_rules=False, infer_tags=True)
        lines = [f"- {v.render('')}" for v in violations if not v.soft] or [f"- {err.message}"]
        return (f"The arguments for '{err.tool}' do not fit its input schema:\n"
                + "\n".join(lines) + "\nFix those fields and call the tool again.")
    return err.message


def _agent(program: ast.Program, name: str | None) -> ast.AgentDecl | None:
    if name is None:
        return None
    for agent in program.agents:
        if agent.name == name:
            return agent
    from luma.syntax.diagnostics import did_you_mean

    hint = did_you_mean(name, [a.name for a in program.agents])
    raise LumaError("AGENT_NOT_FOUND", f"Unknown agent '{name}'" + (f"; {hint}" if hint else "")
                    + ".")


def _description(config: tuple[ast.ConfigEntry, ...]) -> str:
    for entry in config:
        if entry.key == "description" and isinstance(entry.value, ast.StringLit):
            return str(entry.value.value)
    return ""


def _object_schema(schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """An MCP ``outputSchema`` is an object: another type is wrapped in ``{"result": …}``."""
    if schema.get("type") == "object":
        return schema, False
    inner = dict(schema)
    dialect = inner.pop("$schema", None)
    defs = inner.pop("$defs", None)
    wrapped: dict[str, Any] = {"type": "object", "properties": {RESULT_FIELD: inner},
                               "required": [RESULT_FIELD], "additionalProperties": False}
    if dialect is not None:  # the keywords of the root stay at the root
        wrapped = {"$schema": dialect, **wrapped}
    if defs is not None:
        wrapped["$defs"] = defs
    return wrapped, True
