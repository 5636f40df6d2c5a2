"""The grammar, ``grammar/luma.lark``, and the Lark options it is analysed with: shared by
the parse module (whose Lark parser describes syntax errors) and the table generator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# The tables are built with these options, and the parse module's Lark parser with the same.
LARK_OPTIONS: dict[str, Any] = {
    "parser": "lalr", "lexer": "contextual", "strict": True, "propagate_positions": False,
    "maybe_placeholders": True, "keep_all_tokens": True,
}


def grammar_text() -> str:
    """The text of ``luma.lark``: from the installed package, or from a source checkout."""
    from importlib import resources

    try:
        return resources.files("luma.grammar").joinpath("luma.lark").read_text(encoding="utf-8")
    except ModuleNotFoundError:
        checkout = Path(__file__).resolve().parents[2] / "grammar" / "luma.lark"
        return checkout.read_text(encoding="utf-8")
