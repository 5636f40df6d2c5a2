"""Who may run a tool: credential, scope and ``tool_policy`` (RUNTIME.md §3 steps 2–5, §4).

These checks are callable alone, without running anything, so that the ask engine can compute
which tools a model may be offered: :func:`static_refusal` covers steps 2–4 and
:func:`approval_refusal` the part of step 5 that needs no prompt. The tool pipeline uses the
same functions' building blocks on every call, and :func:`ask_approval` when it must prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import IO, Any

from luma.runtime.errors import LumaError
from luma.runtime.settings import AgentSettings, ToolSettings, agent_settings, tool_settings
from luma.syntax import ast

PERMISSION_DENIED = "TOOL_PERMISSION_DENIED"
APPROVED_TOOLS_ENV = "LUMA_APPROVED_TOOLS"

_PROMPT_INPUT_LIMIT = 2000


def missing_credential(tool: ToolSettings, env: Mapping[str, str]) -> LumaError | None:
    """Step 2: the environment variable named by ``credential`` must be set and non-empty."""
    if tool.credential is not None and not env.get(tool.credential):
        return LumaError(PERMISSION_DENIED, f"Tool '{tool.name}' is missing credential: "
                         f"{tool.credential}.", tool=tool.name)
    return None


def scope_refusal(tool: ToolSettings, agent: AgentSettings | None) -> LumaError | None:
    """Step 3: only when the tool declares a scope and the agent gives ``tool_scopes``."""
    if tool.scope is None or agent is None or agent.tool_scopes is None:
        return None
    if tool.scope in agent.tool_scopes:
        return None
    return LumaError(PERMISSION_DENIED, f"Tool '{tool.name}' scope access was denied: "
                     f"{tool.scope}.", tool=tool.name)


def deny_write_refusal(tool: ToolSettings, agent: AgentSettings | None) -> LumaError | None:
    """Step 4: an agent with ``tool_policy: "deny_write"`` runs no write tool."""
    if agent is None or agent.tool_policy != "deny_write" or not tool.is_write:
        return None
    return LumaError(PERMISSION_DENIED, f"Tool '{tool.name}' is a write tool and agent "
                     f"'{agent.name}' has tool_policy deny_write.", tool=tool.name)


def needs_approval(tool: ToolSettings, agent: AgentSettings | None) -> bool:
    """Step 5 applies: the agent's policy is ``approval`` and the tool writes."""
    return agent is not None and agent.tool_policy == "approval" and tool.is_write


def approved_tools(env: Mapping[str, str]) -> frozenset[str]:
    """The tool names in ``LUMA_APPROVED_TOOLS`` (comma-separated, spaces ignored)."""
    raw = env.get(APPROVED_TOOLS_ENV, "")
    return frozenset(name.strip() for name in raw.split(",") if name.strip())


def not_in_approved_list(tool_name: str) -> LumaError:
    return LumaError(PERMISSION_DENIED, f"Tool '{tool_name}' requires approval: it is not in "
                     f"{APPROVED_TOOLS_ENV}.", tool=tool_name)


def declined(tool_name: str) -> LumaError:
    return LumaError(PERMISSION_DENIED, f"Tool '{tool_name}' was not approved.", tool=tool_name)


async def ask_callback(approve: Callable[[str, Any], Any], tool_name: str, shown_input: Any) -> bool:
    """Ask the caller's approval callback (sync or async) about one call. It fails closed: a
    callback that raises, or answers anything but ``True``, does not approve."""
    import inspect

    try:
        answer = approve(tool_name, shown_input)
        if inspect.isawaitable(answer):
            answer = await answer
    except Exception as exc:  # the caller's bug: the call does not run, and the error says why
        raise LumaError(PERMISSION_DENIED, f"Tool '{tool_name}' was not approved: the approval "
                        f"callback raised {type(exc).__name__}: {exc}", tool=tool_name) from None
    return answer is True


# ------------------------------------------------------------------------- on declarations


def static_refusal(tool: ast.ToolDecl, agent: ast.AgentDecl | None,
                   env: Mapping[str, str]) -> LumaError | None:
    """Steps 2–4 for ``tool`` called by ``agent`` (None: the top level): the first refusal, or
    None when the tool may run as far as credential, scope and ``deny_write`` go."""
    t = tool_settings(tool)
    a = agent_settings(agent) if agent is not None else None
    return missing_credential(t, env) or scope_refusal(t, a) or deny_write_refusal(t, a)


def approval_refusal(tool: ast.ToolDecl, agent: ast.AgentDecl | None, env: Mapping[str, str],
                     *, interactive: bool) -> LumaError | None:
    """Step 5 without prompting: the refusal a non-interactive run gives, or None when the tool
    needs no approval, is approved in ``LUMA_APPROVED_TOOLS``, or would be asked about (an
    interactive run prompts when the call happens)."""
    t = tool_settings(tool)
    a = agent_settings(agent) if agent is not None else None
    if not needs_approval(t, a) or t.name in approved_tools(env) or interactive:
        return None
    return not_in_approved_list(t.name)


def offer_refusal(tool: ast.ToolDecl, agent: ast.AgentDecl | None, env: Mapping[str, str],
                  *, interactive: bool) -> LumaError | None:
    """Steps 2–5 as far as they can be decided before a call: why ``tool`` must not be offered
    to ``agent``'s model, or None."""
    return static_refusal(tool, agent, env) or approval_refusal(tool, agent, env,
                                                                interactive=interactive)


# ---------------------------------------------------------------------------------- prompt


def ask_approval(tool: ToolSettings, raw_input: Any, *, stdin: IO[str], stderr: IO[str],
                 redact: Callable[[str], str] = lambda text: text) -> bool:
    """Ask on stderr/stdin whether one call of a write tool may run: shows the tool's name, its
    side effects and the input (never a secret: ``redact`` removes known secret values).
    Only ``y`` or ``yes`` approves; anything else, or end of input, declines."""
    from luma.runtime.values import short

    shown = redact(short(raw_input, _PROMPT_INPUT_LIMIT))
    stderr.write(f"Tool '{tool.name}' wants to run (side effects: {tool.side_effects}).\n"
                 f"  input: {shown}\n"
                 f"Approve this call? [y/N] ")
    stderr.flush()
    answer = stdin.readline()
    if not answer.endswith("\n"):
        stderr.write("\n")
    return answer.strip().lower() in ("y", "yes")
