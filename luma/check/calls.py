"""Calls in statements: functions (an agent's own methods, built-ins, ``Agent.fn``), direct tool
calls ``tool name(arg)`` and ``ask … using tool name``.

The walker in ``bodies`` evaluates the argument expressions (names, nested calls, their static
types); this module decides what is called, whether it may be called from here, and whether the
arguments fit what it declares.
"""

from __future__ import annotations

from collections.abc import Sequence

from luma.check.arguments import ArgumentChecker
from luma.check.exprtypes import (
    FLOAT, INT, NULL, OBJECT, STRING, UNKNOWN, Ty, is_objectlike, kind_word, list_of, resolve)
from luma.check.references import report_unknown_tool
from luma.check.scopes import Scope
from luma.check.symbols import Symbols
from luma.record import Record
from luma.syntax import ast
from luma.syntax.diagnostics import DiagnosticBag, Related, did_you_mean
from luma.syntax.source import Span


class Builtin(Record):
    __slots__ = __match_args__ = ("min_args", "max_args", "returns")

    def __init__(self, min_args: int, max_args: int | None, returns: Ty) -> None:
        self.min_args = min_args
        self.max_args = max_args  # None: any number
        self.returns = returns


BUILTINS: dict[str, Builtin] = {
    "len": Builtin(1, 1, INT),
    "str": Builtin(1, 1, STRING),
    "int": Builtin(1, 1, INT),
    "float": Builtin(1, 1, FLOAT),
    "json": Builtin(1, 1, STRING),
    "keys": Builtin(1, 1, list_of(STRING)),
    "range": Builtin(1, 2, list_of(INT)),
    "print": Builtin(0, None, NULL),
}
"""The built-in functions of LANGUAGE.md §8, with their arities and result types."""


class Target(Record):
    """What a call resolves to: an agent method (with ``params``) or a built-in."""

    __slots__ = __match_args__ = ("label", "min_args", "max_args", "returns", "params",
                                  "declared")

    def __init__(self, label: str, min_args: int, max_args: int | None, returns: Ty,
                 params: tuple[ast.Field, ...] = (), declared: Span | None = None) -> None:
        self.label = label  # how the message names it: 'summarize', 'Other.run', 'len'
        self.min_args = min_args
        self.max_args = max_args
        self.returns = returns
        self.params = params
        self.declared = declared


def agent_tools(agent: ast.AgentDecl) -> frozenset[str] | None:
    """The tool names in the agent's ``tools`` list (``[]`` when it has none), or None when the
    entry is not a list (reported with the agent's configuration; nothing to check against)."""
    entry = agent.entry("tools")
    if entry is None:
        return frozenset()
    if not isinstance(entry.value, ast.ListLit):
        return None
    return frozenset(item.id for item in entry.value.items if isinstance(item, ast.Name))


def _tools_span(agent: ast.AgentDecl) -> Related:
    entry = agent.entry("tools")
    if entry is None:
        return Related(agent.name_span, f"agent '{agent.name}' has no tools list")
    return Related(entry.span, "the agent's tools are listed here")


def _is_required(param: ast.Field) -> bool:
    return not param.optional and param.annotation("default") is None


def _fn_target(label: str, fn: ast.FnDecl, symbols: Symbols) -> Target:
    required = sum(1 for p in fn.params if _is_required(p))
    return Target(label, required, len(fn.params), resolve(fn.returns, symbols), fn.params,
                  fn.name_span)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def arity_text(low: int, high: int | None) -> str:
    """``no arguments``, ``1 argument``, ``1 or 2 arguments``, ``at least 1 argument``."""
    if high is None:
        return f"at least {_plural(low, 'argument')}"
    if low == high:
        return "no arguments" if low == 0 else _plural(low, "argument")
    if high == low + 1:
        return f"{low} or {high} arguments"
    return f"{low} to {high} arguments"


class CallChecker:
    """Resolves and checks the calls of one body."""

    def __init__(self, scope: Scope, symbols: Symbols, bag: DiagnosticBag,
                 arguments: ArgumentChecker) -> None:
        self.scope = scope
        self.symbols = symbols
        self.bag = bag
        self.arguments = arguments

    # ------------------------------------------------------------------------ functions
    def resolve_function(self, call: ast.Call) -> Target | None:
        """What ``call`` calls; None (after reporting why) when it calls nothing known."""
        callee = call.callee
        if isinstance(callee, ast.Name):
            return self._resolve_plain(callee)
        if isinstance(callee, ast.Member) and isinstance(callee.obj, ast.Name):
            return self._resolve_agent_method(callee.obj, callee)
        self.bag.error("E039", "Only a function can be called: write f(...) or Agent.fn(...).",
                       callee.span)
        return None

    def _resolve_plain(self, callee: ast.Name) -> Target | None:
        name = callee.id
        agent = self.scope.agent
        fn = agent.fn(name) if agent is not None else None
        if fn is not None:
            return _fn_target(name, fn, self.symbols)
        builtin = BUILTINS.get(name)
        if builtin is not None:
            return Target(name, builtin.min_args, builtin.max_args, builtin.returns)
        if name == "calls" and self.scope.test is not None:
            return Target(name, 1, 1, list_of(OBJECT))  # a test's record of one tool's calls
        candidates = [*BUILTINS, *(f.name for f in agent.fns)] if agent else list(BUILTINS)
        hint = did_you_mean(name, candidates)
        owners = [a.name for a in self.symbols.agents.values() if a.fn(name) is not None]
        if hint is None and owners:
            hint = f"'{name}' is a function of agent '{owners[0]}'; call it as " \
                   f"{owners[0]}.{name}(...)"
        if hint is None and name in self.scope.names:
            hint = f"'{name}' is a variable, not a function"
        if hint is None and name == "calls":
            hint = "calls(\"tool\") is available only in a test"
        self.bag.error("E036", f"Unknown function '{name}'.", callee.span, hint=hint)
        return None

    def _resolve_agent_method(self, obj: ast.Name, callee: ast.Member) -> Target | None:
        agent = self.symbols.agents.get(obj.id)
        if agent is None:
            if obj.id in self.scope.names:
                self.bag.error(
                    "E039", f"'{obj.id}.{callee.name}' cannot be called: '{obj.id}' is a "
                    "variable, and only an agent's functions are called as Agent.fn(...).",
                    callee.span)
            else:
                self.bag.error("E028", f"Unknown agent '{obj.id}'.", obj.span,
                               hint=did_you_mean(obj.id, list(self.symbols.agents)))
            return None
        fn = agent.fn(callee.name)
        if fn is None:
            self.bag.error("E036", f"Agent '{agent.name}' has no function '{callee.name}'.",
                           callee.name_span,
                           hint=did_you_mean(callee.name, [f.name for f in agent.fns]),
                           related=(Related(agent.name_span, "agent declared here"),))
            return None
        return _fn_target(f"{agent.name}.{fn.name}", fn, self.symbols)

    def check_function_call(self, call: ast.Call, target: Target,
                            arg_types: Sequence[Ty]) -> Ty:
        """Check the number of arguments and the values given for declared parameters."""
        given = len(call.args)
        too_few = given < target.min_args
        too_many = target.max_args is not None and given > target.max_args
        if too_few or too_many:
            related = (Related(target.declared, "declared here"),) if target.declared else ()
            self.bag.error(
                "E037", f"Function '{target.label}' takes "
                f"{arity_text(target.min_args, target.max_args)} but {given} "
                f"{'was' if given == 1 else 'were'} given.", call.span, related=related)
        for param, arg, ty in zip(target.params, call.args, arg_types):
            self.arguments.check_param(
                f"parameter '{param.name}' of function '{target.label}'", param, arg, ty)
        return target.returns

    # ---------------------------------------------------------------------------- tools
    def tool(self, name: str, span: Span) -> ast.ToolDecl | None:
        """The declared tool ``name``; None after reporting it unknown (E026)."""
        return self._tool(name, span)

    def _tool(self, name: str, span: Span) -> ast.ToolDecl | None:
        tool = self.symbols.tools.get(name)
        if tool is None:
            report_unknown_tool(name, span, self.symbols, self.bag)
        return tool

    def check_tool_call(self, call: ast.ToolCall, arg_type: Ty,
                        entry_types: Sequence[Ty] | None) -> Ty:
        """A direct tool call: the tool exists, this agent may call it, and the argument fits
        its parameters. ``entry_types`` are the static types of an object literal's values."""
        tool = self._tool(call.tool, call.tool_span)
        if tool is None:
            return UNKNOWN
        agent = self.scope.agent
        if agent is not None:
            allowed = agent_tools(agent)
            if allowed is not None and tool.name not in allowed:
                self.bag.error(
                    "E030", f"Agent '{agent.name}' does not allow tool '{tool.name}' to be "
                    "called directly.", call.tool_span,
                    hint=f"add {tool.name} to the tools list of agent '{agent.name}'",
                    related=(_tools_span(agent),))
        if isinstance(call.arg, ast.ObjectLit) and entry_types is not None:
            self.arguments.check_object(tool, call.arg, entry_types)
        elif arg_type.is_known and not is_objectlike(arg_type):
            self.bag.error("E034", f"The argument of tool '{tool.name}' must be an object, "
                           f"not {kind_word(arg_type)}.", call.arg.span,
                           hint=f"pass the parameters by name: tool {tool.name}({{ ... }})")
        if tool.returns is None:
            return OBJECT  # a command's {"rows_affected": n}
        return resolve(tool.returns, self.symbols)

    def check_using_tool(self, ask: ast.Ask) -> None:
        """``ask … using tool name``: the tool exists and the agent offers it."""
        if ask.using_tool is None:
            return
        span = ask.using_span or ask.span
        tool = self._tool(ask.using_tool, span)
        agent = self.scope.agent
        if tool is None or agent is None:
            return
        allowed = agent_tools(agent)
        if allowed is not None and tool.name not in allowed:
            self.bag.error(
                "E031", f"Agent '{agent.name}' does not allow the tool '{tool.name}' required "
                "by using tool.", span,
                hint=f"add {tool.name} to the tools list of agent '{agent.name}'",
                related=(_tools_span(agent),))
