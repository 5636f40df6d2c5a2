"""Writing a program and its tool module for a test that runs them with the ``luma`` command."""

from __future__ import annotations

import textwrap
from pathlib import Path


def write_program(tmp_path: Path, program: str, tools: str = "") -> tuple[str, str]:
    """``prog.luma`` and ``tools.py`` in ``tmp_path`` (both dedented); their paths."""
    (tmp_path / "prog.luma").write_text(textwrap.dedent(program), encoding="utf-8")
    (tmp_path / "tools.py").write_text(textwrap.dedent(tools), encoding="utf-8")
    return str(tmp_path / "prog.luma"), str(tmp_path / "tools.py")


def assert_no_traceback(stderr: str) -> None:
    """What a user must never see for their own mistake."""
    assert "Traceback" not in stderr
    assert "internal error" not in stderr
