"""Properties of the schema compiler and the validator, over random Luma programs.

Programs are generated as source text and parsed, so the whole path (text → AST → JSON Schema →
validation) is exercised: every generated schema passes the Draft 2020-12 metaschema; a value
built to fit a type validates (ours and the reference ``jsonschema`` agree); the same value with
one hard rule broken does not; a broken soft rule only warns.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import jsonschema
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from luma.schema import SchemaCompiler, validate, validate_and_fill
from luma.syntax.parse import parse_text

FIELD_NAMES = ["a", "b", "count", "name", "items", "total", "note", "when", "id_1", "x"]
TAG = "kind"
LETTERS = "abcdefghij"

# (regex, a string that does not match it) — the good strings come from the regex itself
PATTERNS = [("[a-z]+", "abc1"), ("[0-9]{3}", "12"), ("(ab|cd)*x", "abx x"), ("[A-F]?-[a-c]+", "-")]
FORMATS = {
    "email": (["a@b.co", "first.last@example.org"], "not-an-email"),
    "uri": (["https://example.com/a?b=1", "urn:isbn:1"], "no scheme here"),
    "date": (["2024-02-29", "1999-01-31"], "2023-02-29"),
    "date-time": (["2024-02-29T12:00:00Z", "2024-01-01T00:00:00.5+01:00"], "2024-01-01 00:00"),
    "uuid": (["123e4567-e89b-12d3-a456-426614174000"], "123e4567"),
}


# ----------------------------------------------------------------------- the type model


@dataclass
class T:
    """A Luma type: ``prim`` (name), ``enum`` (values), ``list``/``map`` (item), ``named``."""

    kind: str
    name: str = ""
    values: tuple[str, ...] = ()
    item: T | None = None

    def source(self) -> str:
        if self.kind == "prim" or self.kind == "named":
            return self.name
        if self.kind == "enum":
            return "enum[" + ", ".join(literal(v) for v in self.values) + "]"
        assert self.item is not None
        return f"{self.item.source()}[]" if self.kind == "list" else f"map[{self.item.source()}]"


@dataclass
class F:
    name: str
    type: T
    optional: bool = False
    range: tuple[Any, Any] | None = None
    length: tuple[int | None, int | None] | None = None
    pattern: tuple[str, str] | None = None
    format: str | None = None
    default: Any = None
    has_default: bool = False
    soft: bool = False

    def source(self) -> str:
        text = f"{self.name}{'?' if self.optional else ''}: {self.type.source()}"
        if self.range is not None:
            text += f" @range({literal(self.range[0])}, {literal(self.range[1])})"
        if self.length is not None:
            text += f" @length({literal(self.length[0])}, {literal(self.length[1])})"
        if self.pattern is not None:
            text += f" @pattern({literal(self.pattern[0])})"
        if self.format is not None:
            text += f' @format("{self.format}")'
        if self.has_default:
            text += f" @default({literal(self.default)})"
        if self.soft:
            text += ' @severity("soft")'
        return text

    @property
    def required(self) -> bool:
        return not self.optional and not self.has_default


@dataclass
class World:
    """The declarations generated so far: schemas (fields) and unions (member names)."""

    schemas: dict[str, list[F]] = field(default_factory=dict)
    unions: dict[str, list[str]] = field(default_factory=dict)

    def source(self) -> str:
        lines = []
        for name, fields in self.schemas.items():
            lines.append(f"schema {name} {{\n  " + "\n  ".join(f.source() for f in fields) + "\n}")
        for name, members in self.unions.items():
            lines.append(f"schema {name} = {' | '.join(members)} tagged by {TAG}")
        return "\n".join(lines) + "\n"


def literal(value: Any) -> str:
    """A JSON value as a Luma constant expression."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    return "{ " + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + " }"


# ------------------------------------------------------------------------------ generation


def draw_type(data: st.DataObject, world: World, depth: int) -> T:
    choices = ["string", "int", "float", "bool", "any", "enum"]
    if depth > 0:
        choices += ["list", "map"]
    named = list(world.schemas) + list(world.unions)
    if named:
        choices += ["named"]
    kind = data.draw(st.sampled_from(choices))
    if kind == "enum":
        values = data.draw(st.lists(st.sampled_from(["add", "multiply", "open", "x y", "é"]),
                                    min_size=1, max_size=3, unique=True))
        return T("enum", values=tuple(values))
    if kind in ("list", "map"):
        return T(kind, item=draw_type(data, world, depth - 1))
    if kind == "named":
        return T("named", name=data.draw(st.sampled_from(named)))
    return T("prim", name=kind)


def draw_field(data: st.DataObject, world: World, name: str, depth: int,
               t: T | None = None) -> F:
    forced = t is not None
    t = t or draw_type(data, world, depth)
    f = F(name, t, optional=data.draw(st.booleans()))
    rule = "rule" if forced else data.draw(st.sampled_from(["none", "rule"]))
    if rule == "rule":
        if t.kind == "prim" and t.name == "int":
            low = data.draw(st.none() | st.integers(-50, 50))
            high = data.draw(st.none() | st.integers(low if low is not None else -50, 60))
            f.range = (low, high)
        elif t.kind == "prim" and t.name == "float":
            low = data.draw(st.none() | st.floats(-100, 100).map(lambda v: round(v, 2)))
            high = data.draw(st.none() | st.floats(low if low is not None else -100, 200)
                             .map(lambda v: round(v, 2)))
            f.range = (low, None if high is None or (low is not None and high < low) else high)
        elif t.kind == "prim" and t.name == "string":
            which = data.draw(st.sampled_from(["length", "pattern", "format"]))
            if which == "length":
                low = data.draw(st.none() | st.integers(0, 3))
                f.length = (low, data.draw(st.none() | st.integers(low or 0, 6)))
            elif which == "pattern":
                f.pattern = data.draw(st.sampled_from(PATTERNS))
            else:
                f.format = data.draw(st.sampled_from(sorted(FORMATS)))
        elif t.kind == "list":
            low = data.draw(st.none() | st.integers(0, 2))
            f.length = (low, data.draw(st.none() | st.integers(max(low or 0, 1), 3)))
        if f.range or f.length or f.pattern or f.format:
            f.soft = data.draw(st.booleans())
    if data.draw(st.integers(0, 3)) == 0:
        f.has_default = True
        f.default = draw_value(data, world, t, f, depth=1, printable=True)
    return f


def draw_world(data: st.DataObject) -> World:
    world = World()
    for i in range(data.draw(st.integers(0, 3))):
        names = data.draw(st.lists(st.sampled_from(FIELD_NAMES), max_size=4, unique=True))
        world.schemas[f"S{i}"] = [draw_field(data, world, n, depth=1) for n in names]
        if i >= 1 and data.draw(st.booleans()):
            members = data.draw(st.lists(st.sampled_from(list(world.schemas)), min_size=1,
                                         max_size=3, unique=True))
            world.unions[f"U{i}"] = members
    names = data.draw(st.lists(st.sampled_from(FIELD_NAMES), min_size=1, max_size=5, unique=True))
    world.schemas["Root"] = [draw_field(data, world, n, depth=2) for n in names]
    return world


JSON_LEAVES = st.none() | st.booleans() | st.integers(-10, 10) | st.text(LETTERS, max_size=3)
JSON_VALUES = st.recursive(JSON_LEAVES, lambda inner: st.lists(inner, max_size=2)
                           | st.dictionaries(st.text(LETTERS, max_size=2), inner, max_size=2),
                           max_leaves=4)


def draw_value(data: st.DataObject, world: World, t: T, f: F | None, depth: int,
               printable: bool = False) -> Any:
    """A value that fits ``t`` and the rules of ``f`` (when ``t`` is that field's own type)."""
    if t.kind == "prim":
        if t.name == "string":
            if f is not None and f.pattern is not None:
                return data.draw(st.from_regex(f.pattern[0], fullmatch=True))
            if f is not None and f.format is not None:
                return data.draw(st.sampled_from(FORMATS[f.format][0]))
            low, high = f.length if f is not None and f.length else (None, None)
            alphabet = LETTERS if printable else st.characters(blacklist_categories=("Cs",))
            return data.draw(st.text(alphabet, min_size=low or 0,
                                     max_size=high if high is not None else 8))
        if t.name == "int":
            low, high = f.range if f is not None and f.range else (None, None)
            n = data.draw(st.integers(low if low is not None else -10**6,
                                      high if high is not None else 10**6))
            # a whole float is an int too (LANGUAGE.md §2)
            return float(n) if not printable and data.draw(st.integers(0, 4)) == 0 else n
        if t.name == "float":
            low, high = f.range if f is not None and f.range else (None, None)
            floats = st.floats(low, high, allow_nan=False, allow_infinity=False)
            whole_low = math.ceil(low) if low is not None else -1000
            whole_high = math.floor(high) if high is not None else 1000
            if whole_low <= whole_high:  # an int is a valid float
                return data.draw(floats | st.integers(whole_low, whole_high))
            return data.draw(floats)
        if t.name == "bool":
            return data.draw(st.booleans())
        return data.draw(JSON_VALUES)
    if t.kind == "enum":
        return data.draw(st.sampled_from(t.values))
    if t.kind == "list":
        assert t.item is not None
        low, high = f.length if f is not None and f.length else (None, None)
        top = high if high is not None else max(low or 0, 2 if depth else 0)
        size = data.draw(st.integers(low or 0, top))
        return [draw_value(data, world, t.item, None, depth - 1, printable) for _ in range(size)]
    if t.kind == "map":
        assert t.item is not None
        keys = data.draw(st.lists(st.text(LETTERS, min_size=1, max_size=3), unique=True,
                                  max_size=2 if depth else 0))
        return {k: draw_value(data, world, t.item, None, depth - 1, printable) for k in keys}
    if t.name in world.unions:
        member = data.draw(st.sampled_from(world.unions[t.name]))
        return {TAG: member, **draw_object(data, world, member, depth, printable)}
    return draw_object(data, world, t.name, depth, printable)


def draw_object(data: st.DataObject, world: World, name: str, depth: int,
                printable: bool) -> dict[str, Any]:
    out = {}
    for f in world.schemas[name]:
        if f.required or data.draw(st.booleans()):
            out[f.name] = draw_value(data, world, f.type, f, max(depth - 1, 0), printable)
    return out


# -------------------------------------------------------------------------------- breaking


@dataclass
class Break:
    value: Any
    soft: bool  # only a soft rule was broken
    reference_agrees: bool = True  # jsonschema sees the same break (formats: its checks differ)


def wrong_type(t: T, world: World) -> Any:
    if t.kind == "prim":
        return {"string": 1, "int": "1", "float": "1.5", "bool": 0}.get(t.name)
    if t.kind == "enum":
        return "not-a-member" if "not-a-member" not in t.values else 7
    if t.kind == "list":
        return {"not": "a list"}
    if t.kind == "map":
        return [1]
    return "not an object"


def break_value(data: st.DataObject, world: World, t: T, f: F | None, value: Any,
                rules_only: bool = False) -> Break | None:
    """``value`` with one rule of ``t`` (or of field ``f``) broken, or None if nothing breaks."""
    options: list[str] = []
    if not (t.kind == "prim" and t.name == "any") and not rules_only:
        options.append("type")
    if f is not None and f.range is not None and (f.range[0] is not None or f.range[1] is not None):
        options.append("range")
    if f is not None and f.length is not None and (f.length[1] is not None or (f.length[0] or 0) > 0):
        options.append("length")
    if f is not None and (f.pattern or f.format):
        options.append("pattern")
    if t.kind == "list" and value and not rules_only:
        options.append("item")
    if t.kind == "map" and value and not rules_only:
        options.append("entry")
    if t.kind == "named" and not rules_only:
        options += ["object"]
    if not options:
        return None
    # a wrong type is the easy break; give the specific rules more turns
    how = data.draw(st.sampled_from(options + [o for o in options if o != "type"] * 3))
    event(f"break {how}")
    soft = f is not None and f.soft
    if how == "type":
        if t.kind == "named" and t.name in world.unions and isinstance(value, dict):
            return Break({k: v for k, v in value.items() if k != TAG}, soft=False)
        return Break(wrong_type(t, world), soft=False)
    assert f is not None or how in ("item", "entry", "object")
    if how == "range":
        assert f is not None and f.range is not None
        low, high = f.range
        return Break(high + 1 if high is not None else low - 1, soft)
    if how == "length":
        assert f is not None and f.length is not None
        low, high = f.length
        n = high + 1 if high is not None else (low or 0) - 1
        filler = draw_value(data, world, t.item, None, 0) if t.kind == "list" and t.item else "a"
        return Break([filler] * n if t.kind == "list" else "a" * n, soft)
    if how == "pattern":
        assert f is not None
        bad = f.pattern[1] if f.pattern else FORMATS[f.format or ""][1]
        return Break(bad, soft, reference_agrees=f.pattern is not None)
    if how in ("item", "entry"):
        assert t.item is not None
        keys = list(range(len(value))) if how == "item" else list(value)
        key = data.draw(st.sampled_from(keys))
        inner = break_value(data, world, t.item, None, value[key])
        if inner is None:
            return None
        copy = list(value) if how == "item" else dict(value)
        copy[key] = inner.value
        return Break(copy, inner.soft, inner.reference_agrees)
    return break_object(data, world, t.name, value)


def break_object(data: st.DataObject, world: World, name: str, value: Any) -> Break | None:
    if not isinstance(value, dict):
        return None
    if name in world.unions:
        action = data.draw(st.sampled_from(["tag", "member"]))
        if action == "tag":
            return Break({**value, TAG: data.draw(st.sampled_from(["Nope", None, 3]))}, False)
        return break_object(data, world, value[TAG], value)
    fields = world.schemas[name]
    actions = [f"field:{f.name}" for f in fields if f.name in value] * 4
    actions += [f"drop:{f.name}" for f in fields if f.required] + ["unknown"]
    action = data.draw(st.sampled_from(actions))
    event(f"object {action.split(':')[0]}")
    if action == "unknown":
        return Break({**value, "zz_unknown": 1}, False)
    verb, fname = action.split(":")
    if verb == "drop":
        return Break({k: v for k, v in value.items() if k != fname}, False)
    f = next(f for f in fields if f.name == fname)
    inner = break_value(data, world, f.type, f, value[fname])
    if inner is None:
        return None
    return Break({**value, fname: inner.value}, inner.soft, inner.reference_agrees)


# ------------------------------------------------------------------------------ properties


def compile_world(world: World) -> SchemaCompiler:
    text = world.source()
    program, diagnostics = parse_text(text)
    assert program is not None and not diagnostics, (text, diagnostics)
    return SchemaCompiler(program)


def reference_valid(schema: dict[str, Any], value: Any) -> bool:
    checker = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    return bool(checker.is_valid(value))


PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


@PROPERTY
@given(st.data())
def test_generated_schemas_pass_the_metaschema(data: st.DataObject) -> None:
    c = compile_world(draw_world(data))
    jsonschema.Draft202012Validator.check_schema(c.document())
    for name in c.definitions():
        jsonschema.Draft202012Validator.check_schema(c.standalone(name))


@PROPERTY
@given(st.data())
def test_values_that_fit_validate_and_broken_ones_do_not(data: st.DataObject) -> None:
    world = draw_world(data)
    c = compile_world(world)
    root_type = T("named", name="Root")
    schema = c.standalone("Root")
    value = draw_value(data, world, root_type, None, depth=2)

    assert validate(schema, value) == [], (world.source(), value)
    assert reference_valid(schema, value), (world.source(), value)
    filled, violations = validate_and_fill(schema, value, soft_rules=False)
    assert violations == []
    assert validate(schema, filled) == []
    assert reference_valid(schema, filled)
    assert set(filled) == set(value) | {f.name for f in world.schemas["Root"] if f.has_default}

    broken = break_object(data, world, "Root", value)
    event("broken: " + ("none" if broken is None else "soft" if broken.soft else "hard"))
    if broken is None:
        return
    found = validate(schema, broken.value)
    assert found, (world.source(), broken.value)
    assert all(v.message and "\n" not in v.message for v in found)
    hard = [v for v in found if not v.soft]
    if broken.soft:
        assert hard == [], (world.source(), broken.value, found)
        assert [v for v in validate(schema, broken.value, soft_rules=False) if not v.soft]
    else:
        assert hard, (world.source(), broken.value, found)
        _, filled_violations = validate_and_fill(schema, broken.value, soft_rules=True)
        assert [v for v in filled_violations if not v.soft]
    if broken.reference_agrees:
        assert not reference_valid(schema, broken.value), (world.source(), broken.value)


@PROPERTY
@given(st.data())
def test_field_types_validate_alone(data: st.DataObject) -> None:
    world = draw_world(data)
    c = compile_world(world)
    program = c.program
    root = next(d for d in program.schemas if d.name == "Root")
    for f_ast, f in zip(root.fields, world.schemas["Root"]):  # type: ignore[union-attr]
        schema = c.standalone(f_ast.type)
        jsonschema.Draft202012Validator.check_schema(schema)
        value = draw_value(data, world, f.type, None, depth=2)
        assert validate(schema, value) == []
        assert reference_valid(schema, value)


RULED_TYPES = [T("prim", name="int"), T("prim", name="float"), T("prim", name="string"),
               T("list", item=T("prim", name="int")), T("list", item=T("enum", values=("a",)))]


@PROPERTY
@given(st.data())
def test_each_annotation_rule_is_enforced(data: st.DataObject) -> None:
    world = World()
    f = draw_field(data, world, "v", depth=1, t=data.draw(st.sampled_from(RULED_TYPES)))
    f.optional, f.has_default = False, False
    world.schemas["Root"] = [f]
    schema = compile_world(world).standalone("Root")
    value = draw_value(data, world, f.type, f, depth=1)
    assert validate(schema, {"v": value}) == [], (world.source(), value)
    assert reference_valid(schema, {"v": value})
    broken = break_value(data, world, f.type, f, value, rules_only=True)
    if broken is None:
        return
    found = validate(schema, {"v": broken.value})
    assert len(found) == 1 and found[0].soft == f.soft, (world.source(), broken.value, found)
    assert found[0].rule in ("range", "length", "pattern", "format")
    assert found[0].path == "v"
    hard = validate(schema, {"v": broken.value}, soft_rules=False)
    assert [v.soft for v in hard] == [False]
    if broken.reference_agrees:
        assert not reference_valid(schema, {"v": broken.value})


def test_patterns_used_here_behave_as_declared() -> None:
    for regex, bad in PATTERNS:
        assert re.fullmatch(regex, bad) is None
