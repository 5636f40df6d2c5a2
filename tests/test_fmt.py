"""``luma fmt``: the canonical layout, its properties (idempotent, meaning-preserving, no comment
lost) over every ``.luma`` file of the repository and over generated programs, and the command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_runner import ROOT, luma
from luma.syntax.format import FormatError, ast_shape, format_text
from luma.syntax.parse import parse_text

FILES = sorted(p for p in ROOT.glob("**/*.luma")
               if not any(part.startswith(".") for part in p.relative_to(ROOT).parts))
PARSING = [p for p in FILES if parse_text(p.read_text(encoding="utf-8"))[0] is not None]
_COMMENT = re.compile(r'"""(?:\\.|[^\\])*?"""|"(?:\\.|[^"\\\n])*"|(//[^\n]*|/\*[\s\S]*?\*/)')


def comments(text: str) -> list[str]:
    return [m.group(1).rstrip() for m in _COMMENT.finditer(text) if m.group(1)]


def _sequence(text: str) -> list[str]:
    """The tokens and comments in order, without the commas (the layout adds or drops them)."""
    from luma.syntax.format import tokenize

    return [it.text for it in tokenize(text) if it.text != ","]


def assert_formats_well(text: str) -> str:
    out = format_text(text, "prop.luma")
    before, _ = parse_text(text)
    after, diagnostics = parse_text(out)
    assert after is not None, diagnostics
    assert ast_shape(after) == ast_shape(before)
    assert format_text(out, "prop.luma") == out
    assert comments(out) == comments(text)
    assert _sequence(out) == _sequence(text)  # no comment moved past a token
    assert out.endswith("\n") and not out.endswith("\n\n")
    assert not any(line != line.rstrip() for line in out.split("\n") if '"""' not in line)
    return out


def test_the_repository_has_files_to_format() -> None:
    assert len(PARSING) > 50 and len(PARSING) > 0.75 * len(FILES)  # most of them parse


@pytest.mark.parametrize("path", PARSING, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_luma_file_formats_idempotently_keeping_meaning_and_comments(path: Path) -> None:
    assert_formats_well(path.read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------- the layout

CASES = [
    ("schema A{x:int,  y ?:string@desc( \"d\" )}\n",
     'schema A { x: int, y?: string @desc("d") }\n'),
    ("schema A {\n    x : int\n\n\n\n    y: string[ ]\n}\n",
     "schema A {\n  x: int\n\n  y: string[]\n}\n"),
    ("schema A { x: int }\nschema B { y: int }\n",
     "schema A { x: int }\n\nschema B { y: int }\n"),
    ("tool t(a: int,\n    b: float\n       @range(0, 1)) -> R {}\n",
     "tool t(\n  a: int,\n  b: float @range(0, 1),\n) -> R {}\n"),
    ("x = [1,2 ,3,]\ny = f( a , b )\n", "x = [1, 2, 3]\ny = f(a, b)\n"),
    ("x = [\n1,\n2\n]\n", "x = [\n  1,\n  2,\n]\n"),
    ("model M { provider: \"test\",\n name: \"n\", }\n",
     'model M {\n  provider: "test"\n  name: "n"\n}\n'),
    ("x=-1\ny = a-b*-c\nz = not(a)and b\nw = -(a)\n",
     "x = -1\ny = a - b * -c\nz = not (a) and b\nw = -(a)\n"),
    ("agent A {\n  fn f() {\n    if a {\n      b = 1\n    }\n    else {\n      b = 2\n    }\n"
     "  }\n  fn g() {}\n}\n",
     "agent A {\n  fn f() {\n    if a {\n      b = 1\n    } else {\n      b = 2\n    }\n  }\n\n"
     "  fn g() {}\n}\n"),
    ("x = tool f({\n      a: 1\n  })\n", "x = tool f({\n  a: 1\n})\n"),
    ("x = a +\nb\n", "x = a +\n  b\n"),
    ("x = \"\"\"\n      kept   as\n   written\n  \"\"\"\n",
     'x = """\n      kept   as\n   written\n  """\n'),
    ("a = 1 // one\nbbb = 2 // two\n\nc = 3    // three\n",
     "a = 1    // one\nbbb = 2  // two\n\nc = 3  // three\n"),
    ("schema A {\n  x: int\n      // about the end\n}\n",
     "schema A {\n  x: int\n  // about the end\n}\n"),
    ("schema A { /* inline */ x: int }\n", "schema A { /* inline */ x: int }\n"),
    ("// head\n\n\n\nschema A {}\n// about B\nschema B {\n}\n",
     "// head\n\nschema A {}\n\n// about B\nschema B {}\n"),
    ("schema D = A|B tagged  by kind\n", "schema D = A | B tagged by kind\n"),
    ("x = a[0].b[\"k\"]\ny: map[ int ] = {}\nz = ask \"q\"->enum[ \"a\",\"b\" ] using tool t\n",
     'x = a[0].b["k"]\ny: map[int] = {}\nz = ask "q" -> enum["a", "b"] using tool t\n'),
    ("\n\nx = 1\n\n\n", "x = 1\n"),
    # an assert's ',' before its message is kept, also at the end of a line
    ('test "t" {\n  assert a == 1 ,"m"\n    check b,\n"n"\n}\n',
     'test "t" {\n  assert a == 1, "m"\n  check b,\n    "n"\n}\n'),
    # and so in the blocks of a test
    ('test "t" {\nfor n in [1,2] {\n mock tool t returns n\nif n>1 {\nassert n == 2 ,"m"\n'
     '  check b,\n"n"\n}\n}\n}\n',
     'test "t" {\n  for n in [1, 2] {\n    mock tool t returns n\n    if n > 1 {\n'
     '      assert n == 2, "m"\n      check b,\n        "n"\n    }\n  }\n}\n'),
    # `else` after a declaration's `}` is a name on a line of its own, not an else clause
    ("agent A {}\nelse\n", "agent A {}\n\nelse\n"),
]


@pytest.mark.parametrize(("source", "expected"), CASES)
def test_layout(source: str, expected: str) -> None:
    assert format_text(source) == expected
    assert_formats_well(source)


def test_a_syntax_error_is_reported_not_formatted() -> None:
    with pytest.raises(FormatError) as info:
        format_text("schema {\n")
    assert info.value.diagnostics[0].code == "E001"
    assert info.value.diagnostics[0].message == (
        "expected a name after the keyword 'schema', found '{'")


# ------------------------------------------------------------------- generated programs

_names = st.sampled_from(["a", "b", "total", "item", "x1"])
_space = st.sampled_from(["", " ", "  ", "\t"])
_comment = st.sampled_from(["", "", " // note", " /* c */"])
_annotation = st.sampled_from(["", ' @desc("d")', " @range(0, 1)"])


@st.composite
def _expr(draw: st.DrawFn, depth: int = 0) -> str:
    leaf = st.one_of(_names, st.sampled_from(["1", "-2", "0.5", "true", "null", '"s {a}"']))
    if depth > 2:
        return draw(leaf)
    kind = draw(st.integers(0, 7))
    sub = _expr(depth + 1)
    s = draw(_space)
    if kind == 0:
        return draw(leaf)
    if kind == 1:
        op = draw(st.sampled_from(["+", "-", "*", "==", "and", "or", "<="]))
        return f"{draw(sub)}{s or ' '}{op}{s or ' '}{draw(sub)}"
    if kind == 2:
        items = draw(st.lists(sub, max_size=3))
        sep = draw(st.sampled_from([",", ", ", ",\n"]))
        trail = draw(st.sampled_from(["", ","])) if items else ""
        return f"[{s}{sep.join(items)}{trail}{s}]"
    if kind == 3:
        entries = draw(st.lists(st.tuples(_names, sub), max_size=3, unique_by=lambda e: e[0]))
        sep = draw(st.sampled_from([", ", "\n", ",\n"]))
        return "{" + s + sep.join(f"{k}{s}:{s}{v}" for k, v in entries) + s + "}"
    if kind == 4:
        return f"{draw(_names)}({s}{', '.join(draw(st.lists(sub, max_size=2)))}{s})"
    if kind == 5:
        return f"{draw(sub)}.{draw(_names)}"
    if kind == 6:
        return f"not {draw(sub)}"
    return f"({s}{draw(sub)}{s})"


@st.composite
def _program(draw: st.DrawFn) -> str:
    parts: list[str] = []
    nl = st.sampled_from(["\n", "\n\n", "\n\n\n"])
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.integers(0, 4))
        c = draw(_comment)
        s = draw(_space)
        if kind == 0:
            fields = [f"{name}{draw(st.sampled_from(['', '?']))}{s}:{s}"
                      f"{draw(st.sampled_from(['int', 'string[]', 'map[float]']))}"
                      f"{draw(_annotation)}{c}"
                      for name in draw(st.lists(_names, min_size=1, max_size=3, unique=True))]
            parts.append(f"schema S{len(parts)}{s}{{\n" + "\n".join(fields) + "\n}")
        elif kind == 1:
            params = draw(st.lists(_names, max_size=3, unique=True))
            sep = draw(st.sampled_from([", ", ",\n"]))
            parts.append(f"tool t{len(parts)}({sep.join(p + ': int' for p in params)})"
                         f"{s}->{s}R{s}{{{c}\n  description: \"d\"\n}}")
        elif kind == 2:
            body = [f"{draw(_names)}{s}={s}{draw(_expr())}{draw(_comment)}"
                    for _ in range(draw(st.integers(0, 3)))]
            cond = draw(_expr())
            parts.append(f"agent A{len(parts)} {{\n  tools: []\n  fn run(){s}{{\n"
                         + "\n".join(body) + f"\n if {cond} {{\n x = 1\n }}{draw(nl)}"
                         "else {\n x = 2 }\n }\n}")
        elif kind == 3:
            parts.append(f"// own line{c}")
        else:
            parts.append(f"{draw(_names)}{s}={s}{draw(_expr())}{c}")
    return "".join(p + draw(nl) for p in parts)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(_program())
def test_generated_programs_format_well(text: str) -> None:
    if parse_text(text)[0] is None:
        return  # a generated name clash or a newline the grammar refuses: nothing to format
    assert_formats_well(text)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(PARSING), st.data())
def test_relaid_repository_programs_format_well(path: Path, data: st.DataObject) -> None:
    """A real program with its spaces changed at random formats to the same text."""
    text = path.read_text(encoding="utf-8")
    canonical = format_text(text)
    pieces = []
    last = 0
    for m in _COMMENT.finditer(canonical):  # strings and comments stay as they are
        pieces.append(re.sub(r"(?<=[,:(\[])(?=[^\n])|(?<=\S)(?= )",
                             lambda _: data.draw(st.sampled_from(["", " ", "  "])),
                             canonical[last:m.start()]))
        pieces.append(m.group())
        last = m.end()
    spaced = "".join(pieces) + canonical[last:]
    if parse_text(spaced)[0] is None or ast_shape(parse_text(spaced)[0]) != ast_shape(
            parse_text(canonical)[0]):
        return  # the spaces changed a token (inside a string, between two words)
    assert format_text(spaced) == canonical


# ------------------------------------------------------------------------------ the command

def test_check_lists_the_files_that_would_change_and_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "ugly.luma").write_text("schema A{x:int}\n", encoding="utf-8")
    (tmp_path / "fine.luma").write_text("schema A { x: int }\n", encoding="utf-8")
    done = luma("fmt", "--check", str(tmp_path))
    assert done.code == 1
    assert done.stdout == f"{tmp_path / 'ugly.luma'}\n"
    assert done.stderr == "luma fmt: 1 file would change, 1 already formatted\n"
    assert (tmp_path / "ugly.luma").read_text(encoding="utf-8") == "schema A{x:int}\n"
    assert luma("fmt", "--check", str(tmp_path / "fine.luma")).code == 0


def test_diff_prints_a_unified_diff_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ugly.luma"
    path.write_text("schema A{x:int}\n", encoding="utf-8")
    done = luma("fmt", "--diff", str(path))
    assert done.code == 0
    assert done.stdout == (f"--- {path} (before)\n+++ {path} (formatted)\n"
                           "@@ -1 +1 @@\n-schema A{x:int}\n+schema A { x: int }\n")
    assert path.read_text(encoding="utf-8") == "schema A{x:int}\n"
    assert luma("fmt", "--diff", "--check", str(path)).code == 1


def test_fmt_rewrites_files_in_place_keeping_their_permissions(tmp_path: Path) -> None:
    path = tmp_path / "ugly.luma"
    path.write_text("x=1\n", encoding="utf-8")
    path.chmod(0o640)
    done = luma("fmt", str(tmp_path))
    assert done.code == 0, done.stderr
    assert path.read_text(encoding="utf-8") == "x = 1\n"
    assert path.stat().st_mode & 0o777 == 0o640
    assert done.stderr == (f"formatted {path}\nluma fmt: 1 file formatted, 0 already formatted\n")
    assert [p.name for p in tmp_path.iterdir()] == ["ugly.luma"]
    path.write_text("x=2\n", encoding="utf-8")
    twice = luma("fmt", str(path), str(tmp_path))
    assert twice.stderr == f"formatted {path}\nluma fmt: 1 file formatted, 0 already formatted\n"


def test_a_file_with_a_syntax_error_is_reported_and_left_untouched(tmp_path: Path) -> None:
    bad = tmp_path / "bad.luma"
    bad.write_bytes(b"schema {\r\n  x:int\n")
    ugly = tmp_path / "ugly.luma"
    ugly.write_text("x=1\n", encoding="utf-8")
    done = luma("fmt", str(tmp_path))
    assert done.code == 1
    assert bad.read_bytes() == b"schema {\r\n  x:int\n"
    assert ugly.read_text(encoding="utf-8") == "x = 1\n"
    assert (f"{bad}:1:8: error[E001]: expected a name after the keyword 'schema', found '{{'"
            in done.stderr)
    assert f"luma fmt: {bad} has a syntax error; left as it was\n" in done.stderr
    assert "Traceback" not in done.stderr


def test_stdin_is_formatted_to_stdout() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "luma", "fmt", "-"], input=b"x=[1,2]\n",
                          capture_output=True, cwd=ROOT)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"x = [1, 2]\n", b"")


def test_a_missing_path_is_a_usage_error() -> None:
    done = luma("fmt", "no/such/file.luma")
    assert done.code == 2
    assert done.stderr.endswith("luma fmt: error: path does not exist: no/such/file.luma\n")


# ---------------------------------------------------------------- the repository is formatted

def _luma_blocks() -> list[tuple[str, str]]:
    blocks = []
    for doc in [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]:
        text = doc.read_text(encoding="utf-8")
        for m in re.finditer(r"^(`{3,})luma([^\n]*)\n(.*?)^\1", text, re.S | re.M):
            if "fmt=off" not in m.group(2).split():
                line = text.count("\n", 0, m.start()) + 1
                blocks.append((f"{doc.name}:{line}", m.group(3)))
    return blocks


def test_every_example_is_formatted() -> None:
    examples = [p for p in PARSING if p.is_relative_to(ROOT / "examples")]
    assert len(examples) > 10
    unformatted = [str(p.relative_to(ROOT)) for p in examples
                   if format_text(p.read_text(encoding="utf-8")) != p.read_text(encoding="utf-8")]
    assert unformatted == []


def test_every_docs_snippet_is_formatted() -> None:
    blocks = [(where, text) for where, text in _luma_blocks() if parse_text(text)[0] is not None]
    assert len(blocks) > 20
    assert [where for where, text in blocks if format_text(text) != text] == []


_EDITS = ["\n", "\n\n", " ", ",", " // c\n", "/* b */", "{", "}", "(", ")", "[", "]", ":", "=",
          "-", "@desc(\"d\")", "else", "x", "1"]


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(PARSING), st.data())
def test_mutated_repository_programs_that_parse_format_well(path: Path,
                                                            data: st.DataObject) -> None:
    """A program a few edits away from a real one (as it is while being typed) that still
    parses is formatted, never refused, and keeps its meaning and comments."""
    text = path.read_text(encoding="utf-8")
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(0, len(text)))
        if data.draw(st.booleans()):
            text = text[:pos] + data.draw(st.sampled_from(_EDITS)) + text[pos:]
        else:
            text = text[:pos] + text[pos + data.draw(st.integers(1, 6)):]
    if parse_text(text)[0] is None:
        return
    assert_formats_well(text)
