"""Luma and the Model Context Protocol: ``luma mcp serve`` offers a program's tools and agent
methods to MCP clients (:mod:`luma.mcp.server`). The ``mcp`` SDK is an extra, imported only
here."""


class MissingExtra(Exception):
    """The ``mcp`` SDK is not installed."""


def require_sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise MissingExtra("luma mcp needs the MCP extra: pip install 'luma[mcp]'") from None
