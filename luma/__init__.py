"""Luma: a compiler and runtime for typed tool contracts and LLM agents.

The Python API (``luma.load``, ``luma.loads``, ``luma.Program``, ``luma.RunError``, …) lives in
:mod:`luma.api`; ``luma.Signal`` and ``luma.LumaToolError`` are what tool modules import. Each
loads on first use, so that ``luma check`` does not pay for the runtime.
"""

from __future__ import annotations

from luma.version import __version__

__all__ = ["CompileError", "DiagnosticInfo", "LoadError", "Location", "LumaToolError",
           "Program", "RunError", "Signal", "__version__", "load", "loads"]

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from luma.api import (
        CompileError,
        DiagnosticInfo,
        LoadError,
        Location,
        Program,
        RunError,
        load,
        loads,
    )
    from luma.runtime.errors import LumaToolError
    from luma.runtime.signal import Signal

_API = frozenset({"CompileError", "DiagnosticInfo", "LoadError", "Location", "Program",
                  "RunError", "load", "loads"})


def __getattr__(name: str) -> Any:
    if name in _API:
        from luma import api

        return getattr(api, name)
    if name == "Signal":
        from luma.runtime.signal import Signal

        return Signal
    if name == "LumaToolError":
        from luma.runtime.errors import LumaToolError

        return LumaToolError
    raise AttributeError(f"module 'luma' has no attribute {name!r}")
