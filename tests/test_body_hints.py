"""Hints, primary spans and secondary spans of the body checks: the parts of a diagnostic that the
inline case files under tests/cases/bodies/ do not show."""

from __future__ import annotations

import time

from luma.compile import check_text
from luma.syntax.diagnostics import Diagnostic
from luma.syntax.source import SourceFile

HEAD = """
schema Stats { words: int, characters: int }
schema Invoice { invoice_number: string }
schema Receipt { reference: string }
schema Document = Invoice | Receipt tagged by kind
tool text_stats(text: string, lang?: string) -> Stats { description: "Count words." }
tool classify(text: string) -> Document { description: "Classify." }
tool calculate(a: float, b: float, operation: enum["add", "multiply"]) -> Stats {
  description: "Calculate."
}
model M { provider: "test" }
"""


def _check(body: str) -> tuple[str, list[Diagnostic]]:
    """The body diagnostics of ``HEAD + body`` (the shared declarations that a test does not use
    are left out: unused declarations are not what these tests are about)."""
    text = HEAD + body
    return text, [d for d in check_text(text, "hints.luma").diagnostics if d.code != "W003"]


def _one(body: str, code: str) -> tuple[str, Diagnostic]:
    text, diagnostics = _check(body)
    found = [d for d in diagnostics if d.code == code]
    assert len(found) == 1, diagnostics
    return text, found[0]


def _covered(text: str, d: Diagnostic) -> str:
    return text[d.span.start:d.span.end]


def _line(text: str, offset: int) -> int:
    return SourceFile("hints.luma", text).line_col(offset)[0]


def test_unknown_name_suggests_a_visible_name() -> None:
    text, d = _one("agent A {\n  model: M\n  fn run(question: string) {\n"
                   "    print(questoin)\n  }\n}\n", "E038")
    assert d.message == "Unknown name 'questoin'."
    assert d.hint == "did you mean 'question'?"
    assert _covered(text, d) == "questoin"


def test_unknown_name_that_is_a_top_level_variable_says_a_fn_cannot_see_it() -> None:
    _, d = _one("limit = 3\nagent A {\n  model: M\n  fn run() {\n    print(limit)\n  }\n}\n",
                "E038")
    assert d.hint == "'limit' is a top-level variable, which a fn cannot see; pass it as a " \
                     "parameter"


def test_unknown_name_that_is_an_agent_says_how_to_call_it() -> None:
    _, d = _one("agent Worker {\n  model: M\n  fn run() { 1 }\n}\nx = Worker\n", "E038")
    assert d.hint == "'Worker' is an agent; call its functions as Worker.fn(...)"


def test_maybe_unassigned_points_at_the_read_and_at_the_assignment() -> None:
    text, d = _one("agent A {\n  model: M\n  fn run(flag: bool) {\n    if flag {\n"
                   "      bonus = 1\n    }\n    print(bonus)\n  }\n}\n", "W002")
    assert d.severity == "warning"
    assert d.message == "'bonus' may be unassigned here"
    assert _covered(text, d) == "bonus"
    assert text[d.span.start - 6:d.span.start] == "print("
    assert [r.message for r in d.related] == ["'bonus' is assigned here"]
    assert text[d.related[0].span.start:d.related[0].span.end + 4] == "bonus = 1"


def test_placeholder_root_is_the_primary_span() -> None:
    text, d = _one('x = "a {nope.field} b"\n', "E038")
    assert _covered(text, d) == "nope"


def test_bad_placeholder_hints_at_the_escape() -> None:
    text, d = _one('x = "a {not valid} b"\n', "E002")
    assert d.hint == "write \\{ for a literal brace"
    assert _covered(text, d) == "{not valid}"


def test_unknown_function_suggests_a_method_or_built_in() -> None:
    _, d = _one("agent A {\n  model: M\n  fn run() { summarise(1) }\n"
                "  fn summarize(x: int) { x }\n}\n", "E036")
    assert d.hint == "did you mean 'summarize'?"
    _, d = _one("x = lne([1])\n", "E036")
    assert d.hint == "did you mean 'len'?"


def test_top_level_call_of_an_agent_method_says_how_to_call_it() -> None:
    _, d = _one("agent Writer {\n  model: M\n  fn draft() { 1 }\n}\nx = draft()\n", "E036")
    assert d.hint == "'draft' is a function of agent 'Writer'; call it as Writer.draft(...)"


def test_wrong_number_of_arguments_points_at_the_declaration() -> None:
    text, d = _one("agent A {\n  model: M\n  fn run() { helper(1, 2) }\n"
                   "  fn helper(x: int) { x }\n}\n", "E037")
    assert d.message == "Function 'helper' takes 1 argument but 2 were given."
    assert [r.message for r in d.related] == ["declared here"]
    assert _covered(text, d) == "helper(1, 2)"
    assert text[d.related[0].span.start:d.related[0].span.end] == "helper"


def test_unknown_agent_and_unknown_method_suggest_names() -> None:
    _, d = _one("agent Writer {\n  model: M\n  fn draft() { 1 }\n}\nx = Writr.draft()\n", "E028")
    assert d.hint == "did you mean 'Writer'?"
    text, d = _one("agent Writer {\n  model: M\n  fn draft() { 1 }\n}\nx = Writer.drat()\n",
                   "E036")
    assert d.hint == "did you mean 'draft'?"
    assert _covered(text, d) == "drat"


def test_direct_call_outside_the_tools_list_points_at_the_list() -> None:
    text, d = _one("agent A {\n  model: M\n  tools: [classify]\n"
                   "  fn run() { tool text_stats({ text: \"x\" }) }\n}\n", "E030")
    assert d.hint == "add text_stats to the tools list of agent 'A'"
    assert text[d.related[0].span.start:d.related[0].span.end] == "tools: [classify]"
    assert _covered(text, d) == "text_stats"


def test_unknown_tool_suggests_a_tool() -> None:
    _, d = _one("x = tool text_stat({ text: \"x\" })\n", "E026")
    assert d.hint == "did you mean 'text_stats'?"


def test_misspelled_key_is_suggested_and_not_reported_missing_as_well() -> None:
    text, diagnostics = _check('x = tool calculate({ a: 1, b: 2, opration: "add" })\n')
    assert [d.code for d in diagnostics] == ["E032"]
    assert diagnostics[0].hint == "did you mean 'operation'?"
    assert _covered(text, diagnostics[0]) == "opration"


def test_missing_parameter_points_at_the_parameter() -> None:
    text, d = _one('x = tool calculate({ a: 1, operation: "add" })\n', "E033")
    assert d.message == "Missing required parameter 'b' of tool 'calculate'."
    assert text[d.related[0].span.start:d.related[0].span.end] == "b"
    assert _line(text, d.related[0].span.start) == 8


def test_unknown_field_suggests_a_field_and_points_at_the_schema() -> None:
    text, d = _one('s = tool text_stats({ text: "a b" })\nx = s.wrods\n', "E035")
    assert d.message == "Type 'Stats' has no field 'wrods'."
    assert d.hint == "did you mean 'words'?"
    assert _covered(text, d) == "wrods"
    assert text[d.related[0].span.start:d.related[0].span.end] == "Stats"


def test_union_field_of_one_member_suggests_testing_the_tag() -> None:
    _, d = _one('doc = tool classify({ text: "a" })\nx = doc.reference\n', "E035")
    assert d.message == "Not every member of 'Document' has the field 'reference'."
    assert d.hint == 'only Receipt has it; check doc.kind == "Receipt" first'


def test_union_field_is_known_after_testing_the_tag() -> None:
    _, diagnostics = _check('doc = tool classify({ text: "a" })\n'
                            'if doc.kind == "Receipt" {\n  x = doc.reference\n}\n'
                            'if doc.kind != "Receipt" {\n  y = doc.invoice_number\n}\n')
    assert diagnostics == []


def test_every_independent_error_is_reported_in_one_run() -> None:
    _, diagnostics = _check("agent A {\n  model: M\n  tools: []\n  fn run() {\n"
                            "    a = missing\n    b = tool nope({})\n    c = nothing()\n"
                            "    throw 1\n  }\n}\nreturn 2\n")
    assert [d.code for d in diagnostics] == ["E038", "E026", "E036", "E039", "E039"]


def test_deeply_nested_loops_are_checked_in_linear_time() -> None:
    depth = 60
    body = "x = 0\n" + "".join(f"for a{i} in [1] {{\n" for i in range(depth)) + \
        "x = x + 1\nif x > 1 { y = x }\n" + "}\n" * depth + "print(x)\n"
    start = time.perf_counter()
    _, diagnostics = _check(body)
    assert time.perf_counter() - start < 2.0
    assert diagnostics == []


def test_a_tool_result_of_another_schema_says_which_field_differs() -> None:
    head = ("schema Other { x: string }\nschema Wide { words: int, characters: int, "
            "note: string }\nschema Count { words: string, characters: int }\n")
    cases = [
        ("Other", "Stats has the field 'words', which Other does not declare"),
        ("Wide", "Wide requires the field 'note', which Stats does not have"),
        ("Count", "the field 'words' is int in Stats but string in Count"),
    ]
    for target, hint in cases:
        text, d = _one(f"{head}y: {target} = tool text_stats({{ text: \"a b\" }})\n", "E034")
        assert d.message == f"Invalid value for variable 'y': expected {target}, got Stats."
        assert d.hint == hint
        assert _covered(text, d) == 'tool text_stats({ text: "a b" })'
