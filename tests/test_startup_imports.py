"""What ``luma check`` loads as a whole process: a guard on its start-up that counts modules
instead of timing them. Each module below cost start-up time and is not needed to check a
program (``docs/benchmarks.md``, "``luma check`` start-up")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# the program bench/check_startup.py times
CLEAN = (Path(__file__).parent.parent / "bench" / "startup.luma").read_text(encoding="utf-8")

WITH_ERRORS = CLEAN.replace("total: float", "total: flaot").replace("order.id}", "order.idd}")

# What no check needs: the dataclass machinery (and inspect, which it imports), the argument
# parser (a command line of paths builds none), pathlib (with urllib.parse and ipaddress, which
# it imports: the check works on paths as strings; a config or a tool module brings it), the
# globs of --exclude, the validator, and every extra and dependency of the runtime.
NEVER = ("dataclasses", "inspect", "argparse", "pathlib", "urllib", "ipaddress", "fnmatch",
         "luma.schema.validate", "luma.runtime", "lark", "rich", "httpx", "pydantic",
         "jsonschema", "cryptography", "pygls", "mcp", "opentelemetry", "psycopg", "redis")
# Needed only to word some problems (unicodedata measures a snippet's width), or to validate a
# value a program declares.
NOT_FOR_A_CLEAN_PROGRAM = ("json", "luma.schema", "unicodedata")


def imported_by_check(tmp_path: Path, text: str) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """The modules ``python -X importtime -m luma check FILE`` imports, from its own report."""
    program = tmp_path / "program.luma"
    program.write_text(text, encoding="utf-8")
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "luma", "check", str(program)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    names = {line.rpartition("|")[2].strip() for line in done.stderr.splitlines()
             if line.startswith("import time:") and "|" in line}
    assert "luma.check" in names and "luma.syntax.parse" in names  # the report was read
    return names, done


def loaded(names: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names for p in packages if n == p or n.startswith(p + "."))


def test_a_clean_check_imports_only_what_it_needs(tmp_path: Path) -> None:
    names, done = imported_by_check(tmp_path, CLEAN)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "checked 1 file: no problems" in done.stderr
    assert loaded(names, NEVER + NOT_FOR_A_CLEAN_PROGRAM) == []


def test_a_check_that_reports_problems_imports_none_of_the_rest(tmp_path: Path) -> None:
    names, done = imported_by_check(tmp_path, WITH_ERRORS)
    assert done.returncode == 1
    assert "error[E" in done.stderr
    assert loaded(names, NEVER) == []


@pytest.mark.parametrize("argv", [["--strict"], ["--format", "json"]])
def test_options_build_the_parser(tmp_path: Path, argv: list[str]) -> None:
    """The other side of the guard: an option goes through argparse as before."""
    program = tmp_path / "program.luma"
    program.write_text(CLEAN, encoding="utf-8")
    code = ("import sys\nfrom luma.cli import main\n"
            f"code = main(['check', *{argv!r}, {str(program)!r}])\n"
            "print(code, 'argparse' in sys.modules, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.stderr.splitlines()[-1] == "0 True"


def test_a_check_as_the_process_runs_no_collection(tmp_path: Path) -> None:
    """``luma check`` as the whole process turns the cyclic collector off before the front
    end's imports: what they make lives until exit, and each collection walked every object
    alive (19 of them during the imports; over a large program, a third of the time). A check
    called from a program that goes on leaves the collector alone."""
    program = tmp_path / "program.luma"
    program.write_text(CLEAN, encoding="utf-8")
    code = ("import gc, sys\nfrom luma.cli import main\n"
            "mode = sys.argv[-1]\n"
            f"sys.argv = ['luma', 'check', {str(program)!r}]\n"
            "before = sum(s['collections'] for s in gc.get_stats())\n"
            "code = main(None if mode == 'process' else sys.argv[1:])\n"
            "after = sum(s['collections'] for s in gc.get_stats())\n"
            "print(code, after - before, gc.isenabled(), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code, "process"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.stderr.splitlines()[-1] == "0 0 False", done.stderr[-2000:]
    done = subprocess.run([sys.executable, "-c", code, "call"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.stderr.splitlines()[-1].endswith(" True"), done.stderr[-2000:]


def test_a_program_the_descent_parses_reads_no_parse_table(tmp_path: Path) -> None:
    """The large parse tables and what the table runner derives from them (its regular
    expression of every terminal, the per-state lexers, the rules' shapes) are made on the first
    program the recursive descent declines: a clean check reads none of them."""
    program = tmp_path / "program.luma"
    code = ("import sys\nfrom luma.cli import main\n"
            f"code = main(['check', {str(program)!r}])\n"
            "import luma.syntax.parse as parse, luma.syntax.tables as tables\n"
            "print(code, sorted(n for n in ('LEXERS', 'ACTIONS', 'RULES') if n in vars(tables)),"
            " parse._RUNNER is not None, file=sys.stderr)\n")
    for text, expected in ((CLEAN, "0 [] False"),
                           ("schema S {\n  a int\n}\n", "1 ['ACTIONS', 'LEXERS', 'RULES'] True")):
        program.write_text(text, encoding="utf-8")
        done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                              text=True, timeout=60)
        assert done.stderr.splitlines()[-1] == expected, done.stderr[-2000:]
