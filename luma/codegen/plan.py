"""What a generated tool-types file declares, before it is written in a language.

Both generators walk the same :class:`TypePlan`: the program's object schemas, its tagged unions
(each member as its own object type carrying the tag), and per tool an input, a needs and a
handler type. The plan also chooses every generated name once, so the Python and TypeScript files
agree, and a name the target language cannot use (a keyword, or a name the file itself needs) is
renamed with a trailing ``_``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from luma.syntax import ast


class CodegenError(ValueError):
    """The program cannot be turned into types (it has an error ``luma check`` reports)."""


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One member of an object type. ``optional``: the key may be absent."""

    name: str
    type: ast.TypeExpr | None  # None: the tag field of a union member, typed by ``tag_value``
    optional: bool
    desc: str | None = None
    tag_value: str | None = None
    nullable: bool = False  # the key is there, its value may be null (a bridge's parameter)


@dataclass(frozen=True, slots=True)
class ObjectSpec:
    """An object type to declare: a schema, a union member with its tag, a tool input or needs."""

    name: str
    fields: tuple[FieldSpec, ...]
    doc: str | None = None


@dataclass(frozen=True, slots=True)
class UnionSpec:
    """A tagged union: ``members`` are the per-member object types, each carrying the tag."""

    name: str
    tag: str
    members: tuple[tuple[str, ObjectSpec], ...]  # (member schema name as written, its type)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    tool: str  # the tool's name as written in the program (the key in GeneratedToolModule)
    input: ObjectSpec
    needs: ObjectSpec
    handler: str
    result: ast.TypeExpr
    description: str | None


@dataclass(frozen=True, slots=True)
class DataSpec:
    """A query or command: the parameters its bridge receives and what it returns."""

    tool: str
    kind: str  # "query" or "command"
    params: ObjectSpec  # every parameter, present (an optional one not given is null)
    result: str  # the name of the result type the file declares
    rows: ast.TypeExpr | None  # the declared return type; None: {"rows_affected": int}


@dataclass(frozen=True, slots=True)
class DataPlan:
    """The datasources of a program (only when it declares one): a type per query and command,
    the bridge type and ``GeneratedDatasources``, the type of a module's ``datasources``."""

    datasources: tuple[str, ...]
    specs: tuple[DataSpec, ...]
    rows_affected: str  # ``RowsAffected``
    bridge: str  # ``DatasourceBridge``
    module: str  # ``GeneratedDatasources``


@dataclass(frozen=True, slots=True)
class TypePlan:
    """Everything a generated file declares, in the order it declares it."""

    source: str
    declarations: tuple[ObjectSpec | UnionSpec, ...]
    tools: tuple[ToolSpec, ...]
    type_names: dict[str, str]  # schema name in the program -> its name in the generated file
    tool_handler: str  # the generic handler type (``ToolHandler``)
    module: str  # ``GeneratedToolModule``
    data: DataPlan | None = None

    def type_name(self, name: str) -> str:
        return self.type_names[name]


def pascal_case(name: str) -> str:
    """``db_read`` → ``DbRead``, ``textStats`` → ``TextStats``; never empty, never a digit first."""
    out = "".join(part[:1].upper() + part[1:] for part in name.split("_"))
    if not out or out[0].isdigit():
        out = "Tool" + out
    return out


def build_plan(program: ast.Program, source: str, reserved: Callable[[str], bool]) -> TypePlan:
    """Collect the program's schemas and tools and name them for a language.

    ``reserved(name)`` says that the target language cannot use ``name`` as a declared type name;
    such a name gets a trailing ``_``. Raises :class:`CodegenError` for a program whose types
    do not resolve (an unknown type, a union member that is not an object schema).
    """
    names = _Names(reserved)
    schemas: dict[str, ast.SchemaDecl | ast.UnionDecl] = {}
    for decl in program.schemas:
        schemas.setdefault(decl.name, decl)  # a duplicate is the checker's E004; first one wins
    type_names = {name: names.take(name) for name in schemas}

    def check_type(t: ast.TypeExpr, where: str) -> None:
        if isinstance(t, (ast.ListType, ast.MapType)):
            check_type(t.item if isinstance(t, ast.ListType) else t.value, where)
        elif isinstance(t, ast.NamedType) and t.name not in schemas:
            raise CodegenError(f"Unknown type '{t.name}' in {where}.")

    declarations: list[ObjectSpec | UnionSpec] = []
    for decl in schemas.values():
        if isinstance(decl, ast.SchemaDecl):
            where = f"schema '{decl.name}'"
            fields = _fields(decl.fields, defaults_filled=False)
            for f in fields:
                assert f.type is not None
                check_type(f.type, where)
            declarations.append(ObjectSpec(type_names[decl.name], fields))
        else:
            declarations.append(_union(decl, schemas, type_names, names))

    tools: list[ToolSpec] = []
    seen_tools: set[str] = set()
    for tool in program.tools:
        if tool.name in seen_tools or tool.returns is None or tool.kind != "tool":
            continue  # a query's or command's handler is its datasource's bridge
        seen_tools.add(tool.name)
        where = f"tool '{tool.name}'"
        base = pascal_case(tool.name)
        params = _fields(tool.params, defaults_filled=True)
        needs = _dedupe(
            FieldSpec(n.name, n.type, optional=False) for n in tool.needs
        )
        for f in (*params, *needs):
            assert f.type is not None
            check_type(f.type, where)
        check_type(tool.returns, where)
        description = _string_entry(tool, "description")
        tools.append(ToolSpec(
            tool=tool.name,
            input=ObjectSpec(
                names.take(base + "Input"), params,
                doc=description or f"The input of the tool '{tool.name}'.",
            ),
            needs=ObjectSpec(
                names.take(base + "Needs"), needs,
                doc=f"The contexts the host supplies to the tool '{tool.name}' (needs).",
            ),
            handler=names.take(base + "Handler"),
            result=tool.returns,
            description=description,
        ))

    tool_handler = names.take("ToolHandler")
    module = names.take("GeneratedToolModule")
    return TypePlan(
        source=source,
        declarations=tuple(declarations),
        tools=tuple(tools),
        type_names=type_names,
        tool_handler=tool_handler,
        module=module,
        data=_data_plan(program, names, check_type),
    )


def _data_plan(program: ast.Program, names: _Names,
               check_type: Callable[[ast.TypeExpr, str], None]) -> DataPlan | None:
    if not program.datasources:
        return None
    specs: list[DataSpec] = []
    seen: set[str] = set()
    for tool in program.tools:
        if tool.kind == "tool" or tool.name in seen:
            continue
        seen.add(tool.name)
        where = f"{tool.kind} '{tool.name}'"
        base = pascal_case(tool.name)
        params = _dedupe(
            FieldSpec(f.name, f.type, optional=False, desc=desc_of(f),
                      nullable=f.optional and f.annotation("default") is None)
            for f in tool.params)
        for f in params:
            assert f.type is not None
            check_type(f.type, where)
        if tool.returns is not None:
            check_type(tool.returns, where)
        specs.append(DataSpec(
            tool.name, tool.kind,
            ObjectSpec(names.take(base + "Params"), params,
                       doc=f"The parameters the bridge receives for the {tool.kind} "
                           f"'{tool.name}'."),
            names.take(base + "Result"), tool.returns))
    datasources: list[str] = []
    for decl in program.datasources:
        if decl.name not in datasources:
            datasources.append(decl.name)
    return DataPlan(tuple(datasources), tuple(specs), names.take("RowsAffected"),
                    names.take("DatasourceBridge"), names.take("GeneratedDatasources"))


def desc_of(f: ast.Field) -> str | None:
    """The text of a field's ``@desc("…")``, if it has one."""
    a = f.annotation("desc")
    if a is not None and len(a.args) == 1 and isinstance(a.args[0], ast.StringLit):
        return a.args[0].value
    return None


class _Names:
    """Hands out distinct names: a reserved or taken name gets ``_`` appended until it is free."""

    def __init__(self, reserved: Callable[[str], bool]) -> None:
        self._reserved = reserved
        self._taken: set[str] = set()

    def take(self, wanted: str) -> str:
        name = wanted
        while name in self._taken or self._reserved(name):
            name += "_"
        self._taken.add(name)
        return name


def _fields(fields: Iterable[ast.Field], *, defaults_filled: bool) -> tuple[FieldSpec, ...]:
    # A @default field may be absent from a value a handler returns (validation fills it in), so
    # it is optional in a schema; in a tool's input the runtime has already filled it in.
    specs = []
    for f in fields:
        has_default = f.annotation("default") is not None
        optional = f.optional and not has_default if defaults_filled else f.optional or has_default
        specs.append(FieldSpec(f.name, f.type, optional, desc_of(f)))
    return _dedupe(specs)


def _dedupe(fields: Iterable[FieldSpec]) -> tuple[FieldSpec, ...]:
    # A repeated name is the checker's E005; the first declaration wins, as in validation.
    seen: set[str] = set()
    out = []
    for f in fields:
        if f.name not in seen:
            seen.add(f.name)
            out.append(f)
    return tuple(out)


def _union(
    decl: ast.UnionDecl,
    schemas: dict[str, ast.SchemaDecl | ast.UnionDecl],
    type_names: dict[str, str],
    names: _Names,
) -> UnionSpec:
    members: list[tuple[str, ObjectSpec]] = []
    for m in decl.members:
        if any(m.name == seen for seen, _ in members):
            continue  # the checker's E019
        target = schemas.get(m.name)
        if not isinstance(target, ast.SchemaDecl):
            raise CodegenError(
                f"Member '{m.name}' of tagged union '{decl.name}' is not a declared object schema."
            )
        tag = FieldSpec(decl.tag, None, optional=False, tag_value=m.name)
        # A member that declares the tag field itself is the checker's E018; the tag wins here.
        own = tuple(f for f in _fields(target.fields, defaults_filled=False) if f.name != decl.tag)
        doc = f"'{m.name}' as a member of '{decl.name}', tagged by '{decl.tag}'."
        members.append((m.name, ObjectSpec(names.take(decl.name + m.name), (tag, *own), doc)))
    return UnionSpec(type_names[decl.name], decl.tag, tuple(members))


def _string_entry(tool: ast.ToolDecl, key: str) -> str | None:
    entry = tool.entry(key)
    if entry is not None and isinstance(entry.value, ast.StringLit):
        return entry.value.value
    return None
