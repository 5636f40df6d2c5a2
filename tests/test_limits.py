"""Luma's limits (luma/limits.py, docs/language.md#limits): a program past one gets a located
diagnostic, never a crash; a program within them checks and runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_runner import ROOT, luma
from luma import cli, compile
from luma.compile import check_text
from luma.limits import MAX_NESTING
from luma.syntax import parse

LIMITS = ROOT / "tests" / "cases" / "limits"


def _codes(text: str) -> list[tuple[str, str]]:
    return [(d.code, d.message) for d in check_text(text, "deep.luma").diagnostics]


@pytest.mark.parametrize("text, kind", [
    ("x = " + "[" * 1000 + "]" * 1000, "expression"),
    ("x = " + " + ".join(["1"] * 5000), "expression"),
    ("x = " + "len([" * 330 + "1" + "])" * 330, "expression"),
    ("x = " + "{a: " * 330 + "1" + "}" * 330, "expression"),
    ("x = " + "not " * 2000 + "true", "expression"),
    ("y = {a: 1}\nx = y" + ".a" * 2000, "expression"),
    ("".join("if true {\n" for _ in range(330)) + "}\n" * 330, "statement"),
    ("schema S { a: " + "map[" * 2000 + "int" + "]" * 2000 + " }", "type"),
])
def test_nesting_past_the_limit_is_a_located_error(text: str, kind: str) -> None:
    checked = check_text(text, "deep.luma")
    (d,) = checked.diagnostics
    assert (d.code, d.message) == (
        "E047", f"This {kind} is nested more than {MAX_NESTING} levels deep.")
    assert 0 <= d.span.start < d.span.end <= len(text)
    assert d.hint


def test_parentheses_alone_do_not_nest() -> None:
    assert _codes("x = " + "(" * 50000 + "1" + ")" * 50000) == []


def test_a_program_at_every_limit_checks_and_runs() -> None:
    r = luma("run", str(LIMITS / "limits_valid.luma"))
    assert (r.code, r.stdout) == (0, "null\n"), r.stderr
    assert "101" in r.stderr  # print(sum)


def test_a_deep_file_does_not_silence_the_others(tmp_path: Path) -> None:
    (tmp_path / "a_deep.luma").write_text("x = " + "[" * 1000 + "]" * 1000 + "\n")
    (tmp_path / "b_huge.luma").write_text("x = " + "9" * 4301 + "\n")
    (tmp_path / "c_wrong.luma").write_text("x = y\n")
    r = luma("check", str(tmp_path), "--format", "json")
    assert r.code == 1
    items = json.loads(r.stdout)
    assert [(Path(d["file"]).name, d["code"]) for d in items] == [
        ("a_deep.luma", "E047"), ("b_huge.luma", "E048"), ("c_wrong.luma", "E038")]
    assert r.stderr == "checked 3 files: 3 errors\n"


@pytest.mark.parametrize("parallel", [False, True])
def test_a_checker_failure_is_that_files_diagnostic(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        parallel: bool) -> None:
    import luma.check

    real = luma.check.check_program

    def failing(program: Any) -> Any:
        if program.span.file.endswith("b_breaks.luma"):
            raise RecursionError("maximum recursion depth exceeded")
        return real(program)

    monkeypatch.setattr(luma.check, "check_program", failing)  # inherited by forked workers
    monkeypatch.delenv("LUMA_DEBUG", raising=False)
    monkeypatch.setattr(compile, "PARALLEL_MIN_BYTES", 0 if parallel else 10**12)
    monkeypatch.setattr(compile, "_idle_cpus", lambda: 2)
    for name in ("a_ok.luma", "b_breaks.luma", "c_wrong.luma", "d_ok.luma"):
        (tmp_path / name).write_text("x = y\n" if name == "c_wrong.luma" else "x = 1\n")
    code = cli.main(["check", str(tmp_path), "--format", "json"])
    out = capsys.readouterr()
    assert code == 1
    items = json.loads(out.out)
    assert [(Path(d["file"]).name, d["code"], d["line"]) for d in items] == [
        ("b_breaks.luma", "INTERNAL_ERROR", 1), ("c_wrong.luma", "E038", 1)]
    assert items[0]["message"] == ("Luma could not check this file: internal error "
                                   "(RecursionError: maximum recursion depth exceeded).")
    assert out.err == "checked 4 files: 2 errors\n"


def test_a_repetition_grows_one_list() -> None:
    # Each item of a list literal, a schema or a block is one reduction of a repetition rule
    # (`(_sep field)*`); copying the list so far into a new one at each was quadratic.
    steps = {(s[0], s[1]): s for s in parse._rule_steps()}
    repetitions = [s for (origin, _), s in steps.items() if "_star_" in origin and s[3]]
    assert repetitions
    for origin, length, function, include, append_none, expand1, unit, nests, grows in repetitions:
        assert grows, origin
        assert all(i != 0 for i, _, _ in include), origin  # the list itself is not copied



# --------------------------------------------------------------------------- synthesis


def test_the_test_model_builds_up_to_its_limit() -> None:
    from luma.limits import MAX_SYNTHESIZED_ITEMS
    from luma.models.synthesize import synthesize

    many = {"type": "array", "items": {"type": "integer"}, "minItems": MAX_SYNTHESIZED_ITEMS}
    assert synthesize(many, "counts") == [1] * MAX_SYNTHESIZED_ITEMS
    long = {"type": "string", "minLength": MAX_SYNTHESIZED_ITEMS}
    assert len(synthesize(long, "text")) == MAX_SYNTHESIZED_ITEMS


@pytest.mark.parametrize("schema, what", [
    ({"type": "array", "items": {"type": "string"}, "minItems": 100_000_000}, "100000000 items"),
    ({"type": "string", "minLength": 1001}, "1001 characters"),
])
def test_past_its_limit_the_test_model_says_so(schema: dict[str, Any], what: str) -> None:
    from luma.models.synthesize import synthesize
    from luma.runtime.errors import LumaError

    with pytest.raises(LumaError) as caught:
        synthesize(schema, "items")
    assert caught.value.code == "LIMIT"
    assert caught.value.message == (f"The test model cannot build a value for 'items': it "
                                    f"needs at least {what}, and the test model builds at most "
                                    "1000.")


def test_a_pattern_too_long_to_build_is_not_built() -> None:
    from luma.models.synthesize import string_for_pattern

    assert string_for_pattern("((a{1000}){1000}){1000}") is None
    assert string_for_pattern("(a{10}){10}") == "a" * 100


def test_a_run_past_the_synthesis_limit_is_a_limit_error(tmp_path: Path) -> None:
    program = tmp_path / "big.luma"
    program.write_text(
        'schema Big { items: string[] @length(5000, null) }\n'
        'model M { provider: "test" }\n'
        'agent A {\n  model: M\n  fn run() -> Big {\n    return ask "give" -> Big\n  }\n}\n')
    r = luma("run", str(program), timeout=60)
    assert r.code == 1
    assert r.stderr.startswith(
        "error[LIMIT]: The test model cannot build a value for 'items': it needs at least 5000 "
        "items, and the test model builds at most 1000.\n")


# ------------------------------------------------------------------------------ big files


def test_a_list_of_40000_items_checks() -> None:
    checked = check_text("x = [" + ", ".join(["1"] * 40000) + "]\nprint(x)\n")
    assert checked.diagnostics == []


def test_the_flow_of_40000_assignments_copies_n_sqrt_n_names(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Each assignment extends the set of assigned names; copying the whole set each time was
    # quadratic (16 s for 40,000 statements). Count the names copied.
    from luma.check.scopes import Names

    copied = [0]
    real = Names._with

    def counting(self: Names, top: dict[str, Any]) -> Names:
        result = real(self, top)
        copied[0] += len(top) + (len(result.base) if result.base is not self.base else 0)
        return result

    monkeypatch.setattr(Names, "_with", counting)
    n = 40000
    checked = check_text("".join(f"x{i} = {i}\n" for i in range(n)) + "print(x0)\n")
    assert checked.diagnostics == []
    assert 0 < copied[0] < 3 * n * int(n ** 0.5)  # n²/2 would be 800,000,000
