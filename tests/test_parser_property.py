"""Property: for any input — random text, binary garbage, mutated real programs — the front end
answers with a program or with located diagnostics, never an exception."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from luma.compile import check_text

ROOT = Path(__file__).parent
SEEDS = sorted({p.read_text(encoding="utf-8") for p in
                [*ROOT.glob("programs/*.luma"), *ROOT.glob("cases/**/*.luma")]})
TOKENS = ["schema", "tool", "agent", "model", "fn", "if", "else", "for", "in", "return", "try",
          "catch", "throw", "ask", "using", "tagged", "by", "needs", "enum", "map", "{", "}", "(",
          ")", "[", "]", ",", ":", "=", "->", "|", "@", ".", "?", "\n", '"', '"""', "/*", "*/",
          "//", "\\", "{x}", "1", "-", "1e", "0.5", "and", "not", "==", " ", "\t", "\r\n", "é",
          "\x00", "\ufeff"]


def assert_answers(text: str) -> None:
    checked = check_text(text, "prop.luma")
    if checked.program is None:
        assert checked.diagnostics, "a failed parse must say why"
    for d in checked.diagnostics:
        assert d.message and "\n" not in d.message
        assert "Tree(" not in d.message and "Token(" not in d.message
        assert 0 <= d.span.start <= d.span.end <= len(text) + 1
        line, col = checked.source.line_col(d.span.start)
        assert line >= 1 and col >= 1


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(max_size=200))
def test_random_text(text: str) -> None:
    assert_answers(text)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.binary(max_size=200))
def test_binary_garbage(data: bytes) -> None:
    assert_answers(data.decode("utf-8", errors="replace"))


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_mutated_programs(data: st.DataObject) -> None:
    text = data.draw(st.sampled_from(SEEDS))
    for _ in range(data.draw(st.integers(1, 4))):
        if not text:
            break
        pos = data.draw(st.integers(0, len(text)))
        action = data.draw(st.sampled_from(["insert", "delete", "replace", "duplicate"]))
        if action == "insert":
            text = text[:pos] + data.draw(st.sampled_from(TOKENS)) + text[pos:]
        elif action == "delete":
            n = data.draw(st.integers(1, 12))
            text = text[:pos] + text[pos + n:]
        elif action == "replace":
            text = text[:pos] + data.draw(st.sampled_from(TOKENS)) + text[pos + 1:]
        else:
            n = data.draw(st.integers(1, 40))
            text = text[:pos] + text[pos:pos + n] + text[pos:]
    assert_answers(text)


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(SEEDS), st.integers(0, 5))
def test_truncated_programs(text: str, cut: int) -> None:
    for i in range(1, 9):
        assert_answers(text[: max(0, len(text) * i // 9 - cut)])
