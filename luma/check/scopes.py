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
from dataclasses import dataclass, field

from luma.check.exprtypes import UNKNOWN, Ty, join
from luma.syntax import ast
from luma.syntax.source import Span


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


@dataclass(frozen=True, slots=True)
class Flow:
    """What is known at one point of a function: ``definite`` names are assigned on every path
    here; ``types`` has every name assigned on some path here, with its static type."""

    definite: frozenset[str] = frozenset()
    types: dict[str, Ty] = field(default_factory=dict)

    def assign(self, name: str, ty: Ty) -> Flow:
        return Flow(self.definite | {name}, {**self.types, name: ty})

    def with_type(self, name: str, ty: Ty) -> Flow:
        """The same state with ``name`` holding a value of type ``ty`` (narrowed or widened)."""
        if name not in self.types:
            return self
        return Flow(self.definite, {**self.types, name: ty})

    def type_of(self, name: str) -> Ty:
        return self.types.get(name, UNKNOWN)


def join_flows(a: Flow | None, b: Flow | None) -> Flow | None:
    """The state where two paths meet; an unreachable side contributes nothing."""
    if a is None:
        return b
    if b is None:
        return a
    types = dict(a.types)
    for name, ty in b.types.items():
        types[name] = join(types[name], ty) if name in types else ty
    return Flow(a.definite & b.definite, types)


@dataclass(slots=True)
class Scope:
    """The names one body can see: its parameters and every name it assigns. ``agent`` is the
    agent whose method this is (``None`` for the top-level statements)."""

    agent: ast.AgentDecl | None
    fn: ast.FnDecl | None
    names: dict[str, Span]

    @staticmethod
    def of_fn(agent: ast.AgentDecl, fn: ast.FnDecl) -> Scope:
        names = {p.name: p.name_span for p in fn.params}
        for name, span in assigned_names(fn.body).items():
            names.setdefault(name, span)
        return Scope(agent, fn, names)

    @staticmethod
    def of_top_level(statements: Iterable[ast.Stmt]) -> Scope:
        return Scope(None, None, assigned_names(statements))

    @property
    def is_top_level(self) -> bool:
        return self.agent is None
