"""Value synthesis for the offline model (MODELS.md §4): what each annotation gives, and a
property test that a synthesized value always validates against its schema."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from luma.check.checker import check_program
from luma.models.seen import Seen
from luma.models.synthesize import string_for_pattern, synthesize
from luma.schema.compile import SchemaCompiler
from luma.schema.formats import FORMAT_CHECKS
from luma.schema.validate import validate
from luma.syntax import ast
from luma.syntax.parse import parse_text


def compiled(source: str, root: str = "T") -> dict:
    program, diagnostics = parse_text(source, "s.luma")
    assert program is not None and not diagnostics, [d.message for d in diagnostics]
    return SchemaCompiler(program).standalone(root)


def one(field: str, extra: str = "") -> object:
    """The synthesized value of a single field ``v`` of schema ``T``."""
    schema = compiled(extra + f"schema T {{ v: {field} }}")
    value = synthesize(schema)
    assert validate(schema, value) == []
    return value["v"]


@pytest.mark.parametrize("field, expected", [
    ("string", "v"),
    ("int", 1),
    ("float", 1.0),
    ("bool", True),
    ("any", "v"),
    ('enum["open", "shipped"]', "open"),
    ("int[]", [1]),
    ("map[string]", {}),
    ('string @example("o-100") @example("o-200")', "o-100"),
    ('enum["a", "b"] @example("b")', "b"),
    ("int @range(5, 10)", 5),
    ("int @range(null, -4)", -4),
    ("float @range(0.5, 0.75)", 0.75),
    ("float @range(-10, -2)", -2.0),
    ("string @length(3, 5)", "vvv"),
    ("string @length(0, 0)", ""),
    ("int[] @length(2, null)", [1, 1]),
    ("int[] @length(0, 0)", []),
    ('string @format("email")', "v@example.com"),
    ('string @format("uri")', "https://example.com/v"),
    ('string @format("date")', "2024-01-01"),
    ('string @format("date-time")', "2024-01-01T00:00:00Z"),
    ('string @pattern("[A-Z]{2}-[0-9]{3}")', "AA-000"),
    ('string @pattern("(ab|cd)+x?") @length(4, 6)', "ababx"),
    ('string @format("email") @length(0, 6)', "a@b.co"),
])
def test_each_annotation_is_honoured(field, expected):
    assert one(field) == expected


def test_a_default_is_taken_where_the_value_must_be_present():
    assert synthesize({"type": "string", "default": "fallback"}) == "fallback"
    assert synthesize({"type": "integer", "default": 7, "minimum": 10}) == 10   # 7 does not fit


def test_a_uuid_is_valid_and_stable():
    first = one('string @format("uuid")')
    assert FORMAT_CHECKS["uuid"](first) and one('string @format("uuid")') == first


def test_objects_hold_only_required_fields():
    schema = compiled("""
schema T {
  id: string
  note?: string
  tags: string[] @default([])
  inner: Inner
}
schema Inner { qty: int @range(2, 9), label?: string }
""")
    assert synthesize(schema) == {"id": "id", "inner": {"qty": 2}}


def test_a_tagged_union_takes_its_first_member_with_the_tag_written():
    schema = compiled("""
schema Invoice { invoice_number: string }
schema Receipt { reference: string }
schema Document = Invoice | Receipt tagged by kind
""", "Document")
    assert synthesize(schema) == {"kind": "Invoice", "invoice_number": "invoice_number"}


def test_a_recursive_schema_ends():
    schema = compiled("schema T { name: string, children: T[] }")
    value = synthesize(schema)
    assert validate(schema, value) == []
    depth = 0
    while value["children"]:
        value = value["children"][0]
        depth += 1
    assert 0 < depth < 20


def test_the_name_given_is_used_for_a_bare_string():
    assert synthesize({"type": "string"}, "title") == "title"
    assert synthesize({"type": "string"}) == "value"


@pytest.mark.parametrize("pattern", [
    r"\d{3}-\d{4}", r"[^a-z]+", r"(?i)ab(c|d)\1", r"[\w.]+@[\w]+\.com", r"(x)?(?(1)y|z)",
    r"a{2,4}b*?", r"\s\S\W",
])
def test_strings_for_patterns_match_them(pattern):
    import re

    text = string_for_pattern(pattern)
    assert text is not None and re.fullmatch(pattern, text), (pattern, text)


# ------------------------------------------------------------------------ property test


IDENT = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True).filter(
    lambda s: s not in {"schema", "tool", "model", "agent", "fn", "if", "else", "for", "in",
                        "return", "try", "catch", "throw", "ask", "using", "tagged", "by",
                        "needs", "enum", "map", "true", "false", "null", "and", "or", "not",
                        "string", "int", "float", "bool", "any", "kind"})
PATTERNS = [r"[a-z]+", r"[A-Z]{2}-\d{3}", r"(yes|no)", r"\w+@\w+\.org", r"[0-9a-f]{8}",
            r"a(b|c)*d"]
FORMATS = ["email", "uri", "date", "date-time", "uuid"]


def j(value: object) -> str:
    return json.dumps(value)


@st.composite
def number_annotations(draw: st.DrawFn, integer: bool) -> str:
    parts = []
    if draw(st.booleans()):
        values = st.integers(-1000, 1000) if integer else st.floats(
            -1e6, 1e6, allow_nan=False, allow_infinity=False).map(lambda f: round(f, 3))
        low = draw(st.none() | values)
        high = draw(st.none() | values)
        if low is not None and high is not None and low > high:
            low, high = high, low
        parts.append(f"@range({j(low)}, {j(high)})")
    return " ".join(parts)


@st.composite
def string_annotations(draw: st.DrawFn) -> str:
    choice = draw(st.sampled_from(["none", "length", "format", "pattern"]))
    parts = []
    if choice == "length":
        low = draw(st.integers(0, 12))
        high = draw(st.none() | st.integers(low, 40))
        parts.append(f"@length({low}, {j(high)})")
    elif choice == "format":
        parts.append(f"@format({j(draw(st.sampled_from(FORMATS)))})")
    elif choice == "pattern":
        parts.append(f"@pattern({j(draw(st.sampled_from(PATTERNS)))})")
    if draw(st.booleans()):
        parts.append('@severity("soft")')
    if draw(st.booleans()):
        parts.append(f"@desc({j(draw(IDENT))})")
    return " ".join(parts)


@st.composite
def type_text(draw: st.DrawFn, schemas: list[str], depth: int = 0) -> tuple[str, str]:
    """A type and annotations that fit it."""
    kinds = ["string", "int", "float", "bool", "any", "enum"]
    if depth < 2:
        kinds += ["list", "map"]
    if schemas:
        kinds += ["named", "named"]
    kind = draw(st.sampled_from(kinds))
    if kind == "string":
        return "string", draw(string_annotations())
    if kind in ("int", "float"):
        return kind, draw(number_annotations(kind == "int"))
    if kind == "enum":
        values = draw(st.lists(IDENT, min_size=1, max_size=4, unique=True))
        return "enum[" + ", ".join(j(v) for v in values) + "]", ""
    if kind == "list":
        item, _ = draw(type_text(schemas, depth + 1))
        note = ""
        if draw(st.booleans()):
            low = draw(st.integers(0, 3))
            note = f"@length({low}, {j(draw(st.none() | st.integers(low, 5)))})"
        return item + "[]", note
    if kind == "map":
        value, _ = draw(type_text(schemas, depth + 1))
        return f"map[{value}]", ""
    if kind == "named":
        return draw(st.sampled_from(schemas)), ""
    return kind, ""


@st.composite
def programs(draw: st.DrawFn) -> tuple[str, str]:
    """Source text with a few schemas (and maybe a tagged union), and the root type."""
    names: list[str] = []
    objects: list[str] = []
    lines = []
    for i in range(draw(st.integers(1, 4))):
        name = f"S{i}"
        fields = draw(st.lists(IDENT, min_size=0, max_size=5, unique=True))
        body = []
        for field in fields:
            type_, notes = draw(type_text(names))
            optional = "?" if draw(st.integers(0, 3)) == 0 else ""
            body.append(f"  {field}{optional}: {type_} {notes}".rstrip())
        lines.append(f"schema {name} {{\n" + "\n".join(body) + "\n}")
        names.append(name)
        objects.append(name)
    if len(objects) >= 2 and draw(st.booleans()):
        members = draw(st.lists(st.sampled_from(objects), min_size=2, max_size=3, unique=True))
        lines.append(f"schema U = {' | '.join(members)} tagged by kind")
        names.append("U")
    root, _ = draw(type_text(names))
    return "\n".join(lines), root


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_a_synthesized_value_always_validates(case):
    source, root = case
    text = source + f'\ntool probe(v: {root}) -> S0 {{\n  description: "Probe."\n}}\n'
    program, diagnostics = parse_text(text, "p.luma")
    assert program is not None and not diagnostics, ([d.message for d in diagnostics], text)
    errors = [d.message for d in check_program(program) if d.is_error]
    assert not errors, (errors, text)
    (tool,) = program.tools
    returns: ast.TypeExpr = tool.params[0].type
    schema = SchemaCompiler(program).standalone(returns)
    value = synthesize(schema)
    assert validate(schema, value) == [], (text, value)
    assert synthesize(schema) == value    # the same every time


# -------------------------------------------------------------------- what the model saw

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6)
    | st.floats(allow_nan=False, allow_infinity=False, width=32) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(IDENT, inner, max_size=3),
    max_leaves=8)


@st.composite
def conversations(draw: st.DrawFn, names: list[str]) -> Seen:
    """Tool results and a prompt whose keys are mostly the program's own field names."""
    keys = st.sampled_from(names) | IDENT if names else IDENT
    results = [json.dumps(draw(st.dictionaries(keys, JSON_VALUES, max_size=4)))
               for _ in range(draw(st.integers(0, 2)))]
    lines = [f"{draw(keys)}: {draw(st.text(max_size=10) | st.integers().map(str))}"
             for _ in range(draw(st.integers(0, 3)))]
    lines.append(" ".join(str(draw(st.integers(-1000, 1000) | st.floats(-1e3, 1e3)))
                          for _ in range(draw(st.integers(0, 4)))))
    return Seen.of(results, "\n".join(lines))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.data())
def test_a_value_made_from_what_was_seen_always_validates(case, data):
    source, root = case
    text = source + f'\ntool probe(v: {root}) -> S0 {{\n  description: "Probe."\n}}\n'
    program, _ = parse_text(text, "p.luma")
    assert program is not None
    names = sorted({f.name for s in program.schemas for f in getattr(s, "fields", ())})
    seen = data.draw(conversations(names))
    schema = SchemaCompiler(program).standalone(program.tools[0].params[0].type)
    wrapped = {"type": "object", "properties": {"v": schema}, "required": ["v"],
               "additionalProperties": False, "$defs": schema.get("$defs", {})}
    value = synthesize(wrapped, seen=seen)
    assert validate(wrapped, value) == [], (text, seen, value)
    assert synthesize(wrapped, seen=seen) == value    # the same every time


def _answer(source: str, results: list[object], prompt: str) -> object:
    seen = Seen.of([json.dumps(r) for r in results], prompt)
    return synthesize(compiled(source), seen=seen)


def test_a_field_takes_the_value_a_tool_returned_under_its_name():
    source = "schema T { words: int, city: string, note?: string }"
    assert _answer(source, [{"words": 7, "city": "Oslo", "note": "x"}], "") == {
        "words": 7, "city": "Oslo"}


def test_the_latest_tool_result_comes_first_and_nested_fields_count():
    source = "schema T { words: int }"
    assert _answer(source, [{"stats": {"words": 9}}, {"words": 3}], "") == {"words": 9}


def test_a_value_of_the_wrong_type_or_out_of_range_is_not_taken():
    source = "schema T { words: int @range(0, 10), city: string }"
    assert _answer(source, [{"words": 11, "city": 5}, {"words": "many"}], "") == {
        "words": 1, "city": "city"}


def test_a_word_of_the_description_names_the_value():
    source = 'schema T { sum: float @desc("The result of the addition") }'
    assert _answer(source, [{"result": 42}], "") == {"sum": 42.0}


def test_the_prompt_gives_labelled_values_interpolated_json_and_numbers_in_order():
    source = "schema T { text: string, words: int, a: float, b: float, c: int }"
    prompt = ('The text is: Luma keeps contracts\nStats: {"words": 3}.\n'
              "Add 20 and 22.5, then 7.")
    assert _answer(source, [], prompt) == {
        "text": "Luma keeps contracts", "words": 3, "a": 20.0, "b": 22.5, "c": 7}


def test_a_prompt_number_that_does_not_fit_is_left_for_another_field():
    source = "schema T { n: int @range(10, 20), m: int }"
    assert _answer(source, [], "Between 5 and 15") == {"n": 15, "m": 5}


def test_tool_results_win_over_the_prompt():
    source = "schema T { words: int }"
    assert _answer(source, [{"words": 5}], "words: 2") == {"words": 5}


def test_const_and_enum_still_decide():
    source = 'schema T { status: enum["open", "done"], n: int @range(3, 3) }'
    assert _answer(source, [{"status": "closed", "n": 4}], "9") == {"status": "open", "n": 3}


def test_a_prompt_full_of_brackets_is_read_quickly():
    import time

    start = time.perf_counter()
    seen = Seen.of([], "[" * 50_000 + ' {"words": 4} and 7')
    assert time.perf_counter() - start < 2.0
    # Only so many brackets are tried as the start of JSON; past them, numbers are numbers.
    assert (seen.named, seen.numbers) == ({}, (4, 7))
    assert Seen.of([], '[1, 2] {"words": 4} and 7').named == {"words": (4,)}
