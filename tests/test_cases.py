"""Runs every ``.luma`` file under tests/cases/ and compares the checker's diagnostics with the
expectations written inline:

    tool f() -> R { side_effects: "write", cache: true }   // error[E012]: Write tool 'f' cannot use cache.

An expectation names the line it is written on; ``// error[CODE]@+1: ...`` names the next line
(for a diagnostic on a line that cannot hold a comment). A file without expectations must check
clean. Every diagnostic must be expected and every expectation met, message text included.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from luma.compile import check_file

CASES = Path(__file__).parent / "cases"
_EXPECT = re.compile(r"//\s*(error|warning)\[([A-Z0-9_]+)\](@[+-]\d+)?:\s?(.*?)\s*$")


def _expectations(text: str) -> list[tuple[int, str, str, str]]:
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        for m in _EXPECT.finditer(line):
            offset = int(m.group(3)[1:]) if m.group(3) else 0
            out.append((lineno + offset, m.group(1), m.group(2), m.group(4)))
    return out


def _case_files() -> list[Path]:
    return sorted(CASES.rglob("*.luma"))


@pytest.mark.parametrize("path", _case_files(), ids=lambda p: str(p.relative_to(CASES)))
def test_case(path: Path) -> None:
    checked = check_file(path)
    expected = sorted(_expectations(path.read_text(encoding="utf-8")))
    actual = sorted(
        (checked.source.line_col(d.span.start)[0], d.severity, d.code, d.message)
        for d in checked.diagnostics
    )
    missing = [e for e in expected if e not in actual]
    unexpected = [a for a in actual if a not in expected]
    report = []
    for line, sev, code, msg in missing:
        report.append(f"  missing    {path.name}:{line}: {sev}[{code}]: {msg}")
    for line, sev, code, msg in unexpected:
        report.append(f"  unexpected {path.name}:{line}: {sev}[{code}]: {msg}")
    assert not report, "diagnostics differ:\n" + "\n".join(report)


def test_there_are_cases() -> None:
    assert len(_case_files()) >= 1
