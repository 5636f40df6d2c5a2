"""Names of one function body (or of the top-level statements) and the flow state of the
may-be-unassigned analysis.

Variables are function-scoped: an ``if``, ``for`` or ``try`` body opens no scope, so a name is
*known* when it is assigned anywhere in the function. Whether it is *assigned* at a given read
depends on the path: the flow state holds the names definitely assigned on every path that
reaches the current point, and the static type of every name assigned on at least one of them.
``None`` stands for "no path reaches here" (after ``return`` or ``throw``).
"""

from __future__ import annotations

from collections.abc import Iterable

from luma.check.exprtypes import UNKNOWN, Ty, join
from luma.record import Record
from luma.syntax import ast
from luma.syntax.source import Span

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any


def assigned_names(stmts: Iterable[ast.Stmt]) -> dict[str, Span]:
    """Every name assigned anywhere in ``stmts`` (targets, ``for`` and ``catch`` variables),
    with the span of its first assignment."""
    found: dict[str, Span] = {}

    def walk(body: Iterable[ast.Stmt]) -> None:
        for s in body:
            if isinstance(s, ast.Assign):
                found.setdefault(s.target, s.target_span)
            elif isinstance(s, ast.If):
                walk(s.then)
                walk(s.orelse or ())
            elif isinstance(s, ast.For):
                found.setdefault(s.var, s.var_span)
                walk(s.body)
            elif isinstance(s, ast.Try):
                walk(s.body)
                found.setdefault(s.err_name, s.err_span)
                walk(s.handler)

    walk(stmts)
    return found


_ABSENT: object = object()


class Names:
    """An immutable map of names, cheap to extend: a shared ``base`` that is never changed and
    a small ``top`` of recent additions, folded into a new base once it grows past the square
    root of the base. Extending a map of n names costs O(√n) rather than a copy of all n, so a
    body of 40,000 assignments is checked in time n·√n, not n²."""

    __slots__ = ("base", "top")

    def __init__(self, base: dict[str, Any] | None = None,
                 top: dict[str, Any] | None = None) -> None:
        self.base: dict[str, Any] = base if base is not None else {}
        self.top: dict[str, Any] = top if top is not None else {}

    def get(self, name: str, default: Any = None) -> Any:
        value = self.top.get(name, _ABSENT)
        return self.base.get(name, default) if value is _ABSENT else value

    def __contains__(self, name: object) -> bool:
        return name in self.top or name in self.base

    def set(self, name: str, value: Any) -> Names:
        return self._with({**self.top, name: value})

    def _with(self, top: dict[str, Any]) -> Names:
        if len(top) * len(top) > max(len(self.base), 1024):
            return Names({**self.base, **top}, {})
        return Names(self.base, top)

    def as_dict(self) -> dict[str, Any]:
        return {**self.base, **self.top} if self.top else dict(self.base)


class Flow:
    """What is known at one point of a function: ``definite`` names are assigned on every path
    here; ``types`` has every name assigned on some path here, with its static type."""

    __slots__ = ("definite", "types")

    def __init__(self, definite: Names | None = None, types: Names | None = None) -> None:
        self.definite = definite if definite is not None else Names()
        self.types = types if types is not None else Names()

    @staticmethod
    def of(definite: Iterable[str], types: dict[str, Ty]) -> Flow:
        return Flow(Names(dict.fromkeys(definite, True)), Names(dict(types)))

    def assign(self, name: str, ty: Ty) -> Flow:
        definite = self.definite if name in self.definite else self.definite.set(name, True)
        return Flow(definite, self.types.set(name, ty))

    def with_type(self, name: str, ty: Ty) -> Flow:
        """The same state with ``name`` holding a value of type ``ty`` (narrowed or widened)."""
        if name not in self.types:
            return self
        return Flow(self.definite, self.types.set(name, ty))

    def type_of(self, name: str) -> Ty:
        value: Ty = self.types.get(name, UNKNOWN)
        return value


def join_flows(a: Flow | None, b: Flow | None) -> Flow | None:
    """The state where two paths meet; an unreachable side contributes nothing."""
    if a is None:
        return b
    if b is None:
        return a
    return Flow(_join_definite(a.definite, b.definite), _join_types(a.types, b.types))


def _join_definite(a: Names, b: Names) -> Names:
    if a.base is b.base:  # both paths grew from one state: only their additions differ
        top = {n: True for n in a.top if n in b}
        top.update((n, True) for n in b.top if n in a)
        return a._with(top) if top else Names(a.base)
    names = a.as_dict()
    return Names({n: True for n in names if n in b})


def _join_types(a: Names, b: Names) -> Names:
    if a.base is b.base:
        top: dict[str, Ty] = {}
        for name in {**a.top, **b.top}:
            ta, tb = a.get(name, _ABSENT), b.get(name, _ABSENT)
            top[name] = ta if tb is _ABSENT else tb if ta is _ABSENT else join(ta, tb)
        return a._with(top) if top else Names(a.base)
    types = a.as_dict()
    for name, ty in b.as_dict().items():
        types[name] = join(types[name], ty) if name in types else ty
    return Names(types)


class Scope(Record):
    """The names one body can see: its parameters and every name it assigns. ``agent`` is the
    agent whose method this is (``None`` for the top-level statements)."""

    __slots__ = __match_args__ = ("agent", "fn", "names", "test")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, agent: ast.AgentDecl | None, fn: ast.FnDecl | None,
                 names: dict[str, Span], test: ast.TestDecl | None = None) -> None:
        self.agent = agent
        self.fn = fn
        self.names = names
        self.test = test  # the test whose body this is

    @staticmethod
    def of_fn(agent: ast.AgentDecl, fn: ast.FnDecl) -> Scope:
        names = {p.name: p.name_span for p in fn.params}
        for name, span in assigned_names(fn.body).items():
            names.setdefault(name, span)
        return Scope(agent, fn, names)

    @staticmethod
    def of_test(test: ast.TestDecl) -> Scope:
        stmts = [s for s in test.body if not isinstance(s, (ast.Mock, ast.Assert))]
        return Scope(None, None, assigned_names(stmts), test)

    @staticmethod
    def of_top_level(statements: Iterable[ast.Stmt]) -> Scope:
        return Scope(None, None, assigned_names(statements))

    @property
    def is_top_level(self) -> bool:
        return self.agent is None
