"""The Luma language server (``luma lsp``). It needs the optional extra: ``pip install
'luma[lsp]'`` (pygls); nothing here is imported by the rest of Luma."""

from __future__ import annotations


class MissingExtra(Exception):
    """pygls is not installed."""


def serve_stdio() -> None:
    """Run the server on stdin and stdout until the client says exit."""
    try:
        import pygls  # noqa: F401
    except ImportError:
        raise MissingExtra("luma lsp needs the language server extra: "
                           "pip install 'luma[lsp]'") from None
    from luma.lsp.server import run_stdio

    run_stdio()
