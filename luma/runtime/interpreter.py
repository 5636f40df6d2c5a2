"""The tree-walking interpreter for ``fn`` bodies and top-level statements (LANGUAGE.md §7–§9).

It evaluates the AST directly. Everything with a side effect leaves through the runtime: a
direct tool call goes to the tool pipeline, an ``ask`` to the ask engine, ``print`` to stderr.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from luma.runtime.calls import MethodCall
from luma.runtime.errors import LumaError
from luma.runtime.values import deep_equal, is_number, json_text, render, short, type_name
from luma.syntax import ast

if TYPE_CHECKING:
    from luma.runtime.calls import InterpreterHost


class TestHooks(Protocol):
    """What a test's body needs from the runner (``luma/testrun.py``): its mocks, the record
    of its tool calls, and the assertions that failed."""

    def mock(self, tool: str, throws: bool, value: Any) -> None: ...

    def calls(self, tool: str) -> list[dict[str, Any]]: ...

    def failed(self, stmt: ast.Assert, operands: tuple[Any, Any] | None, value: Any,
               message: str | None) -> None:
        """A ``check`` that did not hold (an ``assert`` raises :class:`AssertionFailed`)."""


class AssertionFailed(Exception):
    """An ``assert`` of a test that did not hold: the test stops there."""

    def __init__(self, stmt: ast.Assert, operands: tuple[Any, Any] | None, value: Any,
                 message: str | None) -> None:
        super().__init__(message or "assertion failed")
        self.stmt = stmt
        self.operands = operands  # (left, right) of a comparison
        self.value = value  # what the condition was
        self.message = message


@dataclass(slots=True)
class _Frame:
    vars: dict[str, Any]
    method: MethodCall
    agent: ast.AgentDecl | None = None
    depth: int = 0
    last: Any = None
    spans: list[Any] = field(default_factory=list)
    test: TestHooks | None = None  # the body of a test (luma test)


class _Return(Exception):
    def __init__(self, value: Any, span: Any) -> None:
        self.value = value
        self.span = span


MAX_CALL_DEPTH = 200
MAX_LIST_ITEMS = 1_000_000
"""The most items a list built by the program may have (``range``, ``+``)."""
MAX_STRING_LENGTH = 10_000_000
"""The most characters a string built by the program may have (``+``, interpolation)."""
# Python frames one level of Luma calls may use (the interpreter recurses over the AST): with
# MAX_CALL_DEPTH levels this is what the recursion limit must allow during a run.
_FRAMES_PER_CALL = 40
_FRAME_BYTES = 1024  # a generous C-stack cost of one awaited Python frame


class Interpreter:
    """Runs a checked program. One instance per run."""

    def __init__(self, runtime: InterpreterHost) -> None:
        self.runtime = runtime
        self.program = runtime.program
        self.agents = {a.name: a for a in self.program.agents}
        # Schemas of fn parameters, fn returns and typed assignments, compiled once per AST node
        # (the validator caches by schema identity, so the same dict must come back each time).
        self._schemas: dict[int, dict[str, Any]] = runtime.shared.node_schemas

    def _schema_of(self, node: ast.FnDecl | ast.TypeExpr) -> dict[str, Any]:
        schema = self._schemas.get(id(node))
        if schema is None:
            compiler = self.runtime.schemas
            schema = (compiler.standalone_fields(node.params) if isinstance(node, ast.FnDecl)
                      else compiler.standalone(node))
            self._schemas[id(node)] = schema
        return schema

    # entry points ------------------------------------------------------------------------
    async def run_top_level(self) -> Any:
        """Run the top-level statements in order; the result is the last statement's value."""
        frame = _Frame({}, MethodCall(None, None))
        with _stack_for_calls():
            return await self._block(self.program.statements, frame)

    async def run_test(self, test: ast.TestDecl, hooks: TestHooks) -> None:
        """Run a test's body: its statements, mocks and assertions, in order. A failed
        ``assert`` raises :class:`AssertionFailed`; a failed ``check`` goes to ``hooks``."""
        frame = _Frame({}, MethodCall(None, None), test=hooks)
        with _stack_for_calls():
            await self._block(test.body, frame)

    async def call_method(self, agent_name: str, fn_name: str, args: dict[str, Any]) -> Any:
        """Call ``Agent.fn`` with named arguments (from the command line)."""
        agent = self.agents.get(agent_name)
        if agent is None:
            raise LumaError("AGENT_NOT_FOUND", f"Unknown agent '{agent_name}'.")
        fn = agent.fn(fn_name)
        if fn is None:
            raise LumaError("FN_NOT_FOUND", f"Agent '{agent_name}' has no method '{fn_name}'.")
        with _stack_for_calls():
            return await self._invoke(agent, fn, args, 0)

    def check_arguments(self, agent_name: str, fn_name: str, args: dict[str, Any]) -> None:
        """Raise the ``ARGUMENT_INVALID`` error :meth:`call_method` would raise for ``args``,
        without running anything (an unknown agent or method is left to ``call_method``)."""
        agent = self.agents.get(agent_name)
        fn = agent.fn(fn_name) if agent is not None else None
        if agent is not None and fn is not None:
            self._bound_arguments(agent, fn, args)

    # functions ---------------------------------------------------------------------------
    def _bound_arguments(self, agent: ast.AgentDecl, fn: ast.FnDecl,
                         args: dict[str, Any]) -> Any:
        """``args`` validated against ``fn``'s parameters, defaults filled in."""
        where = f"{agent.name}.{fn.name}"
        known = {p.name for p in fn.params}
        for key in args:
            if key not in known:
                raise LumaError("ARGUMENT_INVALID", f"{where}.input.{key}: unknown argument")
        checked, violations = self.runtime.validate(self._schema_of(fn), args, soft_rules=False)
        hard = [v for v in violations if not v.soft]
        if hard:
            raise LumaError("ARGUMENT_INVALID", self.runtime.format_violations(
                f"{where}.input", hard))
        return checked

    async def _invoke(self, agent: ast.AgentDecl, fn: ast.FnDecl, args: dict[str, Any],
                      depth: int) -> Any:
        tracer = self.runtime.tracer
        if tracer is None:
            return await self._invoke_traced(agent, fn, args, depth)
        from luma.runtime import otel

        with otel.agent_span(tracer, agent.name, fn.name) as span:
            try:
                return await self._invoke_traced(agent, fn, args, depth)
            except LumaError as err:
                otel.agent_failed(span, err.code, self.runtime.secrets.redact(err.message))
                raise

    async def _invoke_traced(self, agent: ast.AgentDecl, fn: ast.FnDecl, args: dict[str, Any],
                             depth: int) -> Any:
        if depth > MAX_CALL_DEPTH:
            raise LumaError("CALL_DEPTH", f"{agent.name}.{fn.name}: calls nested deeper than "
                            f"{MAX_CALL_DEPTH} levels (unbounded recursion?)")
        where = f"{agent.name}.{fn.name}"
        checked = self._bound_arguments(agent, fn, args)
        frame = _Frame(dict(checked), MethodCall(agent, fn.name), agent, depth)
        for p in fn.params:
            frame.vars.setdefault(p.name, None)
        self.runtime.telemetry.emit("agent.call", agent=agent.name, fn=fn.name)
        source = fn.body[-1].span if fn.body else fn.span  # where the result came from
        try:
            result = await self._block(fn.body, frame)
        except _Return as ret:
            result, source = ret.value, ret.span
        if fn.returns is not None:
            try:
                result = self._check_type(result, fn.returns, "RETURN_INVALID",
                                          f"{where}.output", output=True)
            except LumaError as err:
                err.span = source
                raise
        return result

    def _check_type(self, value: Any, type_: ast.TypeExpr, code: str, where: str,
                    *, output: bool) -> Any:
        checked, violations = self.runtime.validate(self._schema_of(type_), value,
                                                    soft_rules=output)
        hard = [v for v in violations if not v.soft]
        if hard:
            raise LumaError(code, self.runtime.format_violations(where, hard, code=code))
        for v in violations:
            self.runtime.soft_warning(where, v)
        return checked

    # statements --------------------------------------------------------------------------
    async def _block(self, stmts: tuple[ast.TestStmt, ...], frame: _Frame) -> Any:
        value: Any = None
        for stmt in stmts:
            try:
                value = await self._stmt(stmt, frame)
            except LumaError as err:
                if err.span is None:
                    err.span = stmt.span
                raise
        return value

    async def _stmt(self, stmt: ast.TestStmt, frame: _Frame) -> Any:
        if isinstance(stmt, (ast.Mock, ast.Assert)):
            return await self._test_stmt(stmt, frame)
        if isinstance(stmt, ast.Assign):
            value = await self._expr(stmt.value, frame)
            if stmt.type is not None:
                code = "TOOL_OUTPUT_INVALID" if isinstance(stmt.value, ast.ToolCall) else "TYPE_INVALID"
                where = (f"{stmt.value.tool}.output" if isinstance(stmt.value, ast.ToolCall)
                         else stmt.target)
                value = self._check_type(value, stmt.type, code, where, output=True)
            frame.vars[stmt.target] = value
            return value
        if isinstance(stmt, ast.ExprStmt):
            return await self._expr(stmt.expr, frame)
        if isinstance(stmt, ast.If):
            cond = await self._expr(stmt.cond, frame)
            if not isinstance(cond, bool):
                raise LumaError("TYPE_INVALID",
                                f"an if condition must be a bool, got {type_name(cond)} "
                                f"{short(cond)}")
            if cond:
                return await self._block(stmt.then, frame)
            if stmt.orelse is not None:
                return await self._block(stmt.orelse, frame)
            return None
        if isinstance(stmt, ast.For):
            items = await self._expr(stmt.iterable, frame)
            if not isinstance(items, list):
                raise LumaError("TYPE_INVALID",
                                f"for ... in needs a list, got {type_name(items)} {short(items)}")
            value = None
            for item in items:
                frame.vars[stmt.var] = item
                value = await self._block(stmt.body, frame)
            return value
        if isinstance(stmt, ast.Return):
            value = None if stmt.value is None else await self._expr(stmt.value, frame)
            raise _Return(value, stmt.span)
        if isinstance(stmt, ast.Try):
            try:
                return await self._block(stmt.body, frame)
            except LumaError as err:
                frame.vars[stmt.err_name] = err.to_value()
                return await self._block(stmt.handler, frame)
        if isinstance(stmt, ast.Throw):
            value = await self._expr(stmt.value, frame)
            raise _thrown(value)
        raise AssertionError(f"unknown statement {type(stmt).__name__}")

    async def _test_stmt(self, stmt: ast.Mock | ast.Assert, frame: _Frame) -> None:
        hooks = frame.test
        assert hooks is not None, "a mock or an assertion outside a test body"
        if isinstance(stmt, ast.Mock):
            hooks.mock(stmt.tool, stmt.throws, await self._expr(stmt.value, frame))
            return
        operands: tuple[Any, Any] | None = None
        cond = stmt.cond
        if isinstance(cond, ast.Binary) and cond.op not in ("and", "or"):
            # a comparison's operands are evaluated once and shown when it does not hold
            left = await self._expr(cond.left, frame)
            right = await self._expr(cond.right, frame)
            operands = (left, right)
            try:
                value = self._operate(cond.op, left, right)
            except OverflowError:
                raise _overflow(left, cond.op, right) from None
        else:
            value = await self._expr(cond, frame)
        if value is True:
            return
        message = None
        if stmt.message is not None:
            text = await self._expr(stmt.message, frame)
            message = text if isinstance(text, str) else render(text)
        if stmt.soft:
            hooks.failed(stmt, operands, value, message)
            return
        raise AssertionFailed(stmt, operands, value, message)

    # expressions -------------------------------------------------------------------------
    async def _expr(self, e: ast.Expr, frame: _Frame) -> Any:
        if isinstance(e, ast.Name):
            return frame.vars.get(e.id)
        if isinstance(e, ast.Literal):
            return e.value
        if isinstance(e, ast.StringLit):
            return self._interpolate(e, frame)
        if isinstance(e, ast.ToolCall):
            arg = await self._expr(e.arg, frame)
            return await self.runtime.direct_tool_call(e.tool, arg, frame.agent, frame.method)
        if isinstance(e, ast.Member):
            obj = await self._expr(e.obj, frame)
            if isinstance(obj, dict):
                return obj.get(e.name)
            shown = "null" if obj is None else f"{type_name(obj)} {short(obj)}"
            raise LumaError("TYPE_INVALID", f"cannot read field '{e.name}' of {shown}")
        if isinstance(e, ast.Index):
            return _index(await self._expr(e.obj, frame), await self._expr(e.index, frame))
        if isinstance(e, ast.Binary):
            return await self._binary(e, frame)
        if isinstance(e, ast.Unary):
            operand = await self._expr(e.operand, frame)
            if e.op == "not":
                if not isinstance(operand, bool):
                    raise LumaError("TYPE_INVALID", f"'not' needs a bool, got {type_name(operand)}")
                return not operand
            if not is_number(operand):
                raise LumaError("TYPE_INVALID", f"'-' needs a number, got {type_name(operand)}")
            return -operand
        if isinstance(e, ast.ListLit):
            return [await self._expr(i, frame) for i in e.items]
        if isinstance(e, ast.ObjectLit):
            return {entry.key: await self._expr(entry.value, frame) for entry in e.entries}
        if isinstance(e, ast.Call):
            return await self._call(e, frame)
        if isinstance(e, ast.Ask):
            prompt = await self._expr(e.prompt, frame)
            if not isinstance(prompt, str):
                prompt = render(prompt)
            return await self.runtime.ask(frame.agent, frame.method, prompt, e.type, e.using_tool)
        raise AssertionError(f"unknown expression {type(e).__name__}")

    def _interpolate(self, s: ast.StringLit, frame: _Frame) -> str:
        if len(s.parts) == 1 and isinstance(s.parts[0], str):
            return s.parts[0]
        out: list[str] = []
        for part in s.parts:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, ast.Placeholder):
                value = frame.vars.get(part.root)
                for step in part.steps:
                    if step.name is not None:
                        if not isinstance(value, dict):
                            raise LumaError("TYPE_INVALID", f"cannot read field '{step.name}' of "
                                            f"{type_name(value)} in {{{part.root}...}}")
                        value = value.get(step.name)
                    else:
                        value = _index(value, step.index)
                out.append(render(value))
            else:
                out.append(part.text)
        text = "".join(out)
        if len(text) > MAX_STRING_LENGTH:
            raise _too_long(len(text))
        return text

    async def _binary(self, e: ast.Binary, frame: _Frame) -> Any:
        op = e.op
        left = await self._expr(e.left, frame)
        if op in ("and", "or"):
            if not isinstance(left, bool):
                raise LumaError("TYPE_INVALID", f"'{op}' needs bools, got {type_name(left)}")
            if (op == "and" and not left) or (op == "or" and left):
                return left
            right = await self._expr(e.right, frame)
            if not isinstance(right, bool):
                raise LumaError("TYPE_INVALID", f"'{op}' needs bools, got {type_name(right)}")
            return right
        right = await self._expr(e.right, frame)
        try:
            return self._operate(op, left, right)
        except OverflowError:  # an int too large for a float (a huge literal) met a float
            raise _overflow(left, op, right) from None

    @staticmethod
    def _operate(op: str, left: Any, right: Any) -> Any:
        if op == "==":
            return deep_equal(left, right)
        if op == "!=":
            return not deep_equal(left, right)
        if op == "+":
            if is_number(left) and is_number(right):
                return _number(left + right, left, op, right)
            if isinstance(left, str) and isinstance(right, str):
                if len(left) + len(right) > MAX_STRING_LENGTH:
                    raise _too_long(len(left) + len(right))
                return left + right
            if isinstance(left, list) and isinstance(right, list):
                if len(left) + len(right) > MAX_LIST_ITEMS:
                    raise _too_many(len(left) + len(right), "'+'")
                return left + right
            raise LumaError("TYPE_INVALID", f"cannot add {type_name(left)} and {type_name(right)}")
        if op in ("<", "<=", ">", ">="):
            if not ((is_number(left) and is_number(right))
                    or (isinstance(left, str) and isinstance(right, str))):
                raise LumaError("TYPE_INVALID",
                                f"cannot compare {type_name(left)} {op} {type_name(right)}")
            if op == "<":
                return left < right
            if op == "<=":
                return left <= right
            if op == ">":
                return left > right
            return left >= right
        if not (is_number(left) and is_number(right)):
            raise LumaError("TYPE_INVALID",
                            f"'{op}' needs numbers, got {type_name(left)} and {type_name(right)}")
        if op == "-":
            return _number(left - right, left, op, right)
        if op == "*":
            return _number(left * right, left, op, right)
        if right == 0:
            raise LumaError("DIVISION_BY_ZERO", f"division by zero in '{op}'")
        if op == "/":
            if isinstance(left, int) and isinstance(right, int):
                if left % right == 0:  # exact, and never through a float that could overflow
                    return _number(left // right, left, op, right)
                return _number(left / right, left, op, right)
            try:
                result = left / right
            except OverflowError:
                raise _overflow(left, op, right) from None
            return _number(result, left, op, right)
        return _number(left % right, left, op, right)

    async def _call(self, e: ast.Call, frame: _Frame) -> Any:
        callee = e.callee
        args = [await self._expr(a, frame) for a in e.args]
        if isinstance(callee, ast.Member) and isinstance(callee.obj, ast.Name) \
                and callee.obj.id in self.agents:
            agent = self.agents[callee.obj.id]
            fn = agent.fn(callee.name)
            if fn is None:
                raise LumaError("FN_NOT_FOUND", f"Agent '{agent.name}' has no method '{callee.name}'.")
            return await self._invoke(agent, fn, _bind(fn, args), frame.depth + 1)
        if isinstance(callee, ast.Name):
            if frame.agent is not None:
                fn = frame.agent.fn(callee.id)
                if fn is not None:
                    return await self._invoke(frame.agent, fn, _bind(fn, args), frame.depth + 1)
            if callee.id == "calls" and frame.test is not None and len(args) == 1 \
                    and isinstance(args[0], str):
                return frame.test.calls(args[0])
            builtin = _BUILTINS.get(callee.id)
            if builtin is not None:
                if callee.id == "print":
                    self.runtime.print(" ".join(render(a) for a in args))
                    return None
                return builtin(*args) if _arity_ok(callee.id, len(args)) else _arity_error(
                    callee.id, len(args))
            raise LumaError("FN_NOT_FOUND", f"Unknown function '{callee.id}'.")
        raise LumaError("TYPE_INVALID", "only functions and agent methods can be called")


# ------------------------------------------------------------------------------------ helpers


@contextmanager
def _stack_for_calls() -> Iterator[None]:
    """Let Python's stack hold MAX_CALL_DEPTH levels of Luma calls, so that CALL_DEPTH (not a
    RecursionError) stops an unbounded recursion; within what the C stack can take. A program
    that still runs out of stack (expressions nested extremely deeply in a deep recursion) gets
    CALL_DEPTH too."""
    before = sys.getrecursionlimit()
    wanted = 1000 + MAX_CALL_DEPTH * _FRAMES_PER_CALL
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
        if soft != resource.RLIM_INFINITY:
            wanted = min(wanted, soft // _FRAME_BYTES)
    except (ImportError, OSError, ValueError):  # no resource module (Windows): the default
        wanted = min(wanted, 3000)
    if wanted > before:
        sys.setrecursionlimit(wanted)
    try:
        yield
    except RecursionError:
        raise LumaError("CALL_DEPTH", "calls, expressions or values nested too deeply for "
                        "the interpreter's stack (unbounded recursion?)") from None
    finally:
        if wanted > before and sys.getrecursionlimit() == wanted:
            sys.setrecursionlimit(before)


# The largest magnitude a Luma number may have: that of a float (an int beyond it could not be
# mixed with a float or read by most JSON parsers). An int compares with it exactly.
_MAX_NUMBER = sys.float_info.max


def _number(result: Any, left: Any, op: str, right: Any) -> Any:
    """An arithmetic result, or ARITHMETIC_OVERFLOW when it left the range of numbers."""
    if type(result) is float:
        if not math.isfinite(result):
            raise _overflow(left, op, right)
    elif not -_MAX_NUMBER <= result <= _MAX_NUMBER:
        raise _overflow(left, op, right)
    return result


def _overflow(left: Any, op: str, right: Any) -> LumaError:
    return LumaError("ARITHMETIC_OVERFLOW", f"{short(left, 40)} {op} {short(right, 40)} "
                     "overflows: a number must stay within ±1.8e308")


def _too_many(n: int, what: str) -> LumaError:
    return LumaError("LIMIT", f"{what} would make a list of {n} items; a list the program "
                     f"builds holds at most {MAX_LIST_ITEMS:,}")


def _too_long(n: int) -> LumaError:
    return LumaError("LIMIT", f"the string would be {n} characters long; a string the program "
                     f"builds holds at most {MAX_STRING_LENGTH:,}")


def _thrown(value: Any) -> LumaError:
    if not isinstance(value, dict) or not isinstance(value.get("code"), str) \
            or not isinstance(value.get("message"), str):
        return LumaError("TYPE_INVALID", "throw needs an object with 'code' and 'message' "
                         f"strings, got {short(value)}")
    extra = {k: v for k, v in value.items()
             if k not in ("code", "message", "retryable", "tool", "details")}
    retryable = value.get("retryable") is True
    return LumaError(value["code"], value["message"], retryable=retryable,
                     tool=value.get("tool") if isinstance(value.get("tool"), str) else None,
                     details=value.get("details"), extra=extra)


def _index(obj: Any, index: Any) -> Any:
    if isinstance(obj, list):
        if type(index) is not int:
            raise LumaError("TYPE_INVALID", f"a list index must be an int, got {type_name(index)}")
        return obj[index] if 0 <= index < len(obj) else None
    if isinstance(obj, dict):
        if not isinstance(index, str):
            raise LumaError("TYPE_INVALID", f"an object key must be a string, got {type_name(index)}")
        return obj.get(index)
    raise LumaError("TYPE_INVALID", f"cannot index {type_name(obj)} {short(obj)}")


def _bind(fn: ast.FnDecl, args: list[Any]) -> dict[str, Any]:
    if len(args) > len(fn.params):
        raise LumaError("ARGUMENT_INVALID", f"'{fn.name}' takes {len(fn.params)} "
                        f"argument{'s' if len(fn.params) != 1 else ''}, got {len(args)}")
    return {p.name: a for p, a in zip(fn.params, args)}


def _len(x: Any) -> int:
    if isinstance(x, (str, list, dict)):
        return len(x)
    raise LumaError("TYPE_INVALID", f"len() needs a string, list or object, got {type_name(x)}")


def _str(x: Any) -> str:
    return render(x)


def _int(x: Any) -> int:
    if isinstance(x, bool) or x is None:
        raise LumaError("TYPE_INVALID", f"int() cannot convert {type_name(x)}")
    if isinstance(x, int):
        return x
    if isinstance(x, float):
        if not math.isfinite(x):
            raise LumaError("TYPE_INVALID", f"int() cannot convert {x}")
        return int(x)
    if isinstance(x, str):
        try:
            n = int(x.strip())
        except ValueError:
            try:
                f = float(x.strip())
            except ValueError:
                raise LumaError("TYPE_INVALID", f"int() cannot convert {short(x)}") from None
            if f.is_integer():
                return int(f)
            raise LumaError("TYPE_INVALID", f"int() cannot convert {short(x)}") from None
        if not -_MAX_NUMBER <= n <= _MAX_NUMBER:
            raise LumaError("ARITHMETIC_OVERFLOW", f"int() cannot convert {short(x)}: a number "
                            "must stay within ±1.8e308")
        return n
    raise LumaError("TYPE_INVALID", f"int() cannot convert {type_name(x)}")


def _float(x: Any) -> float:
    if is_number(x):
        return float(x)
    if isinstance(x, str):
        try:
            f = float(x.strip())
        except ValueError:
            raise LumaError("TYPE_INVALID", f"float() cannot convert {short(x)}") from None
        if math.isfinite(f):
            return f
    raise LumaError("TYPE_INVALID", f"float() cannot convert {short(x)}")


def _keys(x: Any) -> list[str]:
    if isinstance(x, dict):
        return list(x)
    raise LumaError("TYPE_INVALID", f"keys() needs an object, got {type_name(x)}")


def _range(*args: Any) -> list[int]:
    if not all(type(a) is int for a in args):
        raise LumaError("TYPE_INVALID", "range() needs ints")
    start, stop = (0, args[0]) if len(args) == 1 else (args[0], args[1])
    if stop - start > MAX_LIST_ITEMS:
        raise _too_many(stop - start, "range()")
    return list(range(start, stop))


_BUILTINS: dict[str, Any] = {
    "len": _len, "str": _str, "int": _int, "float": _float, "json": json_text, "keys": _keys,
    "range": _range, "print": print,
}
_ARITY = {"len": (1, 1), "str": (1, 1), "int": (1, 1), "float": (1, 1), "json": (1, 1),
          "keys": (1, 1), "range": (1, 2)}


def _arity_ok(name: str, n: int) -> bool:
    lo, hi = _ARITY.get(name, (0, 1 << 30))
    return lo <= n <= hi


def _arity_error(name: str, n: int) -> Any:
    lo, hi = _ARITY[name]
    want = str(lo) if lo == hi else f"{lo} or {hi}"
    raise LumaError("ARGUMENT_INVALID", f"{name}() takes {want} argument"
                    f"{'s' if hi != 1 else ''}, got {n}")
