"""Luma types to neutral JSON Schema (Draft 2020-12).

One compiler for the whole program: schemas, tagged unions and tool inputs become ``$defs``;
a type expression becomes a schema that refers to them. Information only Luma uses lives under
``x-luma-`` keys (standard validators ignore them), so per-provider dialects can be thin
transformers over this one neutral form.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from luma.syntax import ast
from luma.syntax.constants import constant_value

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
DEFS_PREFIX = "#/$defs/"

# Keys only Luma reads. Standard JSON Schema validators ignore unknown keywords.
TAG_KEY = "x-luma-tag"
SEVERITY_KEY = "x-luma-severity"
PATTERN_KEY = "x-luma-pattern"

_PRIMITIVE_SCHEMAS: dict[str, dict[str, Any]] = {
    "string": {"type": "string"},
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "bool": {"type": "boolean"},
    "any": {},
}

# Global inline flags such as ``(?i)`` must stay at the very start of a Python regex.
_GLOBAL_FLAGS = re.compile(r"^(?:\(\?[aiLmsux]+\))+")


ROWS_AFFECTED = "__rows_affected"
"""The result of a command that declares no return type: ``{"rows_affected": <int>}``."""


def tool_result(tool: ast.ToolDecl) -> ast.TypeExpr | str:
    """What a tool returns: its declared type, or :data:`ROWS_AFFECTED` for a command without
    one."""
    return tool.returns if tool.returns is not None else ROWS_AFFECTED


def rows_affected_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {"rows_affected": {"type": "integer", "minimum": 0}},
            "required": ["rows_affected"], "additionalProperties": False}


def tool_input_name(tool_name: str) -> str:
    """The ``$defs`` name of a tool's input schema."""
    return f"__tool_{tool_name}_input"


def anchored_pattern(regex: str) -> str:
    """A JSON Schema ``pattern`` (search semantics) that means ``re.fullmatch(regex)``."""
    flags = _GLOBAL_FLAGS.match(regex)
    head = flags.group(0) if flags else ""
    return f"{head}^(?:{regex[len(head):]})$"


def _is_number(v: Any) -> bool:
    return type(v) in (int, float)


class SchemaCompiler:
    """Compiles the types of one program to JSON Schema.

    Every method returns a fresh dict that the caller may keep or change.
    """

    def __init__(self, program: ast.Program) -> None:
        self.program = program
        self._decls: dict[str, ast.SchemaDecl | ast.UnionDecl] = {}
        self._tools: dict[str, ast.ToolDecl] = {}
        for decl in program.declarations:
            # the first declaration of a name wins; duplicates are reported by the checker
            if isinstance(decl, (ast.SchemaDecl, ast.UnionDecl)):
                self._decls.setdefault(decl.name, decl)
            elif isinstance(decl, ast.ToolDecl):
                self._tools.setdefault(tool_input_name(decl.name), decl)

    # ------------------------------------------------------------------------------ types
    def type_schema(self, t: ast.TypeExpr) -> dict[str, Any]:
        """The schema of a type; a declared schema is a ``$ref`` into ``$defs``."""
        if isinstance(t, ast.PrimitiveType):
            return dict(_PRIMITIVE_SCHEMAS.get(t.name, {}))
        if isinstance(t, ast.EnumType):
            return {"type": "string", "enum": list(t.values)}
        if isinstance(t, ast.ListType):
            return {"type": "array", "items": self.type_schema(t.item)}
        if isinstance(t, ast.MapType):
            return {"type": "object", "additionalProperties": self.type_schema(t.value)}
        if isinstance(t, ast.NamedType):
            return {"$ref": DEFS_PREFIX + t.name}
        raise TypeError(f"not a type expression: {t!r}")

    def field_schema(self, f: ast.Field) -> dict[str, Any]:
        """The schema of a field or parameter: its type plus its annotations."""
        schema = self.type_schema(f.type)
        examples: list[Any] = []
        for a in f.annotations:
            args = [constant_value(arg) for arg in a.args]
            values = [v for ok, v in args if ok]
            if len(values) != len(args):
                continue  # a non-constant argument is a checker error; nothing to emit
            if a.name == "desc" and values and isinstance(values[0], str):
                schema["description"] = values[0]
            elif a.name == "default" and len(values) == 1:
                schema["default"] = values[0]
            elif a.name == "example" and len(values) == 1:
                examples.append(values[0])
            elif a.name == "range" and len(values) == 2:
                low, high = values
                if _is_number(low):
                    schema["minimum"] = low
                if _is_number(high):
                    schema["maximum"] = high
            elif a.name == "length" and len(values) == 2:
                self._length(schema, f.type, values[0], values[1])
            elif a.name == "pattern" and values and isinstance(values[0], str):
                schema["pattern"] = anchored_pattern(values[0])
                schema[PATTERN_KEY] = values[0]
            elif a.name == "format" and values and isinstance(values[0], str):
                schema["format"] = values[0]
            elif a.name == "severity" and values == ["soft"]:
                schema[SEVERITY_KEY] = "soft"
        if examples:
            schema["examples"] = examples
        return schema

    @staticmethod
    def _length(schema: dict[str, Any], t: ast.TypeExpr, low: Any, high: Any) -> None:
        if isinstance(t, ast.ListType):
            keys = ("minItems", "maxItems")
        elif isinstance(t, ast.EnumType) or (isinstance(t, ast.PrimitiveType)
                                             and t.name == "string"):
            keys = ("minLength", "maxLength")
        else:
            return  # @length on another type is a checker error
        for key, bound in zip(keys, (low, high)):
            # JSON Schema wants a non-negative integer here; 3.0 is written as 3
            if _is_number(bound) and bound >= 0 and float(bound).is_integer():
                schema[key] = int(bound)

    def fields_schema(self, fields: Sequence[ast.Field]) -> dict[str, Any]:
        """A closed object: unknown fields are invalid; ``required`` holds the fields that are
        neither optional nor defaulted."""
        properties: dict[str, Any] = {}
        required: list[str] = []
        for f in fields:
            if f.name in properties:
                continue  # duplicate field: reported by the checker, the first one counts
            properties[f.name] = self.field_schema(f)
            if not f.optional and f.annotation("default") is None:
                required.append(f.name)
        return {"type": "object", "properties": properties, "required": required,
                "additionalProperties": False}

    # ------------------------------------------------------------------------ definitions
    def schema_def(self, name: str) -> dict[str, Any]:
        """The definition of a declared schema, tagged union or tool input, by name."""
        decl = self._decls.get(name)
        if isinstance(decl, ast.SchemaDecl):
            return self.fields_schema(decl.fields)
        if isinstance(decl, ast.UnionDecl):
            return self._union_schema(decl)
        tool = self._tools.get(name)
        if tool is not None:
            return self.tool_input_schema(tool)
        if name == ROWS_AFFECTED:
            return rows_affected_schema()
        raise KeyError(f"no schema named '{name}'")

    def _union_schema(self, union: ast.UnionDecl) -> dict[str, Any]:
        members = []
        seen: set[str] = set()
        for m in union.members:
            if m.name in seen:
                continue
            seen.add(m.name)
            members.append(self._member_schema(m.name, union.tag))
        return {"type": "object", "oneOf": members, TAG_KEY: union.tag}

    def _member_schema(self, member: str, tag: str) -> dict[str, Any]:
        decl = self._decls.get(member)
        # a member that is not a declared object schema is a checker error; keep only the tag
        body: dict[str, Any] = (self.fields_schema(decl.fields)
                                if isinstance(decl, ast.SchemaDecl)
                                else {"properties": {}, "required": []})
        properties: dict[str, Any] = {tag: {"const": member}}
        properties.update((k, v) for k, v in body["properties"].items() if k != tag)
        required = [tag] + [r for r in body["required"] if r != tag]
        return {"type": "object", "properties": properties, "required": required,
                "additionalProperties": False}

    def tool_input_schema(self, tool: ast.ToolDecl) -> dict[str, Any]:
        """The input schema of a tool (``__tool_<name>_input`` in ``$defs``)."""
        return self.fields_schema(tool.params)

    def definitions(self) -> dict[str, dict[str, Any]]:
        """Every declared schema, tagged union and tool input, in declaration order."""
        defs: dict[str, dict[str, Any]] = {}
        for decl in self.program.declarations:
            if isinstance(decl, (ast.SchemaDecl, ast.UnionDecl)):
                name = decl.name
            elif isinstance(decl, ast.ToolDecl):
                name = tool_input_name(decl.name)
            else:
                continue
            if name not in defs:
                defs[name] = self.schema_def(name)
        return defs

    def document(self) -> dict[str, Any]:
        """One JSON Schema document holding every definition of the program."""
        return {"$schema": DRAFT_2020_12, "$defs": self.definitions()}

    def standalone(self, t: ast.TypeExpr | str) -> dict[str, Any]:
        """A self-contained schema for a type (or a definition, by name).

        A declared schema is inlined at the root; ``$defs`` holds only the definitions the
        schema reaches, and is left out when there are none.
        """
        if isinstance(t, ast.NamedType):
            t = t.name
        return self.with_defs(self.schema_def(t) if isinstance(t, str) else self.type_schema(t))

    def standalone_fields(self, fields: Sequence[ast.Field]) -> dict[str, Any]:
        """A self-contained closed-object schema for a parameter list (a ``fn``'s), with the
        ``$defs`` its field types reach."""
        return self.with_defs(self.fields_schema(fields))

    def with_defs(self, root: dict[str, Any]) -> dict[str, Any]:
        """``root`` as a document with the ``$defs`` it reaches (only those: a schema for one
        field of a large program stays as small as the field)."""
        defs: dict[str, dict[str, Any]] = {}
        pending = list(_refs(root))
        while pending:
            name = pending.pop(0)
            if name in defs or (name not in self._decls and name not in self._tools):
                continue  # an unknown name is a checker error; the $ref stays dangling
            defs[name] = self.schema_def(name)
            pending.extend(_refs(defs[name]))
        document = {"$schema": DRAFT_2020_12, **root}
        if defs:
            document["$defs"] = defs
        return document


def _refs(schema: Any) -> Iterator[str]:
    """Names of the ``#/$defs/<name>`` references inside a schema, in document order."""
    if not isinstance(schema, dict):
        return
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(DEFS_PREFIX):
        yield ref[len(DEFS_PREFIX):]
    for key, value in schema.items():
        if key in ("items", "additionalProperties", "not"):
            yield from _refs(value)
        elif key in ("properties", "$defs") and isinstance(value, dict):
            for sub in value.values():
                yield from _refs(sub)
        elif key in ("oneOf", "anyOf", "allOf", "prefixItems") and isinstance(value, list):
            for sub in value:
                yield from _refs(sub)
