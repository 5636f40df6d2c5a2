"""``luma check`` on many files: worker processes give the same report, in the same order, as
checking the files one by one; the plain ``luma check PATH ...`` command line is read as the
argument parser reads it."""

from __future__ import annotations

import multiprocessing.context
import shutil
from pathlib import Path
from typing import Any

import pytest

from luma import cli, compile

ROOT = Path(__file__).resolve().parent
TOOLS = """
def calculate(input):
    return {"result": input["a"] + input["b"]}
"""
PROGRAM_WITH_TOOLS = """schema Sum { result: int }
tool calculate(a: int, b: int) -> Sum { description: "adds" }
tool missing(a: int) -> Sum { description: "has no handler" }
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """Every test case file (clean ones, warnings, errors, syntax errors), an unreadable file and
    a folder whose luma.config.json names a tool module: more files than the pool threshold."""
    for path in sorted((ROOT / "cases").rglob("*.luma")):
        target = tmp_path / "cases" / path.relative_to(ROOT / "cases")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    (tmp_path / "cases" / "not_utf8.luma").write_bytes(b"x = \"\xff\"\n")
    tools = tmp_path / "with_tools"
    tools.mkdir()
    (tools / "tools.py").write_text(TOOLS, encoding="utf-8")
    (tools / "luma.config.json").write_text('{"tool_modules": ["./tools.py"]}', encoding="utf-8")
    (tools / "calc.luma").write_text(PROGRAM_WITH_TOOLS, encoding="utf-8")
    return tmp_path


def run_check(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str],
              parallel: bool) -> tuple[int, str, str, int]:
    """(exit code, stdout, stderr, pools started) of ``luma check`` run in this process."""
    pools: list[int] = []
    original = multiprocessing.context.BaseContext.Pool

    def counting_pool(self: Any, processes: int | None = None, *args: Any, **kw: Any) -> Any:
        pools.append(processes or 0)
        return original(self, processes, *args, **kw)

    with monkeypatch.context() as m:
        m.setattr(multiprocessing.context.BaseContext, "Pool", counting_pool)
        if parallel:
            m.setattr(compile, "_idle_cpus", lambda: 3)
            m.setattr(compile, "PARALLEL_MIN_BYTES", 0)
        else:
            m.setattr(compile, "PARALLEL_MIN_BYTES", 10**12)
        code = cli.main(["check", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err, len(pools)


@pytest.mark.parametrize("format", ["text", "json", "github", "sarif"])
def test_workers_report_what_one_process_reports(
        project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        format: str) -> None:
    monkeypatch.chdir(project)
    argv = [".", "--format", format, "--color", "never"]
    serial = run_check(monkeypatch, capsys, argv, parallel=False)
    parallel = run_check(monkeypatch, capsys, argv, parallel=True)
    assert serial[3] == 0 and parallel[3] == 1, "the pool ran only when asked"
    assert parallel[:3] == serial[:3]
    report = serial[1] + serial[2]
    assert "E001" in report and "E040" in report and "W0" in report  # all kinds are in it
    assert "'missing' is not registered in the tool registry." in report
    assert "the file is not valid UTF-8 text" in report


def test_an_unreadable_file_is_reported_in_order(
        project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    real_check_file = compile.check_file

    def check_file(path: Any) -> compile.CheckedFile:
        if Path(path).name == "agents.luma":
            raise PermissionError(13, "Permission denied")
        return real_check_file(path)

    monkeypatch.setattr(compile, "check_file", check_file)  # inherited by forked workers
    monkeypatch.chdir(project)
    serial = run_check(monkeypatch, capsys, ["."], parallel=False)
    parallel = run_check(monkeypatch, capsys, ["."], parallel=True)
    assert parallel[3] == 1
    assert parallel[:3] == serial[:3]
    assert serial[0] == 2
    assert "luma check: error: cannot read cases/declarations/agents.luma: Permission denied\n" \
        in serial[2]


def test_check_files_keeps_programs_only_where_asked(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compile, "PARALLEL_MIN_BYTES", 0)
    paths = sorted(project.rglob("*.luma"))
    keep = {p for p in paths if p.parent.name == "with_tools"}
    for jobs in (1, 2):
        results = list(compile.check_files(paths, keep_program=keep.__contains__, jobs=jobs))
        assert [p for p, _ in results] == paths
        for path, checked in results:
            assert isinstance(checked, compile.CheckedFile)
            if path in keep:
                assert checked.program is not None
            else:
                assert checked.program is None


def test_little_source_is_checked_here(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pool(*args: Any, **kw: Any) -> Any:
        raise AssertionError("a pool for a little source")

    monkeypatch.setattr(multiprocessing.context.BaseContext, "Pool", no_pool)
    paths = sorted(project.rglob("*.luma"))
    assert sum(p.stat().st_size for p in paths) < compile.PARALLEL_MIN_BYTES
    results = list(compile.check_files(paths, keep_program=lambda p: True, jobs=4))
    assert [p for p, _ in results] == paths


@pytest.mark.parametrize("argv", [
    [], ["a.luma"], ["a.luma", "b/", "c d.luma"], ["x"],
])
def test_plain_paths_are_read_as_the_parser_reads_them(argv: list[str]) -> None:
    plain = cli._plain_check_args(argv)
    assert plain is not None
    assert vars(plain) == vars(cli._check_parser().parse_intermixed_args(argv))


@pytest.mark.parametrize("argv", [
    ["--strict", "a.luma"], ["a.luma", "--format", "json"], ["-"], [""], ["-h"], ["--", "a"],
])
def test_anything_else_goes_to_the_parser(argv: list[str]) -> None:
    assert cli._plain_check_args(argv) is None


def test_a_check_called_in_process_leaves_the_collector_alone(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import gc

    (tmp_path / "a.luma").write_text("x = 1\n", encoding="utf-8")
    frozen = gc.get_freeze_count()
    assert cli.main(["check", str(tmp_path / "a.luma")]) == 0
    assert gc.get_freeze_count() == frozen  # only `luma check` as the process freezes
    assert capsys.readouterr().err == "checked 1 file: no problems\n"


@pytest.mark.parametrize(("cpus", "machine", "load", "workers"), [
    (2, 2, 0.1, 2), (2, 2, 0.6, 1), (2, 2, 3.5, 1), (8, 8, 2.2, 6), (8, 8, 0.0, 8),
    (1, 1, 0.0, 1), (2, 64, 10.0, 2), (2, 64, 40.0, 1),
])
def test_workers_are_the_idle_cpus(monkeypatch: pytest.MonkeyPatch, cpus: int, machine: int,
                                   load: float, workers: int) -> None:
    import os

    monkeypatch.setattr(compile, "_usable_cpus", lambda: cpus)
    monkeypatch.setattr(os, "cpu_count", lambda: machine)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    assert compile._idle_cpus() == workers
