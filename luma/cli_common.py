"""What the ``luma`` commands share, below every one of them: exit codes, the argument parser
that never prints a traceback, ``--version``, and writing a machine format to stdout."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse with its usage-error exit (2), and never a traceback for a bad command line."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")

    def parse_checked(self, argv: Sequence[str], intermixed: bool = False) -> argparse.Namespace:
        """Parse, then refuse what was left over: an unknown option with the closest known one
        as a hint (``--verison`` → ``--version``), or an argument no command takes."""
        if intermixed:
            namespace, extras = self.parse_known_intermixed_args(list(argv))
        else:
            namespace, extras = self.parse_known_args(list(argv))
        for extra in extras:
            if extra.startswith("-") and extra != "-":
                from luma.syntax.diagnostics import did_you_mean

                option = extra.partition("=")[0]
                known = [o for a in self._actions for o in a.option_strings]
                hint = did_you_mean(option, sorted(set(known)))
                self.error(f"unknown option '{option}'" + (f" ({hint})" if hint else ""))
        if extras:
            self.error(f"unexpected argument '{extras[0]}'")
        return namespace


def _version() -> str:
    from luma.version import __version__

    return f"luma {__version__}\n"


class _Version(argparse.Action):
    """``--version`` on every command, printed as ``luma --version`` prints it."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        _write_stdout(_version())
        parser.exit(EXIT_OK)


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
