"""What the sandbox and manifest tests share: a project folder with a program, a config and
tool modules, run in-process as ``luma prog.luma`` runs it."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from luma.compile import check_file
from luma.runtime.config import parse_config
from luma.runtime.manifests import LoadedModules, load_program_modules
from luma.cli_run import RunOptions, prepare, run_checked

HERE = Path(__file__).parent

#: One tool, ``probe(name) -> {text}``, called once at top level with ``NAME``.
PROGRAM = """schema Out {
  text: string
}
tool probe(name: string) -> Out {
  description: "probes"
}
r = tool probe({ name: NAME })
r
"""

STRICT = {"sandbox": "strict"}

#: The detail of the ``HandlerTimeout`` of a call whose process was stopped at its CPU limit.
CPU_LIMIT_DETAIL = (": the handler used more CPU time than its timeout, and its process was "
                    "stopped")


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str

    @property
    def value(self) -> Any:
        return json.loads(self.stdout)


class Project:
    """A program's folder: ``prog.luma``, ``luma.config.json`` and tool modules."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def write(self, name: str, text: str) -> Path:
        path = self.folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    def fixture(self, name: str, as_name: str = "tools.py") -> Path:
        """Copy the module ``tests/sandbox/<name>`` into the project."""
        return self.write(as_name, (HERE / name).read_text(encoding="utf-8"))

    def config(self, modules: list[Any] | None = None, policy: dict[str, Any] | None = None,
               **extra: Any) -> dict[str, Any]:
        data: dict[str, Any] = {"tool_modules": ["./tools.py"] if modules is None else modules}
        if policy is not None:
            data["tool_module_policy"] = policy
        data.update(extra)
        (self.folder / "luma.config.json").write_text(json.dumps(data), encoding="utf-8")
        return data

    def load(self, *command_line: str) -> LoadedModules:
        """The config's and ``command_line``'s modules, loaded as ``luma run`` loads them."""
        data = json.loads((self.folder / "luma.config.json").read_text(encoding="utf-8"))
        return load_program_modules(self.folder, parse_config(data), command_line)

    def errors(self, *command_line: str) -> list[str]:
        """``path:line: message`` (or just the message) of every module that did not load."""
        return [f"{e.path}:{e.line}: {e.message}" if e.line else e.message
                for e in self.load(*command_line).errors]

    def run(self, name: str = "x", *tool_modules: str, program: str = PROGRAM,
            cwd: Path | None = None) -> Outcome:
        """Run ``prog.luma`` (its ``NAME`` replaced by ``name``) from the project folder, or
        from ``cwd``."""
        prog = self.folder / "prog.luma"
        prog.write_text(program.replace("NAME", json.dumps(name)), encoding="utf-8")
        checked = check_file(prog)
        assert not checked.has_errors, [d.message for d in checked.diagnostics]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.chdir(cwd or self.folder):
            code = run_checked(checked, RunOptions(tool_modules=list(tool_modules)),
                               stdout=out, stderr=err)
        return Outcome(code, out.getvalue(), err.getvalue())

    def runtime(self, program: str) -> Any:
        """The Runtime ``luma prog.luma`` would run ``program`` with (modules loaded)."""
        prog = self.folder / "prog.luma"
        prog.write_text(program, encoding="utf-8")
        checked = check_file(prog)
        assert not checked.has_errors, [d.message for d in checked.diagnostics]
        with contextlib.chdir(self.folder):
            runtime, _ = prepare(checked, RunOptions(), io.StringIO())
        return runtime


async def with_deadline(handler: object, value: dict[str, object], ms: int) -> object:
    """Call a process module's proxy as the pipeline calls a handler with a timeout of ``ms``,
    but without the pipeline's own clock: whatever ends the call is the child's doing."""
    from luma.runtime.handlers import CALL_DEADLINE

    CALL_DEADLINE.set(time.monotonic() + ms / 1000)
    return await handler(value, None, None)  # type: ignore[operator]


def wait_gone(pid: int) -> None:
    """Wait (5 s at most) until process ``pid`` has ended; fails when it has not."""
    with pytest.raises(ProcessLookupError):
        for _ in range(50):
            os.kill(pid, 0)
            time.sleep(0.1)


@contextlib.contextmanager
def restored_imports() -> Iterator[None]:
    """Undo what loading project modules does to the process: modules imported from a
    project folder, and ``dependency_root`` folders put on the import path."""
    modules, path = set(sys.modules), list(sys.path)
    try:
        yield
    finally:
        for name in set(sys.modules) - modules:
            del sys.modules[name]
        sys.path[:] = path


def strict(*allow: str, **settings: Any) -> dict[str, Any]:
    """A ``tool_module_policy`` with sandbox 'strict', ``allow`` as its allow_builtins."""
    return {"sandbox": "strict", "allow_builtins": list(allow), **settings}


@pytest.fixture(autouse=True)
def isolated_imports() -> Iterator[None]:
    """For a test module that imports it: each test's project modules are forgotten after it."""
    with restored_imports():
        yield


@pytest.fixture()
def project(tmp_path: Path) -> Project:
    """An empty program folder, ``app``, under the test's temporary folder."""
    folder = tmp_path / "app"
    folder.mkdir()
    return Project(folder)
