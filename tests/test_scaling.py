"""Costs that grow in proportion to the input, counted rather than timed: the memory a long string
literal takes to parse, the characters the parser copies out of the text, the bytecode the
parser and the checker run for N and 4N declarations."""

from __future__ import annotations

import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from luma.check import check_program
import pytest

from luma.syntax import ast, descent
from luma.syntax.parse import parse_source, parse_text, run_tables
from luma.syntax.ast import BadPlaceholder, StringLit
from luma.syntax.source import SourceFile, Span
from luma.syntax.strings import StringProblem, _placeholder, parse_string

MB = 1_000_000
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import corpus  # noqa: E402  (bench/corpus.py: every kind of declaration and statement)


def schemas(n: int) -> str:
    return "".join(f"schema S{i} {{\n  a: string\n  b: int @range(0, {i})\n}}\n\n"
                   for i in range(n))


def statements(n: int) -> str:
    lines = ["total = 0"]
    for i in range(n):
        lines.append(f"x{i} = total + {i}")
        lines.append(f"if x{i} > 3 {{ total = x{i} }} else {{ print(\"small {{x{i}}}\") }}")
    lines.append("print(\"{total}\")")
    return "\n".join(lines) + "\n"


def contracts(n: int) -> str:
    """n generated contracts in one file: schemas, a tagged union, tools, a model, an agent
    whose methods call tools, branch, loop, catch and ask."""
    return "".join(corpus.TEMPLATE.format(n=i) for i in range(n))


def peak_memory(work: Callable[[], Any]) -> int:
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# --------------------------------------------------------------------------- long strings


def test_a_long_string_is_parsed_in_memory_in_proportion_to_its_length() -> None:
    body = "abcdefghij" * (MB // 10)
    for text in (f'x = "{body}"\nprint(x)\n', f'x = """\n  {body}\n  """\nprint(x)\n',
                 f'x = "{body[:MB // 2]}\\n{{x}}\\"{body[:MB // 2]}"\nprint(x)\n'):
        program, diags = parse_text(text)
        assert diags == [] and program is not None
        # the text, the token's slice, the body, the value, the parts: a few copies, not one
        # object per character
        peak = peak_memory(lambda: parse_text(text))
        assert peak < 6 * len(text), f"{peak / len(text):.1f} bytes per character"


def _reference_body(raw: str, start: int) -> list[tuple[str, int]]:
    """The characters between the quotes with their offsets, one by one (the plain reading the
    run-based one must agree with)."""
    if not raw.startswith('"""'):
        return [(c, start + 1 + i) for i, c in enumerate(raw[1:-1])]
    lines = raw[3:-3].split("\n")
    offsets, pos = [], start + 3
    for line in lines:
        offsets.append(pos)
        pos += len(line) + 1
    first = 1 if len(lines) > 1 and lines[0].strip() == "" else 0
    last = len(lines) - 1 if len(lines) > 1 and lines[-1].strip() == "" else len(lines)
    kept = list(range(first, last))
    indents = [len(lines[i]) - len(lines[i].lstrip(" \t")) for i in kept if lines[i].strip()]
    cut = min(indents) if indents else 0
    chars = []
    for n, i in enumerate(kept):
        line = lines[i]
        drop = min(cut, len(line) - len(line.lstrip(" \t")))
        chars += [(line[j], offsets[i] + j) for j in range(drop, len(line))]
        if n < len(kept) - 1:
            chars.append(("\n", offsets[i] + len(line)))
    return chars


def _reference_string(raw: str, start: int) -> StringLit | tuple[str, int, int]:
    """What the string means, read one character at a time: the literal, or the escape problem
    and its offsets."""
    escapes = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "{": "{", "}": "}"}
    chars = _reference_body(raw, start)
    value: list[str] = []
    parts: list[Any] = []
    text: list[str] = []
    i = 0
    while i < len(chars):
        c, off = chars[i]
        if c == "\\":
            if i + 1 >= len(chars):
                return ("a string cannot end with a lone backslash", off, off + 1)
            e = chars[i + 1][0]
            if e not in escapes:
                return (f"unknown escape '\\{e}' in a string (use \\\\ for a backslash)", off,
                        off + 2)
            value.append(escapes[e])
            text.append(escapes[e])
            i += 2
        elif c == "{":
            close = i + 1
            while close < len(chars) and chars[close][0] not in "{}\n":
                close += 1
            if text:
                parts.append("".join(text))
                text = []
            if close < len(chars) and chars[close][0] == "}":
                inner = "".join(ch for ch, _ in chars[i + 1:close])
                value.append("{" + inner + "}")
                span = Span("t.luma", off, chars[close][1] + 1)
                parts.append(_placeholder(inner, off + 1, span, "t.luma"))
                i = close + 1
            else:
                value.append("{")
                parts.append(BadPlaceholder("{", Span("t.luma", off, off + 1)))
                i += 1
        else:
            value.append(c)
            text.append(c)
            i += 1
    if text:
        parts.append("".join(text))
    return StringLit("".join(value), tuple(parts), Span("t.luma", start, start + len(raw)))


def _meaning(raw: str, start: int) -> StringLit | tuple[str, int, int]:
    try:
        return parse_string(raw, start, "t.luma")
    except StringProblem as exc:
        return (exc.message, exc.offset, exc.end)


_PIECES = st.sampled_from(["a", " ", "\t", "  x", "\n", "{", "}", "{x}", "{x.y}", "{ x}", "\\n",
                           "\\{", "\\}", "\\\\", "\\q", '\\"', '"', "é", "{a[0]}", "\n    "])


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=12), st.booleans(), st.integers(0, 40))
def test_strings_read_in_runs_mean_what_they_mean_read_one_character_at_a_time(
        pieces: list[str], long: bool, start: int) -> None:
    body = "".join(pieces)
    if long:
        raw = '"""' + body.replace('"', "'") + '"""'
    else:
        raw = '"' + body.replace("\n", "").replace('"', "'") + '"'
    if raw.endswith('\\"') or raw.endswith('\\"""'):
        return  # not one token: the lexer would read on past the closing quote
    assert _meaning(raw, start) == _reference_string(raw, start)


# ------------------------------------------------------------------- the parser's own work


class _CountingText(str):
    """A text that counts the characters sliced out of it."""

    copied = 0

    def __getitem__(self, key: Any) -> str:
        piece = str.__getitem__(self, key)
        _CountingText.copied += len(piece)
        return piece


def test_the_parser_copies_each_character_at_most_once() -> None:
    for text in (schemas(300), statements(200), contracts(5), 'x = "' + "y" * 100_000 + '"\n'):
        _CountingText.copied = 0
        run_tables(_CountingText(text), "t.luma")
        # every token's text once (a name too, which is looked up among the keywords): never
        # the rest of the file, and not the spaces and newlines between tokens
        assert _CountingText.copied <= len(text)


def opcodes(work: Callable[[], Any], package: str) -> int:
    """The bytecode instructions ``work`` runs in the modules of ``package`` (deterministic:
    the same input runs the same instructions)."""
    count = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "opcode":
            count += 1
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_globals.get("__name__", "").startswith(package):
            frame.f_trace_opcodes = True
            return local
        return None

    sys.settrace(tracer)
    try:
        work()
    finally:
        sys.settrace(None)
    return count


@pytest.mark.parametrize("parse", [descent.parse, run_tables], ids=["descent", "tables"])
def test_the_parser_runs_the_same_work_per_declaration_at_any_size(
        parse: Callable[[str, str], ast.Program]) -> None:
    small = opcodes(lambda: parse(schemas(250), "t.luma"), "luma.syntax")
    large = opcodes(lambda: parse(schemas(1000), "t.luma"), "luma.syntax")
    assert large <= 4.02 * small
    small = opcodes(lambda: parse(statements(100), "t.luma"), "luma.syntax")
    large = opcodes(lambda: parse(statements(400), "t.luma"), "luma.syntax")
    assert large <= 4.02 * small
    small = opcodes(lambda: parse(contracts(3), "t.luma"), "luma.syntax")
    large = opcodes(lambda: parse(contracts(12), "t.luma"), "luma.syntax")
    assert large <= 4.02 * small


def test_the_descent_is_the_parser_and_runs_far_less_than_the_tables() -> None:
    """Every program is parsed by the descent first; it runs about half of the tables' bytecode
    (the nodes, their spans and the strings' reading, the same in both, included)."""
    text = contracts(6)
    by_descent = opcodes(lambda: parse_text(text, "t.luma"), "luma.syntax")
    by_tables = opcodes(lambda: run_tables(text, "t.luma"), "luma.syntax")
    assert by_descent < 0.6 * by_tables
    text = schemas(200)
    assert opcodes(lambda: parse_text(text, "t.luma"), "luma.syntax") < 0.6 * opcodes(
        lambda: run_tables(text, "t.luma"), "luma.syntax")


def test_the_descent_slices_each_token_once() -> None:
    """The tokens are slices of the text made once by one regular expression: together no
    longer than the text (the spaces, comments and layout newlines between them not kept)."""
    for text in (schemas(300), statements(200), contracts(5), 'x = "' + "y" * 100_000 + '"\n'):
        toks, starts, _ = descent.tokens(text)
        real = [(t, s) for t, s in zip(toks, starts) if t != "$end"]
        assert sum(len(t) for t, _ in real) <= len(text)
        assert all(text.startswith(t.lstrip("\n"), s) or t == "\n" for t, s in real)


def _checked(text: str) -> Callable[[], Any]:
    program, diags = parse_text(text, "t.luma")
    assert diags == [] and isinstance(program, ast.Program)
    return lambda: check_program(program)


def test_the_checker_runs_the_same_work_per_declaration_at_any_size() -> None:
    small = opcodes(_checked(schemas(250)), "luma.check")
    large = opcodes(_checked(schemas(1000)), "luma.check")
    assert large <= 4.05 * small
    small = opcodes(_checked(statements(100)), "luma.check")
    large = opcodes(_checked(statements(400)), "luma.check")
    assert large <= 4.05 * small
    small = opcodes(_checked(contracts(3)), "luma.check")
    large = opcodes(_checked(contracts(12)), "luma.check")
    assert large <= 4.05 * small


def test_each_default_is_validated_against_a_schema_the_size_of_its_field(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``@default`` or ``@example`` is checked against its field's schema with the definitions
    it reaches, not every definition of the program: the JSON the checks compile grows with the
    number of contracts, not with its square (it did: 300 contracts took four seconds)."""
    import importlib
    import json

    validation = importlib.import_module("luma.schema.validate")

    compiled: list[int] = []
    real = validation.validator_for

    def recording(schema: Any) -> Any:
        compiled.append(len(json.dumps(schema)))
        return real(schema)

    monkeypatch.setattr(validation, "validator_for", recording)
    sizes = []
    for n in (3, 12):
        compiled.clear()
        _checked(contracts(n))()
        assert compiled  # the corpus has defaults and examples to check
        sizes.append(sum(compiled))
    assert sizes[1] <= 4.05 * sizes[0]


def chain(n: int) -> str:
    """n schemas, each needing the next: whether the first has a finite value is known only
    at the end of the chain."""
    return "".join(f"schema S{i} {{ next: S{i + 1} }}\n" for i in range(n)) + \
        f"schema S{n} {{ a: int }}\nschema Loop {{ again: Loop }}\n"


def test_the_finite_value_check_is_linear_on_a_chain_of_schemas() -> None:
    """E045 looks at each schema once (it went over every schema once per link of the chain:
    8,000 linked schemas took 20 s)."""
    small = opcodes(_checked(chain(300)), "luma.check")
    large = opcodes(_checked(chain(1200)), "luma.check")
    assert large <= 4.05 * small


def _finite_by_definition(decls: dict[str, Any]) -> set[str]:
    """The plain reading of E045's rule, for the test below: repeat until nothing changes."""
    finite: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, (kind, parts) in decls.items():
            if name in finite:
                continue
            if kind == "schema":
                ok = all(not (required and t in decls) or t in finite for t, required in parts)
            else:
                ok = any(t not in decls or t in finite for t in parts)
            if ok:
                finite.add(name)
                changed = True
    return finite


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_the_finite_value_check_finds_what_its_rule_says(data: st.DataObject) -> None:
    """Random graphs of schemas and tagged unions: the schemas without a finite value that lie
    on a cycle of what blocks them are the ones reported."""
    names = [f"T{i}" for i in range(data.draw(st.integers(1, 8)))]
    decls: dict[str, Any] = {}
    lines = []
    for name in names:
        if data.draw(st.booleans()):
            fields = data.draw(st.lists(st.tuples(st.sampled_from(names + ["int"]),
                                                  st.sampled_from(["", "?", "[]", "@"])),
                                        max_size=3))
            text = []
            parts = []
            for k, (t, how) in enumerate(fields):
                field = f"f{k}?: {t}" if how == "?" else f"f{k}: {t}[]" if how == "[]" else \
                    f"f{k}: {t} @default({{}})" if how == "@" else f"f{k}: {t}"
                text.append(field)
                parts.append((t, how == ""))
            decls[name] = ("schema", parts)
            lines.append(f"schema {name} {{ {', '.join(text)} }}")
        else:
            members = data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=3,
                                         unique=True))
            decls[name] = ("union", members)
            lines.append(f"schema {name} = {' | '.join(members)} tagged by kind")
    program, diagnostics = parse_text("\n".join(lines) + "\n", "t.luma")
    assert program is not None and diagnostics == []
    reported = {d.message.split("'")[1] for d in check_program(program) if d.code == "E045"}
    finite = _finite_by_definition(decls)

    def reaches(start: str, target: str) -> bool:
        pending, seen = [start], set()
        while pending:
            name = pending.pop()
            if name == target:
                return True
            if name in seen or name not in decls:
                continue
            seen.add(name)
            kind, parts = decls[name]
            pending += ([t for t, required in parts if required and t in decls
                         and t not in finite] if kind == "schema" else list(parts))
        return False

    expected = set()
    for name, (kind, parts) in decls.items():
        if kind == "schema" and name not in finite:
            first = next(t for t, required in parts if required and t in decls
                         and t not in finite)
            if reaches(first, name):
                expected.add(name)
    assert reported == expected


def test_a_bad_placeholder_keeps_its_text() -> None:
    lit = parse_string('"a {b c} d"', 10, "t.luma")
    assert lit.value == "a {b c} d"
    bad = [p for p in lit.parts if isinstance(p, BadPlaceholder)]
    assert [(b.text, b.span.start, b.span.end) for b in bad] == [("{b c}", 13, 18)]


def test_no_collection_runs_during_a_parse_and_the_collector_is_left_as_it_was() -> None:
    import gc

    collections: list[str] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(phase)

    text = schemas(3000)  # far more allocations than one generation holds
    source = SourceFile("t.luma", text)
    gc.callbacks.append(seen)
    try:
        program, _ = parse_source(source)
        # none while it runs; the first allocation after it may start one (over what it made)
        assert program is not None and len(collections) <= 1
        assert gc.isenabled()
        gc.disable()
        try:
            parse_text("x = 1\n")
            assert not gc.isenabled()
        finally:
            gc.enable()
        parse_text("x = \n")  # a syntax error too
        assert gc.isenabled()
    finally:
        gc.callbacks.remove(seen)
