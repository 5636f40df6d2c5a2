"""The authoring commands: ``luma fmt``, ``luma init`` and ``luma lsp``.

Thin like the rest of the command line: parse the arguments, call the library (the formatter in
``luma.syntax.format``, the project template in ``luma.project``, the server in ``luma.lsp``),
report, exit.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def _parser(prog: str, **kwargs: object) -> argparse.ArgumentParser:
    from luma.cli_parser import _Parser, _Version

    parser = _Parser(prog=prog, allow_abbrev=False, **kwargs)  # type: ignore[arg-type]
    parser.add_argument("--version", action=_Version)
    return parser


# ----------------------------------------------------------------------------------------- fmt

def fmt_parser() -> argparse.ArgumentParser:
    parser = _parser(
        "luma fmt",
        description="Format .luma files in the one canonical layout (files are rewritten in "
                    "place unless --check or --diff is given; '-' formats stdin to stdout).",
        epilog="exit status: 0 formatted (or, with --check, already formatted), 1 a file would "
               "change (--check) or has a syntax error, 2 a usage error")
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="files, or folders searched recursively for *.luma (default: .)")
    parser.add_argument("--check", action="store_true",
                        help="change nothing; list the files that would change on stdout and "
                             "exit 1 if there are any")
    parser.add_argument("--diff", action="store_true",
                        help="change nothing; print a unified diff of what would change")
    parser.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                        help="skip files and folders whose path or name matches GLOB "
                             "(repeatable)")
    return parser


def fmt_command(argv: Sequence[str]) -> int:
    """``luma fmt``: 0 done, 1 a file would change (``--check``) or does not parse, 2 usage."""
    from luma.cli_common import _write_stdout
    from luma.compile import find_luma_files

    parser = fmt_parser()
    args = parser.parse_checked(argv, intermixed=True)  # type: ignore[attr-defined]
    paths: list[str] = args.paths or ["."]
    if "-" in paths:
        if len(paths) > 1:
            parser.error("'-' (stdin) cannot be combined with other paths")
        return _fmt_stdin(args.check, args.diff)
    for path in paths:
        if not os.path.exists(path):
            parser.error(f"path does not exist: {path}")
    found, _ = find_luma_files(paths, exclude=args.exclude)
    unique = {os.path.realpath(f): f for f in reversed(found)}  # a file named twice: once
    files = [f for f in found if unique.get(os.path.realpath(f)) is f]
    changed: list[str] = []
    failed = 0
    for file in files:
        name = str(file)
        outcome = _format_file(file)
        if isinstance(outcome, str):
            failed += 1
            sys.stderr.write(outcome)
            continue
        before, after = outcome
        if before == after:
            continue
        changed.append(name)
        if args.diff:
            _write_stdout(_diff(before, after, name))
        if args.check and not args.diff:
            _write_stdout(name + "\n")
        if not (args.check or args.diff):
            problem = _write(file, after)
            if problem:
                failed += 1
                print(f"luma fmt: error: cannot write {name}: {problem}", file=sys.stderr)
                changed.pop()
            else:
                print(f"formatted {name}", file=sys.stderr)
    print(_summary(len(files), changed, failed, dry=args.check or args.diff), file=sys.stderr)
    if failed or (args.check and changed):
        return EXIT_FAILED
    return EXIT_OK


def _summary(total: int, changed: list[str], failed: int, dry: bool) -> str:
    from luma.cli_common import _plural

    if total == 0:
        return "luma fmt: warning: no .luma files found"
    verb = "would change" if dry else "formatted"
    parts = [f"{_plural(len(changed), 'file')} {verb}" if changed else "nothing to change"]
    parts.append(f"{total - len(changed) - failed} already formatted")
    if failed:
        parts.append(f"{_plural(failed, 'file')} left as {'it was' if failed == 1 else 'they were'}")
    return "luma fmt: " + ", ".join(parts)


def _format_file(path: Path) -> tuple[str, str] | str:
    """(text, formatted text), or the report of why the file cannot be formatted."""
    from luma.syntax.format import FormatError, format_text
    from luma.syntax.render import render_text, source_lookup
    from luma.syntax.source import SourceFile

    try:
        data = path.read_bytes()
    except OSError as exc:
        return f"luma fmt: error: cannot read {path}: {exc.strerror or exc}\n"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return f"luma fmt: error: {path} is not valid UTF-8 text; left as it was\n"
    try:
        return text, format_text(text, str(path))
    except FormatError as exc:
        if not exc.diagnostics:
            return f"luma fmt: error: {exc}\n"
        source = SourceFile(str(path), text.removeprefix("\ufeff"))
        return (render_text(exc.diagnostics, source_lookup([source]), color=False)
                + f"luma fmt: {path} has a syntax error; left as it was\n")


def _fmt_stdin(check: bool, diff: bool) -> int:
    from luma.cli_common import _write_stdout
    from luma.syntax.format import FormatError, format_text
    from luma.syntax.render import render_text, source_lookup
    from luma.syntax.source import SourceFile

    text = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    try:
        out = format_text(text, "<stdin>")
    except FormatError as exc:
        if exc.diagnostics:
            source = SourceFile("<stdin>", text.removeprefix("\ufeff"))
            sys.stderr.write(render_text(exc.diagnostics, source_lookup([source]), color=False))
        else:
            print(f"luma fmt: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if diff:
        _write_stdout(_diff(text, out, "<stdin>"))
    elif check:
        if out != text:
            _write_stdout("<stdin>\n")
    else:
        _write_stdout(out)
    return EXIT_FAILED if check and out != text else EXIT_OK


def _diff(before: str, after: str, name: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True),
                                        after.splitlines(keepends=True),
                                        fromfile=f"{name} (before)", tofile=f"{name} (formatted)"))


def _write(path: Path, text: str) -> str | None:
    """Replace the file's content (through a temporary file beside it, so that a full disk
    leaves the old content whole); the file keeps its permissions. Returns why it failed."""
    import tempfile

    target = Path(os.path.realpath(path))
    try:
        mode = target.stat().st_mode & 0o7777
        fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".fmt")
    except OSError as exc:
        return exc.strerror or str(exc)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.chmod(temp, mode)
        os.replace(temp, target)
    except OSError as exc:
        try:
            os.unlink(temp)
        except OSError:
            pass
        return exc.strerror or str(exc)
    return None


# ---------------------------------------------------------------------------------------- init

def init_parser() -> argparse.ArgumentParser:
    parser = _parser(
        "luma init",
        description="Create a new Luma project that runs at once: a program, its tool module "
                    "with generated types, luma.config.json, a test on the offline model and a "
                    "pre-commit config. Overwrites nothing.")
    parser.add_argument("folder", nargs="?", default=".", metavar="DIR",
                        help="the project's folder, made when missing (default: .)")
    return parser


def init_command(argv: Sequence[str]) -> int:
    """``luma init [DIR]``: 0 written, 1 refused (a file of the project exists), 2 usage."""
    from luma.project import PROGRAM, InitRefused, init_project

    args = init_parser().parse_checked(argv)  # type: ignore[attr-defined]
    folder = Path(args.folder)
    try:
        written = init_project(folder)
    except InitRefused as exc:
        print(f"luma init: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as exc:
        print(f"luma init: error: cannot write in {folder}: {exc.strerror or exc}",
              file=sys.stderr)
        return EXIT_FAILED
    for path in written:
        print(f"created {path}", file=sys.stderr)
    program = PROGRAM if folder == Path(".") else str(folder / PROGRAM)
    print(f"run it: luma {program}    test it: pytest {folder}", file=sys.stderr)
    return EXIT_OK


# ----------------------------------------------------------------------------------------- lsp

def lsp_parser() -> argparse.ArgumentParser:
    return _parser("luma lsp", description="Run the Luma language server on stdin and stdout "
                                           "(for editors; needs the extra: pip install "
                                           "'luma[lsp]').")


def lsp_command(argv: Sequence[str]) -> int:
    """``luma lsp``: serve until the client says exit; 1 when the extra is missing."""
    lsp_parser().parse_checked(argv)  # type: ignore[attr-defined]
    from luma.lsp import MissingExtra, serve_stdio

    try:
        serve_stdio()
    except MissingExtra as exc:
        print(f"luma lsp: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
