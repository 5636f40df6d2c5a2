"""The per-provider schema dialects over the one neutral schema."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from luma.models.dialects import (StrictSchemaError, anthropic_schema, drop_strict_nulls,
                                  gemini_recursive_required, gemini_schema, openai_schema,
                                  openai_strict_schema)
from luma.schema.compile import SchemaCompiler
from luma.syntax.parse import parse_text
from providers.gemini_fake import json_schema_violations as gemini_json_violations
from providers.openai_fake import strict_violations

PROGRAM = """
schema Address {
  street: string
  zip?: string @pattern("[0-9]{5}")
}
schema Invoice { invoice_number: string, billed_to: Address }
schema Receipt { reference: string @format("uuid") }
schema Document = Invoice | Receipt tagged by kind
schema Order {
  id: string @desc("Order id, e.g. o-100") @example("o-100")
  status: enum["open", "shipped", "cancelled"]
  total: float @range(0, 1000000) @severity("soft")
  note?: string @length(0, 500)
  site?: string @format("uri")
  placed: string @format("date-time")
  tags: string[] @default([]) @length(0, 10)
  ship_to?: Address @desc("Where it goes")
  document: Document
  history: Document[]
}
schema Counts { by_status: map[int] }
schema Loose { extra: any }
schema Node { name: string, children: Node[] }
"""


def compiler() -> SchemaCompiler:
    program, diagnostics = parse_text(PROGRAM, "dialects.luma")
    assert program is not None and not diagnostics, diagnostics
    return SchemaCompiler(program)


def schema(name: str) -> dict:
    return compiler().standalone(name)


# ------------------------------------------------------------------------------- OpenAI
def test_openai_strict_closes_objects_requires_everything_and_makes_optionals_nullable():
    out, strict = openai_schema(schema("Order"), None)
    assert strict is True
    assert strict_violations(out) == []
    props = out["properties"]
    assert out["required"] == list(props)
    assert out["additionalProperties"] is False
    assert props["note"]["type"] == ["string", "null"]
    assert props["status"] == {"type": "string", "enum": ["open", "shipped", "cancelled"]}
    # an optional $ref with a description: the ref is inlined under its siblings, then nullable
    assert props["ship_to"]["type"] == ["object", "null"]
    assert props["ship_to"]["description"] == "Where it goes"
    assert props["ship_to"]["required"] == ["street", "zip"]
    # a bare optional $ref stays a ref, made nullable with anyOf
    out_doc = openai_strict_schema({"type": "object", "properties": {
        "d": {"$ref": "#/$defs/A"}}, "required": [], "additionalProperties": False,
        "$defs": {"A": {"type": "object", "properties": {}, "required": [],
                        "additionalProperties": False}}})
    assert out_doc["properties"]["d"] == {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "null"}]}


def test_openai_strict_moves_unsupported_keywords_into_the_description():
    out = openai_strict_schema(schema("Order"))
    props = out["properties"]
    assert "maxLength" not in props["note"] and "minLength" not in props["note"]
    assert props["note"]["description"] == "At least 0 characters; at most 500 characters."
    assert "format" not in props["site"] and props["site"]["description"] == "Format: uri."
    assert props["placed"]["format"] == "date-time"  # a format strict mode supports stays
    assert props["id"]["description"] == 'Order id, e.g. o-100 (example: "o-100")'
    assert props["tags"]["description"] == "Default: []."
    assert (props["tags"]["minItems"], props["tags"]["maxItems"]) == (0, 10)
    assert (props["total"]["minimum"], props["total"]["maximum"]) == (0, 1000000)
    assert "x-luma" not in json.dumps(out)


def test_openai_strict_turns_tagged_unions_into_anyof_with_typed_one_value_enum_tags():
    out = openai_strict_schema(schema("Order"))
    document = out["$defs"]["Document"]
    assert "oneOf" not in document and "type" not in document
    members = document["anyOf"]
    # strict mode wants a type on every schema: the tag's const is a typed one-value enum
    assert [m["properties"]["kind"] for m in members] == [
        {"type": "string", "enum": ["Invoice"]}, {"type": "string", "enum": ["Receipt"]}]
    assert "const" not in json.dumps(out)
    assert out["$defs"]["Address"]["properties"]["zip"]["type"] == ["string", "null"]
    assert out["$defs"]["Address"]["properties"]["zip"]["pattern"] == "^(?:[0-9]{5})$"
    assert strict_violations(out) == []


def test_openai_recursive_schemas_keep_their_refs():
    out, strict = openai_schema(schema("Node"), None)
    assert strict is True and strict_violations(out) == []
    assert out["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}


@pytest.mark.parametrize("name, reason", [
    ("Counts", "field 'by_status' is a map with free-form keys"),
    ("Loose", "field 'extra' accepts any JSON value"),
    ("Document", "the answer is a union at the top level"),
])
def test_what_has_no_strict_form(name, reason):
    with pytest.raises(StrictSchemaError) as info:
        openai_strict_schema(schema(name))
    assert info.value.reason == reason
    out, strict = openai_schema(schema(name), None)
    assert strict is False
    assert "x-luma" not in json.dumps(out) and "$schema" not in out
    with pytest.raises(StrictSchemaError):
        openai_schema(schema(name), True)


def test_strict_false_sends_the_neutral_schema_without_luma_keys():
    out, strict = openai_schema(schema("Order"), False)
    neutral = schema("Order")
    assert strict is False
    assert out["required"] == neutral["required"]
    assert out["properties"]["note"] == neutral["properties"]["note"]
    assert "x-luma-severity" not in out["properties"]["total"]


def test_drop_strict_nulls_removes_nulls_of_optional_fields_only():
    neutral = schema("Order")
    value = {"id": "o-1", "note": None, "site": None, "ship_to": {"street": "A", "zip": None},
             "document": {"kind": "Invoice", "invoice_number": "I-1",
                          "billed_to": {"street": "B", "zip": None}},
             "history": [{"kind": "Receipt", "reference": "r"}], "placed": None}
    assert drop_strict_nulls(neutral, value) == {
        "id": "o-1", "ship_to": {"street": "A"},
        "document": {"kind": "Invoice", "invoice_number": "I-1", "billed_to": {"street": "B"}},
        "history": [{"kind": "Receipt", "reference": "r"}],
        "placed": None}  # a required field keeps its null: validation reports it


# ---------------------------------------------------------------------------- Anthropic
def test_anthropic_is_standard_json_schema_without_title_and_schema_keys():
    neutral = schema("Order")
    neutral["title"] = "Order"
    neutral["properties"]["note"]["title"] = "Note"
    out = anthropic_schema(neutral)
    assert "title" not in json.dumps(out) and "$schema" not in out
    assert "x-luma" not in json.dumps(out)
    assert out["required"] == schema("Order")["required"]
    assert out["properties"]["note"]["maxLength"] == 500
    assert out["$defs"]["Document"]["oneOf"][0]["properties"]["kind"] == {"const": "Invoice"}
    assert out["properties"]["document"] == {"$ref": "#/$defs/Document"}


# ------------------------------------------------------------------------------- Gemini
def test_gemini_takes_json_schema_with_refs_and_closed_objects():
    out = gemini_schema(schema("Order"))
    assert gemini_json_violations(out, "schema") == []
    text = json.dumps(out)
    for word in ("const", "oneOf", "x-luma", "$schema", "examples", "minLength", "pattern"):
        assert word not in text
    props = out["properties"]
    assert out["additionalProperties"] is False and out["$defs"]["Address"]["required"] == [
        "street"]
    assert props["document"] == {"$ref": "#/$defs/Document"}
    # a $ref stands alone: what was said beside it moves to a one-member anyOf
    assert props["ship_to"] == {"anyOf": [{"$ref": "#/$defs/Address"}],
                                "description": "Where it goes"}
    members = out["$defs"]["Document"]["anyOf"]
    assert "type" not in out["$defs"]["Document"]
    assert members[0]["properties"]["kind"] == {"type": "string", "enum": ["Invoice"]}
    assert members[1]["properties"]["reference"] == {"type": "string",
                                                     "description": "Format: uuid."}
    assert props["placed"]["format"] == "date-time"
    assert props["site"]["description"] == "Format: uri."
    assert props["id"]["description"] == 'Order id, e.g. o-100 (example: "o-100")'
    assert props["note"]["description"] == "At least 0 characters; at most 500 characters."
    assert "zip" in out["$defs"]["Address"]["properties"]
    assert out["$defs"]["Address"]["properties"]["zip"]["description"] == \
        "Must match the regular expression ^(?:[0-9]{5})$."


def test_gemini_keeps_maps_and_makes_required_recursion_optional():
    counts = gemini_schema(schema("Counts"))
    assert counts["properties"]["by_status"] == {"type": "object",
                                                 "additionalProperties": {"type": "integer"}}
    # Node.children is required and leads back to Node: Gemini takes that only when optional
    neutral = schema("Node")
    assert gemini_recursive_required(neutral) == [("Node", "children")]
    node = gemini_schema(neutral)
    assert node["$defs"]["Node"]["required"] == ["name"]
    assert node["$defs"]["Node"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert node["required"] == ["name", "children"]   # the root is not part of the cycle
    assert gemini_json_violations(node, "schema") == []
    assert neutral["$defs"]["Node"]["required"] == ["name", "children"]  # not changed
    assert gemini_recursive_required(schema("Order")) == []


# ---------------------------------------------- property: every dialect's rules always hold
_NAMES = st.sampled_from(["a", "b", "c", "d"])


def _neutral(depth: int) -> st.SearchStrategy[dict]:
    leaves = st.one_of(
        st.just({"type": "string"}), st.just({"type": "integer"}), st.just({"type": "number"}),
        st.just({"type": "boolean"}), st.just({}),
        st.builds(lambda v: {"type": "string", "enum": v},
                  st.lists(st.sampled_from(["x", "y", "z"]), min_size=1, max_size=3, unique=True)),
        st.sampled_from([{"type": "string", "format": f} for f in
                         ("email", "uri", "date", "date-time", "uuid")]),
        st.just({"type": "string", "minLength": 1, "maxLength": 9, "x-luma-severity": "soft"}),
        st.just({"type": "string", "pattern": "^(?:a+)$", "x-luma-pattern": "a+"}),
        st.just({"$ref": "#/$defs/Shared"}),
        st.just({"$ref": "#/$defs/Shared", "description": "shared"}),
    )
    if depth == 0:
        return leaves
    sub = _neutral(depth - 1)
    objects = st.builds(
        lambda props, optional: {"type": "object", "properties": props,
                                 "required": [k for k in props if k not in optional],
                                 "additionalProperties": False},
        st.dictionaries(_NAMES, sub, max_size=3), st.sets(_NAMES))
    return st.one_of(
        leaves, objects,
        st.builds(lambda s: {"type": "array", "items": s, "default": []}, sub),
        st.builds(lambda s: {"type": "object", "additionalProperties": s}, sub),
        st.builds(lambda s: {"type": "object", "oneOf": [
            {"type": "object", "properties": {"t": {"const": "A"}, "v": s},
             "required": ["t", "v"], "additionalProperties": False},
            {"type": "object", "properties": {"t": {"const": "B"}}, "required": ["t"],
             "additionalProperties": False}], "x-luma-tag": "t"}, sub),
    )


_SHARED = {"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"],
           "additionalProperties": False}
_ROOTS = st.builds(
    lambda props, optional: {"$schema": "https://json-schema.org/draft/2020-12/schema",
                             "type": "object", "properties": props,
                             "required": [k for k in props if k not in optional],
                             "additionalProperties": False, "$defs": {"Shared": _SHARED}},
    st.dictionaries(_NAMES, _neutral(2), max_size=4), st.sets(_NAMES))


@settings(max_examples=300, deadline=None)
@given(_ROOTS)
def test_every_dialect_output_obeys_its_rules(neutral):
    before = json.dumps(neutral, sort_keys=True)
    out, strict = openai_schema(neutral, None)
    if strict:
        assert strict_violations(out) == []
    assert "x-luma" not in json.dumps(out) and "$schema" not in out
    anthropic = anthropic_schema(neutral)
    assert "x-luma" not in json.dumps(anthropic) and "$schema" not in anthropic
    gemini = gemini_schema(neutral)
    assert gemini_json_violations(gemini, "schema") == []
    assert json.dumps(neutral, sort_keys=True) == before  # the neutral schema is not changed


@settings(max_examples=200, deadline=None)
@given(_ROOTS)
def test_strict_is_chosen_exactly_when_no_map_any_or_free_object_is_reachable(neutral):
    text = json.dumps({k: v for k, v in neutral.items() if k != "$defs"})
    has_map = '"additionalProperties": {' in text
    has_any = "{}" in text.replace('"properties": {}', "")
    _, strict = openai_schema(neutral, None)
    assert strict == (not has_map and not has_any)


def test_fields_named_like_keywords_are_kept_by_every_dialect():
    program, _ = parse_text("schema Book { title: string, format?: string, default: int }", "b")
    neutral = SchemaCompiler(program).standalone("Book")
    fields = ["title", "format", "default"]
    assert list(anthropic_schema(neutral)["properties"]) == fields
    assert list(gemini_schema(neutral)["properties"]) == fields
    strict = openai_strict_schema(neutral)
    assert list(strict["properties"]) == fields and strict["required"] == fields


# ------------------------------------------------------------- OpenAI strict mode's size limits
def _standalone(source: str, name: str) -> dict:
    program, diagnostics = parse_text(source, "limits.luma")
    assert program is not None and not diagnostics, diagnostics
    return SchemaCompiler(program).standalone(name)


def _nested(levels: int) -> dict:
    source = "".join(f"schema S{i} {{ inner: S{i + 1} }}\n" for i in range(levels - 1))
    return _standalone(source + f"schema S{levels - 1} {{ leaf: string }}\n", "S0")


def _enum(count: int, width: int = 3) -> dict:
    values = ", ".join(f'"{str(i).zfill(width)}"' for i in range(count))
    return _standalone(f"schema E {{ e: enum[{values}] }}", "E")


@pytest.mark.parametrize("neutral, reason", [
    (_nested(11), "objects nest 11 levels deep (strict mode allows 10)"),
    (_enum(1001, 4), "it has 1001 enum values (strict mode allows 1000)"),
    (_enum(251, 60), "an enum of 251 values has 15060 characters in its values (strict mode "
                     "allows 15000 beyond 250 values)"),
])
def test_a_schema_past_openais_strict_limits_is_sent_without_strict(neutral, reason):
    with pytest.raises(StrictSchemaError) as info:
        openai_strict_schema(neutral)
    assert info.value.reason == reason
    out, strict = openai_schema(neutral, None)
    assert strict is False
    with pytest.raises(StrictSchemaError):
        openai_schema(neutral, True)


def test_a_schema_at_openais_strict_limits_stays_strict():
    for neutral in (_nested(10), _enum(1000, 4), _enum(250, 60)):
        out, strict = openai_schema(neutral, None)
        assert strict is True and strict_violations(out) == []


def test_the_openai_fake_rejects_what_the_limits_reject():
    # the fake checks the strict form on its own; a schema past a limit breaks its rules too
    deep = openai_schema(_nested(10), True)[0]
    deeper = {"type": "object", "properties": {"wrap": deep}, "required": ["wrap"],
              "additionalProperties": False, "$defs": deep.pop("$defs")}
    assert strict_violations(deeper) == ["#: 11 levels of nesting exceeds the limit of 10"]
