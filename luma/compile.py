"""The front end as one call: read, parse and check files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from luma.syntax import ast
from luma.syntax.diagnostics import Diagnostic
from luma.syntax.source import SourceFile


@dataclass(slots=True)
class CheckedFile:
    """One file after the front end: its source, its AST (None on a syntax error) and all its
    diagnostics."""

    source: SourceFile
    program: ast.Program | None
    diagnostics: list[Diagnostic]

    @property
    def has_errors(self) -> bool:
        return any(d.is_error for d in self.diagnostics)


def check_source(source: SourceFile) -> CheckedFile:
    from luma.check import check_program
    from luma.syntax.parse import parse_source

    program, diagnostics = parse_source(source)
    if program is not None:
        diagnostics = diagnostics + check_program(program)
    return CheckedFile(source, program, diagnostics)


def check_text(text: str, path: str = "<input>") -> CheckedFile:
    return check_source(SourceFile(path, text))


def check_file(path: str | Path) -> CheckedFile:
    from luma.check import check_program
    from luma.syntax.parse import parse_file

    source, program, diagnostics = parse_file(path)
    if program is not None:
        diagnostics = diagnostics + check_program(program)
    return CheckedFile(source, program, diagnostics)


def find_luma_files(paths: list[str]) -> tuple[list[Path], list[str]]:
    """The ``.luma`` files named by ``paths`` (folders searched recursively, sorted), and the
    paths that do not exist."""
    found: list[Path] = []
    missing: list[str] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found.extend(sorted(f for f in path.rglob("*.luma") if f.is_file()
                                and not any(part.startswith(".") for part in f.parts[len(path.parts):])))
        elif path.is_file():
            found.append(path)
        else:
            missing.append(p)
    return found, missing
