"""The program's symbol table: every declaration by name, with duplicates reported once."""

from __future__ import annotations

from luma.record import Record
from luma.syntax import ast
from luma.syntax.diagnostics import DiagnosticBag, Related

_KIND_WORDS = {
    ast.SchemaDecl: "schema", ast.UnionDecl: "schema", ast.ToolDecl: "tool",
    ast.ModelDecl: "model", ast.AgentDecl: "agent", ast.DatasourceDecl: "datasource",
}


class Symbols(Record):
    """Declarations by name. Schemas and unions share one namespace (both are types); tools,
    models and agents each have their own, but one name may not be declared twice in any."""

    __slots__ = __match_args__ = ("schemas", "unions", "tools", "models", "agents", "datasources")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self) -> None:
        self.schemas: dict[str, ast.SchemaDecl] = {}
        self.unions: dict[str, ast.UnionDecl] = {}
        self.tools: dict[str, ast.ToolDecl] = {}
        self.models: dict[str, ast.ModelDecl] = {}
        self.agents: dict[str, ast.AgentDecl] = {}
        self.datasources: dict[str, ast.DatasourceDecl] = {}

    def is_type(self, name: str) -> bool:
        return name in self.schemas or name in self.unions

    def type_names(self) -> list[str]:
        return [*self.schemas, *self.unions, *ast.PRIMITIVE_TYPES]


def collect_symbols(program: ast.Program, bag: DiagnosticBag) -> Symbols:
    """Index the declarations; a second declaration of a name is E004, pointing at the first."""
    symbols = Symbols()
    seen: dict[str, ast.Decl] = {}
    for decl in program.declarations:
        if isinstance(decl, ast.TestDecl):
            continue  # a test's name is a string, in no namespace (bodies.py checks them)
        first = seen.get(decl.name)
        if first is not None:
            kind = decl.kind if isinstance(decl, ast.ToolDecl) else _KIND_WORDS[type(decl)]
            bag.error("E004", f"'{decl.name}' is declared more than once.", decl.name_span,
                      hint=f"rename this {kind} or remove one of the declarations",
                      related=(Related(first.name_span, "first declared here"),))
            continue
        seen[decl.name] = decl
        if isinstance(decl, ast.SchemaDecl):
            symbols.schemas[decl.name] = decl
        elif isinstance(decl, ast.UnionDecl):
            symbols.unions[decl.name] = decl
        elif isinstance(decl, ast.ToolDecl):
            symbols.tools[decl.name] = decl
        elif isinstance(decl, ast.ModelDecl):
            symbols.models[decl.name] = decl
        elif isinstance(decl, ast.DatasourceDecl):
            symbols.datasources[decl.name] = decl
        else:
            symbols.agents[decl.name] = decl
    return symbols
