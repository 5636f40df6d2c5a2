"""Luma: a compiler and runtime for typed tool contracts and LLM agents.

``luma.Signal`` and ``luma.LumaToolError`` are what tool modules import; they load on first use
so that ``luma check`` does not pay for the runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["LumaToolError", "Signal", "__version__"]

if TYPE_CHECKING:
    from luma.runtime.errors import LumaToolError
    from luma.runtime.signal import Signal


def __getattr__(name: str) -> Any:
    if name == "Signal":
        from luma.runtime.signal import Signal

        return Signal
    if name == "LumaToolError":
        from luma.runtime.errors import LumaToolError

        return LumaToolError
    raise AttributeError(f"module 'luma' has no attribute {name!r}")
