"""``luma init``: a new project that runs, checks, formats, tests and type-checks at once, and
that never overwrites a file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cli_runner import luma
from luma.project import FILES


def test_a_new_project_runs_checks_and_passes_its_own_test(tmp_path: Path) -> None:
    folder = tmp_path / "proj"
    done = luma("init", str(folder))
    assert done.code == 0, done.stderr
    assert sorted(p.name for p in folder.iterdir()) == sorted(FILES)
    assert done.stderr.splitlines()[0] == f"created {folder / 'main.luma'}"
    assert done.stderr.splitlines()[-1] == (
        f"run it: luma {folder / 'main.luma'}    test it: pytest {folder}")

    ran = luma(str(folder / "main.luma"), "--arg", "text=one two")
    assert ran.code == 0, ran.stderr
    assert set(json.loads(ran.stdout)) == {"summary", "words"}
    checked = luma("check", str(folder))
    assert (checked.code, checked.stderr) == (0, "checked 1 file: no problems\n")
    assert luma("fmt", "--check", str(folder)).code == 0

    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            str(folder)], capture_output=True, text=True, cwd=folder)
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "2 passed" in tests.stdout
    typed = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                            "tools.py", "test_main.py"], capture_output=True, text=True,
                           cwd=folder)
    assert typed.returncode == 0, typed.stdout
    hooks = (folder / ".pre-commit-config.yaml").read_text(encoding="utf-8")
    assert "entry: luma fmt --check" in hooks and "entry: luma check" in hooks


def test_the_generated_types_catch_a_handler_that_breaks_its_contract(tmp_path: Path) -> None:
    assert luma("init", str(tmp_path)).code == 0
    tools = tmp_path / "tools.py"
    tools.write_text(tools.read_text(encoding="utf-8").replace('{"words":', '{"wrods":'),
                     encoding="utf-8")
    typed = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                            "tools.py"], capture_output=True, text=True, cwd=tmp_path)
    assert typed.returncode == 1
    assert '"wrods"' in typed.stdout


def test_init_overwrites_nothing(tmp_path: Path) -> None:
    (tmp_path / "main.luma").write_text("// mine\n", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("keep\n", encoding="utf-8")
    done = luma("init", str(tmp_path))
    assert done.code == 1
    assert done.stderr == (
        f"luma init: error: {tmp_path} already has main.luma; luma init overwrites nothing, so "
        "nothing was written (choose an empty folder: luma init DIR)\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["main.luma", "notes.txt"]
    assert (tmp_path / "main.luma").read_text(encoding="utf-8") == "// mine\n"


def test_init_beside_unrelated_files_adds_the_project(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("# mine\n", encoding="utf-8")
    assert luma("init", str(tmp_path)).code == 0
    assert (tmp_path / "README.md").read_text(encoding="utf-8") == "# mine\n"
    assert (tmp_path / "main.luma").is_file()
