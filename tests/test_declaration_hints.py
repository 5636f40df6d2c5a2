"""Hints and secondary spans of the declaration checks: the parts of a diagnostic that the inline
case files do not show."""

from __future__ import annotations

from luma.compile import check_text
from luma.syntax.diagnostics import Diagnostic


def _diagnostics(text: str) -> list[Diagnostic]:
    return check_text(text, "hints.luma").diagnostics


def _one(text: str, code: str) -> Diagnostic:
    found = [d for d in _diagnostics(text) if d.code == code]
    assert len(found) == 1, found
    return found[0]


def _at(text: str, d_span_start: int) -> tuple[int, int]:
    from luma.syntax.source import SourceFile

    return SourceFile("hints.luma", text).line_col(d_span_start)


def test_unknown_type_suggests_the_closest_name() -> None:
    d = _one("schema Order { id: string }\nschema Box { order: Ordr }\n"
             "tool t(b: Box) -> Order { description: \"d\" }\nagent A { tools: [t] }\n", "E007")
    assert d.hint == "did you mean 'Order'?"
    assert d.message == "Unknown type 'Ordr'."


def test_unknown_type_naming_a_tool_says_what_it_is() -> None:
    d = _one("schema R { x: int }\ntool t(a: t) -> R { description: \"d\" }\n"
             "agent A { tools: [t] }\n", "E007")
    assert d.hint == "'t' is a tool, not a type"


def test_primitive_type_typo_is_suggested() -> None:
    d = _one("schema R { x: Strng }\nx: R = { x: \"a\" }\n", "E007")
    assert d.hint == "did you mean 'string'?"


def test_duplicate_field_points_at_the_first() -> None:
    text = "schema R {\n  id: string\n  id: int\n}\nx: R = { id: \"a\" }\n"
    d = _one(text, "E005")
    assert _at(text, d.span.start) == (3, 3)
    assert [r.message for r in d.related] == ["first declared here"]
    assert _at(text, d.related[0].span.start) == (2, 3)


def test_duplicate_config_key_points_at_the_first() -> None:
    text = ("schema R { x: int }\ntool t() -> R {\n  description: \"d\"\n  retries: 1\n"
            "  retries: 2\n}\nagent A { tools: [t] }\n")
    d = _one(text, "E006")
    assert _at(text, d.span.start) == (5, 3)
    assert [r.message for r in d.related] == ["first given here"]
    assert _at(text, d.related[0].span.start) == (4, 3)


def test_unknown_config_key_suggests_the_closest_key() -> None:
    d = _one("schema R { x: int }\ntool t() -> R { description: \"d\", retires: 1 }\n"
             "agent A { tools: [t] }\n", "E008")
    assert d.hint == "did you mean 'retries'?"


def test_unknown_annotation_suggests_the_closest_annotation() -> None:
    d = _one("schema R { x: int @rnage(0, 1) }\ny: R = { x: 0 }\n", "E020")
    assert d.hint == "did you mean '@range'?"


def test_unknown_format_suggests_the_closest_format() -> None:
    d = _one("schema R { x: string @format(\"date_time\") }\ny: R = { x: \"a\" }\n", "E021")
    assert d.hint == "did you mean 'date-time'?"


def test_bad_choice_suggests_the_closest_value() -> None:
    d = _one("schema R { x: int }\ntool t() -> R { description: \"d\", side_effects: \"wirte\" }\n"
             "agent A { tools: [t] }\n", "E009")
    assert d.hint == "did you mean 'write'?"


def test_choice_written_as_a_name_asks_for_quotes() -> None:
    d = _one("schema R { x: int }\ntool t() -> R { description: \"d\", side_effects: read }\n"
             "agent A { tools: [t] }\n", "E009")
    assert d.hint == 'write it as a string: "read"'


def test_model_written_as_a_string_asks_to_drop_the_quotes() -> None:
    d = _one("model M { provider: \"test\" }\nagent A { model: \"M\" }\n", "E009")
    assert d.hint == "write the name without quotes: M"


def test_unknown_model_and_tool_and_context_suggest_names() -> None:
    text = ("schema R { x: int }\nschema Db { u: string }\n"
            "tool lookup() -> R { description: \"d\", needs db: Db }\n"
            "model GPT54Mini { provider: \"test\" }\n"
            "agent A { model: GPT54Mni, tools: [lookpu], tool_contexts: [\"dbb\"] }\n")
    hints = {d.code: d.hint for d in _diagnostics(text)}
    assert hints["E027"] == "did you mean 'GPT54Mini'?"
    assert hints["E026"] == "did you mean 'lookup'?"
    assert hints["E029"] == "did you mean 'db'?"


def test_idempotency_key_suggests_an_input_field() -> None:
    d = _one("schema R { x: int }\ntool t(request_id: string) -> R {\n  description: \"d\"\n"
             "  idempotent: true\n  idempotency_key: requestid\n}\nagent A { tools: [t] }\n",
             "E015")
    assert d.hint == "did you mean 'request_id'?"


def test_union_member_with_the_tag_points_at_the_field() -> None:
    text = ("schema Memo {\n  kind: string\n}\nschema Note { text: string }\n"
            "schema Doc = Memo | Note tagged by kind\nx: Doc = { kind: \"Note\", text: \"a\" }\n")
    d = _one(text, "E018")
    assert [r.message for r in d.related] == ["the tag field is declared here"]
    assert _at(text, d.related[0].span.start) == (2, 3)


def test_missing_description_points_at_the_agent_that_offers_the_tool() -> None:
    text = "schema R { x: int }\ntool t() -> R {}\nagent Helper {\n  tools: [t]\n}\n"
    d = _one(text, "W001")
    assert d.severity == "warning"
    assert [r.message for r in d.related] == ["offered to the model of agent 'Helper' here"]
    assert _at(text, d.related[0].span.start) == (4, 11)


def test_every_independent_error_is_reported() -> None:
    text = ("schema R { x: int @range(5, 1), y: Nope, x: string }\n"
            "tool t(r: R) -> float { description: \"d\", side_effects: \"write\", cache: true,"
            " retries: -1 }\n"
            "agent A { tools: [t, u], tool_rate_limit: 0 }\n")
    codes = sorted(d.code for d in _diagnostics(text))
    assert codes == ["E005", "E007", "E009", "E009", "E012", "E016", "E022", "E026"]
