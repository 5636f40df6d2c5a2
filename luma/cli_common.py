"""What the ``luma`` commands share, below every one of them: exit codes, the version line, and
writing a machine format to stdout. The argument parser is in ``luma.cli_parser``: ``argparse``
loads only for a command that builds a parser (``luma check PATH ...`` builds none)."""

from __future__ import annotations

import sys

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def _version() -> str:
    from luma.version import __version__

    return f"luma {__version__}\n"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


class _StdoutFailed(Exception):
    """stdout cannot be written (a full disk, a closed stream); the message says why."""


def _write_stdout(text: str) -> None:
    """Machine formats are UTF-8 whatever the locale (SARIF requires it; GitHub and JSON tools
    expect it)."""
    try:
        buffer = getattr(sys.stdout, "buffer", None)
        if buffer is None:
            sys.stdout.write(text)
        else:
            sys.stdout.flush()
            buffer.write(text.encode("utf-8"))
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        _silence_stdout()
        raise _StdoutFailed(exc.strerror or str(exc)) from None


def _silence_stdout() -> None:
    from luma.outputs import discard_stream

    discard_stream(sys.stdout)
