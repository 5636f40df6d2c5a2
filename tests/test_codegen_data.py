"""Generated types for a program's datasources (DATA.md §1, §4): the parameter and result type of
each query and command, the bridge type and ``GeneratedDatasources``, checked with
``mypy --strict`` and ``tsc --strict`` as a project that uses them would."""

from __future__ import annotations

from pathlib import Path

from test_codegen_python import _mypy, _project, mypy_cache  # noqa: F401 - a fixture
from test_codegen_typescript import _project as _ts_project
from test_codegen_typescript import _tsc, tsc  # noqa: F401 - a fixture


def test_a_typed_datasources_export_passes_mypy(tmp_path: Path, mypy_cache: Path) -> None:
    project = _project(tmp_path, "data.luma", "data_types.py", "data_ok.py")
    done = _mypy(project, mypy_cache, "data_types.py", "data_ok.py")
    assert done.returncode == 0, done.stdout


def test_a_misspelled_datasource_fails_mypy(tmp_path: Path, mypy_cache: Path) -> None:
    project = _project(tmp_path, "data.luma", "data_types.py", "data_misspelled.py")
    done = _mypy(project, mypy_cache, "data_misspelled.py")
    assert done.returncode == 1
    assert 'Extra key "Shp" for TypedDict "GeneratedDatasources"' in done.stdout, done.stdout


def test_the_generated_typescript_types_a_bridge(tmp_path: Path, tsc: list[str]) -> None:
    project = _ts_project(tmp_path, "data.luma", "data.generated.ts", "data_ok.ts")
    done = _tsc(tsc, project, "data_ok.ts")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_program_without_datasources_generates_what_it_did(tmp_path: Path) -> None:
    from luma.codegen import write_tool_types
    from luma.syntax.parse import parse_text

    program, _ = parse_text("schema A { x: int }\n")
    assert program is not None
    write_tool_types(program, str(tmp_path / "a.py"), "a.luma")
    assert "Datasource" not in (tmp_path / "a.py").read_text()
