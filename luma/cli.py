"""The ``luma`` command: parse the arguments, call the library, render, exit.

stdout carries only the result (a machine-format report); everything for people — text
diagnostics, the summary, warnings — goes to stderr. The front end is imported only once the
arguments are known, so ``luma check`` starts fast.
"""

from __future__ import annotations

import errno
import io
import os
import sys
from collections.abc import Sequence
from types import SimpleNamespace

from luma.cli_common import (EXIT_FAILED, EXIT_OK, EXIT_USAGE, _plural, _silence_stdout,
                              _StdoutFailed, _version, _write_stdout)

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:  # the parser is imported where one is built: luma check PATH ... builds none
    import argparse
    from typing import IO, Any

    from luma.cli_parser import _Parser


_COMMANDS = """commands:
  luma check [PATH ...]      check .luma files (a CI lint); see 'luma check --help'
  luma PROGRAM.luma [...]    run a program (also 'luma run PROGRAM.luma'); see 'luma run --help'
  luma export PROGRAM.luma   print the tool declarations sent to a provider
  luma batch PROGRAM.luma    run an agent method over every line of a JSON Lines file
  luma fmt [PATH ...]        format .luma files in the canonical layout (--check, --diff)
  luma init [DIR]            create a new project that runs at once
  luma lsp                   run the language server on stdio (for editors)
  luma mcp serve PROGRAM     offer a program's tools to MCP clients on stdio
  luma test [PATH ...]       run the tests declared in .luma files; see 'luma test --help'
  luma eval PROGRAM.luma     tool-selection accuracy on a golden set; see 'luma eval --help'
  luma help [COMMAND]        show the help of a command

options:
  -h, --help                 show this help and exit
  --version                  print the version and exit
"""

_ENVIRONMENT = """environment:
  LUMA_APPROVED_TOOLS    comma-separated write tools an approval policy lets run
  LUMA_IDEMPOTENCY_KEY   the key of an encrypted idempotency store
  LUMA_DEBUG             set to 1 to see the traceback of an internal error
  NO_COLOR               set to turn colour off (like --color never)
  OTEL_EXPORTER_OTLP_ENDPOINT  send OpenTelemetry spans there (pip install 'luma[otel]')
  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT  true: prompts and tool values on spans
"""

_NAMES = ("check", "run", "export", "batch", "fmt", "init", "lsp", "mcp", "test", "eval",
          "help")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    _reopen_closed_streams()
    try:
        return _dispatch(args, whole_process=argv is None)
    except KeyboardInterrupt:
        print("luma: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (``luma check --format json | head``): nothing more to say.
        _silence_stdout()
        return EXIT_FAILED
    except _StdoutFailed as exc:
        command = f"luma {args[0]}" if args and args[0] in ("check", "export") else "luma"
        print(f"{command}: error: cannot write to stdout: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # a bug in luma itself: one line, the traceback on request
        if os.environ.get("LUMA_DEBUG"):
            raise
        print(f"luma: internal error: {type(exc).__name__}: {exc} "
              "(set LUMA_DEBUG=1 to see the traceback)", file=sys.stderr)
        return EXIT_USAGE


def _dispatch(args: list[str], whole_process: bool = False) -> int:
    if not args:
        sys.stderr.write(_top_usage() + "\n" + _COMMANDS)
        return EXIT_USAGE
    first = args[0]
    if first in ("-h", "--help"):
        _write_stdout(_top_help())
        return EXIT_OK
    if first == "--version":
        _write_stdout(_version())
        return EXIT_OK
    if first == "help":
        return help_command(args[1:])
    if first == "check":
        return check_command(args[1:], whole_process=whole_process)
    if first == "export":
        return export_command(args[1:])
    if first == "run":
        return run_command(args[1:], prog="luma run", whole_process=whole_process)
    if first == "batch":
        from luma.batch import batch_command

        return batch_command(args[1:])
    if first == "fmt":
        from luma.authoring import fmt_command

        return fmt_command(args[1:])
    if first == "test":
        from luma.cli_test import test_command

        return test_command(args[1:])
    if first == "eval":
        from luma.cli_eval import eval_command

        return eval_command(args[1:])
    if first == "init":
        from luma.authoring import init_command

        return init_command(args[1:])
    if first == "lsp":
        from luma.authoring import lsp_command

        return lsp_command(args[1:])
    if first == "mcp":
        from luma.mcp.command import mcp_command

        return mcp_command(args[1:])
    return run_command(args, prog="luma", whole_process=whole_process)


def _top_usage() -> str:
    return "usage: luma check [PATH ...] | luma PROGRAM.luma [options] | luma export PROGRAM.luma"


def _top_help() -> str:
    return _top_usage() + "\n\n" + _COMMANDS + "\n" + _ENVIRONMENT


def _top_parser() -> _Parser:
    """The parser whose usage line is ``luma``'s own (for errors that concern no command)."""
    from luma.cli_parser import _Parser

    return _Parser(prog="luma", usage=_top_usage()[len("usage: "):])


def _unknown_command(name: str) -> str | None:
    """``unknown command 'chek' (did you mean 'luma check'?)`` when ``name`` is a near miss of
    a command and no file of that name exists; else None."""
    import difflib

    if os.path.exists(name) or name in _NAMES or "." in name or os.sep in name:
        return None  # a path, not a command
    close = difflib.get_close_matches(name, list(_NAMES), n=1)
    return f"unknown command '{name}' (did you mean 'luma {close[0]}'?)" if close else None


def help_command(argv: Sequence[str]) -> int:
    """``luma help [COMMAND]``: the help of the command (or of ``luma``), on stdout."""
    from luma import authoring
    from luma.mcp.command import mcp_parser

    parsers = {"check": _check_parser, "run": lambda: _run_parser("luma run"),
               "export": _export_parser, "batch": _batch_parser, "fmt": authoring.fmt_parser,
               "init": authoring.init_parser, "lsp": authoring.lsp_parser, "mcp": mcp_parser,
               "test": _test_parser, "eval": _eval_parser}
    usage = _top_parser()
    if len(argv) > 1:
        usage.error(f"unexpected argument '{argv[1]}' (luma help takes one command)")
    if not argv or argv[0] == "help":
        _write_stdout(_top_help())
        return EXIT_OK
    name = argv[0]
    if name not in parsers:
        usage.error(_unknown_command(name)
                    or f"unknown command '{name}' (commands: {', '.join(parsers)})")
    _write_stdout(parsers[name]().format_help())
    return EXIT_OK


def _eval_parser() -> _Parser:
    from luma.cli_eval import eval_parser

    return eval_parser()


def _test_parser() -> _Parser:
    from luma.cli_test import test_parser

    return test_parser()


# --------------------------------------------------------------------------------------- check

def _check_parser() -> _Parser:
    from luma.cli_parser import _Parser, _Version

    parser = _Parser(
        prog="luma check", allow_abbrev=False,
        description="Parse and check .luma files; report every diagnostic of every file.",
        epilog="exit status: 0 no error (warnings allowed), 1 an error (or a warning with "
               "--strict), 2 a usage error")
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="files, or folders searched recursively for *.luma (default: .)")
    parser.add_argument("--format", choices=("text", "json", "github", "sarif"), default="text",
                        help="text (for people, on stderr) or a machine format on stdout")
    parser.add_argument("--strict", action="store_true", help="fail on warnings too")
    parser.add_argument("--tool-module", action="append", default=[], metavar="PATH",
                        help="a Python tool module; report tools without a handler (repeatable)")
    parser.add_argument("--config", metavar="PATH",
                        help="the config of every program checked (default: luma.config.json "
                             "beside each program)")
    parser.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                        help="skip files and folders whose path or name matches GLOB "
                             "(repeatable)")
    _add_color(parser)
    parser.add_argument("--version", action=_Version)
    return parser


def _plain_check_args(argv: Sequence[str]) -> SimpleNamespace | None:
    """The arguments of ``luma check PATH ...`` (paths only, the common case) as the parser
    would give them, without building it (its help formatter costs a noticeable part of the
    start-up); None for anything else."""
    if not all(a and not a.startswith("-") for a in argv):
        return None
    return SimpleNamespace(paths=list(argv), format="text", strict=False, tool_module=[],
                              config=None, exclude=[], color="auto")


def check_command(argv: Sequence[str], whole_process: bool = False) -> int:
    """``luma check``: exit 0 clean (warnings allowed), 1 on an error (or a warning with
    ``--strict``), 2 on a usage error. ``whole_process``: this command is the process (not a
    call from a program that goes on after it)."""
    args: Any = _plain_check_args(argv)
    if args is None:
        args = _check_parser().parse_checked(argv, intermixed=True)
    paths: list[str] = args.paths or ["."]
    for path in [*paths, *args.tool_module]:
        if not os.path.exists(path):
            _check_parser().error(f"path does not exist: {path}")
    for path in args.tool_module:
        if not os.path.isfile(path):
            _check_parser().error(f"tool module is not a file: {path}")
    if args.config is not None and not os.path.isfile(args.config):
        what = "is not a file" if os.path.exists(args.config) else "does not exist"
        _check_parser().error(f"config {what}: {args.config}")

    import gc

    if whole_process:
        # A check makes no cyclic garbage to speak of: what the imports below make lives until
        # exit, and each file's tree is freed when the file is done. A collection walks every
        # object alive (over a large program collections took a third of the time), so the
        # process runs without them; its peak memory is the same.
        gc.disable()
    # The checker and the parser too, which check_files would import on first use.
    import luma.check  # noqa: F401
    import luma.syntax.parse  # noqa: F401
    from luma.check.host import HostCheck
    from luma.compile import check_files, find_luma_paths
    from luma.syntax.diagnostics import Diagnostic
    from luma.syntax.render import render, source_lookup
    from luma.syntax.source import SourceFile

    found, missing = find_luma_paths(paths, exclude=args.exclude)
    if missing:  # vanished since the check above
        _check_parser().error(f"path does not exist: {missing[0]}")
    files: list[str] = []
    named: set[str] = set()
    for f in found:  # a file named twice is checked once, where it is first named
        real = os.path.realpath(f)
        if real not in named:
            named.add(real)
            files.append(f)
    host = HostCheck(list(args.tool_module), args.config or None)
    diagnostics: list[Diagnostic] = []
    sources: list[SourceFile] = []
    unreadable: list[str] = []

    def host_needs_program(path: str) -> bool:  # it has a config or tool modules to check
        return bool(args.tool_module) or host.config_of(path) is not None

    for path, checked in check_files(files, keep_program=host_needs_program):
        if isinstance(checked, OSError):
            unreadable.append(f"luma check: error: cannot read {path}: "
                              f"{checked.strerror or checked}")
            continue
        sources.append(checked.source)
        diagnostics += sorted(checked.diagnostics, key=lambda d: (d.span.start, d.span.end))
        if checked.program is not None:
            diagnostics += host.check(checked.program, path)

    report = render(args.format, diagnostics, source_lookup(sources),
                    color=args.format == "text" and _use_color(args.color, sys.stderr))
    report = host.redact(report)  # a config line shown may hold an MCP server's token
    if args.format == "text":
        sys.stderr.write(report)
    else:
        _write_stdout(report)
    for line in unreadable:
        print(line, file=sys.stderr)
    if not files and not unreadable:
        print(f"luma check: warning: no .luma files found in {', '.join(paths)}", file=sys.stderr)
    else:
        print(_summary(diagnostics, len(sources)), file=sys.stderr)
    if unreadable:
        return EXIT_USAGE
    failing = any(d.is_error or args.strict for d in diagnostics)
    return EXIT_FAILED if failing else EXIT_OK


def _summary(diagnostics: Sequence[Any], files: int) -> str:
    errors = sum(1 for d in diagnostics if d.is_error)
    warnings = len(diagnostics) - errors
    checked = f"checked {_plural(files, 'file')}"
    if not diagnostics:
        return f"{checked}: no problems"
    parts = [_plural(errors, "error")] if errors else []
    parts += [_plural(warnings, "warning")] if warnings else []
    return f"{checked}: {', '.join(parts)}"


# ----------------------------------------------------------------------------------------- run

def _run_parser(prog: str) -> _Parser:
    import argparse

    from luma.cli_parser import _Parser, _Version

    parser = _Parser(prog=prog, allow_abbrev=False,
                     usage=f"{prog} PROGRAM.luma [options]",
                     formatter_class=argparse.RawDescriptionHelpFormatter,
                     description="Compile and run a .luma program; its result is printed to "
                                 "stdout as JSON.",
                     epilog="exit status: 0 ran and returned, 1 a Luma error at run time,\n"
                            "  2 could not start (compile error, bad config, missing handler, "
                            "bad command line)\n\n" + _ENVIRONMENT)
    parser.add_argument("program", metavar="PROGRAM.luma", nargs="?", help="the program to run")
    parser.add_argument("--tool-module", action="append", default=[], metavar="PATH",
                        help="a Python tool module; repeatable; adds to the config's "
                             "tool_modules")
    parser.add_argument("--config", metavar="PATH",
                        help="the config file (default: luma.config.json beside the program)")
    parser.add_argument("--agent", metavar="NAME", help="run this agent's method")
    parser.add_argument("--fn", metavar="NAME", default="run", help="the method (default: run)")
    parser.add_argument("--input", metavar="JSON",
                        help="the method's arguments as a JSON object, or @FILE to read one")
    parser.add_argument("--arg", action="append", default=[], metavar="KEY=VALUE",
                        type=_key_value, help="one argument (VALUE parsed as JSON when it "
                                              "parses); repeatable")
    parser.add_argument("--model", metavar="NAME", help="default model for this run")
    parser.add_argument("--trace", metavar="FILE", help="write telemetry events as JSON Lines")
    parser.add_argument("--trace-no-values", action="store_true",
                        help="leave tool arguments and results out of the trace")
    replay = parser.add_mutually_exclusive_group()
    replay.add_argument("--record", metavar="FILE", help="record provider traffic to FILE")
    replay.add_argument("--replay", metavar="FILE", help="replay provider traffic from FILE")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="show each tool call and model turn on stderr")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="do not show the program's compile warnings (errors still show)")
    parser.add_argument("--generate-tool-types", metavar="OUT",
                        help="write generated types for tool modules to OUT (.py, .pyi, .ts, "
                             ".d.ts) and exit without running")
    _add_color(parser)
    parser.add_argument("--version", action=_Version)
    return parser


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        import argparse

        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def run_command(argv: Sequence[str], prog: str = "luma", whole_process: bool = False) -> int:
    """``luma PROGRAM.luma`` / ``luma run PROGRAM.luma``: compile (exit 2 with the diagnostics on
    a compile error), then run."""
    parser = _run_parser(prog)
    if prog == "luma" and argv and not argv[0].startswith("-"):
        unknown = _unknown_command(argv[0])
        if unknown is not None:  # ``luma chek x.luma``: a mistyped command, not a program
            _top_parser().error(unknown)
    args = parser.parse_checked(argv)
    if args.program is None:
        parser.error("the following arguments are required: PROGRAM.luma")
    if not os.path.isfile(args.program):
        what = "is not a file" if os.path.exists(args.program) else "does not exist"
        parser.error(f"program {what}: {args.program}")

    from luma.compile import check_file
    from luma.syntax.render import render_text, source_lookup

    try:
        checked = check_file(args.program)
    except OSError as exc:
        print(f"{prog}: error: cannot read {args.program}: {exc.strerror or exc}",
              file=sys.stderr)
        return EXIT_USAGE
    shown = [d for d in checked.diagnostics if d.is_error or not (
        args.quiet or (d.code == "W004" and args.model is not None))]  # --model chose it
    if shown:
        sys.stderr.write(render_text(shown, source_lookup([checked.source]),
                                     color=_use_color(args.color, sys.stderr)))
    if checked.has_errors:
        errors = sum(1 for d in checked.diagnostics if d.is_error)
        print(f"error: {args.program} did not compile: {_plural(errors, 'error')}",
              file=sys.stderr)
        return EXIT_USAGE
    return run_program(checked, args, whole_process=whole_process)


def run_program(checked: Any, args: argparse.Namespace, whole_process: bool = False) -> int:
    """Run a compiled program with the parsed options, or generate its tool types."""
    from luma.cli_run import RunOptions, run_checked

    options = RunOptions(
        tool_modules=list(args.tool_module), config_path=args.config, agent=args.agent,
        fn=args.fn, input=args.input, args=list(args.arg), model=args.model, trace=args.trace,
        record=args.record, replay=args.replay, verbose=args.verbose,
        trace_values=not args.trace_no_values)
    if args.generate_tool_types:
        return _generate_tool_types(checked, args.generate_tool_types, options)
    return run_checked(checked, options, whole_process=whole_process)


def _generate_tool_types(checked: Any, out: str, options: Any) -> int:
    from luma.codegen import is_generated_types, write_tool_types
    from luma.outputs import OutputRefused, guard_output
    from luma.cli_run import codegen_inputs

    try:
        guard_output(out, is_generated_types, protected=codegen_inputs(checked, options),
                     made="generated")
    except OutputRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        write_tool_types(checked.program, out, os.path.basename(checked.source.path))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"error: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote {out}", file=sys.stderr)
    return EXIT_OK


# -------------------------------------------------------------------------------------- export

def _export_parser() -> _Parser:
    from luma.cli_parser import _Parser, _Version

    parser = _Parser(prog="luma export", allow_abbrev=False,
                     usage="luma export PROGRAM.luma --provider openai|azure|anthropic|gemini "
                           "[--agent NAME] [options]",
                     description="Print the JSON tool declarations a provider would receive.")
    parser.add_argument("program", metavar="PROGRAM.luma", nargs="?")
    parser.add_argument("--agent", metavar="NAME",
                        help="only the tools visible to this agent's model")
    parser.add_argument("--provider", metavar="openai|azure|anthropic|gemini",
                        help="the provider whose declaration format to print (required)")
    _add_color(parser)
    parser.add_argument("--version", action=_Version)
    return parser


def export_command(argv: Sequence[str]) -> int:
    """``luma export``: print a program's tool declarations for one provider."""
    parser = _export_parser()
    args = parser.parse_checked(argv)
    if args.program is None:
        parser.error("the following arguments are required: PROGRAM.luma")
    if args.provider is None:
        parser.error("the following arguments are required: --provider")
    if not os.path.isfile(args.program):
        parser.error(f"program does not exist: {args.program}")
    from luma.compile import check_file
    from luma.runtime.errors import LumaError
    from luma.syntax.render import render_text, source_lookup

    try:
        checked = check_file(args.program)
    except OSError as exc:
        print(f"luma export: error: cannot read {args.program}: {exc.strerror or exc}",
              file=sys.stderr)
        return EXIT_USAGE
    if checked.has_errors:
        sys.stderr.write(render_text(checked.diagnostics, source_lookup([checked.source]),
                                     color=_use_color(args.color, sys.stderr)))
        print(f"error: {args.program} did not compile", file=sys.stderr)
        return EXIT_USAGE
    from luma.models.export import export_tool_declarations

    assert checked.program is not None  # it compiled
    try:
        declarations = export_tool_declarations(checked.program, args.provider, args.agent)
    except LumaError as exc:
        print(f"error[{exc.code}]: {exc.message}", file=sys.stderr)
        return EXIT_USAGE
    import json

    _write_stdout(json.dumps(declarations, indent=2, ensure_ascii=False) + "\n")
    return EXIT_OK


# -------------------------------------------------------------------------------------- output

def _add_color(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--color", choices=("never", "always", "auto"), default="auto",
                        help="colour the text output (auto: only on a terminal, and not when "
                             "NO_COLOR is set)")


def _use_color(choice: str, stream: IO[str]) -> bool:
    """``always``/``never`` win; ``auto`` colours only a terminal, and never when ``NO_COLOR``
    is set to anything non-empty or ``TERM`` is ``dumb``."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class _ClosedStream(io.TextIOBase):
    """What stdout is when the caller closed it (``>&-``): writing to it is an error."""

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))


def _reopen_closed_streams() -> None:
    """A standard stream the caller closed (``2>&-``) gets the null device as its descriptor,
    so that no file Luma opens later takes that number. A closed stderr then swallows the
    messages (they never move to stdout); a closed stdout makes writing the result an error."""
    for fd, name in ((1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        except OSError:
            continue
        if name == "stdout":
            sys.stdout = _ClosedStream()
        else:
            sys.stderr = open(fd, "w", encoding="utf-8", errors="backslashreplace",
                              closefd=False)




def _batch_parser() -> _Parser:
    from luma.batch import batch_parser

    return batch_parser()
