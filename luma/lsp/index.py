"""What the language server knows about one document: its diagnostics, and where each name is
declared and used. Plain data over the parsed program; nothing here speaks the protocol.

A symbol's key says what it is: ``("schema", "Order")``, ``("tool", "calculate")``,
``("model", "M")``, ``("datasource", "Shop")``, ``("agent", "Flow")``, ``("fn", "Flow", "run")``,
``("field", "Order", "id")``,
``("var", "Flow.run", "stats")`` for a parameter or local variable of ``Flow.run`` (``"<top>"``
for the program's top-level statements).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from luma.syntax import ast
from luma.syntax.diagnostics import Diagnostic
from luma.syntax.source import SourceFile, Span

Key = tuple[str, ...]


@dataclass(slots=True)
class Occurrence:
    key: Key
    span: Span
    is_definition: bool


@dataclass(slots=True)
class Analysis:
    """One version of a document: parsed, checked and indexed."""

    source: SourceFile
    program: ast.Program | None
    diagnostics: list[Diagnostic]
    occurrences: list[Occurrence] = field(default_factory=list)
    definitions: dict[Key, Span] = field(default_factory=dict)
    declarations: dict[Key, Any] = field(default_factory=dict)  # key -> the AST node
    _starts: list[int] = field(default_factory=list)

    def at(self, offset: int) -> Occurrence | None:
        """The occurrence of a name under ``offset`` (its end counts: the cursor after a name)."""
        i = bisect.bisect_right(self._starts, offset) - 1
        for j in range(i, max(-1, i - 4), -1):
            occ = self.occurrences[j]
            if occ.span.start <= offset <= occ.span.end:
                return occ
        return None

    def references(self, key: Key) -> list[Occurrence]:
        return [o for o in self.occurrences if o.key == key]


def analyse(text: str, path: str) -> Analysis:
    """Parse, check and index ``text``."""
    import gc

    from luma.compile import check_text

    # The tree is made of many small objects and no cycles: a collection halfway through
    # building it would only cost time (a tenth of an analysis).
    enabled = gc.isenabled()
    gc.disable()
    try:
        checked = check_text(text, path)
    finally:
        if enabled:
            gc.enable()
    analysis = Analysis(checked.source, checked.program, list(checked.diagnostics))
    if checked.program is not None:
        _Indexer(analysis, checked.program).run()
        analysis.occurrences.sort(key=lambda o: (o.span.start, o.span.end))
        analysis._starts = [o.span.start for o in analysis.occurrences]
    return analysis


class _Indexer:
    def __init__(self, analysis: Analysis, program: ast.Program) -> None:
        self.a = analysis
        self.program = program
        self.schemas = {d.name for d in program.schemas}
        self.tools = {t.name for t in program.tools}
        self.models = {m.name for m in program.models}
        self.datasources = {d.name for d in program.datasources}
        self.agents = {a.name: a for a in program.agents}

    def define(self, key: Key, span: Span, node: Any) -> None:
        if key not in self.a.definitions:
            self.a.definitions[key] = span
            self.a.declarations[key] = node
        self.a.occurrences.append(Occurrence(key, span, True))

    def use(self, key: Key, span: Span) -> None:
        self.a.occurrences.append(Occurrence(key, span, False))

    def run(self) -> None:
        for d in self.program.declarations:
            if isinstance(d, ast.SchemaDecl):
                self.define(("schema", d.name), d.name_span, d)
            elif isinstance(d, ast.UnionDecl):
                self.define(("schema", d.name), d.name_span, d)
            elif isinstance(d, ast.ToolDecl):
                self.define(("tool", d.name), d.name_span, d)
            elif isinstance(d, ast.ModelDecl):
                self.define(("model", d.name), d.name_span, d)
            elif isinstance(d, ast.DatasourceDecl):
                self.define(("datasource", d.name), d.name_span, d)
            elif isinstance(d, ast.AgentDecl):
                self.define(("agent", d.name), d.name_span, d)
                for f in d.fns:
                    self.define(("fn", d.name, f.name), f.name_span, f)
        for d in self.program.declarations:
            if isinstance(d, ast.SchemaDecl):
                for fld in d.fields:
                    self.define(("field", d.name, fld.name), fld.name_span, fld)
                    self.type_refs(fld.type)
            elif isinstance(d, ast.UnionDecl):
                for m in d.members:
                    if m.name in self.schemas:
                        self.use(("schema", m.name), m.span)
            elif isinstance(d, ast.ToolDecl):
                for p in d.params:
                    self.type_refs(p.type)
                self.type_refs(d.returns)
                for n in d.needs:
                    self.type_refs(n.type)
                error = d.entry("error")
                if error is not None and isinstance(error.value, ast.Name):
                    self.name_ref(error.value, "schema")
                source = d.entry("datasource")  # a query's or a command's
                if source is not None:
                    self.name_ref(source.value, "datasource")
            elif isinstance(d, ast.AgentDecl):
                self.agent(d)
        self.body("<top>", None, (), self.program.statements)
        for i, test in enumerate(self.program.tests):
            self.test(i, test)

    def test(self, i: int, test: ast.TestDecl) -> None:
        for m in test.models:
            if m.name in self.models:
                self.use(("model", m.name), m.name_span)
        for s in _walk(test.body):  # a mock may stand in a block of the test
            if isinstance(s, ast.Mock) and s.tool in self.tools:
                self.use(("tool", s.tool), s.tool_span)
        self.body(f"<test {i}>", None, (), test.body)

    def type_refs(self, t: ast.TypeExpr | None) -> None:
        if isinstance(t, ast.NamedType) and t.name in self.schemas:
            self.use(("schema", t.name), t.span)
        elif isinstance(t, ast.ListType):
            self.type_refs(t.item)
        elif isinstance(t, ast.MapType):
            self.type_refs(t.value)

    def name_ref(self, expr: ast.Expr, kind: str) -> None:
        if isinstance(expr, ast.Name):
            names = {"schema": self.schemas, "tool": self.tools, "model": self.models,
                     "datasource": self.datasources}[kind]
            if expr.id in names:
                self.use((kind, expr.id), expr.span)

    def agent(self, d: ast.AgentDecl) -> None:
        model = d.entry("model")
        if model is not None:
            self.name_ref(model.value, "model")
        tools = d.entry("tools")
        if tools is not None and isinstance(tools.value, ast.ListLit):
            for item in tools.value.items:
                self.name_ref(item, "tool")
        for f in d.fns:
            for p in f.params:
                self.type_refs(p.type)
            self.type_refs(f.returns)
            self.body(f"{d.name}.{f.name}", d, f.params, f.body)

    def body(self, scope: str, agent: ast.AgentDecl | None, params: tuple[ast.Field, ...],
             stmts: tuple[ast.TestStmt, ...]) -> None:
        local: set[str] = set()
        for p in params:
            local.add(p.name)
            self.define(("var", scope, p.name), p.name_span, p)
        for node in _walk(stmts):  # definitions first: a name read before it is assigned
            if isinstance(node, ast.Assign):
                local.add(node.target)
                self.define(("var", scope, node.target), node.target_span, node)
            elif isinstance(node, ast.For):
                local.add(node.var)
                self.define(("var", scope, node.var), node.var_span, node)
            elif isinstance(node, ast.Try):
                local.add(node.err_name)
                self.define(("var", scope, node.err_name), node.err_span, node)
        for node in _walk(stmts):
            if isinstance(node, ast.Assign):
                self.type_refs(node.type)
            elif isinstance(node, ast.Ask):
                self.type_refs(node.type)
                if node.using_tool and node.using_span is not None:
                    if node.using_tool in self.tools:
                        self.use(("tool", node.using_tool), node.using_span)
            elif isinstance(node, ast.ToolCall) and node.tool in self.tools:
                self.use(("tool", node.tool), node.tool_span)
            elif isinstance(node, ast.Call) and isinstance(node.callee, ast.Name):
                name = node.callee.id
                if agent is not None and agent.fn(name) is not None and name not in local:
                    self.use(("fn", agent.name, name), node.callee.span)
            elif isinstance(node, ast.Member) and isinstance(node.obj, ast.Name) \
                    and node.obj.id in self.agents and node.obj.id not in local:
                self.use(("agent", node.obj.id), node.obj.span)
                if self.agents[node.obj.id].fn(node.name) is not None:
                    self.use(("fn", node.obj.id, node.name), node.name_span)
            elif isinstance(node, ast.Name) and node.id in local:
                self.use(("var", scope, node.id), node.span)
            elif isinstance(node, ast.Placeholder) and node.root in local:
                root = Span(node.root_span.file, node.root_span.start, node.root_span.end)
                self.use(("var", scope, node.root), root)


_FIELDS: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        import dataclasses

        names = _FIELDS[cls] = tuple(
            f.name for f in dataclasses.fields(cls) if not f.name.endswith("span"))
    return names


_LEAVES = (str, int, float, bool, type(None))


def _walk(node: Any) -> Iterator[Any]:
    """Every node under ``node`` in source order, callees and member objects included."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, tuple):
            stack.extend(reversed(n))
        elif isinstance(n, _LEAVES) or isinstance(n, Span):
            continue
        else:
            yield n
            if isinstance(n, ast.Call) and isinstance(n.callee, ast.Name):
                stack.extend(reversed(n.args))  # the callee is a function, not a variable
                continue
            if isinstance(n, ast.Member) and isinstance(n.obj, ast.Name):
                stack.append(n.obj)
                continue
            stack.extend(reversed([getattr(n, name) for name in _field_names(type(n))]))
