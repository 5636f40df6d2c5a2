"""Generated Python tool types, checked by running ``mypy --strict`` and by importing them.

Each test writes the generated module next to a tool module from tests/codegen/ in a temporary
directory and runs mypy there, as a project that uses the generated file would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from luma.codegen import write_tool_types
from luma.syntax.parse import parse_file

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "codegen"

# The generated file imports luma; errors inside luma's own modules are not what these tests
# check, so luma is followed silently (its types are still used).
MYPY_CONFIG = """\
[mypy]
strict = True

[mypy-luma.*]
follow_imports = silent
"""


@pytest.fixture(scope="session")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mypy-cache")


def _project(tmp_path: Path, program: str, module: str, *tool_modules: str) -> Path:
    """A directory with the types generated from ``program`` and copies of ``tool_modules``."""
    _, parsed, diagnostics = parse_file(FIXTURES / program)
    assert parsed is not None and not diagnostics
    write_tool_types(parsed, str(tmp_path / module), program)
    for name in tool_modules:
        shutil.copy(FIXTURES / name, tmp_path / name)
    (tmp_path / "mypy.ini").write_text(MYPY_CONFIG, encoding="utf-8")
    return tmp_path


def _mypy(project: Path, cache: Path, *files: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, MYPYPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--config-file", "mypy.ini",
         "--cache-dir", str(cache), "--no-color-output", *files],
        cwd=project, env=env, capture_output=True, text=True, timeout=300,
    )


def _python(project: Path, code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_generated_module_passes_mypy_strict(tmp_path: Path, mypy_cache: Path) -> None:
    project = _project(tmp_path, "tools.luma", "tools_types.py")
    done = _mypy(project, mypy_cache, "tools_types.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found in 1 source file" in done.stdout


def test_fitting_tool_module_passes_mypy_strict(tmp_path: Path, mypy_cache: Path) -> None:
    # Sync and async handlers, with one and with three parameters, one returning a union.
    project = _project(tmp_path, "tools.luma", "tools_types.py", "tools_ok.py")
    done = _mypy(project, mypy_cache, "tools_types.py", "tools_ok.py")
    assert done.returncode == 0, done.stdout + done.stderr


def test_misspelled_result_field_fails_naming_the_field(tmp_path: Path, mypy_cache: Path) -> None:
    project = _project(tmp_path, "tools.luma", "tools_types.py", "tools_misspelled.py")
    done = _mypy(project, mypy_cache, "tools_misspelled.py")
    assert done.returncode == 1
    assert 'Extra key "reslt" for TypedDict "CalcResult"' in done.stdout
    assert 'Missing key "result" for TypedDict "CalcResult"' in done.stdout


def test_union_member_without_its_tag_fails(tmp_path: Path, mypy_cache: Path) -> None:
    project = _project(tmp_path, "tools.luma", "tools_types.py", "tools_union_without_kind.py")
    done = _mypy(project, mypy_cache, "tools_union_without_kind.py")
    assert done.returncode == 1
    assert "tools_union_without_kind.py:7: error: Incompatible return value type" in done.stdout
    assert '"DocumentInvoice | DocumentReceipt"' in done.stdout


def test_handlers_that_break_their_contract_are_rejected_in_luma_tools(
    tmp_path: Path, mypy_cache: Path
) -> None:
    project = _project(tmp_path, "tools.luma", "tools_types.py", "tools_wrong_contract.py")
    done = _mypy(project, mypy_cache, "tools_wrong_contract.py")
    assert done.returncode == 1
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 2, done.stdout
    assert 'TypedDict item "calculate" has type' in errors[0]
    assert '"Callable[[CalculateInput], dict[str, float]]"' in errors[0]
    assert 'TypedDict item "db_write" has type' in errors[1]


def test_missing_handler_is_rejected_in_luma_tools(tmp_path: Path, mypy_cache: Path) -> None:
    project = _project(tmp_path, "tools.luma", "tools_types.py", "tools_ok.py")
    module = (project / "tools_ok.py").read_text(encoding="utf-8")
    (project / "tools_ok.py").write_text(
        module.replace('    "classify": classify,\n', ""), encoding="utf-8"
    )
    done = _mypy(project, mypy_cache, "tools_ok.py")
    assert done.returncode == 1
    assert 'Missing key "classify" for TypedDict "GeneratedToolModule"' in done.stdout


def test_generated_module_and_tool_module_run(tmp_path: Path) -> None:
    project = _project(tmp_path, "tools.luma", "tools_types.py", "tools_ok.py")
    out = _python(project, (
        "import asyncio, tools_types as t, tools_ok as m\n"
        "from luma import Signal\n"
        "print(sorted(t.DbResult.__required_keys__), sorted(t.DbResult.__optional_keys__))\n"
        "print(sorted(t.DbWriteInput.__required_keys__))\n"
        "print(m.luma_tools['calculate']({'a': 2, 'b': 3, 'operation': 'add'}))\n"
        "print(asyncio.run(m.classify({'text': 'a receipt'}))['kind'])\n"
        "needs = {'db': {'user': 'u', 'port': 5432}}\n"
        "print(m.db_write({'request_id': 'r', 'table': 't', 'value': 'v', 'mode': 'insert'},"
        " Signal(), needs))\n"
    ))
    assert out.splitlines() == [
        "['ok'] ['rows_written']",
        "['mode', 'request_id', 'table', 'value']",
        "{'result': 5}",
        "Receipt",
        "{'ok': True, 'rows_written': 1}",
    ]


def test_stub_file_output_type_checks_a_tool_module(tmp_path: Path, mypy_cache: Path) -> None:
    project = _project(tmp_path, "tools.luma", "tools_types.pyi", "tools_ok.py")
    done = _mypy(project, mypy_cache, "tools_types.pyi", "tools_ok.py")
    assert done.returncode == 0, done.stdout + done.stderr


def test_keyword_names_use_the_functional_form(tmp_path: Path, mypy_cache: Path) -> None:
    project = _project(tmp_path, "names.luma", "names_types.py", "names_ok.py")
    done = _mypy(project, mypy_cache, "names_types.py", "names_ok.py")
    assert done.returncode == 0, done.stdout + done.stderr
    out = _python(project, (
        "import names_types as t, names_ok\n"
        "print(sorted(t.Flight.__required_keys__), sorted(t.Flight.__optional_keys__))\n"
        "print(sorted(t.TicketAny.__required_keys__), t.Any_.__required_keys__)\n"
        "print(names_ok.db_read({'key': 'k'}))\n"
    ))
    assert out.splitlines() == [
        "['__private', 'class', 'from', 'in', 'to'] ['import']",
        "['def', 'value'] frozenset({'value'})",
        "{'label': 'k', 'children': [{'label': 'leaf', 'children': []}]}",
    ]


def test_misspelled_keyword_key_fails(tmp_path: Path, mypy_cache: Path) -> None:
    project = _project(tmp_path, "names.luma", "names_types.py", "names_misspelled.py")
    done = _mypy(project, mypy_cache, "names_misspelled.py")
    assert done.returncode == 1
    assert 'Extra key "form" for TypedDict "Flight"' in done.stdout


def test_every_call_shape_the_runtime_makes_fits_the_handler_type(
    tmp_path: Path, mypy_cache: Path
) -> None:
    project = _project(tmp_path, "tools.luma", "tools_types.py", "tools_call_shapes.py")
    done = _mypy(project, mypy_cache, "tools_types.py", "tools_call_shapes.py")
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_handler_that_fits_the_type_runs_as_typed(tmp_path: Path) -> None:
    # The types and the runtime agree: each handler gets its input, signal and needs where its
    # parameters say (a needs value in the signal's place would fail inside the handler).
    project = _project(tmp_path, "tools.luma", "tools_types.py", "tools_call_shapes.py")
    out = _python(project, (
        "import asyncio, tools_call_shapes as m\n"
        "from luma.runtime.handlers import HandlerInvoker\n"
        "value = {'request_id': 'r', 'table': 't', 'value': 'v', 'mode': 'insert'}\n"
        "needs = {'db': {'user': 'u', 'port': 5432}}\n"
        "for h in m.HANDLERS:\n"
        "    print(h.__name__, asyncio.run(HandlerInvoker(h, 'db_write').run(value, needs, None)))\n"
    ))
    names = ["input_only", "input_signal", "input_signal_needs", "input_needs",
             "input_needs_signal", "other_names", "keyword_needs", "keyword_signal",
             "all_optional", "async_needs"]
    assert out.splitlines() == [f"{name} {{'ok': True}}" for name in names]


def test_handlers_the_runtime_would_call_wrongly_are_rejected(
    tmp_path: Path, mypy_cache: Path
) -> None:
    project = _project(tmp_path, "tools.luma", "tools_types.py", "tools_wrong_shapes.py")
    done = _mypy(project, mypy_cache, "tools_wrong_shapes.py")
    assert done.returncode == 1
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert [e.split(":")[1] for e in errors] == ["25", "26", "27", "28"], done.stdout
    assert all("Incompatible types in assignment" in e for e in errors), done.stdout
    assert '"Callable[[DbWriteInput, DbWriteNeeds], DbResult]"' in errors[0]
    assert '"Callable[[DbWriteInput, Signal, DbWriteNeeds, int], DbResult]"' in errors[1]


def test_generated_types_type_check_in_the_installed_environment(tmp_path: Path) -> None:
    # As a project would run it after `make run`: the venv's mypy, no MYPYPATH, no config, so
    # `from luma import Signal` is found only when the install is visible to type checkers.
    project = _project(tmp_path, "tools.luma", "tools_types.py", "tools_ok.py")
    (project / "mypy.ini").unlink()
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-color-output",
         "--cache-dir", str(tmp_path / ".cache"), "tools_types.py", "tools_ok.py"],
        cwd=project, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, (
        "mypy cannot see the installed luma (install it as the Makefile does, in strict "
        "editable mode):\n" + done.stdout + done.stderr)
    assert "Success: no issues found in 2 source files" in done.stdout
