"""Program-wide warnings about declarations: tools offered to a model without a description
(W001) and schemas, tools and models that nothing uses (W003).

What counts as a use:

- a **tool** is used when an agent lists it in ``tools``, or a statement anywhere calls it
  (``tool name(...)``) or forces it (``using tool name``);
- a **schema** is used when a tool (its parameters, result, ``needs`` or ``error``), an agent's
  fn (its signature or body) or a top-level statement refers to it, directly or through other
  used schemas. A schema that only unused schemas refer to is unused too. A tool counts here
  even when it is itself unused: it gets its own warning, and its types are part of its contract;
- a **model** is used when an agent or a test names it in ``model``. While some ``ask`` runs on the default
  model (at the top level, or in an agent without ``model``), no model is reported: ``--model``
  or ``default_model`` in the config may pick any of them;
- agents are never unused: each is an entry point.

A program with no agent and no top-level statement runs nothing: it is a library of contracts
(for generated handler types), and none of its declarations is reported.

A declaration whose name is a keyword or a built-in type gets no warning: it cannot be referred
to at all, and E003 already says so.
"""

from __future__ import annotations

from collections.abc import Iterator

from luma.check.names import KEYWORDS
from luma.check.symbols import Symbols
from luma.check.types import named_types
from luma.syntax import ast
from luma.syntax.diagnostics import DiagnosticBag, Related


def check_unused(program: ast.Program, symbols: Symbols, bag: DiagnosticBag) -> None:
    _missing_descriptions(symbols, bag)
    if not program.agents and not program.statements:
        return  # a file of contracts only is a library (for generated types): all of it is API
    _unused_schemas(program, symbols, bag)
    _unused_tools(program, symbols, bag)
    _unused_models(program, symbols, bag)
    _unused_datasources(program, symbols, bag)


def _listed_tools(agent: ast.AgentDecl) -> list[ast.Name]:
    entry = agent.entry("tools")
    if entry is None or not isinstance(entry.value, ast.ListLit):
        return []
    return [item for item in entry.value.items if isinstance(item, ast.Name)]


def _missing_descriptions(symbols: Symbols, bag: DiagnosticBag) -> None:
    reported: set[str] = set()
    for agent in symbols.agents.values():
        for name in _listed_tools(agent):
            tool = symbols.tools.get(name.id)
            if tool is None or tool.name in reported:
                continue
            entry = tool.entry("description")
            if entry is not None and not (isinstance(entry.value, ast.StringLit)
                                          and not entry.value.value.strip()):
                continue
            reported.add(tool.name)
            bag.warning("W001", f"Tool '{tool.name}' is offered to a model but has no "
                        "description.", tool.name_span,
                        hint='add description: "..." saying what the tool does and when to '
                             "use it; it is all a model has to choose by",
                        related=(Related(name.span, f"offered to the model of agent "
                                                    f"'{agent.name}' here"),))


# -------------------------------------------------------------------------------- walking


def _statements(stmts: tuple[ast.TestStmt, ...]) -> Iterator[ast.TestStmt]:
    for stmt in stmts:
        yield stmt
        if isinstance(stmt, ast.If):
            yield from _statements(stmt.then)
            if stmt.orelse:
                yield from _statements(stmt.orelse)
        elif isinstance(stmt, ast.For):
            yield from _statements(stmt.body)
        elif isinstance(stmt, ast.Try):
            yield from _statements(stmt.body)
            yield from _statements(stmt.handler)


def _expressions(expr: ast.Expr) -> Iterator[ast.Expr]:
    yield expr
    children: tuple[ast.Expr, ...] = ()
    if isinstance(expr, ast.ListLit):
        children = expr.items
    elif isinstance(expr, ast.ObjectLit):
        children = tuple(e.value for e in expr.entries)
    elif isinstance(expr, ast.Member):
        children = (expr.obj,)
    elif isinstance(expr, ast.Index):
        children = (expr.obj, expr.index)
    elif isinstance(expr, ast.Call):
        children = (expr.callee, *expr.args)
    elif isinstance(expr, ast.Unary):
        children = (expr.operand,)
    elif isinstance(expr, ast.Binary):
        children = (expr.left, expr.right)
    elif isinstance(expr, ast.ToolCall):
        children = (expr.arg,)
    elif isinstance(expr, ast.Ask):
        children = (expr.prompt,)
    for child in children:
        yield from _expressions(child)


def _stmt_exprs(stmt: ast.TestStmt) -> Iterator[ast.Expr]:
    if isinstance(stmt, ast.Mock):
        yield from _expressions(stmt.value)
    elif isinstance(stmt, ast.Assert):
        yield from _expressions(stmt.cond)
        if stmt.message is not None:
            yield from _expressions(stmt.message)
    elif isinstance(stmt, ast.Assign):
        yield from _expressions(stmt.value)
    elif isinstance(stmt, ast.ExprStmt):
        yield from _expressions(stmt.expr)
    elif isinstance(stmt, ast.If):
        yield from _expressions(stmt.cond)
    elif isinstance(stmt, ast.For):
        yield from _expressions(stmt.iterable)
    elif isinstance(stmt, (ast.Return, ast.Throw)) and stmt.value is not None:
        yield from _expressions(stmt.value)


def _code(program: ast.Program) -> Iterator[tuple[ast.AgentDecl | None, ast.TestStmt]]:
    """Every statement of the program, with the agent whose fn holds it (None: top level or a
    test)."""
    for stmt in _statements(program.statements):
        yield None, stmt
    for test in program.tests:
        for stmt in _statements(test.body):
            yield None, stmt
    for agent in program.agents:
        for fn in agent.fns:
            for stmt in _statements(fn.body):
                yield agent, stmt


def _code_exprs(program: ast.Program) -> Iterator[tuple[ast.AgentDecl | None, ast.Expr]]:
    for agent, stmt in _code(program):
        for expr in _stmt_exprs(stmt):
            yield agent, expr


# ----------------------------------------------------------------------------------- uses


def _referable(name: str) -> bool:
    return name not in KEYWORDS and name not in ast.PRIMITIVE_TYPES


def _unused_schemas(program: ast.Program, symbols: Symbols, bag: DiagnosticBag) -> None:
    roots: list[ast.TypeExpr] = []
    for tool in program.tools:
        roots.extend(p.type for p in tool.params)
        if tool.returns is not None:
            roots.append(tool.returns)
        roots.extend(n.type for n in tool.needs)
        error = tool.entry("error")
        if error is not None and isinstance(error.value, ast.Name):
            roots.append(ast.NamedType(error.value.id, error.value.span))
    for agent in program.agents:
        for fn in agent.fns:
            roots.extend(p.type for p in fn.params)
            if fn.returns is not None:
                roots.append(fn.returns)
    for _, stmt in _code(program):
        if isinstance(stmt, ast.Assign) and stmt.type is not None:
            roots.append(stmt.type)
    for _, expr in _code_exprs(program):
        if isinstance(expr, ast.Ask):
            roots.append(expr.type)
    used: set[str] = set()
    pending = [n.name for t in roots for n in named_types(t)]
    while pending:
        name = pending.pop()
        if name in used:
            continue
        used.add(name)
        schema = symbols.schemas.get(name)
        if schema is not None:
            pending.extend(n.name for f in schema.fields for n in named_types(f.type))
        union = symbols.unions.get(name)
        if union is not None:
            pending.extend(m.name for m in union.members)
    declared: list[ast.SchemaDecl | ast.UnionDecl] = [*symbols.schemas.values(),
                                                      *symbols.unions.values()]
    for decl in declared:
        if decl.name not in used and _referable(decl.name):
            bag.warning("W003", f"Schema '{decl.name}' is declared but never used.",
                        decl.name_span,
                        hint="use it in a tool, a fn or a statement, or remove it")


def _unused_tools(program: ast.Program, symbols: Symbols, bag: DiagnosticBag) -> None:
    used = {name.id for agent in program.agents for name in _listed_tools(agent)}
    for _, expr in _code_exprs(program):
        if isinstance(expr, ast.ToolCall):
            used.add(expr.tool)
        elif isinstance(expr, ast.Ask) and expr.using_tool is not None:
            used.add(expr.using_tool)
    for tool in symbols.tools.values():
        if tool.name not in used and _referable(tool.name):
            bag.warning("W003", f"{tool.kind.capitalize()} '{tool.name}' is declared but never "
                        "used.",
                        tool.name_span,
                        hint=f"list it in an agent's tools or call it with "
                             f"tool {tool.name}(...), or remove it")


def _unused_models(program: ast.Program, symbols: Symbols, bag: DiagnosticBag) -> None:
    named: set[str] = set()
    for agent in program.agents:
        entry = agent.entry("model")
        if entry is not None and isinstance(entry.value, ast.Name):
            named.add(entry.value.id)
    named.update(m.name for test in program.tests for m in test.models)
    for owner, expr in _code_exprs(program):
        if isinstance(expr, ast.Ask) and (owner is None or owner.entry("model") is None):
            return  # an ask on the default model: any model may be the one it runs on
    for model in symbols.models.values():
        if model.name not in named and _referable(model.name):
            bag.warning("W003", f"Model '{model.name}' is declared but never used.",
                        model.name_span,
                        hint="name it in an agent's model: entry, or remove it")


def _unused_datasources(program: ast.Program, symbols: Symbols, bag: DiagnosticBag) -> None:
    named = set()
    for tool in program.tools:
        entry = tool.entry("datasource")
        if entry is not None and isinstance(entry.value, ast.Name):
            named.add(entry.value.id)
    for source in symbols.datasources.values():
        if source.name not in named and _referable(source.name):
            bag.warning("W003", f"Datasource '{source.name}' is declared but never used.",
                        source.name_span,
                        hint="name it in a query's or command's datasource: entry, or remove it")
