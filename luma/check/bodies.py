"""Checks of code: fn bodies and top-level statements.

One walk per body, in execution order, carrying the flow state of ``scopes``: every name read is
resolved (unknown: E038; maybe unassigned on this path: W002), every expression gets a static
type (``exprtypes``) so that a misspelled field is caught, and every call is handed to ``calls``.
"""

from __future__ import annotations

from collections.abc import Sequence

from luma.check.arguments import ArgumentChecker, sentence
from luma.check.calls import CallChecker
from luma.check.provider_schemas import ProviderSchemaCheck
from luma.check.references import report_unknown_model
from luma.check.exprtypes import (
    BOOL, FLOAT, INT, OBJECT, STRING, UNKNOWN, Ty, field_type, index_type,
    is_objectlike, join, kind_word, list_of, literal_type, path_text, resolve)
from luma.check.scopes import Flow, Scope, assigned_names, join_flows
from luma.check.symbols import Symbols
from luma.check.types import check_type
from luma.syntax import ast
from luma.syntax.diagnostics import DiagnosticBag, Related, did_you_mean
from luma.syntax.source import Span


def check_bodies(program: ast.Program, symbols: Symbols, bag: DiagnosticBag) -> None:
    """Report every problem in function bodies and top-level statements into ``bag``."""
    arguments = ArgumentChecker(program, symbols, bag)
    top_level = Scope.of_top_level(program.statements)
    provider_schemas = ProviderSchemaCheck(program, bag)
    for agent in program.agents:
        for fn in agent.fns:
            checker = BodyChecker(Scope.of_fn(agent, fn), symbols, bag, arguments)
            checker.outer_names = frozenset(top_level.names)
            checker.provider_schemas = provider_schemas
            checker.check_fn(fn)
    if program.statements:
        BodyChecker(top_level, symbols, bag, arguments).check_top_level(program.statements)
    seen: dict[str, ast.TestDecl] = {}
    for test in program.tests:
        first = seen.setdefault(test.name, test)
        if first is not test:
            bag.error("E004", f"Test '{test.name}' is declared more than once.", test.name_span,
                      hint="give each test its own name: luma test -k selects tests by name",
                      related=(Related(first.name_span, "first declared here"),))
        checker = BodyChecker(Scope.of_test(test), symbols, bag, arguments)
        checker.provider_schemas = provider_schemas
        checker.check_test(test)


_NUMBERS = ("int", "float")


class BodyChecker:
    """Walks one body (a fn's or the top-level statements) and reports into ``bag``."""

    def __init__(self, scope: Scope, symbols: Symbols, bag: DiagnosticBag,
                 arguments: ArgumentChecker) -> None:
        self.scope = scope
        self.symbols = symbols
        self.bag = bag
        self.arguments = arguments
        self.calls = CallChecker(scope, symbols, bag, arguments)
        self.outer_names: frozenset[str] = frozenset()  # top-level variables, for hints
        self.provider_schemas: ProviderSchemaCheck | None = None  # W006, for agents' asks

    # --------------------------------------------------------------------------- entry points
    def check_fn(self, fn: ast.FnDecl) -> None:
        for p in fn.params:
            check_type(p.type, self.symbols, self.bag)
        if fn.returns is not None:
            check_type(fn.returns, self.symbols, self.bag)
        flow = Flow()
        for p in fn.params:
            flow = flow.assign(p.name, resolve(p.type, self.symbols))
        self.block(fn.body, flow)

    def check_top_level(self, statements: Sequence[ast.Stmt]) -> None:
        self.block(statements, Flow())

    def check_test(self, test: ast.TestDecl) -> None:
        """A test's body is checked like the top-level statements, with its mocks and
        assertions, ``calls("tool")`` and its ``model:`` entry."""
        for extra in test.models[1:]:
            self.bag.error("E006", f"Test '{test.name}' names its model more than once.",
                           extra.span, hint="keep one model: entry",
                           related=(Related(test.models[0].span, "first given here"),))
        if test.models and test.models[0].name not in self.symbols.models:
            report_unknown_model(test.models[0].name, test.models[0].name_span, self.symbols,
                                 self.bag)
        self.block(test.body, Flow())

    # ----------------------------------------------------------------------------- statements
    def block(self, stmts: Sequence[ast.TestStmt], flow: Flow | None) -> Flow | None:
        """Check ``stmts`` starting from ``flow``; the state after them (None: unreachable)."""
        for i, stmt in enumerate(stmts):
            if flow is None:
                self.bag.warning("W005", "This statement can never run.", stmt.span,
                                 hint="it follows a return or throw on every path")
                self._dead(stmts[i:])
                return None
            flow = self.stmt(stmt, flow)
        return flow

    def _dead(self, stmts: Sequence[ast.TestStmt]) -> None:
        """Check unreachable statements for everything but the flow (no W002 there)."""
        dead = Flow.of(self.scope.names, {})
        for stmt in stmts:
            self.stmt(stmt, dead)

    def stmt(self, s: ast.TestStmt, flow: Flow) -> Flow | None:
        if isinstance(s, ast.Mock):
            self._mock(s, flow)
            return flow
        if isinstance(s, ast.Assert):
            self._assert(s, flow)
            return flow
        if isinstance(s, ast.Assign):
            return self._assign(s, flow)
        if isinstance(s, ast.ExprStmt):
            self.expr(s.expr, flow)
            return flow
        if isinstance(s, ast.If):
            return self._if(s, flow)
        if isinstance(s, ast.For):
            return self._for(s, flow)
        if isinstance(s, ast.Try):
            return self._try(s, flow)
        if isinstance(s, ast.Return):
            self._return(s, flow)
            # a top-level return is an error of its own; the statements after it still count
            return flow if self.scope.fn is None else None
        self._throw(s, flow)
        return None

    def _assign(self, s: ast.Assign, flow: Flow) -> Flow:
        ty = self.expr(s.value, flow)
        if s.type is not None:
            check_type(s.type, self.symbols, self.bag)
            self.arguments.check_value(
                s.value, ty, s.type, None, is_input=False,
                invalid=lambda problem: sentence(
                    f"Invalid value for variable '{s.target}': {problem}"))
            ty = resolve(s.type, self.symbols)
        return flow.assign(s.target, ty)

    def _if(self, s: ast.If, flow: Flow) -> Flow | None:
        cond = self.expr(s.cond, flow)
        if cond.is_known and cond != BOOL:
            self.bag.error("E034", f"The condition of an if must be a bool, not "
                           f"{kind_word(cond)}.", s.cond.span)
        then_narrow, else_narrow = self.narrowings(s.cond, flow)
        after_then = self.block(s.then, _narrowed(flow, then_narrow))
        otherwise = _narrowed(flow, else_narrow)
        after_else = self.block(s.orelse, otherwise) if s.orelse is not None else otherwise
        return join_flows(after_then, after_else)

    def _for(self, s: ast.For, flow: Flow) -> Flow | None:
        iterable = self.expr(s.iterable, flow)
        if iterable.is_known and iterable.kind != "list":
            self.bag.error("E034", f"A for loop needs a list, not {kind_word(iterable)}.",
                           s.iterable.span)
        item = iterable.item or UNKNOWN if iterable.kind == "list" else UNKNOWN
        # a later round sees what an earlier one assigned: a name the body assigns may hold
        # a value of another type at the top of the body (one walk, so nesting stays linear)
        entry = flow
        for name in assigned_names(s.body):
            if name in entry.types:
                entry = entry.with_type(name, UNKNOWN)
        after_body = self.block(s.body, entry.assign(s.var, item))
        # the body may run zero times
        return join_flows(flow, after_body)

    def _try(self, s: ast.Try, flow: Flow) -> Flow | None:
        after_body = self.block(s.body, flow)
        # the error may interrupt the body anywhere: nothing it assigns is certain
        handler_entry = join_flows(flow, after_body) or flow
        after_handler = self.block(s.handler, handler_entry.assign(s.err_name, OBJECT))
        return join_flows(after_body, after_handler)

    def _return(self, s: ast.Return, flow: Flow) -> None:
        ty = self.expr(s.value, flow) if s.value is not None else None
        fn = self.scope.fn
        if fn is None:
            self.bag.error("E039", "'return' is only allowed inside a fn.", s.span,
                           hint="a test ends after its last statement" if self.scope.test
                           else "the program's result is the value of its last top-level "
                                "statement")
            return
        if fn.returns is None or ty is None or s.value is None:
            return
        self.arguments.check_value(
            s.value, ty, fn.returns, None, is_input=False,
            invalid=lambda problem: sentence(
                f"Invalid return value of function '{fn.name}': {problem}"))

    def _mock(self, s: ast.Mock, flow: Flow) -> None:
        """``mock tool NAME returns VALUE``: a declared tool, and a value its result type could
        be; ``throws VALUE``: an error object, as ``throw`` takes."""
        tool = self.calls.tool(s.tool, s.tool_span)
        if s.throws:
            self._throw(ast.Throw(s.value, s.span), flow)
            return
        ty = self.expr(s.value, flow)
        if tool is None or tool.returns is None:
            return
        self.arguments.check_value(
            s.value, ty, tool.returns, None, is_input=False,
            invalid=lambda problem: sentence(
                f"Invalid mocked result of tool '{tool.name}': {problem}"))

    def _assert(self, s: ast.Assert, flow: Flow) -> None:
        self.expr(s.cond, flow)
        if s.message is None:
            return
        ty = self.expr(s.message, flow)
        if ty.is_known and ty.kind != "string":
            word = "a check" if s.soft else "an assert"
            self.bag.error("E034", f"The message of {word} must be a string, not "
                           f"{kind_word(ty)}.", s.message.span)

    def _calls(self, e: ast.Call) -> None:
        """``calls("tool")`` in a test: its argument is a declared tool's name, written out."""
        if len(e.args) != 1:
            return  # E037 says so
        arg = e.args[0]
        if isinstance(arg, ast.StringLit) and not arg.has_placeholders:
            self.calls.tool(arg.value, arg.span)
        else:
            self.bag.error("E034", "The argument of calls() must be a tool's name as a string "
                           "literal.", arg.span, hint='write calls("tool_name")')

    def _throw(self, s: ast.Throw, flow: Flow) -> None:
        value = s.value
        hint = 'throw an object such as { code: "NOT_FOUND", message: "..." }'
        if isinstance(value, ast.ObjectLit):
            entry_types = dict(zip((e.key for e in value.entries), self._object(value, flow)))
            keys = {e.key: e for e in value.entries}
            missing = [k for k in ("code", "message") if k not in keys]
            if missing:
                self.bag.error("E039", "The thrown error has no " +
                               " and no ".join(f"'{k}'" for k in missing) +
                               "; an error needs 'code' and 'message' strings.", value.span,
                               hint=hint)
            for key in ("code", "message"):
                entry = keys.get(key)
                if entry is None:
                    continue
                entry_ty = entry_types[key]
                if entry_ty.is_known and entry_ty.kind != "string":
                    self.bag.error("E039", f"The '{key}' of a thrown error must be a string, "
                                   f"not {kind_word(entry_ty)}.", entry.value.span)
            return
        ty = self.expr(value, flow)
        if ty.is_known and not is_objectlike(ty):
            self.bag.error("E039", "Only an error object can be thrown, not "
                           f"{kind_word(ty)}: an error needs 'code' and 'message' strings.",
                           value.span, hint=hint)
        elif ty.kind == "schema" and ty.name in self.symbols.schemas:
            fields = {f.name for f in self.symbols.schemas[ty.name].fields}
            missing = [k for k in ("code", "message") if k not in fields]
            if missing:
                self.bag.error("E039", f"A '{ty.name}' cannot be thrown: it has no " +
                               " and no ".join(f"'{k}'" for k in missing) +
                               " field; an error needs 'code' and 'message' strings.",
                               value.span)

    # ---------------------------------------------------------------------------- expressions
    def expr(self, e: ast.Expr, flow: Flow) -> Ty:
        """Check ``e`` in the state ``flow`` and return its static type."""
        if isinstance(e, ast.Literal):
            return literal_type(e)
        if isinstance(e, ast.StringLit):
            self._string(e, flow)
            return STRING
        if isinstance(e, ast.Name):
            return self.read(e.id, e.span, flow)
        if isinstance(e, ast.Member):
            return self._member(e, flow)
        if isinstance(e, ast.Index):
            obj = self.expr(e.obj, flow)
            self.expr(e.index, flow)
            return index_type(obj, e.index, self.symbols)
        if isinstance(e, ast.ListLit):
            item: Ty | None = None
            for i in e.items:
                t = self.expr(i, flow)
                item = t if item is None else join(item, t)
            return list_of(item or UNKNOWN)
        if isinstance(e, ast.ObjectLit):
            self._object(e, flow)
            return OBJECT
        if isinstance(e, ast.Call):
            target = self.calls.resolve_function(e)
            arg_types = [self.expr(a, flow) for a in e.args]
            if target is not None and target.label == "calls" and self.scope.test is not None:
                self._calls(e)
            return self.calls.check_function_call(e, target, arg_types) if target else UNKNOWN
        if isinstance(e, ast.Unary):
            operand = self.expr(e.operand, flow)
            if e.op == "not":
                return BOOL
            return operand if operand.kind in _NUMBERS else UNKNOWN
        if isinstance(e, ast.Binary):
            return self._binary(e, flow)
        if isinstance(e, ast.ToolCall):
            if isinstance(e.arg, ast.ObjectLit):
                entry_types = self._object(e.arg, flow)
                return self.calls.check_tool_call(e, OBJECT, entry_types)
            return self.calls.check_tool_call(e, self.expr(e.arg, flow), None)
        return self._ask(e, flow)

    def read(self, name: str, span: Span, flow: Flow) -> Ty:
        """A read of the variable ``name``."""
        first = self.scope.names.get(name)
        if first is None:
            self.bag.error("E038", f"Unknown name '{name}'.", span, hint=self._name_hint(name))
            return UNKNOWN
        if name not in flow.definite:
            self.bag.warning(
                "W002", f"'{name}' may be unassigned here", span,
                hint=f"assign '{name}' on every path before this point, e.g. {name} = null "
                     "first", related=(Related(first, f"'{name}' is assigned here"),))
        return flow.type_of(name)

    def _name_hint(self, name: str) -> str | None:
        hint = did_you_mean(name, [n for n in self.scope.names if n != name])
        if hint is not None:
            return hint
        if name in self.outer_names:
            return (f"'{name}' is a top-level variable, which a fn cannot see; pass it as a "
                    "parameter")
        if name in self.symbols.agents:
            return f"'{name}' is an agent; call its functions as {name}.fn(...)"
        if name in self.symbols.tools:
            return f"'{name}' is a tool; call it as tool {name}({{ ... }})"
        if self.symbols.is_type(name):
            return f"'{name}' is a schema, not a value"
        if name in self.symbols.models:
            return f"'{name}' is a model, not a value"
        return None

    def _member(self, e: ast.Member, flow: Flow) -> Ty:
        agent = self.symbols.agents.get(e.obj.id) if isinstance(e.obj, ast.Name) else None
        if agent is not None and agent.name not in self.scope.names:
            if agent.fn(e.name) is None:
                self.bag.error("E036", f"Agent '{agent.name}' has no function '{e.name}'.",
                               e.name_span,
                               hint=did_you_mean(e.name, [f.name for f in agent.fns]))
            else:
                self.bag.error("E039", f"'{agent.name}.{e.name}' is a function of agent "
                               f"'{agent.name}' and must be called: {agent.name}.{e.name}(...).",
                               e.span)
            return UNKNOWN
        obj = self.expr(e.obj, flow)
        ty, problem = field_type(obj, e.name, self.symbols, path_text(e.obj))
        if problem is not None:
            self.bag.error("E035", problem.message, e.name_span, hint=problem.hint,
                           related=problem.related)
        return ty

    def _string(self, s: ast.StringLit, flow: Flow) -> None:
        for part in s.parts:
            if isinstance(part, ast.Placeholder):
                ty = self.read(part.root, part.root_span, flow)
                path = part.root
                for step in part.steps:
                    if step.name is None:
                        ty = ty.item or UNKNOWN if ty.kind in ("list", "map") else UNKNOWN
                        import json

                        path += f"[{json.dumps(step.index)}]"
                        continue
                    ty, problem = field_type(ty, step.name, self.symbols, path)
                    path += f".{step.name}"
                    if problem is not None:
                        name_span = Span(step.span.file, step.span.start + 1, step.span.end)
                        self.bag.error("E035", problem.message, name_span, hint=problem.hint,
                                       related=problem.related)
                        break
            elif isinstance(part, ast.BadPlaceholder):
                if part.text == "{":
                    message = "This '{' starts a placeholder that is never closed with '}'."
                else:
                    message = (f"'{part.text}' is not a valid placeholder: write a name "
                               "followed by .field or [index].")
                self.bag.error("E002", message, part.span,
                               hint="write \\{ for a literal brace")

    def _object(self, e: ast.ObjectLit, flow: Flow) -> list[Ty]:
        first: dict[str, ast.ObjectEntry] = {}
        for entry in e.entries:
            earlier = first.setdefault(entry.key, entry)
            if earlier is not entry:
                self.bag.error("E005", f"Key '{entry.key}' is given more than once in this "
                               "object.", entry.key_span,
                               related=(Related(earlier.key_span, "first given here"),))
        return [self.expr(entry.value, flow) for entry in e.entries]

    def _binary(self, e: ast.Binary, flow: Flow) -> Ty:
        left = self.expr(e.left, flow)
        if e.op in ("and", "or"):
            # the right side runs only when the left one is true (and) or false (or)
            then_narrow, else_narrow = self.narrowings(e.left, flow)
            right_flow = _narrowed(flow, then_narrow if e.op == "and" else else_narrow)
            right = self.expr(e.right, right_flow)
            return BOOL if left == right == BOOL else UNKNOWN
        right = self.expr(e.right, flow)
        if e.op in ("==", "!=", "<", "<=", ">", ">="):
            return BOOL
        if left.kind in _NUMBERS and right.kind in _NUMBERS:
            if e.op == "/" or FLOAT in (left, right):
                return FLOAT
            return INT
        if e.op == "+" and left.kind == right.kind == "string":
            return STRING
        if e.op == "+" and left.kind == right.kind == "list":
            return join(left, right)
        return UNKNOWN

    def _ask(self, e: ast.Ask, flow: Flow) -> Ty:
        prompt = self.expr(e.prompt, flow)
        if prompt.is_known and prompt.kind != "string":
            self.bag.error("E034", f"The prompt of an ask must be a string, not "
                           f"{kind_word(prompt)}.", e.prompt.span)
        check_type(e.type, self.symbols, self.bag)
        self.calls.check_using_tool(e)
        agent = self.scope.agent
        if agent is None:
            self.bag.warning("W004", "This top-level ask uses the default model.", e.span,
                             hint="the default model is --model, else default_model in "
                                  "luma.config.json, else the offline test model")
        elif agent.entry("model") is None:
            self.bag.warning("W004", f"Agent '{agent.name}' has no model, so this ask uses the "
                             "default model.", e.span,
                             hint=f"add 'model: <name>' to agent '{agent.name}'")
        elif self.provider_schemas is not None:
            model = agent.entry("model")
            declared = self.symbols.models.get(model.value.id) if model is not None and \
                isinstance(model.value, ast.Name) else None
            if declared is not None:
                self.provider_schemas.check_ask(e, agent, declared)
        return resolve(e.type, self.symbols)

    # ---------------------------------------------------------------------------- narrowing
    def narrowings(self, cond: ast.Expr, flow: Flow) -> tuple[dict[str, Ty], dict[str, Ty]]:
        """What ``cond`` being true, and being false, says about tagged-union variables:
        ``doc.kind == "Receipt"`` narrows ``doc`` to the member ``Receipt``."""
        if isinstance(cond, ast.Unary) and cond.op == "not":
            then, otherwise = self.narrowings(cond.operand, flow)
            return otherwise, then
        if isinstance(cond, ast.Binary) and cond.op in ("and", "or"):
            lt, le = self.narrowings(cond.left, flow)
            rt, re_ = self.narrowings(cond.right, flow)
            return ({**lt, **rt}, {}) if cond.op == "and" else ({}, {**le, **re_})
        if not (isinstance(cond, ast.Binary) and cond.op in ("==", "!=")):
            return {}, {}
        sides = (cond.left, cond.right)
        test = next((x for x in sides if isinstance(x, ast.Member)
                     and isinstance(x.obj, ast.Name)), None)
        literal = next((x for x in sides if isinstance(x, ast.StringLit)
                        and not x.has_placeholders), None)
        if test is None or literal is None or not isinstance(test, ast.Member):
            return {}, {}
        assert isinstance(test.obj, ast.Name) and isinstance(literal, ast.StringLit)
        var = test.obj.id
        ty = flow.type_of(var)
        union = self.symbols.unions.get(ty.name or "") if ty.kind == "union" else None
        if union is None or test.name != union.tag:
            return {}, {}
        members = list(dict.fromkeys(m.name for m in union.members))
        if literal.value not in members:
            return {}, {}
        then = {var: Ty("union", name=union.name, member=literal.value)}
        rest = [m for m in members if m != literal.value]
        otherwise = ({var: Ty("union", name=union.name, member=rest[0])}
                     if len(rest) == 1 and ty.member is None else {})
        return (then, otherwise) if cond.op == "==" else (otherwise, then)


def _narrowed(flow: Flow, narrowing: dict[str, Ty]) -> Flow:
    for name, ty in narrowing.items():
        flow = flow.with_type(name, ty)
    return flow
