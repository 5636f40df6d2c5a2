"""Luma types → JSON Schema, and validation against it: exact schemas, messages, defaults."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from luma.schema import (
    SchemaCompiler,
    SchemaError,
    Violation,
    constant_value,
    format_violations,
    validate,
    validate_and_fill,
    validator_for,
)
from luma.check import check_program
from luma.schema.formats import FORMAT_CHECKS
from luma.syntax import ast
from luma.syntax.parse import parse_text

ROOT = Path(__file__).parent.parent
DRAFT = "https://json-schema.org/draft/2020-12/schema"


def compiler(src: str) -> SchemaCompiler:
    program, diagnostics = parse_text(src)
    assert program is not None, diagnostics
    assert not diagnostics, diagnostics
    return SchemaCompiler(program)


def field_of(decl: str) -> tuple[SchemaCompiler, ast.Field]:
    c = compiler(f"schema S {{ {decl} }}")
    schema = c.program.schemas[0]
    assert isinstance(schema, ast.SchemaDecl)
    return c, schema.fields[0]


def fs(decl: str) -> dict[str, Any]:
    c, f = field_of(decl)
    return c.field_schema(f)


def messages(violations: list[Violation]) -> list[str]:
    return [v.render() for v in violations]


CALC = """
schema CalcResult { result: float }
tool calculate(
  a: float @range(0, 1000000),
  b: float @range(0, 1000000),
  operation: enum["add", "multiply"] @desc("The operation to perform"),
  limit?: int @default(10) @range(1, 100),
  verbose?: bool
) -> CalcResult {
  description: "Add or multiply two numbers."
}
"""

UNION = """
schema Line { sku: string, qty: int @range(1, null) @default(1) }
schema Invoice { invoice_number: string, lines: Line[] @default([]) }
schema Receipt { reference: string }
schema Document = Invoice | Receipt tagged by kind
tool classify(text: string) -> Document {}
tool file(doc: Document, docs?: Document[]) -> Document {}
"""


# ------------------------------------------------------------------------------- types


@pytest.mark.parametrize("type_text, expected", [
    ("string", {"type": "string"}),
    ("int", {"type": "integer"}),
    ("float", {"type": "number"}),
    ("bool", {"type": "boolean"}),
    ("any", {}),
    ('enum["a", "b"]', {"type": "string", "enum": ["a", "b"]}),
    ("int[]", {"type": "array", "items": {"type": "integer"}}),
    ("string[][]", {"type": "array", "items": {"type": "array", "items": {"type": "string"}}}),
    ("map[float]", {"type": "object", "additionalProperties": {"type": "number"}}),
    ("map[S[]]", {"type": "object",
                  "additionalProperties": {"type": "array", "items": {"$ref": "#/$defs/S"}}}),
    ("S", {"$ref": "#/$defs/S"}),
])
def test_type_schemas(type_text: str, expected: dict[str, Any]) -> None:
    c, f = field_of(f"x: {type_text}")
    assert c.type_schema(f.type) == expected
    assert c.field_schema(f) == expected


@pytest.mark.parametrize("decl, expected", [
    ('x: string @desc("The name")', {"type": "string", "description": "The name"}),
    ("x: int @default(3)", {"type": "integer", "default": 3}),
    ("x: string[] @default([])", {"type": "array", "items": {"type": "string"}, "default": []}),
    ('x: map[int] @default({ a: 1, "b-c": -2 })',
     {"type": "object", "additionalProperties": {"type": "integer"},
      "default": {"a": 1, "b-c": -2}}),
    ("x: float @range(0, 1000000)", {"type": "number", "minimum": 0, "maximum": 1000000}),
    ("x: float @range(-0.5, null)", {"type": "number", "minimum": -0.5}),
    ("x: int @range(null, 10)", {"type": "integer", "maximum": 10}),
    ("x: string @length(0, 500)", {"type": "string", "minLength": 0, "maxLength": 500}),
    ("x: int[] @length(1, null)", {"type": "array", "items": {"type": "integer"}, "minItems": 1}),
    ('x: string @pattern("[a-z]+")',
     {"type": "string", "pattern": "^(?:[a-z]+)$", "x-luma-pattern": "[a-z]+"}),
    ('x: string @pattern("(?i)ab|c")',
     {"type": "string", "pattern": "(?i)^(?:ab|c)$", "x-luma-pattern": "(?i)ab|c"}),
    ('x: string @format("email")', {"type": "string", "format": "email"}),
    ('x: int @example(4) @example(5)', {"type": "integer", "examples": [4, 5]}),
    ('x: S @desc("d") @example({ a: "b" })',
     {"$ref": "#/$defs/S", "description": "d", "examples": [{"a": "b"}]}),
    ('x: int @range(0, 100) @severity("soft")',
     {"type": "integer", "minimum": 0, "maximum": 100, "x-luma-severity": "soft"}),
    ('x: int @range(0, 100) @severity("hard")', {"type": "integer", "minimum": 0, "maximum": 100}),
    ('x: string @desc("braces {stay} literal")',
     {"type": "string", "description": "braces {stay} literal"}),
])
def test_annotation_schemas(decl: str, expected: dict[str, Any]) -> None:
    assert fs(decl) == expected


def test_object_schema_is_closed_and_lists_required_fields() -> None:
    c = compiler("""
    schema Order {
      id: string
      note?: string
      tags: string[] @default([])
      limit?: int @default(10)
    }""")
    assert c.schema_def("Order") == {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "note": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}, "default": []},
            "limit": {"type": "integer", "default": 10},
        },
        "required": ["id"],
        "additionalProperties": False,
    }


def test_tool_input_schema_with_defaults() -> None:
    c = compiler(CALC)
    tool = c.program.tools[0]
    expected = {
        "type": "object",
        "properties": {
            "a": {"type": "number", "minimum": 0, "maximum": 1000000},
            "b": {"type": "number", "minimum": 0, "maximum": 1000000},
            "operation": {"type": "string", "enum": ["add", "multiply"],
                          "description": "The operation to perform"},
            "limit": {"type": "integer", "default": 10, "minimum": 1, "maximum": 100},
            "verbose": {"type": "boolean"},
        },
        "required": ["a", "b", "operation"],
        "additionalProperties": False,
    }
    assert c.tool_input_schema(tool) == expected
    assert c.schema_def("__tool_calculate_input") == expected
    assert list(c.definitions()) == ["CalcResult", "__tool_calculate_input"]


def test_union_schema() -> None:
    c = compiler("""
    schema Invoice { invoice_number: string }
    schema Receipt { reference: string, note?: string }
    schema Document = Invoice | Receipt tagged by kind
    """)
    assert c.schema_def("Document") == {
        "type": "object",
        "x-luma-tag": "kind",
        "oneOf": [
            {"type": "object",
             "properties": {"kind": {"const": "Invoice"}, "invoice_number": {"type": "string"}},
             "required": ["kind", "invoice_number"], "additionalProperties": False},
            {"type": "object",
             "properties": {"kind": {"const": "Receipt"}, "reference": {"type": "string"},
                            "note": {"type": "string"}},
             "required": ["kind", "reference"], "additionalProperties": False},
        ],
    }


def test_document_and_standalone() -> None:
    c = compiler(UNION + "schema Unused { x: int }\nschema Tree { children: Tree[], label: string }")
    doc = c.document()
    assert doc["$schema"] == DRAFT
    assert list(doc["$defs"]) == ["Line", "Invoice", "Receipt", "Document",
                                  "__tool_classify_input", "__tool_file_input", "Unused", "Tree"]
    # a named schema is inlined at the root; only what it reaches goes into $defs
    doc_alone = c.standalone("Document")
    assert doc_alone["$schema"] == DRAFT
    assert doc_alone["x-luma-tag"] == "kind"
    assert set(doc_alone["$defs"]) == {"Line"}
    listed = c.standalone(ast.ListType(ast.NamedType("Document", _SPAN), _SPAN))
    assert listed["items"] == {"$ref": "#/$defs/Document"}
    assert set(listed["$defs"]) == {"Document", "Line"}
    assert c.standalone(ast.PrimitiveType("int", _SPAN)) == {"$schema": DRAFT, "type": "integer"}
    tree = c.standalone(ast.NamedType("Tree", _SPAN))
    assert set(tree["$defs"]) == {"Tree"}  # recursion keeps its own definition
    assert validate(tree, {"label": "a", "children": [{"label": "b", "children": []}]}) == []
    assert messages(validate(tree, {"label": "a", "children": [{"label": 1, "children": []}]})) \
        == ["children[0].label: expected string, got int"]
    with pytest.raises(KeyError):
        c.schema_def("Nope")


_SPAN = parse_text("schema S { x: int }")[0].span  # type: ignore[union-attr]


def test_returned_schemas_are_fresh() -> None:
    c = compiler(CALC)
    first = c.schema_def("__tool_calculate_input")
    first["properties"].clear()
    assert c.schema_def("__tool_calculate_input")["properties"]


# ------------------------------------------------------------------------------ values


@pytest.mark.parametrize("text, expected", [
    ("null", (True, None)),
    ("true", (True, True)),
    ("-7", (True, -7)),
    ("-0.25", (True, -0.25)),
    ("1e6", (True, 1e6)),
    ('"a {x} b"', (True, "a {x} b")),
    ('[1, "two", [null]]', (True, [1, "two", [None]])),
    ('{ a: 1, "b-c": { d: [] } }', (True, {"a": 1, "b-c": {"d": []}})),
    ("x", (False, None)),
    ("[1, x]", (False, None)),
    ("{ a: 1 + 2 }", (False, None)),
    ("-x", (False, None)),
])
def test_constant_value(text: str, expected: tuple[bool, Any]) -> None:
    program, diagnostics = parse_text(f"x = {text}")
    assert program is not None and not diagnostics
    stmt = program.statements[0]
    assert isinstance(stmt, ast.Assign)
    assert constant_value(stmt.value) == expected


# --------------------------------------------------------------------------- validation


def calc_input() -> dict[str, Any]:
    return compiler(CALC).standalone("__tool_calculate_input")


def test_valid_input_has_no_violations() -> None:
    assert validate(calc_input(), {"a": 2, "b": 3.5, "operation": "add"}) == []


def test_every_violation_is_listed_with_exact_messages() -> None:
    violations = validate(calc_input(), {"a": 2000000, "b": "3", "operation": "x", "z": 1,
                                         "limit": 0, "verbose": 1})
    assert messages(violations) == [
        "a: 2000000 is greater than the maximum of 1000000",
        "b: expected float, got string",
        "operation: 'x' is not one of 'add', 'multiply'",
        "limit: 0 is less than the minimum of 1",
        "verbose: expected bool, got int",
        "unknown field 'z'",
    ]
    assert [v.rule for v in violations] == ["range", "type", "enum", "range", "type",
                                            "unknown_field"]
    assert not any(v.soft for v in violations)


def test_missing_required_fields() -> None:
    violations = validate(calc_input(), {"b": 1})
    assert messages(violations) == ["missing required field 'a'",
                                    "missing required field 'operation'"]
    assert violations[0] == Violation("", "missing required field 'a'", "required", False)


def test_format_violations_prefix() -> None:
    violations = validate(calc_input(), {"a": 2000000, "operation": "add"})
    assert format_violations("calculate.input", violations) == (
        "calculate.input.a: 2000000 is greater than the maximum of 1000000; "
        "calculate.input: missing required field 'b'")


def test_paths_for_lists_and_maps() -> None:
    c = compiler("""
    schema Item { qty: int @range(1, 5) }
    schema Cart { items: Item[], meta: map[int] }
    """)
    violations = validate(c.standalone("Cart"), {
        "items": [{"qty": 1}, {"qty": 2}, {"qty": 9}],
        "meta": {"ok": 1, "bad key": "x", "b2": True},
    })
    assert messages(violations) == [
        "items[2].qty: 9 is greater than the maximum of 5",
        'meta["bad key"]: expected int, got string',
        "meta.b2: expected int, got bool",
    ]
    assert format_violations("t.output", violations[:1]) == \
        "t.output.items[2].qty: 9 is greater than the maximum of 5"
    root_list = c.standalone(ast.ListType(ast.NamedType("Item", _SPAN), _SPAN))
    assert format_violations("f.return", validate(root_list, [{"qty": 0}])) == \
        "f.return[0].qty: 0 is less than the minimum of 1"


@pytest.mark.parametrize("decl, value, expected", [
    ("x: int", 3.0, []),
    ("x: int", 3.5, ["x: expected int, got float"]),
    ("x: int", True, ["x: expected int, got bool"]),
    ("x: float", 3, []),
    ("x: float", False, ["x: expected float, got bool"]),
    ("x: float", float("nan"), ["x: expected float, got a non-finite number"]),
    ("x: string", None, ["x: expected string, got null"]),
    ("x: bool", "true", ["x: expected bool, got string"]),
    ("x: any", {"deep": [1, None]}, []),
    ("x: int[]", {"a": 1}, ["x: expected list, got object"]),
    ("x: map[int]", [1], ["x: expected map, got list"]),
    ("x: S2", "text", ["x: expected S2, got string"]),
    ('x: enum["a", "b"]', 1, ["x: expected string, got int"]),
    ("x: string @length(2, 3)", "a", ["x: 'a' has 1 character, fewer than the minimum of 2"]),
    ("x: string @length(2, 3)", "abcd",
     ["x: 'abcd' has 4 characters, more than the maximum of 3"]),
    ("x: int[] @length(1, 2)", [], ["x: [] has 0 items, fewer than the minimum of 1"]),
    ("x: int[] @length(1, 2)", [1, 2, 3],
     ["x: [1,2,3] has 3 items, more than the maximum of 2"]),
    ('x: string @pattern("[0-9]+")', "12a", ["x: '12a' does not match the pattern '[0-9]+'"]),
    ('x: string @pattern("[0-9]+")', "12\n", ["x: '12\\n' does not match the pattern '[0-9]+'"]),
    ('x: string @pattern("[0-9]+")', "0042", []),
    ('x: string @pattern("a|b")', "ab", ["x: 'ab' does not match the pattern 'a|b'"]),
    ('x: string @format("date")', "2024-02-30",
     ["x: '2024-02-30' is not a valid date (YYYY-MM-DD)"]),
    ('x: string @format("uuid")', "nope", ["x: 'nope' is not a valid UUID"]),
])
def test_field_rules(decl: str, value: Any, expected: list[str]) -> None:
    c = compiler(f"schema S {{ {decl} }}\nschema S2 {{ y: int }}")
    assert messages(validate(c.standalone("S"), {"x": value})) == expected


def test_long_values_are_truncated_in_messages() -> None:
    c = compiler("schema S { x: string @length(0, 3), y: int }")
    [first, second] = validate(c.standalone("S"), {"x": "a" * 500, "y": list(range(100))})
    assert first.message.startswith("'aaaa") and "...' has 500 characters" in first.message
    assert len(first.message) < 160
    assert second.message == "expected int, got list"
    assert all("\n" not in v.message for v in (first, second))


# --------------------------------------------------------------------------------- unions


def union_schemas() -> SchemaCompiler:
    return compiler(UNION)


def test_union_valid_member() -> None:
    doc = union_schemas().standalone("Document")
    assert validate(doc, {"kind": "Invoice", "invoice_number": "A-1"}) == []
    assert validate(doc, {"kind": "Receipt", "reference": "r"}) == []


def test_union_missing_tag() -> None:
    doc = union_schemas().standalone("Document")
    violations = validate(doc, {"invoice_number": "A-1"})
    assert violations == [Violation("kind", "must identify a tagged union member.", "tag", False)]
    assert format_violations("classify.output", violations) == \
        "classify.output.kind must identify a tagged union member."


@pytest.mark.parametrize("tag", ["Other", 3, None, "invoice"])
def test_union_unknown_tag(tag: Any) -> None:
    doc = union_schemas().standalone("Document")
    assert messages(validate(doc, {"kind": tag, "invoice_number": "A-1"})) == \
        ["kind must identify a tagged union member."]


def test_union_member_fields_wrong() -> None:
    doc = union_schemas().standalone("Document")
    assert messages(validate(doc, {"kind": "Invoice", "reference": "r",
                                   "lines": [{"sku": 1, "qty": 0}]})) == [
        "lines[0].sku: expected string, got int",
        "lines[0].qty: 0 is less than the minimum of 1",
        "missing required field 'invoice_number'",
        "unknown field 'reference'",
    ]
    assert messages(validate(doc, "Invoice")) == ["expected object, got string"]


def test_union_nested_in_a_tool_input() -> None:
    c = union_schemas()
    schema = c.standalone("__tool_file_input")
    violations = validate(schema, {"doc": {"reference": "r"}, "docs": [{"kind": "Receipt"}, 5]})
    assert format_violations("file.input", violations) == (
        "file.input.doc.kind must identify a tagged union member.; "
        "file.input.docs[0]: missing required field 'reference'; "
        "file.input.docs[1]: expected Document, got int")


def test_union_tag_is_written_on_input_when_exactly_one_member_fits() -> None:
    schema = union_schemas().standalone("__tool_file_input")
    value, violations = validate_and_fill(
        schema, {"doc": {"invoice_number": "A-1"}, "docs": [{"reference": "r"}]},
        soft_rules=False, infer_tags=True)
    assert violations == []
    assert value == {"doc": {"kind": "Invoice", "invoice_number": "A-1", "lines": []},
                     "docs": [{"kind": "Receipt", "reference": "r"}]}
    assert list(value["doc"]) == ["kind", "invoice_number", "lines"]


def test_union_tag_is_not_guessed_when_ambiguous_or_on_output() -> None:
    c = compiler("""
    schema A { x?: int }
    schema B { y?: int }
    schema AB = A | B tagged by t
    """)
    schema = c.standalone("AB")
    _, violations = validate_and_fill(schema, {}, soft_rules=False, infer_tags=True)
    assert messages(violations) == ['t must identify a tagged union member: the value fits more '
                                    'than one ("A" and "B").']
    _, violations = validate_and_fill(schema, {"x": 1}, soft_rules=True)
    assert messages(violations) == ["t must identify a tagged union member."]
    value, violations = validate_and_fill(schema, {"x": 1}, soft_rules=False, infer_tags=True)
    assert (value, violations) == ({"t": "A", "x": 1}, [])


def test_union_defaults_are_filled_inside_the_chosen_member() -> None:
    doc = union_schemas().standalone("Document")
    value, violations = validate_and_fill(
        doc, {"kind": "Invoice", "invoice_number": "A", "lines": [{"sku": "s"}]}, soft_rules=True)
    assert violations == []
    assert value == {"kind": "Invoice", "invoice_number": "A", "lines": [{"sku": "s", "qty": 1}]}


def test_union_schema_is_standard_json_schema() -> None:
    doc = union_schemas().standalone("Document")
    jsonschema.Draft202012Validator.check_schema(doc)
    std = jsonschema.Draft202012Validator(doc)
    assert std.is_valid({"kind": "Receipt", "reference": "r"})
    assert not std.is_valid({"reference": "r"})
    assert not std.is_valid({"kind": "Receipt", "invoice_number": "r"})


# ---------------------------------------------------------------------------- soft rules

SOFT = """
schema Score {
  score: int @range(0, 100) @severity("soft")
  label: string @length(1, 5) @pattern("[a-z]+") @severity("soft")
  email?: string @format("email") @severity("soft")
  hard: int @range(0, 1)
}
"""


def test_soft_rules_warn_and_hard_rules_fail() -> None:
    schema = compiler(SOFT).standalone("Score")
    violations = validate(schema, {"score": 120, "label": "TOOLONG", "email": "x", "hard": 2})
    assert [(v.render("score_text.output"), v.rule, v.soft) for v in violations] == [
        ("score_text.output.score: 120 is greater than the maximum of 100", "range", True),
        ("score_text.output.label: 'TOOLONG' has 7 characters, more than the maximum of 5",
         "length", True),
        ("score_text.output.label: 'TOOLONG' does not match the pattern '[a-z]+'", "pattern",
         True),
        ("score_text.output.email: 'x' is not a valid email address", "format", True),
        ("score_text.output.hard: 2 is greater than the maximum of 1", "range", False),
    ]


def test_soft_rules_are_hard_when_soft_rules_are_off() -> None:
    schema = compiler(SOFT).standalone("Score")
    violations = validate(schema, {"score": 120, "label": "ok", "hard": 0}, soft_rules=False)
    assert violations == [Violation("score", "120 is greater than the maximum of 100", "range",
                                    False)]
    value, violations = validate_and_fill(schema, {"score": 120, "label": "ok", "hard": 0},
                                          soft_rules=True)
    assert value == {"score": 120, "label": "ok", "hard": 0}
    assert [v.soft for v in violations] == [True]


def test_type_mismatch_is_hard_even_on_a_soft_field() -> None:
    schema = compiler(SOFT).standalone("Score")
    violations = validate(schema, {"score": "high", "label": "ok", "hard": 0, "extra": 1})
    assert [(v.render(), v.soft) for v in violations] == [
        ("score: expected int, got string", False), ("unknown field 'extra'", False)]


# ------------------------------------------------------------------ defaults and coercion


def test_defaults_are_filled_and_the_input_is_not_changed() -> None:
    c = compiler("""
    schema Opts { depth: int @default(2), mode?: enum["a", "b"] @default("a") }
    tool search(query: string, limit?: int @default(10), tags: string[] @default([]),
                opts: Opts @default({}), by_name: map[Opts] @default({ x: {} })) -> Opts {}
    """)
    schema = c.standalone("__tool_search_input")
    original = {"query": "q"}
    value, violations = validate_and_fill(schema, original, soft_rules=False)
    assert violations == []
    assert value == {"query": "q", "limit": 10, "tags": [], "opts": {"depth": 2, "mode": "a"},
                     "by_name": {"x": {"depth": 2, "mode": "a"}}}
    assert original == {"query": "q"}
    second, _ = validate_and_fill(schema, original, soft_rules=False)
    second["tags"].append("t")
    assert validate_and_fill(schema, original, soft_rules=False)[0]["tags"] == []
    # a given value is kept, and defaults apply inside lists and maps too
    value, _ = validate_and_fill(schema, {"query": "q", "limit": 3, "opts": {"depth": 5},
                                          "by_name": {"y": {"mode": "b"}}}, soft_rules=False)
    assert value["limit"] == 3 and value["opts"] == {"depth": 5, "mode": "a"}
    assert value["by_name"] == {"y": {"depth": 2, "mode": "b"}}


def test_whole_floats_become_ints_where_an_int_is_expected() -> None:
    c = compiler("""
    schema P { n: int, xs: int[], m: map[int], f: float, a: any }
    """)
    value, violations = validate_and_fill(
        c.standalone("P"), {"n": 3.0, "xs": [1.0, 2], "m": {"k": -4.0}, "f": 2.0, "a": 5.0},
        soft_rules=True)
    assert violations == []
    assert value == {"n": 3, "xs": [1, 2], "m": {"k": -4}, "f": 2.0, "a": 5.0}
    assert type(value["n"]) is int and type(value["xs"][0]) is int
    assert type(value["m"]["k"]) is int
    assert type(value["f"]) is float and type(value["a"]) is float
    _, violations = validate_and_fill(c.standalone("P"),
                                      {"n": 3.5, "xs": [], "m": {}, "f": 1, "a": None},
                                      soft_rules=True)
    assert messages(violations) == ["n: expected int, got float"]


def test_fill_reports_the_same_violations_as_validate() -> None:
    schema = calc_input()
    bad = {"a": -1, "operation": "pow", "limit": 200, "verbose": 0.0}
    _, filled = validate_and_fill(schema, bad, soft_rules=False)
    assert filled == validate(schema, bad, soft_rules=False)


# -------------------------------------------------------------------------------- formats


@pytest.mark.parametrize("fmt, good, bad", [
    ("email", ["a@b.co", "first.last+tag@sub.example.org"],
     ["", "a", "a@b", "a b@c.de", "@b.co", "a@b..co", "a@-b.co", "a@@b.co"]),
    ("uri", ["https://example.com/a?b=c#d", "mailto:x@y.z", "urn:isbn:0451450523"],
     ["", "example.com", "http://exa mple.com", "://x", "1http://x"]),
    ("date", ["2024-02-29", "1999-12-31"],
     ["2023-02-29", "2024-13-01", "2024-1-01", "20240101", "2024-01-01T00:00:00Z"]),
    ("date-time", ["2024-02-29T12:30:00Z", "2024-02-29T12:30:00.123+02:00",
                   "2024-02-29t23:59:60z"],
     ["2024-02-29T12:30:00", "2024-02-29 12:30:00Z", "2024-02-29T24:00:00Z",
      "2024-02-30T12:00:00Z", "2024-02-29T12:30:00+25:00", "now"]),
    ("uuid", ["123e4567-e89b-12d3-a456-426614174000", "123E4567-E89B-12D3-A456-426614174000"],
     ["123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400g", ""]),
])
def test_format_checks(fmt: str, good: list[str], bad: list[str]) -> None:
    check = FORMAT_CHECKS[fmt]
    assert [g for g in good if not check(g)] == []
    assert [b for b in bad if check(b)] == []
    schema = compiler(f'schema S {{ x: string @format("{fmt}") }}').standalone("S")
    assert validate(schema, {"x": good[0]}) == []
    assert [v.rule for v in validate(schema, {"x": bad[0]})] == ["format"]


# ------------------------------------------------------------------ the validator itself


def test_validators_are_cached_per_schema_object() -> None:
    schema = calc_input()
    assert validator_for(schema) is validator_for(schema)
    assert validator_for(calc_input()) is not validator_for(schema)


def test_unsupported_keywords_are_refused_rather_than_ignored() -> None:
    with pytest.raises(SchemaError, match="unsupported JSON Schema keyword 'uniqueItems'"):
        validate({"type": "array", "uniqueItems": True}, [1, 1])
    with pytest.raises(SchemaError, match="unresolvable reference"):
        validate({"$ref": "#/$defs/Missing"}, 1)


def test_plain_json_schema_combinators() -> None:
    schema = {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    assert validate(schema, None) == []
    assert messages(validate(schema, "x")) == ["'x' does not match any of the allowed shapes"]
    one = {"oneOf": [{"type": "number"}, {"type": "integer"}]}
    assert messages(validate(one, 1)) == ["1 matches more than one of the allowed shapes"]
    assert validate(one, 1.5) == []
    assert messages(validate({"const": True}, 1)) == ["expected true, got 1"]
    assert messages(validate({"enum": [1, "a"]}, True)) == ["true is not one of 1, 'a'"]
    assert validate(False, 1)[0].message == "no value is allowed here"


def test_importing_luma_schema_does_not_import_jsonschema() -> None:
    code = ("import sys, luma.schema; from luma.schema import validate;"
            "validate({'type': 'integer'}, 1); print('jsonschema' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------- metaschema validity


def luma_files() -> list[Path]:
    """Every .luma file of the project that parses (syntax-error cases have no schemas)."""
    found = [p for pattern in ("examples/**/*.luma", "tests/**/*.luma")
             for p in ROOT.glob(pattern)]
    return sorted(p for p in found if ".venv" not in p.parts
                  and parse_text(p.read_text(encoding="utf-8"), str(p))[0] is not None)


@pytest.mark.parametrize("path", luma_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_generated_schema_passes_the_metaschema(path: Path) -> None:
    program, _ = parse_text(path.read_text(encoding="utf-8"), str(path))
    assert program is not None
    c = SchemaCompiler(program)
    # the compiler never raises, even on a program the checker rejects
    document = c.document()
    standalone = {name: c.standalone(name) for name in c.definitions()}
    if any(d.is_error for d in check_program(program)):
        return  # an unknown type or a bad regex can stay in the schema: such programs never run
    jsonschema.Draft202012Validator.check_schema(document)
    for schema in standalone.values():
        jsonschema.Draft202012Validator.check_schema(schema)
        validator_for(schema)  # and our validator compiles it


def test_an_equal_schema_rebuilt_reuses_the_compiled_form() -> None:
    schema = calc_input()
    again = calc_input()
    assert validator_for(again) is not validator_for(schema)
    assert validator_for(again)._root is validator_for(schema)._root
    assert validator_for(again).schema is again


def test_a_pattern_is_shown_as_written() -> None:
    schema = compiler('schema S { x: string @pattern("[é-ü]+\\\\d") }').standalone("S")
    assert schema["properties"]["x"]["x-luma-pattern"] == "[é-ü]+\\d"
    assert messages(validate(schema, {"x": "a1"})) == [
        "x: 'a1' does not match the pattern '[é-ü]+\\d'"]
    assert validate(schema, {"x": "éü7"}) == []


def test_a_default_that_contains_its_own_schema_is_filled_to_a_bounded_depth() -> None:
    from luma.schema.compile import SchemaCompiler
    from luma.schema.validate import validate_and_fill
    from luma.syntax.parse import parse_text

    program, _ = parse_text("schema P { inner: P @default({}) }")
    assert program is not None
    schema = SchemaCompiler(program).standalone("P")
    value, violations = validate_and_fill(schema, {}, soft_rules=True)
    assert violations == []
    depth = 0
    while "inner" in value:
        value = value["inner"]
        depth += 1
    assert depth == 17  # 16 levels filled, then the default as written: {"inner": {}}
