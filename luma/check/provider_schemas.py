"""Types the agent's model cannot be told (W006): an ``ask`` whose answer type, or a tool it offers
the model, has a schema the model's provider cannot express.

The checker knows each agent's model, so it runs the same dialect functions the provider's
adapter runs on every request (``luma.models.dialects``) and reports at the ``ask`` what would
otherwise be a failed request at run time:

- OpenAI or Azure with ``strict: true``: a schema with no strict form (a map, ``any``, a schema
  past strict mode's size limits) — the request would fail with ``MODEL_CONFIG``;
- Gemini: a required field through which a schema refers back to itself — Gemini takes
  recursion only through optional fields, so the model is told the field is optional.
"""

from __future__ import annotations

from luma.check.types import type_text
from luma.syntax import ast
from luma.syntax.constants import constant_value
from luma.syntax.diagnostics import DiagnosticBag

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any


class ProviderSchemaCheck:
    """W006 for the asks of one program; the schemas are compiled only when a model needs it."""

    def __init__(self, program: ast.Program, bag: DiagnosticBag) -> None:
        self.program = program
        self.bag = bag
        self._compiler: Any = None
        self._said: set[tuple[object, str]] = set()   # one warning per ask and problem

    def check_ask(self, e: ast.Ask, agent: ast.AgentDecl, model: ast.ModelDecl) -> None:
        provider = _constant(model, "provider")
        strict = _constant(model, "strict")
        if provider in ("openai", "azure") and strict is True:
            self._each_schema(e, agent, lambda what, schema: self._openai_strict(
                e, model, what, schema))
        elif provider == "gemini":
            self._each_schema(e, agent, lambda what, schema: self._gemini(e, what, schema))

    # ------------------------------------------------------------------------------- schemas
    def _each_schema(self, e: ast.Ask, agent: ast.AgentDecl, check: Any) -> None:
        """Call ``check(what, schema)`` for the answer's wire schema and each offered tool's."""
        from luma.models.answer import answer_shape
        from luma.schema.compile import SchemaCompiler, tool_input_name

        if self._compiler is None:
            self._compiler = SchemaCompiler(self.program)
        tools = _offered_tools(agent, {t.name for t in self.program.tools})
        types = {d.name for d in self.program.declarations
                 if isinstance(d, (ast.SchemaDecl, ast.UnionDecl))}
        # an unknown type is E007 already; there is no schema to look at
        if not (isinstance(e.type, ast.NamedType) and e.type.name not in types):
            shape = answer_shape(e.type, self._compiler.standalone(e.type))
            if not (shape.is_string and not tools):   # plain text has no schema
                check(_answer_words(e.type), shape.wire)
        for name in tools:
            schema = self._compiler.standalone(tool_input_name(name))
            schema.pop("$schema", None)
            check(f"the parameters of tool '{name}'", schema)

    def _openai_strict(self, e: ast.Ask, model: ast.ModelDecl, what: str,
                       schema: dict[str, Any]) -> None:
        from luma.models.dialects import StrictSchemaError, openai_strict_schema

        try:
            openai_strict_schema(schema)
        except StrictSchemaError as exc:
            self._warn(
                e, f"Model '{model.name}' requires strict schemas (strict: true), but "
                f"{what} cannot be made strict for OpenAI: {exc.reason}.",
                hint=f"remove 'strict: true' from model '{model.name}' to send this schema "
                     "without strict mode, or change the type")

    def _gemini(self, e: ast.Ask, what: str, schema: dict[str, Any]) -> None:
        from luma.models.dialects import gemini_recursive_required

        for owner, field in gemini_recursive_required(schema):
            self._warn(
                e, f"Gemini cannot require field '{field}' of '{owner}' in {what}: it refers "
                f"back to '{owner}', and Gemini takes a recursive reference only in an optional "
                "field.",
                hint=f"make '{field}' optional (`{field}?:`); as it is, the model is told it "
                     "is optional and an answer without it is sent back to be corrected")


    def _warn(self, e: ast.Ask, message: str, hint: str) -> None:
        if (e.span, message) not in self._said:
            self._said.add((e.span, message))
            self.bag.warning("W006", message, e.span, hint=hint)


def _constant(decl: ast.ModelDecl, key: str) -> Any:
    entry = decl.entry(key)
    if entry is None:
        return None
    ok, value = constant_value(entry.value)
    return value if ok else None


def _offered_tools(agent: ast.AgentDecl, declared: set[str]) -> list[str]:
    """The declared tools the agent lists, by name, once each, sorted (as they are sent)."""
    entry = agent.entry("tools")
    if entry is None or not isinstance(entry.value, ast.ListLit):
        return []
    names = {item.id for item in entry.value.items if isinstance(item, ast.Name)}
    return sorted(names & declared)


def _answer_words(t: ast.TypeExpr) -> str:
    return f"the answer type '{type_text(t)}'"
