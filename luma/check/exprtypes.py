"""Static types of expressions in statements: just enough to catch a misspelled field, a value of
the wrong kind where an object, a list or a bool is required, and to narrow tagged unions.

A static type is an approximation that errs towards ``UNKNOWN``: whatever cannot be known for
sure (``any``, an object literal's fields, two different types meeting after an ``if``) is
never checked.
"""

from __future__ import annotations

from luma.check.symbols import Symbols
from luma.record import Record
from luma.syntax import ast
from luma.syntax.diagnostics import Related, did_you_mean
from luma.syntax.source import Span


class Ty(Record):
    """A static type.

    ``kind`` is one of ``unknown null bool int float string list map object schema union``.
    ``name`` names the schema or union; ``member`` is the member a union value is narrowed to;
    ``item`` is a list's item or a map's value type; ``values`` are an enum's strings.
    """

    __slots__ = __match_args__ = ("kind", "name", "member", "item", "values")

    def __init__(self, kind: str, name: str | None = None, member: str | None = None,
                 item: Ty | None = None, values: tuple[str, ...] = ()) -> None:
        self.kind = kind
        self.name = name
        self.member = member
        self.item = item
        self.values = values

    def __eq__(self, other: object) -> bool:  # types are compared often: no loop over fields
        if other.__class__ is self.__class__:
            assert isinstance(other, Ty)
            return (self.kind, self.name, self.member, self.item, self.values) \
                == (other.kind, other.name, other.member, other.item, other.values)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.kind, self.name, self.member, self.item, self.values))

    @property
    def is_known(self) -> bool:
        return self.kind != "unknown"


UNKNOWN = Ty("unknown")
NULL = Ty("null")
BOOL = Ty("bool")
INT = Ty("int")
FLOAT = Ty("float")
STRING = Ty("string")
OBJECT = Ty("object")  # an object whose fields are not known (an object literal, a caught error)


def list_of(item: Ty) -> Ty:
    return Ty("list", item=item)


def describe(ty: Ty) -> str:
    """How a type is written in Luma source (``string[]``, ``Order``, ``enum["a", "b"]``)."""
    if ty.kind == "string" and ty.values:
        return "enum[" + ", ".join(f'"{v}"' for v in ty.values) + "]"
    if ty.kind == "list":
        return describe(ty.item or UNKNOWN) + "[]"
    if ty.kind == "map":
        return f"map[{describe(ty.item or UNKNOWN)}]"
    if ty.kind == "union" and ty.member:
        return ty.member
    if ty.kind in ("schema", "union"):
        return ty.name or "object"
    if ty.kind == "unknown":
        return "any"
    return ty.kind


_KIND_WORDS = {
    "null": "null", "bool": "a bool", "int": "a number", "float": "a number", "string": "a string",
    "list": "a list", "map": "an object", "object": "an object", "schema": "an object",
    "union": "an object",
}


def kind_word(ty: Ty) -> str:
    """The kind of a value in words, for messages: ``a number``, ``a list``."""
    return _KIND_WORDS.get(ty.kind, "a value")


def is_objectlike(ty: Ty) -> bool:
    return ty.kind in ("map", "object", "schema", "union")


# ------------------------------------------------------------------------------- resolution


def resolve(te: ast.TypeExpr | None, symbols: Symbols) -> Ty:
    """The static type a declared type stands for; an unknown name is ``UNKNOWN`` (reported by
    ``luma.check.types.check_type``)."""
    if te is None:
        return UNKNOWN
    if isinstance(te, ast.PrimitiveType):
        return {"string": STRING, "int": INT, "float": FLOAT, "bool": BOOL}.get(te.name, UNKNOWN)
    if isinstance(te, ast.EnumType):
        return Ty("string", values=te.values)
    if isinstance(te, ast.ListType):
        return list_of(resolve(te.item, symbols))
    if isinstance(te, ast.MapType):
        return Ty("map", item=resolve(te.value, symbols))
    if te.name in symbols.schemas:
        return Ty("schema", name=te.name)
    if te.name in symbols.unions:
        return Ty("union", name=te.name)
    return UNKNOWN


# ------------------------------------------------------------------------------------ joins


def join(a: Ty, b: Ty) -> Ty:
    """The type of a value that is ``a`` on one path and ``b`` on another."""
    if a == b:
        return a
    if a.kind == b.kind == "string":
        return STRING
    if {a.kind, b.kind} == {"int", "float"}:
        return FLOAT
    if a.kind == b.kind == "list":
        return list_of(join(a.item or UNKNOWN, b.item or UNKNOWN))
    if a.kind == b.kind == "union" and a.name == b.name:
        return Ty("union", name=a.name)
    return UNKNOWN


# ---------------------------------------------------------------------------- field lookup


class FieldProblem(Record):
    """Why ``.field`` cannot be read from a value of a known type (E035)."""

    __slots__ = __match_args__ = ("message", "hint", "declared")

    def __init__(self, message: str, hint: str | None, declared: Span | None = None) -> None:
        self.message = message
        self.hint = hint
        self.declared = declared  # the name of the schema or union that lacks the field

    @property
    def related(self) -> tuple[Related, ...]:
        if self.declared is None:
            return ()
        return (Related(self.declared, "the type is declared here"),)


def _fields(decl: ast.SchemaDecl) -> dict[str, ast.Field]:
    return {f.name: f for f in decl.fields}


def field_type(ty: Ty, name: str, symbols: Symbols, path: str) -> tuple[Ty, FieldProblem | None]:
    """The type of ``value.name`` for a value of type ``ty``, or the problem with reading it.

    ``path`` is the source text of the value (``stats``), for hints.
    """
    if ty.kind == "map":
        return ty.item or UNKNOWN, None
    if ty.kind == "schema" and ty.name in symbols.schemas:
        decl = symbols.schemas[ty.name]
        fields = _fields(decl)
        if name in fields:
            return resolve(fields[name].type, symbols), None
        return UNKNOWN, FieldProblem(f"Type '{ty.name}' has no field '{name}'.",
                                     did_you_mean(name, list(fields)), decl.name_span)
    if ty.kind == "union" and ty.name in symbols.unions:
        return _union_field(ty, name, symbols, path)
    if ty.kind in ("bool", "int", "float", "string", "list"):
        hint = "use len(...) for the length" if ty.kind in ("string", "list") else None
        return UNKNOWN, FieldProblem(
            f"A value of type {describe(ty)} has no field '{name}'.", hint)
    return UNKNOWN, None


def _union_field(ty: Ty, name: str, symbols: Symbols,
                 path: str) -> tuple[Ty, FieldProblem | None]:
    union = symbols.unions[ty.name or ""]
    members = [m.name for m in union.members]
    if name == union.tag:
        return Ty("string", values=tuple(members)), None
    decls = {m: symbols.schemas[m] for m in members if m in symbols.schemas}
    if len(decls) != len(members):
        return UNKNOWN, None  # a broken union is reported with its declaration
    if ty.member is not None and ty.member in decls:
        decl = decls[ty.member]
        fields = _fields(decl)
        if name in fields:
            return resolve(fields[name].type, symbols), None
        return UNKNOWN, FieldProblem(
            f"Type '{ty.member}' has no field '{name}'.",
            did_you_mean(name, [*fields, union.tag]), decl.name_span)
    having = [m for m, d in decls.items() if name in _fields(d)]
    if len(having) == len(decls):
        result: Ty | None = None
        for d in decls.values():
            t = resolve(_fields(d)[name].type, symbols)
            result = t if result is None else join(result, t)
        return result or UNKNOWN, None
    if having:
        listed = ", ".join(having)
        hint = f"only {listed} {'has' if len(having) == 1 else 'have'} it; " \
               f"check {path}.{union.tag} == \"{having[0]}\" first"
        return UNKNOWN, FieldProblem(
            f"Not every member of '{ty.name}' has the field '{name}'.", hint, union.name_span)
    every = sorted({f for d in decls.values() for f in _fields(d)} | {union.tag})
    return UNKNOWN, FieldProblem(f"Type '{ty.name}' has no field '{name}'.",
                                 did_you_mean(name, every), union.name_span)


def index_type(ty: Ty, index: ast.Expr, symbols: Symbols) -> Ty:
    """The type of ``value[index]``; never a problem (an index is checked at run time)."""
    if ty.kind == "list":
        return ty.item or UNKNOWN
    if ty.kind == "map":
        return ty.item or UNKNOWN
    if ty.kind in ("schema", "union") and isinstance(index, ast.StringLit) \
            and not index.has_placeholders:
        found, problem = field_type(ty, index.value, symbols, "")
        return UNKNOWN if problem else found
    return UNKNOWN


def path_text(expr: ast.Expr) -> str:
    """Source-like text of a name/field path (``order.items``), for hints; ``value`` otherwise."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Member):
        return f"{path_text(expr.obj)}.{expr.name}"
    return "value"


# ------------------------------------------------------------------------------- literals


def literal_type(expr: ast.Literal) -> Ty:
    v = expr.value
    if v is None:
        return NULL
    if isinstance(v, bool):
        return BOOL
    if isinstance(v, int):
        return INT
    return FLOAT


def fits_kind(value: Ty, target: Ty, symbols: Symbols | None = None,
              _seen: frozenset[tuple[str, str]] = frozenset()) -> bool:
    """Whether a value of static type ``value`` may be a valid ``target`` as far as kinds go.

    Only a certain mismatch is ``False``: any unknown side, a float for an int (``3.0`` is
    accepted) and an object for a schema (its fields are checked elsewhere) all fit. With
    ``symbols``, a value of one schema for another schema is compared field by field
    (:func:`schema_difference`).
    """
    if not value.is_known or not target.is_known:
        return True
    v, t = value.kind, target.kind
    if t == "float":
        return v in ("int", "float")
    if t == "int":
        return v in ("int", "float")
    if t == "string":
        if v != "string":
            return False
        return not (target.values and value.values and not set(value.values) <= set(target.values))
    if t == "bool":
        return v == "bool"
    if t == "list":
        return v == "list" and fits_kind(value.item or UNKNOWN, target.item or UNKNOWN, symbols, _seen)
    if t == "map":
        if v == "map":
            return fits_kind(value.item or UNKNOWN, target.item or UNKNOWN, symbols, _seen)
        return is_objectlike(value)
    if t in ("object", "schema", "union"):
        if symbols is not None and v == t == "schema":
            return schema_difference(value, target, symbols, _seen) is None
        # schemas are structural: a value of another schema may still fit, at run time
        return is_objectlike(value)
    return True


def _always_present(f: ast.Field) -> bool:
    return not f.optional and f.annotation("default") is None


def schema_difference(value: Ty, target: Ty, symbols: Symbols,
                      _seen: frozenset[tuple[str, str]] = frozenset()) -> str | None:
    """Why no value of the schema ``value`` is a valid ``target`` schema, or None when one may
    be. Schemas are closed and structural: a value of ``CalcResult`` is a valid ``Other`` when
    every field it always has is declared by ``Other`` with a fitting type, and it has every
    field that ``Other`` requires."""
    a, b = value.name or "", target.name or ""
    if a == b or (a, b) in _seen or a not in symbols.schemas or b not in symbols.schemas:
        return None
    seen = _seen | {(a, b)}
    fa, fb = _fields(symbols.schemas[a]), _fields(symbols.schemas[b])
    for name, f in fa.items():
        if _always_present(f) and name not in fb:
            return f"{a} has the field '{name}', which {b} does not declare"
    for name, f in fb.items():
        if _always_present(f) and name not in fa:
            return f"{b} requires the field '{name}', which {a} does not have"
    for name, f in fa.items():
        if name not in fb or not (_always_present(f) or _always_present(fb[name])):
            continue  # a field the value may leave out cannot make it invalid
        ta, tb = resolve(f.type, symbols), resolve(fb[name].type, symbols)
        if not fits_kind(ta, tb, symbols, seen):
            return f"the field '{name}' is {describe(ta)} in {a} but {describe(tb)} in {b}"
    return None
