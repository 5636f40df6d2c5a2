"""The argument parser of the ``luma`` commands: a usage error exits 2 and never shows a
traceback, and ``--version`` is on every command. A module of its own, imported by a command
when it builds its parser: ``luma check PATH ...`` does not load ``argparse``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from luma.cli_common import EXIT_OK, EXIT_USAGE, _version, _write_stdout


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


class _Version(argparse.Action):
    """``--version`` on every command, printed as ``luma --version`` prints it."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        _write_stdout(_version())
        parser.exit(EXIT_OK)
