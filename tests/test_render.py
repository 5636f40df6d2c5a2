"""The four renderers of one diagnostic list: text, json, github, sarif.

Snapshot files live in tests/snapshots/; they are rewritten only when LUMA_UPDATE_SNAPSHOTS=1 is
set, and then the test still fails once, so an update is always a deliberate, reviewed step.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest

from luma.check.codes import CODES
from luma.compile import check_file
from luma.syntax.diagnostics import Diagnostic, Related
from luma.syntax.render import (
    locate, render, render_github, render_json, render_sarif, render_text, source_lookup,
)
from luma.syntax.source import SourceFile, Span

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOTS = Path(__file__).parent / "snapshots"
SUFFIX = {"text": ".txt", "json": ".json", "github": ".github.txt", "sarif": ".sarif"}

DEMO = (
    "schema Order {\n"
    "  id: string\n"
    "  id: int\n"
    "}\n"
    "tool\tlookup(q: string) -> Order { description: \"finds 名前 orders\" }\n"
    "agent Shop {\n"
    "  tools: [lookup]\n"
    "}\n"
    "total = 1 +"
)


def _at(needle: str, nth: int = 0, length: int | None = None) -> Span:
    start = -1
    for _ in range(nth + 1):
        start = DEMO.index(needle, start + 1)
    return Span("demo.luma", start, start + (len(needle) if length is None else length))


def demo_diagnostics() -> list[Diagnostic]:
    return [
        Diagnostic("error", "E005", "Field 'id' is declared more than once in schema 'Order'.",
                   _at("id", 1), hint="rename one of the fields",
                   related=(Related(_at("id", 0), "first declared here"),)),
        Diagnostic("warning", "W001", "Tool 'lookup' is offered to a model without a description.",
                   _at("lookup"), hint=None),
        Diagnostic("error", "E009", "The description of 'lookup' is not 100% clear, see: notes.",
                   _at('"finds')),
        Diagnostic("error", "E028", "Agent 'Shop' spans several lines.",
                   Span("demo.luma", DEMO.index("agent"), DEMO.index("}\ntotal") + 1),
                   related=(Related(_at("Shop"), "named here"),)),
        Diagnostic("error", "E001", "expected an expression after '+'",
                   Span("demo.luma", len(DEMO), len(DEMO)), hint="finish the expression"),
    ]


def demo_sources() -> dict[str, SourceFile]:
    return {"demo.luma": SourceFile("demo.luma", DEMO)}


def _stable(fmt: str, text: str) -> str:
    """The report with what changes whenever a code is added or the version moves (the SARIF
    rule table, rule indices, the driver version) replaced by placeholders; those parts are
    tested against CODES on their own."""
    if fmt != "sarif":
        return text
    log = json.loads(text)
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    for result in run["results"]:
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
        result["ruleIndex"] = f"<index of {result['ruleId']}>"
    driver["rules"] = "<one rule per code of luma.check.codes.CODES>"
    driver["version"] = "<luma version>"
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def assert_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("LUMA_UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
        pytest.fail(f"snapshot {name} written; check it and run again without "
                    "LUMA_UPDATE_SNAPSHOTS")
    assert path.exists(), f"no snapshot {name}: run with LUMA_UPDATE_SNAPSHOTS=1 to write it"
    assert text == path.read_bytes().decode("utf-8"), f"{name} differs from its snapshot"


# -------------------------------------------------------------------------------- snapshots

@pytest.mark.parametrize("fmt", list(SUFFIX))
def test_snapshot_demo(fmt: str) -> None:
    text = _stable(fmt, render(fmt, demo_diagnostics(), source_lookup(demo_sources())))
    assert_snapshot(f"demo{SUFFIX[fmt]}", text)


@pytest.mark.parametrize("fmt", list(SUFFIX))
def test_snapshot_syntax_cases(fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    checked = [check_file(p) for p in sorted(Path("tests/cases/syntax").glob("*.luma"))]
    diagnostics = [d for c in checked for d in c.diagnostics]
    assert len(diagnostics) == 3
    text = _stable(fmt, render(fmt, diagnostics, source_lookup(c.source for c in checked)))
    assert_snapshot(f"syntax_cases{SUFFIX[fmt]}", text)


# ------------------------------------------------------------------------------------- text

def _one(span: Span, text: str, **kw: object) -> str:
    d = Diagnostic("error", "E001", "msg", span, **kw)  # type: ignore[arg-type]
    return render_text([d], source_lookup([SourceFile(span.file, text)]))


def test_text_caret_covers_the_span() -> None:
    out = _one(Span("a.luma", 7, 12), "schema Order {}\n")
    assert out == ("a.luma:1:8: error[E001]: msg\n"
                   "  |\n"
                   "1 | schema Order {}\n"
                   "  |        ^^^^^\n\n")


def test_text_empty_span_gets_one_caret_even_at_the_end_of_the_file() -> None:
    assert _one(Span("a.luma", 3, 3), "x =").endswith("1 | x =\n  |    ^\n\n")
    assert _one(Span("a.luma", 0, 0), "") == "a.luma:1:1: error[E001]: msg\n  |\n1 |\n  | ^\n\n"


def test_text_multi_line_span_underlines_to_the_end_of_its_first_line() -> None:
    out = _one(Span("a.luma", 2, 14), "x {abc\n  def\n}\n")
    assert "1 | x {abc\n  |   ^^^^\n" in out


def test_text_tabs_and_wide_characters_keep_the_caret_aligned() -> None:
    out = _one(Span("a.luma", 7, 9), "\tname: 名前\n")
    assert "1 |     name: 名前\n  |           ^^^^\n" in out


def test_text_control_characters_are_shown_as_symbols() -> None:
    out = _one(Span("a.luma", 1, 2), "a\x1b[31mb\x00\n")
    assert "\x1b" not in out and "\x00" not in out
    assert "1 | a\u241b[31mb\u2400\n" in out


def test_text_long_lines_are_cut_around_the_span() -> None:
    line = "a" * 300 + "$" + "b" * 300
    out = _one(Span("a.luma", 300, 301), line + "\n")
    shown = out.splitlines()[2]
    caret = out.splitlines()[3]
    assert shown.startswith("1 | ...") and shown.endswith("...")
    assert len(shown) < 140
    assert shown[caret.index("^")] == "$"


def test_text_related_spans_are_notes_with_their_own_snippet() -> None:
    out = render_text(demo_diagnostics()[:1], source_lookup(demo_sources()))
    assert out == (
        "demo.luma:3:3: error[E005]: Field 'id' is declared more than once in schema 'Order'.\n"
        "  |\n"
        "3 |   id: int\n"
        "  |   ^^\n"
        "  = hint: rename one of the fields\n"
        "  = note: first declared here at demo.luma:2:3\n"
        "  |\n"
        "2 |   id: string\n"
        "  |   --\n\n")


def test_text_related_span_on_the_same_line_is_a_note_only() -> None:
    d = demo_diagnostics()[3]
    out = render_text([d], source_lookup(demo_sources()))
    assert out.count("6 | agent Shop {") == 1
    assert "  = note: named here at demo.luma:6:7\n" in out


def test_text_gutter_widens_for_large_line_numbers() -> None:
    text = "\n" * 99 + "x y\n"
    out = _one(Span("a.luma", 101, 102), text)
    assert out == "a.luma:100:3: error[E001]: msg\n    |\n100 | x y\n    |   ^\n\n"


def test_text_colour_only_when_asked() -> None:
    plain = render_text(demo_diagnostics(), source_lookup(demo_sources()))
    assert "\x1b[" not in plain
    coloured = render_text(demo_diagnostics(), source_lookup(demo_sources()), color=True)
    assert "\x1b[1;33mwarning[W001]\x1b[0m" in coloured
    assert "\x1b[1;31merror[E005]\x1b[0m" in coloured


def test_text_without_a_readable_source_still_has_the_headline(tmp_path: Path) -> None:
    missing = str(tmp_path / "gone.luma")
    d = Diagnostic("error", "E001", "msg", Span(missing, 5, 6))
    assert render_text([d], source_lookup()) == f"{missing}:1:1: error[E001]: msg\n\n"


def test_source_lookup_reads_other_files_from_disk(tmp_path: Path) -> None:
    path = tmp_path / "tools.py"
    path.write_text("import os\nraise X\n", encoding="utf-8")
    loc = locate(Span(str(path), 10, 17), source_lookup())
    assert (loc.line, loc.column, loc.end_line, loc.end_column) == (2, 1, 2, 8)


# ------------------------------------------------------------------------------------- json

def test_json_fields_are_one_based_with_an_exclusive_end() -> None:
    items = json.loads(render_json(demo_diagnostics(), source_lookup(demo_sources())))
    assert items[0] == {
        "file": "demo.luma", "line": 3, "column": 3, "end_line": 3, "end_column": 5,
        "severity": "error", "code": "E005",
        "message": "Field 'id' is declared more than once in schema 'Order'.",
        "hint": "rename one of the fields",
        "related": [{"file": "demo.luma", "line": 2, "column": 3, "end_line": 2, "end_column": 5,
                     "message": "first declared here"}],
    }
    multi = items[3]
    assert (multi["line"], multi["end_line"], multi["end_column"]) == (6, 8, 2)
    assert items[1]["hint"] is None


# ----------------------------------------------------------------------------------- github

def test_github_escapes_data_and_properties() -> None:
    text = "x\n"
    d = Diagnostic("warning", "W005", "100% sure:\r\nsecond, part", Span("dir,a:b.luma", 0, 1),
                   hint="h: 50%")
    out = render_github([d], source_lookup([SourceFile("dir,a:b.luma", text)]))
    assert out == ("::warning file=dir%2Ca%3Ab.luma,line=1,col=1,endLine=1,endColumn=2,"
                   "title=W005::100%25 sure:%0D%0Asecond, part%0Ahint: h: 50%25\n")


def test_github_paths_are_relative_to_the_workspace(tmp_path: Path) -> None:
    inside = tmp_path / "src" / "a.luma"
    outside = Path("/elsewhere/b.luma")
    sources = {str(p): SourceFile(str(p), "x\n") for p in (inside, outside)}
    diags = [Diagnostic("error", "E001", "m", Span(p, 0, 1)) for p in sources]
    out = render_github(diags, source_lookup(sources), root=tmp_path)
    assert [line.split(",")[0] for line in out.splitlines()] == [
        "::error file=src/a.luma", "::error file=/elsewhere/b.luma"]


def test_github_related_spans_are_note_lines() -> None:
    out = render_github(demo_diagnostics()[:1], source_lookup(demo_sources()))
    assert out.endswith("::Field 'id' is declared more than once in schema 'Order'.%0A"
                        "hint: rename one of the fields%0Anote: first declared here at "
                        "demo.luma:2:3\n")


# ------------------------------------------------------------------------------------ sarif

def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/definitions/{name}"}


def _closed(required: list[str], **properties: object) -> dict[str, object]:
    return {"type": "object", "additionalProperties": False, "required": required,
            "properties": properties}


# The parts of the SARIF 2.1.0 schema (OASIS) that a luma log uses, with the same property
# names, required properties, enums and minimums; objects are closed as they are there.
SARIF_STRUCTURE: dict[str, object] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "definitions": {
        "message": {"type": "object", "additionalProperties": False,
                    "properties": {"text": {"type": "string"}, "id": {"type": "string"}},
                    "anyOf": [{"required": ["text"]}, {"required": ["id"]}]},
        "multiformatMessageString": _closed(["text"], text={"type": "string"}),
        "artifactLocation": _closed([], uri={"type": "string", "format": "uri-reference"},
                                    uriBaseId={"type": "string"}),
        "region": _closed(
            ["startLine"], startLine={"type": "integer", "minimum": 1},
            startColumn={"type": "integer", "minimum": 1},
            endLine={"type": "integer", "minimum": 1},
            endColumn={"type": "integer", "minimum": 1}),
        "physicalLocation": _closed(["artifactLocation", "region"],
                                    artifactLocation=_ref("artifactLocation"),
                                    region=_ref("region")),
        "location": _closed(["physicalLocation"], id={"type": "integer", "minimum": -1},
                            physicalLocation=_ref("physicalLocation"), message=_ref("message")),
        "reportingConfiguration": _closed(
            [], level={"enum": ["none", "note", "warning", "error"]}),
        "reportingDescriptor": _closed(
            ["id", "shortDescription", "defaultConfiguration"], id={"type": "string"},
            shortDescription=_ref("multiformatMessageString"),
            defaultConfiguration=_ref("reportingConfiguration")),
        "toolComponent": _closed(
            ["name", "version", "rules"], name={"type": "string"}, version={"type": "string"},
            rules={"type": "array", "uniqueItems": True, "items": _ref("reportingDescriptor")}),
        "result": _closed(
            ["ruleId", "ruleIndex", "level", "message", "locations"],
            ruleId={"type": "string"}, ruleIndex={"type": "integer", "minimum": -1},
            level={"enum": ["none", "note", "warning", "error"]}, message=_ref("message"),
            locations={"type": "array", "minItems": 1, "maxItems": 1, "items": _ref("location")},
            relatedLocations={"type": "array", "uniqueItems": True,
                              "items": {"allOf": [_ref("location"), {"required": ["id"]}]}}),
        "run": _closed(
            ["tool", "results"], tool=_closed(["driver"], driver=_ref("toolComponent")),
            columnKind={"enum": ["utf16CodeUnits", "unicodeCodePoints"]},
            results={"type": "array", "items": _ref("result")}),
    },
    **_closed(["version", "runs"], **{
        "$schema": {"type": "string", "format": "uri"}, "version": {"enum": ["2.1.0"]},
        "runs": {"type": "array", "minItems": 1, "maxItems": 1, "items": _ref("run")},
    }),
}


def _sarif(diagnostics: list[Diagnostic], sources: dict[str, SourceFile],
           root: Path | None = None) -> dict:  # type: ignore[type-arg]
    log = json.loads(render_sarif(diagnostics, source_lookup(sources), root=root))
    jsonschema.Draft7Validator(
        SARIF_STRUCTURE, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER).validate(log)
    return log  # type: ignore[no-any-return]


def test_sarif_has_the_required_structure() -> None:
    log = _sarif(demo_diagnostics(), demo_sources())
    assert log["$schema"].endswith("sarif-schema-2.1.0.json")
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "luma" and driver["version"] == "0.1.0"
    assert [r["id"] for r in driver["rules"]] == list(CODES)
    assert {r["id"]: r["shortDescription"]["text"] for r in driver["rules"]} == CODES
    for result in run["results"]:
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
    first = run["results"][0]
    assert first["level"] == "error"
    assert first["message"]["text"] == ("Field 'id' is declared more than once in schema "
                                        "'Order'.\nhint: rename one of the fields")
    assert first["relatedLocations"] == [{
        "id": 0, "message": {"text": "first declared here"},
        "physicalLocation": {"artifactLocation": {"uri": "demo.luma", "uriBaseId": "%SRCROOT%"},
                             "region": {"startLine": 2, "startColumn": 3, "endLine": 2,
                                        "endColumn": 5}}}]
    assert run["results"][1]["level"] == "warning"


def test_sarif_rejects_what_the_structure_forbids() -> None:
    """The structural schema is strict enough to catch a malformed log."""
    log = _sarif(demo_diagnostics(), demo_sources())
    log["runs"][0]["results"][0]["level"] = "fatal"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(log, SARIF_STRUCTURE)
    log = _sarif(demo_diagnostics(), demo_sources())
    del log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(log, SARIF_STRUCTURE)


def test_sarif_uris_are_relative_and_encoded_or_absolute_outside_the_root(tmp_path: Path) -> None:
    inside = tmp_path / "my dir" / "a b.luma"
    outside = Path("/elsewhere/x.luma")
    sources = {str(inside): SourceFile(str(inside), "x\n"),
               str(outside): SourceFile(str(outside), "x\n"),
               "rel/c#d.luma": SourceFile("rel/c#d.luma", "x\n")}
    diags = [Diagnostic("error", "E001", "m", Span(p, 0, 1)) for p in sources]
    log = _sarif(diags, sources, root=tmp_path)
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"]
            for r in log["runs"][0]["results"]]
    assert uris == [{"uri": "my%20dir/a%20b.luma", "uriBaseId": "%SRCROOT%"},
                    {"uri": "file:///elsewhere/x.luma"},
                    {"uri": "rel/c%23d.luma", "uriBaseId": "%SRCROOT%"}]


def test_sarif_unknown_codes_still_get_a_rule() -> None:
    d = Diagnostic("error", "X999", "m", Span("demo.luma", 0, 1))
    log = _sarif([d], demo_sources())
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert rules[-1]["id"] == "X999"
    assert log["runs"][0]["results"][0]["ruleIndex"] == len(rules) - 1


def test_sarif_columns_count_code_points() -> None:
    text = "名前 = 😀 + x\n"
    span = Span("u.luma", text.index("x"), text.index("x") + 1)
    log = _sarif([Diagnostic("error", "E038", "m", span)], {"u.luma": SourceFile("u.luma", text)})
    run = log["runs"][0]
    assert run["columnKind"] == "unicodeCodePoints"
    assert run["results"][0]["locations"][0]["physicalLocation"]["region"]["startColumn"] == 10


def test_render_rejects_an_unknown_format() -> None:
    with pytest.raises(ValueError, match="unknown format 'xml'"):
        render("xml", [], source_lookup())
