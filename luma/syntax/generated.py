"""Committed generated files (the parse tables, the AST methods): write one, or check it."""

from __future__ import annotations

import sys
from pathlib import Path


def write_or_check(path: Path, text: str, argv: list[str], command: str) -> int:
    """With ``--check`` in ``argv``, exit status 1 when ``path`` differs from ``text``;
    otherwise write ``text`` to ``path``."""
    current = path.read_text(encoding="utf-8") if path.exists() else ""
    if "--check" in argv:
        if text != current:
            print(f"{path} is out of date: run {command}", file=sys.stderr)
            return 1
        print(f"{path} is up to date")
        return 0
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
    return 0
