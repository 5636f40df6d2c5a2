"""The checker: every rule of LANGUAGE.md §10, as diagnostics (never exceptions)."""

from __future__ import annotations

from luma.check.checker import check_program

__all__ = ["check_program"]
