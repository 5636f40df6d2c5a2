"""The parsers against Lark: the same grammar, the same programs, the same AST.

``luma/syntax/tables.py`` is generated from ``grammar/luma.lark``; these tests check that it is
up to date, and that running it gives exactly what Lark's own LALR parser (contextual lexer,
the newline post-lexer) gives: the same tree for every program, a failure for the same texts.
The recursive descent (``luma/syntax/descent.py``), which every program goes through first,
must give the tables' tree whenever it gives one, and must give one for every program in the
repository (it declines only texts that are wrong or that the contextual lexer splits its own
way).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from luma.syntax import ast, descent, tables, tablegen
from luma.syntax.grammar import grammar_text
from luma.syntax.parse import NoParse, Token, _Refused, _StringError, _ToAst
from luma.syntax.parse import lark_parser
from luma.syntax.parse import parse_text, run_tables

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import corpus  # noqa: E402  (bench/corpus.py)

PROGRAMS = sorted({*ROOT.glob("tests/**/*.luma"), *ROOT.glob("examples/**/*.luma")})
SEEDS = sorted({p.read_text(encoding="utf-8") for p in PROGRAMS} | {corpus.TEMPLATE.format(n=7)})


class _LarkTokensToAst:
    """The transformer methods, handed Lark's tokens as the parse module's ``Token``s."""

    def __init__(self, file: str) -> None:
        self.builder = _ToAst(file)

    def __getattr__(self, name: str) -> Any:
        from lark import Token as LarkToken

        method = getattr(self.builder, name)  # AttributeError: Lark builds a tree node

        def call(children: list[Any]) -> Any:
            return method([Token(c.type, str(c), c.start_pos, c.end_pos)
                           if isinstance(c, LarkToken) else c for c in children])
        return call


_REFERENCE: dict[str, Any] = {}


def lark_reference(text: str, file: str = "t.luma") -> Any:
    """What Lark's own parser, with the transformer inline, makes of ``text``: the AST, or
    ``NoParse``."""
    from lark.exceptions import UnexpectedInput

    if file not in _REFERENCE:
        _REFERENCE[file] = (_LarkTokensToAst(file),)
        _REFERENCE[file] += (tablegen.build_lark(grammar_text(),
                                                 transformer=_REFERENCE[file][0]),)
    transformer, parser = _REFERENCE[file]
    transformer.builder.text = text  # the source, as run_tables gives it (a sql string's offsets)
    try:
        return parser.parse(text)
    except UnexpectedInput:
        return NoParse


def tables_result(text: str, file: str = "t.luma") -> Any:
    try:
        return run_tables(text, file)
    except NoParse:
        return NoParse


def outcome(run: Any, text: str) -> Any:
    try:
        return run(text)
    except _StringError as exc:
        return ("string error", exc.problem.message, exc.problem.offset)
    except _Refused as exc:  # a number literal past its limit: the same transformer method
        return ("refused", exc.diagnostic)


def descent_result(text: str, file: str = "t.luma") -> Any:
    try:
        return descent.parse(text, file)
    except descent.Declined:
        return descent.Declined


def assert_same(text: str) -> None:
    expected = outcome(lark_reference, text)
    got = outcome(tables_result, text)
    by_descent = descent_result(text)
    if by_descent is not descent.Declined:
        # what the descent parses, the tables parse into the same tree
        assert isinstance(got, ast.Program) and by_descent == got, text
    if isinstance(got, tuple) and got[0] == "refused" and got[1].code == "E047":
        # The tables also count nesting (MAX_NESTING), which Lark does not: what they refuse
        # is a program Lark parses, or one whose syntax error comes after the nesting (the
        # parse stops at the limit, before reaching it), so the refusal is the limit and not
        # the grammar.
        assert isinstance(expected, ast.Program) or expected is NoParse, text
        return
    assert got == expected, text


def test_tables_are_generated_from_the_grammar() -> None:
    import hashlib

    digest = hashlib.sha256(grammar_text().encode("utf-8")).hexdigest()
    assert tables.GRAMMAR_SHA256 == digest, \
        "luma/syntax/tables.py is out of date: run python -m luma.syntax.tablegen"


def test_regenerating_the_tables_gives_the_committed_file() -> None:
    import lark

    # pyproject pins the Lark that made the tables: its analysis decides their state numbers
    assert lark.__version__ == tables.LARK_VERSION, \
        f"the tables were made with Lark {tables.LARK_VERSION}, this is {lark.__version__}: " \
        "install the pinned Lark, or regenerate with python -m luma.syntax.tablegen"
    current = tablegen.TABLES_PATH.read_text(encoding="utf-8")
    assert tablegen.generate(grammar_text()) == current, \
        "luma/syntax/tables.py is out of date: run python -m luma.syntax.tablegen"


def test_generation_does_not_depend_on_hash_order() -> None:
    program = ("import sys; from luma.syntax import tablegen; from luma.syntax.grammar import "
               "grammar_text; sys.stdout.write(tablegen.generate(grammar_text()))")
    outputs = {subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}, check=True).stdout
               for seed in ("1", "12345")}
    assert len(outputs) == 1


def test_every_rule_has_a_method_or_never_needs_one() -> None:
    builder = _ToAst("t.luma")
    for origin, length, name, include, append_none, expand1 in tables.RULES:
        if name is None or hasattr(builder, name):
            continue
        # a `?rule` whose one child replaces it: its method is never called
        assert expand1 and length == 1 and include is None and not append_none, origin


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_program_parses_as_lark_parses_it(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert_same(text)
    if isinstance(outcome(tables_result, text), ast.Program):
        assert descent_result(text) is not descent.Declined, "the descent declined a program"


def test_a_generated_contract_parses_as_lark_parses_it() -> None:
    text = corpus.TEMPLATE.format(n=3)
    assert_same(text)
    assert tables_result(text) is not NoParse
    assert descent_result(text) is not descent.Declined


@pytest.mark.parametrize("text", [
    "",
    "\n\n",
    "// only a comment",
    "x = a android",  # a state that takes `and` but no name lexes `and` + `roid`
    "x = a and\n  b",
    "else = 1\nx = else",  # `else` is a name where `else` cannot follow
    "if a { b }\n\n  else { c }",
    "if a { b } else if c { d }\nelse { e }",
    "try { a() }\ncatch e { b }",
    "catch = 1",
    "x = tool t({a: 1})\ny = ask \"q {x}\" -> T using tool t",
    "schema D = A | B tagged by kind",
    "schema D = A | B tagged by tagged",
    "schema S { a: int, b?: string[] @length(1, 2), c: map[int] }",
    "tool t(a: int,) -> R { needs db: Db, retries: 3 }",
    "x = 1.5e3 + 2e-1 - 3 * -4 / 5 % 6",
    "x = [1, 2,\n 3,]\ny = {a: 1,\n \"b\": 2}",
    "x = f(\n  a,\n  b\n)\ny = (1 +\n 2)",
    'x = """long\n  "text" """',
    "x = a /* note */ + b",
    "x = not a == b or c != d and e <= f",
    "agent A { model: M\n fn run(a: int) -> int { return a } }",
    "x = 1 y = 2",
    "schema { }",
    "x = ",
    "x = (1",
    "x = \"open",
    "x = 'single'",
    "x = a & b",
    "/* never closed",
    "schema S { a: int } }",
    "x = \"bad {escape\\q}\"",
    "x = \"\\u{110000}\"",
    "x = 1\r\ny = 2\r\n",
    "\tx\f=\t1",
    "x = a.b[0](c).d",
    "return",
    "throw e",
    "for x in xs { }",
    "fn",
    "x = tool",
    "x = schemas",
    "schema S { tool: int, model: string, if: bool }",  # keywords a state does not take are names
    "x = {schema: 1, agent: 2}",
    # a word that continues the line only as a keyword: a name here, so the newline separates
    "x = a.tool\n(y)",
    "x = a.and\n-1",
    "and = 1\nx = and\n-1",
    "x = a and\n b or\n c",
    "x = not\n b",
    "x = ask\n \"q\" -> T using\n tool\n t",
    "x = tool\n t(1)",
    "test \"t\" {\n mock tool\n t returns 1\n check x, \"m\"\n model: M\n}",
    "test \"t\" {\n if a { model = 1 }\n assert = 2\n}",
    "x = a == not",
    "x = a + ask",
    "x = -5 - -2.5 - --3",
    "x = (a).b\ny = ((a))",
    "x = 1 +\nelse",
    "x = a\nelse",
    "tool t() -> int {}\ntool t(a)\ntool t(a: int) -> int { needs k: string }",
    "query q(a: int) { sql: \"select :a\" }\ncommand c() -> R { sql: \"x\" }",
    "datasource D { url: \"u\" }",
    "agent A { fn f() { try { a() }\n catch e { b() } }\n fn g() -> int[][] { return } }",
    "x = f(a,)\ny = [1,]\nz = {a: 1,}",
    "schema S { a: enum[\"x\", \"y\",], b: map[map[int]][] }",
    "x = {\"k\": 1, \"\"\"k\"\"\": 2}",
    "x = 1,\ny = 2,",
    "x = 1 // c\n/* d */ y = 2",
    "x = 9007199254740991\ny = 9007199254740992",
    "x = 1e999",
    "x = \"a {b} c\"  \n  ",
    "x = 1 # no",
    "x = 1 // a comment that ends the file",
    "y = a //x  ",
    "x = 1 /* c */",
    "x = 1\n// c\n/* d",
    "x\r",
    "return\nelse",
    "throw\n else",
    "x = a\n  else",
    "if a { b }\n// c\nelse { c }",
    "try { a }\n\n catch e { b }\ncatch = 1",
    "x = a\rb",
    "x = 1\r\n\r\ny = 2\r",
    "x = a andb",
    "for x inxs { }",
    "schema D = A | B taggedby kind",
    "tool t(tool: int) -> R {}",  # the first parameter: where a call's argument could begin
    "tool t(a: int, tool: int, true: int) -> R {}",
])
def test_edge_cases_parse_as_lark_parses_them(text: str) -> None:
    assert_same(text)


TOKENS = ["schema", "tool", "agent", "model", "fn", "if", "else", "for", "in", "return", "try",
          "catch", "throw", "ask", "using", "tagged", "by", "needs", "enum", "map", "{", "}", "(",
          ")", "[", "]", ",", ":", "=", "->", "|", "@", ".", "?", "\n", '"', '"""', "/*", "*/",
          "//", "\\", "{x}", "1", "-", "1e", "0.5", "and", "not", "or", "==", " ", "\t", "\r\n",
          "é", "\x00", "android", "order", "x", "true", "null", "\n else", "\ncatch"]


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_mutated_programs_parse_as_lark_parses_them(data: st.DataObject) -> None:
    text = data.draw(st.sampled_from(SEEDS))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(text)))
        action = data.draw(st.sampled_from(["insert", "delete", "replace"]))
        if action == "insert":
            text = text[:pos] + data.draw(st.sampled_from(TOKENS)) + text[pos:]
        elif action == "delete":
            text = text[:pos] + text[pos + data.draw(st.integers(1, 12)):]
        else:
            text = text[:pos] + data.draw(st.sampled_from(TOKENS)) + text[pos + 1:]
    assert_same(text)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(TOKENS + [" ", "\n", "a", "b", "f(", ")", "\"s\""]), max_size=30))
def test_token_soup_parses_as_lark_parses_it(parts: list[str]) -> None:
    assert_same(" ".join(parts))
    assert_same("".join(parts))


@pytest.mark.parametrize("text", [
    "x = " + "[" * 100 + "]" * 100,
    "x = " + "[" * 101 + "]" * 101,
    "x = " + "-" * 101 + "1",
    "x = " + " + ".join(["a"] * 101),
    "x = " + " + ".join(["a"] * 102),
    "x = a" + ".b" * 101,
    "schema S { a: int" + "[]" * 101 + " }",
    "schema S { a: " + "map[" * 101 + "int" + "]" * 101 + " }",
    "fn_body = 1\n" + "if a {\n" * 101 + "}\n" * 101,
])
def test_nesting_at_the_limit_parses_as_the_tables_parse_it(text: str) -> None:
    """The descent counts the levels of nesting the tables count, and declines where they
    refuse (E047), or where Python's own stack runs out."""
    tables_said = outcome(tables_result, text)
    by_descent = descent_result(text)
    if isinstance(tables_said, ast.Program):
        assert by_descent == tables_said
    else:
        assert by_descent is descent.Declined


def test_the_descent_continues_lines_after_what_the_newline_rules_name() -> None:
    """The descent's words and punctuation after which a newline is no separator are the
    kinds of token ``CONTINUES_AFTER`` names (the newline itself aside), each of its texts."""
    import re

    from luma.syntax.lexer import CONTINUES_AFTER

    kinds = set()
    for text in descent._CONTINUES:
        kind = tables.KEYWORDS.get(text)
        if kind is None:
            kind = next(k for k in tables.MASTER if re.fullmatch(tables.TERMINALS[k], text))
        kinds.add(kind)
    assert kinds == CONTINUES_AFTER - {"_NL"}
    assert {t for t, v in descent._CONTINUES.items() if v == descent._SOFT} == {
        t for t, k in tables.KEYWORDS.items() if k in CONTINUES_AFTER}
    for kind in ("COMP_OP", "MUL_OP"):  # every text of the operators
        pattern = tables.TERMINALS[kind].strip("(?:)").replace("\\", "")
        assert {t for t in descent._CONTINUES if re.fullmatch(tables.TERMINALS[kind], t)} == \
            set(pattern.split("|"))


def test_parentheses_past_the_stack_are_parsed_by_the_tables() -> None:
    """Parentheses are no level of nesting: 300 of them are a program, deeper than the descent
    recurses, which declines; the parse goes on with the tables."""
    text = "x = " + "(" * 300 + "a" + ")" * 300
    assert descent_result(text) is descent.Declined
    program, diagnostics = parse_text(text)
    assert diagnostics == [] and program == tables_result(text, "<input>")


_WORDS = ["x", "y", "f", "else", "catch", "and", "or", "not", "ask", "tool", "using", "schema",
          "fn", "agent", "model", "test", "mock", "check", "assert", "returns", "throws", "if",
          "for", "in", "return", "try", "throw", "true", "null", "enum", "map", "needs",
          "tagged", "by", "query", "command", "datasource", "S", "int", "string"]
_MARKS = [*"{}()[]:,.=@|?<>+-*/%", "->", "==", "!=", "\n", "\n", "\n", " ", ",\n", '"s"',
          '"{x}"', '"""l"""', "1", "2.5", "\r\n", "// c\n", "/* c */", "\r", "\n else",
          "\ncatch"]


@pytest.mark.parametrize("seed", range(4))
def test_what_the_descent_takes_from_token_soup_the_tables_parse_the_same(seed: int) -> None:
    """Many short random texts of words and marks, compared with the tables only (quicker than
    Lark): whatever the descent parses, the tables parse into the same tree."""
    import random

    rng = random.Random(seed)
    taken = 0
    for _ in range(20000):
        text = " ".join(rng.choice(_WORDS if rng.random() < 0.5 else _MARKS)
                        for _ in range(rng.randint(1, 14)))
        by_descent = descent_result(text)
        if by_descent is not descent.Declined:
            taken += 1
            assert by_descent == outcome(tables_result, text), text
    assert taken > 100  # the texts do reach the descent's programs


def test_a_syntax_error_is_described_by_lark() -> None:
    program, diagnostics = parse_text("schema S {\n  a int\n}", "s.luma")
    assert program is None
    assert [d.message for d in diagnostics] == ["expected ':' after the field name 'a'"]


def test_the_wheel_lists_every_package_and_the_grammar() -> None:
    """pyproject lists the packages (the grammar's lives outside luma/, where a find would miss
    it): every package of the source tree, and the grammar with its .lark file."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    packages = set(config["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts)
             for p in (ROOT / "luma").rglob("__init__.py")}
    assert packages == found | {"luma.grammar"}
    assert config["setuptools"]["package-dir"]["luma.grammar"] == "grammar"
    assert config["setuptools"]["package-data"]["luma.grammar"] == ["*.lark"]
    assert (ROOT / "grammar" / "__init__.py").is_file()
