"""Generated TypeScript tool types, checked with ``tsc --strict --noEmit``.

The TypeScript compiler is the version pinned in tests/node/package.json (and its lock file),
installed by ``node_packages`` when it is missing.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from node_packages import node_modules

from luma.codegen import write_tool_types
from luma.syntax.parse import parse_file

FIXTURES = Path(__file__).resolve().parent / "codegen"
TSC_FLAGS = ("--strict", "--noEmit", "--target", "es2022", "--module", "esnext",
             "--moduleResolution", "bundler", "--pretty", "false")


@pytest.fixture(scope="session")
def tsc() -> list[str]:
    """The command that runs the pinned ``tsc``, installing it first if needed."""
    node = shutil.which("node")
    script = node_modules("the codegen tests") / "typescript" / "bin" / "tsc"
    if node is None:
        pytest.fail("node is needed to run the TypeScript compiler for the codegen tests.")
    return [node, str(script)]


def _project(tmp_path: Path, program: str, out_name: str, *modules: str) -> Path:
    _, parsed, diagnostics = parse_file(FIXTURES / program)
    assert parsed is not None and not diagnostics
    write_tool_types(parsed, str(tmp_path / out_name), program)
    for name in modules:
        shutil.copy(FIXTURES / name, tmp_path / name)
    return tmp_path


def _tsc(tsc: list[str], project: Path, *files: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*tsc, *TSC_FLAGS, *files], cwd=project, capture_output=True, text=True, timeout=300
    )


def test_generated_declarations_compile(tmp_path: Path, tsc: list[str]) -> None:
    project = _project(tmp_path, "tools.luma", "tools.generated.d.ts")
    done = _tsc(tsc, project, "tools.generated.d.ts")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""


def test_generated_ts_file_compiles(tmp_path: Path, tsc: list[str]) -> None:
    project = _project(tmp_path, "tools.luma", "tools.generated.ts")
    done = _tsc(tsc, project, "tools.generated.ts")
    assert done.returncode == 0, done.stdout + done.stderr


def test_fitting_tool_module_compiles(tmp_path: Path, tsc: list[str]) -> None:
    project = _project(tmp_path, "tools.luma", "tools.generated.d.ts", "tools_ok.ts")
    done = _tsc(tsc, project, "tools_ok.ts")
    assert done.returncode == 0, done.stdout + done.stderr


def test_union_member_without_its_tag_fails(tmp_path: Path, tsc: list[str]) -> None:
    project = _project(
        tmp_path, "tools.luma", "tools.generated.d.ts", "tools_union_without_kind.ts"
    )
    done = _tsc(tsc, project, "tools_union_without_kind.ts")
    assert done.returncode != 0
    assert "tools_union_without_kind.ts(4," in done.stdout
    assert (
        "Property 'kind' is missing in type '{ invoice_number: string; }' but required in type "
        "'{ kind: \"Invoice\"; }'." in done.stdout
    )


def test_misspelled_result_field_fails_naming_the_field(tmp_path: Path, tsc: list[str]) -> None:
    project = _project(tmp_path, "tools.luma", "tools.generated.d.ts", "tools_misspelled.ts")
    done = _tsc(tsc, project, "tools_misspelled.ts")
    assert done.returncode != 0
    assert "Type '{ reslt: number; }' is not assignable to type" in done.stdout


def test_missing_handler_fails(tmp_path: Path, tsc: list[str]) -> None:
    project = _project(tmp_path, "tools.luma", "tools.generated.d.ts", "tools_ok.ts")
    module = (project / "tools_ok.ts").read_text(encoding="utf-8")
    start = module.index("  classify:")
    (project / "tools_ok.ts").write_text(module[:start] + "};\n", encoding="utf-8")
    done = _tsc(tsc, project, "tools_ok.ts")
    assert done.returncode != 0
    assert "Property 'classify' is missing" in done.stdout


def test_reserved_names_compile(tmp_path: Path, tsc: list[str]) -> None:
    project = _project(tmp_path, "names.luma", "names.generated.d.ts", "names_ok.ts")
    done = _tsc(tsc, project, "names.generated.d.ts", "names_ok.ts")
    assert done.returncode == 0, done.stdout + done.stderr
